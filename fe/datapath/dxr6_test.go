package datapath

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// memDXR6 is an IPv6 FIB with its range table over plain slices: subs sub
// groups and rows rows of ranges.
func memDXR6(subs, rows int) (*fib6, *dxr6, *int) {
	f, graces := memFIB6(FIB6Groups)
	x := newDXR6(f, make([]uint32, dxr6DirectEntries), make([]uint32, subs*fibGroupEntries),
		make([]uint64, rows*dxr6RowEntries), f.grace)
	return f, x, graces
}

// dxr6Driver changes the FIB and reads it back through the range table, as
// the XDP program does.
func dxr6Driver(f *fib6, x *dxr6) fib6Driver {
	d := memDriver6(f)
	d.lookup = x.lookup
	return d
}

// TestDXR6Reference: the range table must agree with the reference LPM
// through every change exerciseFIB6 makes, and hold nothing once the
// routes are gone.
func TestDXR6Reference(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	f, x, _ := memDXR6(DXR6SubGroups, DXR6RangeRows)
	exerciseFIB6(t, dxr6Driver(f, x), seed, 5, 200_000)
	if s := x.statsNow(); s != (DXR6Stats{}) {
		t.Fatalf("empty table: %+v, want nothing in use", s)
	}
	for c, d := range x.direct {
		if d != 0 {
			t.Fatalf("empty table: direct entry %#x of /16 %#x", d, c)
		}
	}
}

// TestDXR6Shapes checks how each /24 is held: ranges for prefixes up to
// /64, the stride table for longer ones, a FIB entry for a /24 of one
// value.
func TestDXR6Shapes(t *testing.T) {
	f, x, _ := memDXR6(DXR6SubGroups, DXR6RangeRows)
	d := dxr6Driver(f, x)
	p := netip.MustParsePrefix
	if err := d.set([]Route{
		{p("2001:db8::/32"), 1}, {p("2001:db8:1::/48"), 2}, {p("2001:db8:2:3::/64"), 3},
		{p("2400:cb00::/24"), 4}, {p("2400:cb00::/32"), 4}, // one value for the /24
		{p("2a00:1::/32"), 5}, {p("2a00:1:0:1::7/128"), 6},
	}); err != nil {
		t.Fatal(err)
	}
	entry := func(a string) uint32 {
		b := netip.MustParseAddr(a).As16()
		hi := binary.BigEndian.Uint64(b[:8])
		dir := x.direct[hi>>48]
		if dir&dxr6Sub == 0 {
			t.Fatalf("%s: direct entry %#x, want a sub group", a, dir)
		}
		return x.sub[int(dir&dxrBaseMask)<<8|int(hi>>40&0xff)]
	}
	if e := entry("2001:db8::"); e&dxrRanges == 0 || e>>dxrLogShift&0xf != 3 {
		// 2001:d00:: none, db8:: 1, db8:1:: 2, db8:2:: 1, db8:2:3:: 3,
		// db8:2:4:: 1, db9:: none: 7 ranges, padded to 8
		t.Errorf("2001:db8::/24 entry %#x, want a block of 8 ranges", e)
	}
	if e := entry("2400:cb00::"); e != fibValid|4 {
		t.Errorf("2400:cb00::/24 entry %#x, want the FIB entry %#x", e, fibValid|4)
	}
	if e := entry("2a00:1::"); e != dxr6Stride {
		t.Errorf("2a00::/24 (a /128 in it) entry %#x, want the stride table", e)
	}
	if s := x.statsNow(); s.SubGroups != 3 || s.RangeChunks != 1 || s.StrideChunks != 1 || s.RangeWords != 8 {
		t.Errorf("stats %+v, want 3 sub groups, 1 range chunk of 8 words, 1 stride chunk", s)
	}
	for a, want := range map[string]uint32{
		"2001:db8::1": 1, "2001:db8:1::": 2, "2001:db8:1:ffff::": 2, "2001:db8:2:3:ffff::": 3,
		"2001:db8:2:4::": 1, "2400:cbff::": 4, "2a00:1:0:1::7": 6, "2a00:1:0:1::8": 5,
	} {
		if nh, ok := x.lookup(netip.MustParseAddr(a).As16()); !ok || nh != want {
			t.Errorf("%s: nexthop %d (%v), want %d", a, nh, ok, want)
		}
	}
	if _, ok := x.lookup(netip.MustParseAddr("2001:db9::").As16()); ok {
		t.Error("2001:db9:: found a route")
	}
	// Removing the /128 brings its /24 back to ranges.
	if err := d.del([]netip.Prefix{p("2a00:1:0:1::7/128")}); err != nil {
		t.Fatal(err)
	}
	if e := entry("2a00:1::"); e&dxrRanges == 0 {
		t.Errorf("2a00::/24 without its /128: entry %#x, want ranges", e)
	}
}

// TestDXR6Fallback runs out of sub groups and of range rows: what does not
// fit is looked up in the stride table, and every lookup stays right.
func TestDXR6Fallback(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	for _, c := range []struct {
		name       string
		subs, rows int
	}{{"subs", 1, DXR6RangeRows}, {"rows", DXR6SubGroups, 1}} {
		t.Run(c.name, func(t *testing.T) {
			f, x, _ := memDXR6(c.subs, c.rows)
			exerciseFIB6(t, dxr6Driver(f, x), seed, 3, 50_000)
			if s := x.statsNow(); s != (DXR6Stats{}) {
				t.Fatalf("empty table: %+v, want nothing in use", s)
			}
		})
	}
}

// TestDXR6Reuse fills the one sub group and then the one row of ranges: the
// /16 or /24 that finds none is on the stride table, and gets the released
// one at its next change, after a grace period.
func TestDXR6Reuse(t *testing.T) {
	p := netip.MustParsePrefix
	t.Run("subs", func(t *testing.T) {
		f, x, graces := memDXR6(1, DXR6RangeRows)
		d := dxr6Driver(f, x)
		if err := d.set([]Route{{p("2001:db8::/32"), 1}, {p("2400:cb00::/32"), 2}}); err != nil {
			t.Fatal(err)
		}
		if x.direct[0x2400] != dxr6Stride || x.direct[0x2001]&dxr6Sub == 0 {
			t.Fatalf("direct entries %#x %#x, want a sub group for 2001::/16 and the stride table for 2400::/16", x.direct[0x2001], x.direct[0x2400])
		}
		if err := d.del([]netip.Prefix{p("2001:db8::/32")}); err != nil {
			t.Fatal(err)
		}
		if *graces != 0 {
			t.Fatalf("%d grace periods before the released group was needed", *graces)
		}
		if err := d.set([]Route{{p("2400:cb01::/32"), 3}}); err != nil {
			t.Fatal(err)
		}
		if x.direct[0x2400]&dxr6Sub == 0 || *graces != 1 {
			t.Fatalf("2400::/16 direct entry %#x after %d grace periods, want its sub group after 1", x.direct[0x2400], *graces)
		}
		for a, want := range map[string]uint32{"2400:cb00::1": 2, "2400:cb01::1": 3} {
			if nh, ok := x.lookup(netip.MustParseAddr(a).As16()); !ok || nh != want {
				t.Errorf("%s: nexthop %d (%v), want %d", a, nh, ok, want)
			}
		}
	})
	t.Run("rows", func(t *testing.T) {
		f, x, graces := memDXR6(DXR6SubGroups, 1)
		d := dxr6Driver(f, x)
		// 1,200 /48s with alternating nexthops in each of two /24s: a
		// block of 2,048 ranges each, and there is one.
		many := func(prefix string, n int) []Route {
			var rs []Route
			for i := range n {
				rs = append(rs, Route{p(fmt.Sprintf("%s:%x::/48", prefix, i)), uint32(1 + i%2)})
			}
			return rs
		}
		if err := d.set(many("2001:db8", 1200)); err != nil {
			t.Fatal(err)
		}
		if err := d.set(many("2001:c00", 1200)); err != nil {
			t.Fatal(err)
		}
		sub := x.sub[int(x.direct[0x2001]&dxrBaseMask)<<8:]
		if sub[0x0d]&dxrRanges == 0 || sub[0x0c] != dxr6Stride {
			t.Fatalf("sub entries %#x %#x, want ranges for 2001:d00::/24 and the stride table for 2001:c00::/24", sub[0x0d], sub[0x0c])
		}
		var gone []netip.Prefix
		for _, r := range many("2001:db8", 1200) {
			gone = append(gone, r.Prefix)
		}
		if err := d.del(gone); err != nil {
			t.Fatal(err)
		}
		if err := d.set([]Route{{p("2001:c00:ffff::/48"), 3}}); err != nil {
			t.Fatal(err)
		}
		if sub[0x0c]&dxrRanges == 0 || *graces != 1 {
			t.Fatalf("2001:c00::/24 entry %#x after %d grace periods, want ranges after 1", sub[0x0c], *graces)
		}
		for a, want := range map[string]uint32{"2001:c00:0::1": 1, "2001:c00:1::1": 2, "2001:c00:ffff::1": 3, "2001:db8:1::": 0} {
			nh, ok := x.lookup(netip.MustParseAddr(a).As16())
			if ok != (want != 0) || nh != want {
				t.Errorf("%s: nexthop %d (%v), want %d", a, nh, ok, want)
			}
		}
	})
}
