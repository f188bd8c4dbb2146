package ce

import (
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// benchRIB is a RIB with a LAN and two uplinks connected, a static default
// via the uplinks, and sets BGP routes, each via its own next hop: half on
// the LAN, half reached through the default.
func benchRIB(b *testing.B, sets int) *RIB {
	b.Helper()
	r, _ := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.0.1/16", "100.64.0.2/30", "100.64.1.2/30"), nil)
	r.SetStatic(netip.MustParsePrefix("0.0.0.0/0"), addrs("100.64.0.1", "100.64.1.1"), 0, nil)
	for i := range sets {
		nh := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		if i%2 == 1 {
			nh = netip.AddrFrom4([4]byte{172, 16, byte(i >> 8), byte(i)})
		}
		r.SetBGP(netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), []netip.Addr{nh}, true, nil)
	}
	return r
}

// BenchmarkRIBReresolve is a re-resolution of 1000 sets that changes none
// of them (an FE reports a port nothing resolves through), per pass.
func BenchmarkRIBReresolve(b *testing.B) {
	r := benchRIB(b, 1000)
	fe := forces.FEID(2)
	ports := [2][]netip.Prefix{prefixes("192.168.0.1/24"), prefixes("192.168.1.1/24")}
	var out []Change
	for i := 0; b.Loop(); i++ {
		out = r.SetConnected(fe, ports[i%2], out[:0])
	}
	if len(out) != 0 {
		b.Fatalf("%d changes", len(out))
	}
}

// BenchmarkRIBSetBGP is a BGP route set, a new next hop every 64 routes
// (a new set to resolve, half of them through the default).
func BenchmarkRIBSetBGP(b *testing.B) {
	r := benchRIB(b, 0)
	var out []Change
	for i := 0; b.Loop(); i++ {
		j := i / 64
		nh := netip.AddrFrom4([4]byte{10, 0, byte(j >> 8), byte(j)})
		if j%2 == 1 {
			nh = netip.AddrFrom4([4]byte{172, 16, byte(j >> 8), byte(j)})
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 0}), 24)
		out, _ = r.SetBGP(p, []netip.Addr{nh}, true, out[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}
