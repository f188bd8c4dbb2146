//go:build linux

package fibbench

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/splitplane/splitplane/fe/datapath"
)

// TestRoutes6Full checks the full table's shape: size, distinct prefixes in
// 2000::/3, the length mix, nesting inside allocations, and the upstreams.
func TestRoutes6Full(t *testing.T) {
	rs := Routes6Full(Full6Routes, 1)
	if len(rs) != Full6Routes {
		t.Fatalf("%d routes, want %d", len(rs), Full6Routes)
	}
	global := netip.MustParsePrefix("2000::/3")
	set := make(map[netip.Prefix]uint32, len(rs))
	var alloc, mid, p48, long, nested, sameNH int
	nhs := map[uint32]int{}
	for _, r := range rs {
		p := r.Prefix
		if !global.Contains(p.Addr()) || p.Bits() < 19 || p != p.Masked() {
			t.Fatalf("route %v: not a masked prefix of /19 or longer in 2000::/3", p)
		}
		if _, dup := set[p]; dup {
			t.Fatalf("route %v twice", p)
		}
		set[p] = r.Nexthop
		nhs[r.Nexthop]++
		switch b := p.Bits(); {
		case b <= 32:
			alloc++
		case b < 48:
			mid++
		case b == 48:
			p48++
		default:
			long++
		}
	}
	for _, r := range rs {
		for b := r.Prefix.Bits() - 1; b >= 19; b-- {
			c, _ := r.Prefix.Addr().Prefix(b)
			if nh, ok := set[c]; ok {
				nested++
				if nh == r.Nexthop {
					sameNH++
				}
				break
			}
		}
	}
	pct := func(k int) float64 { return 100 * float64(k) / float64(len(rs)) }
	t.Logf("allocations %.1f%%, /33-/47 %.1f%%, /48 %.1f%%, longer %.1f%%, nested %.1f%%, nested with the cover's nexthop %.1f%%, nexthops %v",
		pct(alloc), pct(mid), pct(p48), pct(long), pct(nested), 100*float64(sameNH)/float64(nested), nhs)
	for _, c := range []struct {
		name     string
		got      float64
		min, max float64
	}{
		{"allocations /19-/32", pct(alloc), 12, 18},
		{"/33-/47", pct(mid), 33, 43},
		{"/48", pct(p48), 40, 50},
		{"/49 and longer", pct(long), 1, 3},
		{"nested", pct(nested), 80, 100},
		{"nested sharing the cover's nexthop", 100 * float64(sameNH) / float64(nested), 75, 95},
	} {
		if c.got < c.min || c.got > c.max {
			t.Errorf("%s: %.1f%%, want %.0f%% to %.0f%%", c.name, c.got, c.min, c.max)
		}
	}
	if len(nhs) != EdgeUpstreams {
		t.Errorf("nexthops %v, want %d upstreams", nhs, EdgeUpstreams)
	}
	again := Routes6Full(1000, 1)
	for i, r := range Routes6Full(1000, 1) {
		if r != again[i] {
			t.Fatalf("route %d: %v then %v for the same seed", i, again[i], r)
		}
	}
}

// TestFull6Lookups runs the FE's router on a million destinations against
// the full-shaped table, three in four inside its prefixes and the rest
// anywhere in 2000::/3, and checks every answer against a reference
// longest-prefix match.
func TestFull6Lookups(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("a million program runs")
	}
	routes := Routes6Full(Full6Routes, 2)
	gw := netip.MustParseAddr("fe80::1")
	o, err := Load(Options{Sizes: datapath.Sizes{FIB6Groups: fib6GroupsFor(len(routes))}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.AddTxPort(lo.Index); err != nil {
		t.Fatal(err)
	}
	if err := o.SetNeighbor(lo.Index, gw, net.HardwareAddr{2, 0, 0, 0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	for id := uint32(1); id <= EdgeUpstreams; id++ {
		if err := o.SetNexthop(id, datapath.Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 1, byte(id)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	// The range table holds the whole table, in a few MB: no /16 or /24
	// is left to the stride table.
	st, err := o.FIB6Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.StrideChunks != 0 || st.LookupBytes > 8<<20 || st.RangeChunks == 0 {
		t.Errorf("full table: %d /16s and /24s on the stride table, %d range chunks, lookups read %d bytes; want none, some, under 8 MiB",
			st.StrideChunks, st.RangeChunks, st.LookupBytes)
	}
	ref := make(map[netip.Prefix]uint32, len(routes))
	for _, r := range routes {
		ref[r.Prefix] = r.Nexthop
	}
	want := func(a netip.Addr) uint32 {
		for b := 128; b >= 0; b-- {
			p, _ := a.Prefix(b)
			if nh, ok := ref[p]; ok {
				return nh
			}
		}
		return 0
	}
	const n = 1_000_000
	inside, err := InsideDestinations6(routes, n*3/4, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	frame, out := benchFrame6(), make([]byte, len(benchFrame6()))
	var routed int
	for i := range n {
		var a [16]byte
		if i < len(inside) {
			a = inside[i]
		} else {
			binary.BigEndian.PutUint64(a[:], 0x2000_0000_0000_0000|rng.Uint64()>>3)
			binary.BigEndian.PutUint64(a[8:], rng.Uint64())
		}
		dst := netip.AddrFrom16(a)
		copy(frame[14+24:14+40], a[:])
		frame[14+7] = 64
		ret, err := o.Program().Run(&ebpf.RunOptions{Data: frame, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		got := uint32(0)
		if ret == xdpRedirect {
			got = uint32(out[11])
			routed++
		} else if ret != xdpPass {
			t.Fatalf("%v: returned %d", dst, ret)
		}
		if w := want(dst); got != w {
			t.Fatalf("%v: nexthop %d (verdict %d), want %d", dst, got, ret, w)
		}
	}
	t.Logf("%d destinations, %d routed", n, routed)
	if routed < n*3/4 {
		t.Errorf("only %d of %d destinations routed", routed, n)
	}
}
