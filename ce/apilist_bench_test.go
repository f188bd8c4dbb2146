package ce

import (
	"net/netip"
	"testing"
)

// BenchmarkRIBScan is the loop's share of a whole-table List (rib.scan, on
// the loop; the sort happens off it) of 20,000 BGP routes, a quarter of
// them unresolved, per route.
func BenchmarkRIBScan(b *testing.B) {
	const n = 20_000
	r := benchRIB(b, n/4*3)
	r.SetStatic(netip.MustParsePrefix("203.0.0.0/16"), addrs("203.0.0.1"), 0, nil) // loops on itself
	for i := range n / 4 {
		nh := netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)})
		r.SetBGP(netip.PrefixFrom(netip.AddrFrom4([4]byte{101, byte(i >> 8), byte(i), 0}), 24), []netip.Addr{nh}, true, nil)
	}
	var got int
	for b.Loop() {
		got = len(r.scan(RouteFilter{Origin: "bgp"}))
	}
	if got != n-n%4 {
		b.Fatalf("listed %d routes, want %d", got, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*got), "ns/route")
}
