package forces

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

// routeOps returns n SET ops on the IPv4 prefix table, with a DEL and a
// next-hop SET mixed in every 1000 routes, so the packer must open new
// LFBselect and operation TLVs.
func routeOps(n int) []TableOp {
	ops := make([]TableOp, 0, n+n/500)
	for i := 0; i < n; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		row := IPv4PrefixInfo{Prefix: netip.PrefixFrom(a, 32), HopSelector: uint32(i % 7)}
		ops = append(ops, TableOp{
			Op: OpSet, ClassID: ClassIPv4UcastLPM, InstanceID: 1,
			Path: []uint32{CompIPv4PrefixTable, uint32(i)}, FullData: row.MarshalFullData(),
		})
		if i%1000 == 999 {
			ops = append(ops,
				TableOp{Op: OpDel, ClassID: ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{CompIPv4PrefixTable, uint32(i - 500)}},
				TableOp{Op: OpSet, ClassID: ClassIPv4NextHop, InstanceID: 1, Path: []uint32{CompIPv4NextHopTable, uint32(i / 1000)},
					FullData: IPv4NextHopInfo{L3PortID: 1, MTU: 1500, NextHop: netip.MustParseAddr("192.0.2.1")}.MarshalFullData()},
			)
		}
	}
	return ops
}

func TestBuildConfig100k(t *testing.T) {
	ops := routeOps(100_000)
	var corr uint64 = 1000
	hdr := Header{Src: testCE, Dst: testFE, Flags: Flags{ACK: AlwaysACK, ExecMode: ExecContinueOnFailure}}
	msgs, err := BuildConfig(hdr, func() uint64 { corr++; return corr }, ops)
	if err != nil {
		t.Fatal(err)
	}
	// 40 bytes per route path: about 6500 routes fit in a message.
	if max := len(ops)/6000 + 1; len(msgs) > max {
		t.Errorf("%d messages for %d ops, want at most %d", len(msgs), len(ops), max)
	}
	next := 0
	seen := map[uint64]bool{}
	for i, m := range msgs {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(b) > MaxMessageLen {
			t.Fatalf("message %d is %d bytes", i, len(b))
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("message %d: Parse: %v", i, err)
		}
		if back.Header.Type != MsgConfig || back.Header.Flags != hdr.Flags || back.Header.Src != testCE {
			t.Fatalf("message %d header = %+v", i, back.Header)
		}
		if seen[back.Header.Correlator] {
			t.Fatalf("message %d reuses correlator %d", i, back.Header.Correlator)
		}
		seen[back.Header.Correlator] = true
		for _, it := range Items(back) {
			if next >= len(ops) {
				t.Fatalf("more items than ops")
			}
			op := ops[next]
			if it.Op != op.Op || it.ClassID != op.ClassID || it.InstanceID != op.InstanceID ||
				len(it.Path) != len(op.Path) || it.Path[0] != op.Path[0] || it.Path[1] != op.Path[1] ||
				it.HasFullData != (op.FullData != nil) || !bytes.Equal(it.FullData, op.FullData) {
				t.Fatalf("item %d = %+v, want %+v", next, it, op)
			}
			next++
		}
		// The FE's answer must fit in one message too.
		resp, err := NewConfigResponse(back)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := resp.MarshalBinary()
		if err != nil {
			t.Fatalf("response to message %d: %v", i, err)
		}
		rback, err := Parse(rb)
		if err != nil {
			t.Fatal(err)
		}
		codes, err := ConfigResults(rback)
		if err != nil || len(codes) != len(Items(back)) {
			t.Fatalf("ConfigResults = %d codes, %v", len(codes), err)
		}
	}
	if next != len(ops) {
		t.Fatalf("got %d items back, want %d", next, len(ops))
	}
}

func TestBuildConfigDelOnly(t *testing.T) {
	// DEL paths are smaller than their responses: the response budget, not
	// the request's, must bound each message.
	ops := make([]TableOp, 50_000)
	for i := range ops {
		ops[i] = TableOp{Op: OpDel, ClassID: ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1, uint32(i)}}
	}
	msgs, err := BuildConfig(Header{}, nil, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if m.Header.Correlator != uint64(i) {
			t.Errorf("message %d correlator %d", i, m.Header.Correlator)
		}
		resp, err := NewConfigResponse(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.MarshalBinary(); err != nil {
			t.Fatalf("response to message %d: %v", i, err)
		}
	}
}

func TestBuildConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		ops  []TableOp
		want error
	}{
		{"op 0", []TableOp{{Path: []uint32{1}}}, ErrInvalid},
		{"set without data", []TableOp{{Op: OpSet, Path: []uint32{1}}}, ErrInvalid},
		{"huge data", []TableOp{{Op: OpSet, FullData: make([]byte, 70000)}}, ErrTooLarge},
		{"data too big for LFBselect", []TableOp{{Op: OpSet, FullData: make([]byte, 65520)}}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := BuildConfig(Header{}, nil, c.ops); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if msgs, err := BuildConfig(Header{}, nil, nil); err != nil || len(msgs) != 0 {
		t.Errorf("no ops: %v, %v", msgs, err)
	}
}

// routeConfig returns the first Config message of 10,000 route rows, and its
// encoding.
func routeConfig(b *testing.B) (*Message, []byte) {
	b.Helper()
	msgs, err := BuildConfig(Header{}, nil, routeOps(10_000))
	if err != nil {
		b.Fatal(err)
	}
	wire, err := msgs[0].MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	return msgs[0], wire
}

// BenchmarkDecodeRoutes decodes a Config of route rows as the FE does: into
// a reused MessageBuffer, flattened with AppendItems, each row's FULLDATA
// parsed.
func BenchmarkDecodeRoutes(b *testing.B) {
	_, wire := routeConfig(b)
	var (
		mb    MessageBuffer
		items []Item
		rows  int
	)
	b.ReportAllocs()
	for b.Loop() {
		m, err := mb.Parse(wire)
		if err != nil {
			b.Fatal(err)
		}
		items = AppendItems(items[:0], m)
		rows = 0
		for _, it := range items {
			if it.ClassID == ClassIPv4UcastLPM && it.Op == OpSet {
				if _, err := ParseIPv4PrefixInfo(it.FullData); err != nil {
					b.Fatal(err)
				}
				rows++
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/route")
}

func BenchmarkParse(b *testing.B) {
	m, wire := routeConfig(b)
	routes := len(Items(m))
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := Parse(wire)
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range Items(m) {
			if it.ClassID == ClassIPv4UcastLPM && it.Op == OpSet {
				if _, err := ParseIPv4PrefixInfo(it.FullData); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(routes)*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}
