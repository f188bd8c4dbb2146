package forces

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// rawTLV encodes a TLV with its padding, for messages the encoder refuses.
func rawTLV(typ uint16, val []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(val)))
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// rawPath encodes a PATH-DATA value: ids, then the TLVs inside.
func rawPath(ids int, inside ...[]byte) []byte {
	v := binary.BigEndian.AppendUint16(nil, 0)
	v = binary.BigEndian.AppendUint16(v, uint16(ids))
	for i := range ids {
		v = binary.BigEndian.AppendUint32(v, uint32(i+1))
	}
	for _, t := range inside {
		v = append(v, t...)
	}
	return rawTLV(TLVPathData, v)
}

// fanMessage is a Query Response of lfbs LFBselects, each one GET-RESPONSE
// holding one PATH-DATA of prefixIDs IDs over leaves child PATH-DATAs of
// leafIDs IDs each: the shape that makes flattening copy the prefix into
// every leaf.
func fanMessage(lfbs, prefixIDs, leaves, leafIDs int) []byte {
	leaf := rawPath(leafIDs)
	var kids [][]byte
	for range leaves {
		kids = append(kids, leaf)
	}
	op := rawTLV(uint16(OpGetResponse), rawPath(prefixIDs, kids...))
	sel := rawTLV(TLVLFBSelect, append(binary.BigEndian.AppendUint64(nil, 1<<32|1), op...))
	m := make([]byte, HeaderLen)
	for range lfbs {
		m = append(m, sel...)
	}
	m[0] = ProtocolVersion << 4
	m[1] = byte(MsgQueryResponse)
	binary.BigEndian.PutUint16(m[2:], uint16(len(m)/4))
	return m
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A message of ~256 KiB costs a small multiple of its size to parse and
// flatten, whatever its shape: one whose leaves would each copy a long
// prefix is refused (ErrTooDeep), and the worst shape within the limits
// stays linear.
func TestItemsMemoryLinear(t *testing.T) {
	const factor = 48 // bytes allocated per byte of message, at most
	cases := []struct {
		name    string
		msg     []byte
		refused bool
	}{
		// 8,000 IDs over 4,000 leaves, four times: the CE used to
		// allocate 512 MiB flattening it.
		{"long prefix over many leaves", fanMessage(4, 8000, 4000, 0), true},
		{"longest prefix allowed, leaves with an ID each", fanMessage(4, MaxPathIDs-1, 5400, 1), false},
		{"longest prefix allowed, leaves without IDs", fanMessage(4, MaxPathIDs, 8000, 0), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.msg) < 250<<10 || len(c.msg) > MaxMessageLen {
				t.Fatalf("test message of %d bytes", len(c.msg))
			}
			var perr error
			var items int
			n := allocated(func() {
				m, err := Parse(c.msg)
				perr = err
				if err == nil {
					items = len(Items(m))
				}
			})
			if c.refused != (perr != nil) {
				t.Fatalf("Parse: %v (want refused %v)", perr, c.refused)
			}
			if perr != nil && !errors.Is(perr, ErrTooDeep) {
				t.Fatalf("Parse: %v, want ErrTooDeep", perr)
			}
			if n > factor*uint64(len(c.msg)) {
				t.Fatalf("parsing and flattening %d bytes (%d items) allocated %d bytes, more than %d times the message", len(c.msg), items, n, factor)
			}
			t.Logf("%d bytes, %d items: %d bytes allocated (%.1fx)", len(c.msg), items, n, float64(n)/float64(len(c.msg)))
		})
	}
}

// Paths longer than MaxPathIDs are refused by the parser and the encoder
// alike, so whatever encodes also parses.
func TestPathIDsLimit(t *testing.T) {
	long := &Message{Header: Header{Type: MsgQuery}, LFBs: []LFBSelect{{ClassID: 1, InstanceID: 1, Ops: []Operation{{Type: OpGet,
		Paths: []PathData{{IDs: make([]uint32, 20), Children: []PathData{{IDs: make([]uint32, MaxPathIDs-19)}}}}}}}}}
	if _, err := long.MarshalBinary(); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("encoding a path of %d IDs: %v, want ErrTooDeep", MaxPathIDs+1, err)
	}
	long.LFBs[0].Ops[0].Paths[0].Children[0].IDs = make([]uint32, MaxPathIDs-20)
	b, err := long.MarshalBinary()
	if err != nil {
		t.Fatalf("encoding a path of %d IDs: %v", MaxPathIDs, err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("parsing a path of %d IDs: %v", MaxPathIDs, err)
	}
}

// BenchmarkItemsHostile reports the bytes parsing and flattening the worst
// message within the limits allocates, per byte of it.
func BenchmarkItemsHostile(b *testing.B) {
	msg := fanMessage(4, MaxPathIDs-1, 5400, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		m, err := Parse(msg)
		if err != nil {
			b.Fatal(err)
		}
		_ = Items(m)
	}
}
