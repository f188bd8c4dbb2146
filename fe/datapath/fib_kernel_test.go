//go:build linux

package datapath

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// nhMAC is the source MAC of nexthop id in fibFixture: the forwarded frame
// tells which nexthop the program chose.
func nhMAC(id uint32) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x99, 0, 0, byte(id >> 8), byte(id)}
}

// fibFixture loads a datapath whose nexthops 0..n-1 all forward (via lo, to
// the neighbour 10.0.0.1) with the source MAC nhMAC(id).
func fibFixture(tb testing.TB, opts loadOptions, n uint32) *Datapath {
	tb.Helper()
	d := loadForTest(tb, opts)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		tb.Fatal(err)
	}
	gw := netip.MustParseAddr("10.0.0.1")
	if err := d.addTxPort(lo.Index); err != nil {
		tb.Fatal(err)
	}
	if err := d.SetNeighbor(lo.Index, gw, macNeigh1); err != nil {
		tb.Fatal(err)
	}
	for id := range n {
		if err := d.SetNexthop(id, Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: nhMAC(id)}); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// runLookup sends a frame to addr through the program and returns the
// nexthop it was forwarded with, or false when it went to the kernel.
func runLookup(tb testing.TB, d *Datapath, addr uint32) (uint32, bool) {
	frame := udpFrame(addrOf(addr).String(), 64)
	ret, out := run(tb, d, frame)
	switch ret {
	case xdpRedirect:
		if !bytes.Equal(out[6:8], []byte{0x02, 0x99}) {
			tb.Fatalf("%s: forwarded with source MAC %s, not a nexthop's", addrOf(addr), net.HardwareAddr(out[6:12]))
		}
		return uint32(out[10])<<8 | uint32(out[11]), true
	case xdpPass:
		return 0, false
	}
	tb.Fatalf("%s: returned %d", addrOf(addr), ret)
	return 0, false
}

// TestFIBDatapath runs the random FIB exercise through the Datapath API. It
// checks millions of addresses by reading the mmapped tables back the way
// the program does, and a sample of them by running the program on frames.
func TestFIBDatapath(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 16)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	ran := 0
	drv := fibDriver{
		set: d.SetRoutes,
		del: d.DeleteRoutes,
		lookup: func(addr uint32) (uint32, bool) {
			nh, ok := d.fib.lookup(addr)
			// One address in 500 (below 224/4 and outside 0/8 and
			// 127/8, which the program never routes) also goes
			// through the program.
			if a := addr >> 24; a < 224 && a != 0 && a != 127 && addr%499 == 0 {
				ran++
				pnh, pok := runLookup(t, d, addr)
				if pok != ok || pnh != nh {
					t.Fatalf("%s: program gives nexthop %d (%v), the tables %d (%v)", addrOf(addr), pnh, pok, nh, ok)
				}
			}
			return nh, ok
		},
		fib: func() *fib { return d.fib },
	}
	exerciseFIB(t, drv, seed, 3, 1_000_000)
	t.Logf("%d addresses also checked through the program", ran)
	if ran < 1000 {
		t.Errorf("only %d addresses went through the program", ran)
	}

	// The mmapped tables are what the kernel sees through the map API.
	if err := d.SetRoutes([]Route{
		{netip.MustParsePrefix("20.1.0.0/16"), 3},
		{netip.MustParsePrefix("20.1.2.64/26"), 4},
	}); err != nil {
		t.Fatal(err)
	}
	var row [256]uint32
	if err := d.objs.FibTbl24.Lookup(uint32(20<<8|1), &row); err != nil {
		t.Fatal(err)
	}
	if row[0] != fibValid|3 || row[2]&fibGroup == 0 {
		t.Fatalf("tbl24 row 20.1/16 via the map API: %#x %#x", row[0], row[2])
	}
	if err := d.objs.FibTbl8.Lookup(row[2]&fibGroupMask, &row); err != nil {
		t.Fatal(err)
	}
	if row[63] != fibValid|3 || row[64] != fibValid|4 || row[127] != fibValid|4 || row[128] != fibValid|3 {
		t.Fatalf("tbl8 group via the map API: %#x %#x %#x %#x", row[63], row[64], row[127], row[128])
	}
}

// TestFIBDatapathFull checks that tbl8 exhaustion through the API is an
// error wrapping ErrFIBFull and changes nothing the program sees.
func TestFIBDatapathFull(t *testing.T) {
	d := fibFixture(t, loadOptions{tbl8Groups: 2}, 4)
	if err := d.SetRoutes([]Route{
		{netip.MustParsePrefix("20.0.0.0/8"), 1},
		{netip.MustParsePrefix("20.0.1.1/32"), 2},
	}); err != nil {
		t.Fatal(err)
	}
	err := d.SetRoutes([]Route{
		{netip.MustParsePrefix("30.0.0.0/8"), 3},
		{netip.MustParsePrefix("20.0.2.1/32"), 3},
		{netip.MustParsePrefix("20.0.3.1/32"), 3},
	})
	if !errors.Is(err, ErrFIBFull) {
		t.Fatalf("SetRoutes: %v, want ErrFIBFull", err)
	}
	if n, _ := d.RouteCount(); n != 2 {
		t.Errorf("RouteCount %d after a failed batch, want 2", n)
	}
	for addr, want := range map[string]uint32{"20.0.2.1": 1, "20.0.3.1": 1, "20.0.1.1": 2} {
		if nh, ok := runLookup(t, d, be(addr)); !ok || nh != want {
			t.Errorf("%s: nexthop %d (%v), want %d", addr, nh, ok, want)
		}
	}
	if _, ok := runLookup(t, d, be("30.1.1.1")); ok {
		t.Errorf("30.1.1.1 forwarded: the failed batch was partly applied")
	}
}

func be(s string) uint32 {
	p, _ := toPrefix(netip.PrefixFrom(netip.MustParseAddr(s), 32))
	return p.Addr()
}

// TestFIBConcurrent changes routes in a region while the program looks up
// addresses in it, with only 6 tbl8 groups for 16 /24s, so that groups are
// built, published, folded back, quarantined and reused (after a grace
// period) all the time, and the FIB runs full now and then.
//
// What it asserts: every candidate prefix always maps to its own nexthop
// and 20.1.0.0/16 (nexthop 1) is never removed, so for any address the only
// answers that were ever valid are nexthop 1 and the nexthops of the
// candidates covering it. A packet that saw a half-built group (stale
// entries of another /24, or zeros) or a group reused too early would be
// forwarded with another /24's nexthop or passed as "no route", and the test
// fails.
func TestFIBConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	type cand struct {
		p  pfx.V4
		nh uint32
	}
	var cands []cand
	for s := range uint32(16) {
		base := 20<<24 | 1<<16 | s<<8
		for _, pl := range []struct {
			off  uint32
			bits uint8
		}{{0, 24}, {0, 25}, {128, 25}, {64, 26}, {200, 29}, {7, 32}, {255, 32}} {
			cands = append(cands, cand{pfx.Make(base|pl.off, pl.bits), uint32(len(cands) + 2)})
		}
	}
	cands = append(cands, cand{pfx.Make(20<<24|1<<16|8<<12, 20), uint32(len(cands) + 2)})
	d := fibFixture(t, loadOptions{tbl8Groups: 6}, uint32(len(cands)+2))
	if err := d.SetRoute(netip.MustParsePrefix("20.1.0.0/16"), 1); err != nil {
		t.Fatal(err)
	}
	allowed := func(addr uint32) []uint32 {
		out := []uint32{1}
		for _, c := range cands {
			if addr&mask(c.p.Bits()) == c.p.Addr() {
				out = append(out, c.nh)
			}
		}
		return out
	}

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		changes atomic.Int64
		full    atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		present := make([]bool, len(cands))
		for !stop.Load() {
			var add []Route
			var del []netip.Prefix
			var idx []int
			for range 1 + rng.IntN(4) {
				i := rng.IntN(len(cands))
				if slices.Contains(idx, i) {
					continue
				}
				idx = append(idx, i)
				if present[i] {
					del = append(del, cands[i].p.Prefix())
				} else {
					add = append(add, Route{cands[i].p.Prefix(), cands[i].nh})
				}
			}
			if err := d.SetRoutes(add); errors.Is(err, ErrFIBFull) {
				full.Add(1)
				add = nil
			} else if err != nil {
				t.Error(err)
				return
			}
			if err := d.DeleteRoutes(del); err != nil {
				t.Error(err)
				return
			}
			for _, i := range idx {
				p := cands[i].p.Prefix()
				for _, r := range add {
					if r.Prefix == p {
						present[i] = true
					}
				}
				for _, q := range del {
					if q == p {
						present[i] = false
					}
				}
			}
			changes.Add(1)
		}
	}()

	rng := rand.New(rand.NewPCG(3, 4))
	deadline := time.Now().Add(3 * time.Second)
	lookups := 0
	for time.Now().Before(deadline) && !t.Failed() {
		addr := uint32(20<<24|1<<16) | uint32(rng.IntN(16))<<8 | uint32(rng.IntN(256))
		nh, ok := runLookup(t, d, addr)
		ok2 := false
		for _, a := range allowed(addr) {
			ok2 = ok2 || (ok && a == nh)
		}
		if !ok2 {
			t.Errorf("%s: nexthop %d (forwarded %v), never valid for it (valid: %v)", addrOf(addr), nh, ok, allowed(addr))
		}
		lookups++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d lookups during %d route changes (%d refused as FIB full), %d groups in use",
		lookups, changes.Load(), full.Load(), d.fib.groupsInUse())
	if changes.Load() < 1000 || full.Load() == 0 {
		t.Errorf("too little churn to mean anything: %d changes, %d full", changes.Load(), full.Load())
	}
}
