//go:build linux

package datapath

import (
	"net/netip"
	"slices"
	"testing"
)

// TestDXRKernel: the XDP program reads each form of a /16 (leaf, 16- and
// 32-bit ranges, DIR-24-8 when the range table is out of room) as the
// reference does, and FIBStats counts them.
func TestDXRKernel(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 8)
	routes := []Route{
		{netip.MustParsePrefix("20.0.0.0/24"), 1}, // 20.0/16: 16-bit ranges
		{netip.MustParsePrefix("20.0.1.0/24"), 2},
		{netip.MustParsePrefix("20.1.0.0/16"), 3},   // a leaf
		{netip.MustParsePrefix("20.2.0.128/25"), 4}, // 32-bit ranges
		{netip.MustParsePrefix("20.2.0.0/16"), 5},
	}
	if err := d.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	st, err := d.FIBStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.LeafChunks != dxrChunks-2 || st.RangeChunks != 2 || st.ShortChunks != 1 || st.TBL24Chunks != 0 {
		t.Fatalf("stats %+v: want 2 chunks of ranges, one of them short, the rest leaves", st)
	}
	if st.LookupBytes >= st.DIR24_8Bytes {
		t.Fatalf("range table %d bytes, DIR-24-8 %d", st.LookupBytes, st.DIR24_8Bytes)
	}
	want := map[string]uint32{"20.0.0.9": 1, "20.0.1.255": 2, "20.1.77.1": 3, "20.2.0.200": 4, "20.2.0.127": 5, "20.2.9.1": 5}
	check := func(what string) {
		t.Helper()
		for a, nh := range want {
			if got, ok := runLookup(t, d, uintOf(netip.MustParseAddr(a))); !ok || got != nh {
				t.Errorf("%s: %s -> nexthop %d (forwarded %v), want %d", what, a, got, ok, nh)
			}
		}
		if _, ok := runLookup(t, d, uintOf(netip.MustParseAddr("20.0.2.1"))); ok {
			t.Errorf("%s: 20.0.2.1 has no route but was forwarded", what)
		}
	}
	check("range table")

	// The router's own address is found in the range table: with its
	// local_addrs entry removed behind the datapath's back, a packet to it
	// still goes to the kernel, and the addresses around it are forwarded.
	if err := d.SetLocalAddr(netip.MustParseAddr("20.0.0.77")); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.LocalAddrs.Delete(be32(netip.MustParseAddr("20.0.0.77"))); err != nil {
		t.Fatal(err)
	}
	if nh, ok := runLookup(t, d, uintOf(netip.MustParseAddr("20.0.0.77"))); ok {
		t.Errorf("20.0.0.77, a local address, forwarded to nexthop %d", nh)
	}
	for _, a := range []string{"20.0.0.76", "20.0.0.78"} {
		if nh, ok := runLookup(t, d, uintOf(netip.MustParseAddr(a))); !ok || nh != 1 {
			t.Errorf("%s beside the local address: nexthop %d (forwarded %v), want 1", a, nh, ok)
		}
	}
	if err := d.objs.LocalAddrs.Put(be32(netip.MustParseAddr("20.0.0.77")), uint8(1)); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteLocalAddr(netip.MustParseAddr("20.0.0.77")); err != nil {
		t.Fatal(err)
	}
	check("local address removed")

	// The program reads the range table, not tbl24: with the /16s' tbl24
	// rows cleared behind the FIB's back, the answers stay.
	d.fibMu.Lock()
	saved := slices.Clone(d.fib.tbl24[20<<16 : 20<<16+3<<8])
	clear(d.fib.tbl24[20<<16 : 20<<16+3<<8])
	d.fibMu.Unlock()
	check("range table, tbl24 cleared")
	d.fibMu.Lock()
	copy(d.fib.tbl24[20<<16:], saved)
	d.fibMu.Unlock()

	// The same /16s on DIR-24-8: as if the range table had been full.
	d.fibMu.Lock()
	for _, c := range []uint32{20 << 8, 20<<8 | 2} {
		d.fib.dxr.direct[c] = dxrTbl24
	}
	d.fibMu.Unlock()
	check("DIR-24-8")
}

func uintOf(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
