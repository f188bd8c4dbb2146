package forces

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
)

// writeAll encodes ops with a ConfigWriter, flushing every flushEvery ops
// (0: once at the end), the way the CE sends a table in chunks.
func writeAll(t testing.TB, hdr Header, ops []TableOp, flushEvery int) [][]byte {
	t.Helper()
	corr := hdr.Correlator
	w := NewConfigWriter(hdr, func(h *Header) { h.Correlator = corr; corr++ })
	var out [][]byte
	flush := func() {
		for _, m := range w.Flush() {
			out = append(out, bytes.Clone(m))
		}
	}
	for i, op := range ops {
		if err := w.Add(op.Op, op.ClassID, op.InstanceID, op.Path, op.FullData); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if flushEvery > 0 && (i+1)%flushEvery == 0 {
			flush()
		}
	}
	flush()
	return out
}

// Whatever the writer packs must parse back to the ops, in order, in
// messages with consecutive correlators that re-encode to the same bytes,
// each within the length limits along with its Config Response; and rows of
// one LFB and operation must share their LFBselect and operation TLVs unless
// a limit split them.
func TestConfigWriterRoundTrip(t *testing.T) {
	hdr := Header{Src: testCE, Dst: testFE, Correlator: 77, Flags: Flags{ACK: AlwaysACK, ExecMode: ExecContinueOnFailure, Priority: PriorityConfig}}
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]TableOp, 20_000)
	for i := range random {
		class := []uint32{ClassIPv4UcastLPM, ClassIPv4NextHop, ClassIPv6UcastLPM}[r.IntN(3)]
		op := TableOp{Op: OpDel, ClassID: class, InstanceID: 1 + uint32(r.IntN(2)), Path: []uint32{1, r.Uint32()}}
		if r.IntN(4) > 0 {
			op.Op, op.FullData = OpSet, make([]byte, r.IntN(40))
		}
		if r.IntN(50) == 0 {
			op.Path = nil
		}
		random[i] = op
	}
	big := []TableOp{
		{Op: OpSet, ClassID: 1, InstanceID: 1, Path: []uint32{1, 1}, FullData: make([]byte, 40_000)},
		{Op: OpSet, ClassID: 1, InstanceID: 1, Path: []uint32{1, 2}, FullData: make([]byte, 30_000)},
		{Op: OpSet, ClassID: 1, InstanceID: 1, Path: []uint32{1, 3}, FullData: make([]byte, 3)},
	}
	for _, c := range []struct {
		name       string
		ops        []TableOp
		flushEvery int
	}{
		{"routes", routeOps(100_000), 0},
		{"routes in chunks", routeOps(100_000), 32768},
		{"random", random, 0},
		{"random in chunks", random, 999},
		{"big rows", big, 0},
		{"empty", nil, 0},
	} {
		got := writeAll(t, hdr, c.ops, c.flushEvery)
		next := 0
		for i, raw := range got {
			m, err := Parse(raw)
			if err != nil {
				t.Fatalf("%s: message %d: %v", c.name, i, err)
			}
			if m.Header.Correlator != hdr.Correlator+uint64(i) || m.Header.Flags != hdr.Flags || m.Header.Type != MsgConfig {
				t.Fatalf("%s: message %d header %+v", c.name, i, m.Header)
			}
			if again, err := m.MarshalBinary(); err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("%s: message %d re-encodes differently (%v)", c.name, i, err)
			}
			resp, err := NewConfigResponse(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := resp.MarshalBinary(); err != nil {
				t.Fatalf("%s: the response to message %d: %v", c.name, i, err)
			}
			for j, l := range m.LFBs {
				for k := 1; k < len(l.Ops); k++ {
					if l.Ops[k].Type == l.Ops[k-1].Type {
						t.Fatalf("%s: message %d LFBselect %d: two adjacent %v operations", c.name, i, j, l.Ops[k].Type)
					}
				}
			}
			for _, it := range Items(m) {
				if next >= len(c.ops) {
					t.Fatalf("%s: more rows than ops", c.name)
				}
				op := c.ops[next]
				if it.Op != op.Op || it.ClassID != op.ClassID || it.InstanceID != op.InstanceID ||
					!slices.Equal(it.Path, op.Path) || it.HasFullData != (op.FullData != nil) || !bytes.Equal(it.FullData, op.FullData) {
					t.Fatalf("%s: row %d = %+v, want %+v", c.name, next, it, op)
				}
				next++
			}
		}
		if next != len(c.ops) {
			t.Fatalf("%s: %d rows back, want %d", c.name, next, len(c.ops))
		}
	}
	// Packing is tight: 100,000 routes of 28-byte rows take a handful of
	// messages, not one per LFBselect.
	if n := len(writeAll(t, hdr, routeOps(100_000), 0)); n > 60 {
		t.Errorf("100,000 routes in %d messages", n)
	}
}

func TestConfigWriterErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		op   TableOp
		want error
	}{
		{"op 0", TableOp{Path: []uint32{1}}, ErrInvalid},
		{"set without data", TableOp{Op: OpSet, Path: []uint32{1}}, ErrInvalid},
		{"huge data", TableOp{Op: OpSet, FullData: make([]byte, 70000)}, ErrTooLarge},
		{"data too big for LFBselect", TableOp{Op: OpSet, FullData: make([]byte, 65520)}, ErrTooLarge},
	} {
		w := NewConfigWriter(Header{}, nil)
		if err := w.Add(c.op.Op, c.op.ClassID, c.op.InstanceID, c.op.Path, c.op.FullData); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if msgs := w.Flush(); len(msgs) != 0 {
			t.Errorf("%s: a failed Add left %d messages", c.name, len(msgs))
		}
	}
	w := NewConfigWriter(Header{Flags: Flags{ACK: 7}}, nil)
	if err := w.Add(OpDel, 1, 1, []uint32{1, 1}, nil); err == nil {
		t.Error("bad header flags: no error")
	}
}

func BenchmarkConfigWriter(b *testing.B) {
	ops := routeOps(100_000)
	w := NewConfigWriter(Header{Src: testCE, Dst: testFE}, nil)
	b.ReportAllocs()
	for b.Loop() {
		for _, op := range ops {
			if err := w.Add(op.Op, op.ClassID, op.InstanceID, op.Path, op.FullData); err != nil {
				b.Fatal(err)
			}
		}
		w.Flush()
	}
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}

// Messages from a ConfigWriter go over a Conn with WriteEncoded and come out
// of ReadMessage as the Config they encode; the tap sees each.
func TestWriteEncoded(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ca, cb := NewConn(a), NewConn(b)
	var tapped int
	ca.SetTap(func(raw []byte, sent bool) { tapped++ })

	msgs := writeAll(t, Header{Src: testCE, Dst: testFE, Correlator: 5}, routeOps(5000), 0)
	if err := ca.WriteEncoded(append(slices.Clone(msgs), []byte{0x10, 1, 0, 99})...); !errors.Is(err, ErrLength) && !errors.Is(err, ErrMalformed) {
		t.Fatalf("a bad message among good ones: err = %v", err)
	}
	if tapped != 0 {
		t.Fatalf("tap saw %d messages of a refused write", tapped)
	}
	done := make(chan error, 1)
	go func() { done <- ca.WriteEncoded(msgs...) }()
	rows := 0
	for i := range msgs {
		m, err := cb.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Type != MsgConfig || m.Header.Correlator != uint64(5+i) {
			t.Fatalf("message %d: %v correlator %d", i, m.Header.Type, m.Header.Correlator)
		}
		rows += len(Items(m))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := len(routeOps(5000)); rows != want || tapped != len(msgs) {
		t.Fatalf("%d rows (want %d), %d tapped (want %d)", rows, want, tapped, len(msgs))
	}
}
