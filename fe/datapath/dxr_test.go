package datapath

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	pfx "github.com/splitplane/splitplane/internal/prefix"
	"github.com/splitplane/splitplane/internal/routegen"
)

// memDXR is a FIB with its range table over plain slices: rows rows of
// ranges and values value indexes.
func memDXR(rows, values int) (*fib, *dxr, *int) {
	f, graces := memFIB(FIBGroups)
	x := newDXR(f, make([]uint32, dxrChunks), make([]uint32, rows*dxrRowEntries), make([]uint32, values), f.grace)
	return f, x, graces
}

// dxrDriver changes the FIB and reads it back through the range table, as
// the XDP program does.
func dxrDriver(f *fib, x *dxr) fibDriver {
	d := memDriver(f)
	d.lookup = func(addr uint32) (uint32, bool) {
		e := x.lookup(addr)
		return e & fibNexthopMask, e&fibValid != 0
	}
	return d
}

// TestDXRReference: the range table must agree with the reference LPM
// through every change exerciseFIB makes.
func TestDXRReference(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	f, x, _ := memDXR(DXRRangeRows, dxrValueCount)
	exerciseFIB(t, dxrDriver(f, x), seed, 6, 300_000)
	checkDXRStats(t, x)
	if s := x.statsNow(); s.RangeChunks != 0 || s.TBL24Chunks != 0 || s.LeafChunks != dxrChunks {
		t.Fatalf("empty table: %+v, want every chunk a leaf", s)
	}
}

// TestDXRFallback runs out of range rows and of value indexes: the chunks
// that do not fit stay on DIR-24-8, and every lookup stays right.
func TestDXRFallback(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	for _, c := range []struct {
		name         string
		rows, values int
	}{{"rows", 1, dxrValueCount}, {"values", DXRRangeRows, 6}} {
		t.Run(c.name, func(t *testing.T) {
			f, x, _ := memDXR(c.rows, c.values)
			d := dxrDriver(f, x)
			g := newRouteGen(seed)
			ref := newRefLPM()
			var batch []Route
			for i := range 10000 {
				p, nh := g.prefix(), g.nexthop()
				if i%2 == 0 { // spread over many chunks too
					p = pfx.Make(g.rng.Uint32()&0xfffffe00, 23)
				}
				batch = append(batch, Route{Prefix: p.Prefix(), Nexthop: nh})
				ref.m[p.Bits()][p.Addr()] = nh
			}
			if err := d.set(batch); err != nil {
				t.Fatal(err)
			}
			checkFIB(t, "fallback", d, ref, g.addrsToCheck(ref.prefixes(), 100_000))
			if s := x.statsNow(); s.TBL24Chunks == 0 {
				t.Fatalf("%+v: no chunk on DIR-24-8, the limits were not reached", s)
			}
			checkDXRStats(t, x)
		})
	}
}

// TestDXRReuse churns the same chunks with little room, so that released
// blocks and values must come back (after a grace period each time).
func TestDXRReuse(t *testing.T) {
	f, x, graces := memDXR(1, 64)
	d := dxrDriver(f, x)
	ref := newRefLPM()
	for round := range 50 {
		var rs []Route
		for i := range 100 {
			a := 0x0a000000 | uint32(round%3)<<16 | uint32(i)<<5 // /27s: 32-bit entries
			rs = append(rs, Route{Prefix: netip.PrefixFrom(addrOf(a), 27), Nexthop: uint32(round*7+i) % 50})
		}
		if err := d.set(rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			p, _ := toPrefix(r.Prefix)
			ref.m[p.Bits()][p.Addr()] = r.Nexthop
		}
		g := newRouteGen(uint64(round))
		checkFIB(t, "churn", d, ref, g.addrsToCheck(ref.prefixes(), 1000))
		if s := x.statsNow(); s.TBL24Chunks != 0 {
			t.Fatalf("round %d: %+v: a chunk fell back although the freed room suffices", round, s)
		}
	}
	if *graces == 0 {
		t.Fatal("blocks were reused without a grace period")
	}
	checkDXRStats(t, x)
}

// checkDXRStats recounts the statistics and reference counts from the
// tables.
func checkDXRStats(t *testing.T, x *dxr) {
	t.Helper()
	var want DXRStats
	refs := make([]uint32, len(x.refs))
	refs[0] = 1
	for _, d := range x.direct {
		switch {
		case d&dxrRanges != 0:
			want.RangeChunks++
			want.RangeWords += blockOf(d).words()
			if d&dxrShort != 0 {
				want.ShortChunks++
			}
			for i := range 1 << (d >> dxrLogShift & 0xf) {
				_, idx := x.entry(d, d&dxrBaseMask, i)
				refs[idx]++
			}
		case d&dxrTbl24 != 0:
			want.TBL24Chunks++
		default:
			want.LeafChunks++
		}
	}
	for i, r := range refs {
		if r > 0 && i > 0 {
			want.Values++
		}
		if r != x.refs[i] {
			t.Fatalf("value %d: %d references counted, %d found", i, x.refs[i], r)
		}
	}
	got := x.stats
	got.TBL8Groups = 0
	if got != want {
		t.Fatalf("stats %+v, recounted %+v", got, want)
	}
}

// TestDXREdgeTable: an edge-shaped table of routegen prefixes over four
// upstreams fits the range table in a few MB and agrees with the
// reference.
func TestDXREdgeTable(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ps := routegen.Generate(n, 1)
	ups, err := routegen.EdgeUpstreams(ps, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, x, _ := memDXR(DXRRangeRows, dxrValueCount)
	d := dxrDriver(f, x)
	ref := newRefLPM()
	rs := make([]Route, len(ps))
	for i, p := range ps {
		rs[i] = Route{Prefix: p, Nexthop: 1 + uint32(ups[i])}
		k, _ := toPrefix(p)
		ref.m[k.Bits()][k.Addr()] = rs[i].Nexthop
	}
	if err := d.set(rs); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := make([]uint32, 2_000_000)
	for i := range addrs {
		addrs[i] = rng.Uint32()
	}
	checkFIB(t, "edge", d, ref, addrs)
	s := x.statsNow()
	t.Logf("%d routes: %+v, %.2f MB", n, s, float64(s.Bytes())/1e6)
	if s.TBL24Chunks != 0 {
		t.Errorf("%d chunks on DIR-24-8, want all in the range table", s.TBL24Chunks)
	}
	if s.Bytes() > 8<<20 {
		t.Errorf("lookup memory %d bytes, want under 8 MiB", s.Bytes())
	}
}

// TestDXRLocal: the router's addresses are ranges of their own, over
// whatever route covers them, and leave no trace when removed.
func TestDXRLocal(t *testing.T) {
	f, x, _ := memDXR(DXRRangeRows, dxrValueCount)
	d := dxrDriver(f, x)
	if err := d.set([]Route{{netip.MustParsePrefix("20.0.0.0/16"), 3}, {netip.MustParsePrefix("20.0.7.0/25"), 4}}); err != nil {
		t.Fatal(err)
	}
	before := x.statsNow()
	locals := []uint32{20<<24 | 5, 20<<24 | 7<<8 | 9, 20<<24 | 7<<8 | 200, 21<<24 | 1}
	for _, a := range locals {
		x.setLocal(a, true)
	}
	x.setLocal(locals[0], true) // twice: no change
	for _, a := range locals {
		if e := x.lookup(a); e != fibValid|fibLocal {
			t.Errorf("%s: entry %#x, want local", addrOf(a), e)
		}
	}
	for a, want := range map[uint32]uint32{20<<24 | 4: 3, 20<<24 | 6: 3, 20<<24 | 7<<8 | 8: 4, 20<<24 | 7<<8 | 10: 4, 20<<24 | 7<<8 | 201: 3} {
		if e := x.lookup(a); e != fibValid|want {
			t.Errorf("%s: entry %#x, want nexthop %d", addrOf(a), e, want)
		}
	}
	if e := x.lookup(21<<24 | 2); e != 0 {
		t.Errorf("21.0.0.2: entry %#x, want no route", e)
	}
	checkDXRStats(t, x)
	for _, a := range locals {
		x.setLocal(a, false)
	}
	if after := x.statsNow(); after != before {
		t.Errorf("after removing the addresses %+v, before adding them %+v", after, before)
	}
	checkDXRStats(t, x)
}
