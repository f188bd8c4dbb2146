package datapath

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"
)

// TestLookup checks Lookup against the program itself: for addresses in
// and around a table with range chunks, a DIR-24-8 chunk, a group, local
// addresses and IPv6, the nexthop the program forwards with is the one
// Lookup reports (a member of its group), and what goes to the kernel is
// no route or local. It then changes a range value behind the datapath's
// back and sees Lookup report what the program now does.
func TestLookup(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 8)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetNexthopGroup(GroupIDBase+1, []uint32{2, 3, 5}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetNexthop(7, Nexthop{Ifindex: lo.Index, SrcMAC: nhMAC(7)}); err != nil { // connected
		t.Fatal(err)
	}
	if err := d.SetNeighbor(lo.Index, netip.MustParseAddr("20.3.0.9"), macNeigh2); err != nil {
		t.Fatal(err)
	}
	routes := []Route{
		{netip.MustParsePrefix("20.0.0.0/24"), 1},
		{netip.MustParsePrefix("20.0.1.0/24"), GroupIDBase + 1},
		{netip.MustParsePrefix("20.1.0.0/16"), 3},
		{netip.MustParsePrefix("20.2.0.128/25"), 4},
		{netip.MustParsePrefix("20.2.0.0/16"), 5},
		{netip.MustParsePrefix("20.3.0.0/24"), 7},
		{netip.MustParsePrefix("2001:db8:1::/48"), 6},
		{netip.MustParsePrefix("2001:db8:1:2::/64"), GroupIDBase + 1},
	}
	if err := d.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"20.0.0.77", "2001:db8:1::1"} {
		if err := d.SetLocalAddr(netip.MustParseAddr(a)); err != nil {
			t.Fatal(err)
		}
	}
	// 20.2/16 on DIR-24-8, as when the range table is full.
	d.fibMu.Lock()
	d.fib.dxr.direct[20<<8|2] = dxrTbl24
	d.fibMu.Unlock()
	if err := d.SetLocalAddr(netip.MustParseAddr("20.2.0.1")); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []netip.Addr{netip.MustParseAddr("20.0.0.77"), netip.MustParseAddr("20.2.0.1"), netip.MustParseAddr("2001:db8:1::1"),
		netip.MustParseAddr("20.3.0.9"), netip.MustParseAddr("20.9.0.1"), netip.MustParseAddr("2001:db8:2::1")}
	for range 300 {
		r := routes[rng.IntN(len(routes))].Prefix
		a := r.Addr().AsSlice()
		for i := r.Bits() / 8; i < len(a); i++ {
			a[i] = byte(rng.Uint32())
		}
		if i := r.Bits()/8 - 1; rng.IntN(4) == 0 && i >= 0 {
			a[i] ^= 1 // just outside, often
		}
		ad, _ := netip.AddrFromSlice(a)
		addrs = append(addrs, ad)
	}
	ls, err := d.Lookup(addrs)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[LookupKind]int{}
	for i, a := range addrs {
		l := ls[i]
		kinds[l.Kind]++
		nh, fwd := runLookupAddr(t, d, a)
		switch {
		case fwd && l.Kind != LookupRoute:
			t.Errorf("%s: the program forwards by nexthop %d, Lookup says %v", a, nh, l.Kind)
		case !fwd && l.Kind == LookupRoute && !slices.ContainsFunc(l.Hops, func(h LookupHop) bool { return h.DstMAC == nil }):
			t.Errorf("%s: the program passes it, Lookup says route %d %+v, resolved", a, l.ID, l.Hops)
		case fwd && !slices.ContainsFunc(l.Hops, func(h LookupHop) bool { return h.ID == nh }):
			t.Errorf("%s: forwarded by nexthop %d, Lookup says %d %+v", a, nh, l.ID, l.Hops)
		}
	}
	if kinds[LookupLocal] != 3 || kinds[LookupNone] < 10 || kinds[LookupRoute] < 100 {
		t.Errorf("kinds %v: want 3 local, some without a route, most routed", kinds)
	}

	one := func(a string) Lookup {
		t.Helper()
		ls, err := d.Lookup([]netip.Addr{netip.MustParseAddr(a)})
		if err != nil {
			t.Fatal(err)
		}
		return ls[0]
	}
	if l := one("20.0.1.5"); l.ID != GroupIDBase+1 || len(l.Hops) != 3 || l.Hops[0].ID != 2 || l.Hops[1].ID != 3 || l.Hops[2].ID != 5 {
		t.Errorf("20.0.1.5 via the group: %+v", l)
	}
	h := one("20.0.0.5").Hops[0]
	if h.ID != 1 || h.Ifindex != lo.Index || h.Gateway != netip.MustParseAddr("10.0.0.1") ||
		!bytes.Equal(h.SrcMAC, nhMAC(1)) || !bytes.Equal(h.DstMAC, macNeigh1) {
		t.Errorf("20.0.0.5: %+v", h)
	}
	if h := one("20.3.0.9").Hops[0]; h.Gateway.IsValid() || !bytes.Equal(h.DstMAC, macNeigh2) {
		t.Errorf("20.3.0.9, connected with a neighbour entry: %+v", h)
	}
	if h := one("20.3.0.10").Hops[0]; h.DstMAC != nil {
		t.Errorf("20.3.0.10, connected without a neighbour: %+v", h)
	}

	// Behind the datapath's back, the value 20.0.0.0/24's range reads
	// becomes nexthop 6.
	d.fibMu.Lock()
	e := d.fib.dxr.direct[20<<8]
	i := slices.Index(d.fib.dxr.values, fibValid|1)
	d.fibMu.Unlock()
	if e&dxrRanges == 0 || i < 0 {
		t.Fatalf("20.0/16 direct entry %#x, value index %d: not on ranges", e, i)
	}
	if err := d.objs.DxrValues.Update(uint32(i/fibGroupEntries), fibRowWith(t, d, i, fibValid|6), 0); err != nil {
		t.Fatal(err)
	}
	if l := one("20.0.0.5"); l.ID != 6 {
		t.Errorf("after the value changed behind its back, Lookup says %d", l.ID)
	}
	if nh, fwd := runLookupAddr(t, d, netip.MustParseAddr("20.0.0.5")); !fwd || nh != 6 {
		t.Errorf("after the value changed, the program forwards by %d (%v)", nh, fwd)
	}

	if _, err := d.Lookup([]netip.Addr{{}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Lookup of the zero address: %v, want ErrInvalid", err)
	}
}

// fibRowWith reads the dxr_values row holding value i and sets it to v.
func fibRowWith(t *testing.T, d *Datapath, i int, v uint32) [fibGroupEntries]uint32 {
	t.Helper()
	var row [fibGroupEntries]uint32
	if err := d.objs.DxrValues.Lookup(uint32(i/fibGroupEntries), &row); err != nil {
		t.Fatal(err)
	}
	row[i%fibGroupEntries] = v
	return row
}
