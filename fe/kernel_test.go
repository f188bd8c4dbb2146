package fe

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/netnstest"
)

func kernelRoutes(t *testing.T, h *netlink.Handle) map[string]string {
	t.Helper()
	rs, err := h.RouteListFiltered(unix.AF_UNSPEC, &netlink.Route{Protocol: kernelProto}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[r.Dst.String()] = r.Gw.String()
	}
	return out
}

// The kernel copy follows the mode, replaces, removes, and a new FE sweeps
// what an old one left.
func TestKernelFIB(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "k0"}, PeerName: "k1"}
		if err := h.LinkAdd(veth); err != nil {
			t.Fatal(err)
		}
		l, _ := h.LinkByName("k0")
		h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 9, 0, 1), Mask: net.CIDRMask(24, 32)}})
		h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("fd00:9::1"), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD})
		h.LinkSetUp(l)

		gw1, gw2 := ip4(netip.MustParseAddr("10.9.0.2")), ip4(netip.MustParseAddr("10.9.0.3"))
		p := toPrefix4(netip.MustParsePrefix("198.51.100.0/24"))
		def := toPrefix4(netip.MustParsePrefix("0.0.0.0/0"))

		k := newKernelFIB(KernelRoutesDefault)
		defer k.close()
		k.sync(p, gw1)
		k.sync(def, gw1)
		if got := kernelRoutes(t, h); len(got) != 1 || got["0.0.0.0/0"] != "10.9.0.2" {
			t.Fatalf("mode default: kernel has %v, want only the default", got)
		}

		k = newKernelFIB(KernelRoutesAll)
		defer k.close()
		k.sync(p, gw1)
		k.sync(p, gw2)
		if got := kernelRoutes(t, h); got["198.51.100.0/24"] != "10.9.0.3" {
			t.Fatalf("mode all: kernel has %v, want 198.51.100.0/24 via 10.9.0.3", got)
		}
		k.sync(p, 0)
		if _, ok := kernelRoutes(t, h)["198.51.100.0/24"]; ok || k.errors != 0 {
			t.Fatalf("route not removed (errors %d, %s)", k.errors, k.lastErr)
		}

		// IPv6 the same way: the slow path answers ICMPv6 too.
		p6 := netip.MustParsePrefix("2001:db8:100::/48")
		k.sync6(p6, netip.MustParseAddr("fd00:9::2"))
		k.sync6(p6, netip.MustParseAddr("fd00:9::3"))
		if got := kernelRoutes(t, h); got["2001:db8:100::/48"] != "fd00:9::3" || k.len() != 1 {
			t.Fatalf("mode all: kernel has %v (len %d), want 2001:db8:100::/48 via fd00:9::3", got, k.len())
		}
		k6 := newKernelFIB(KernelRoutesDefault)
		defer k6.close()
		k6.sync6(netip.MustParsePrefix("2001:db8:200::/48"), netip.MustParseAddr("fd00:9::2"))
		k6.sync6(netip.MustParsePrefix("::/0"), netip.MustParseAddr("fd00:9::2"))
		if got := kernelRoutes(t, h); got["::/0"] != "fd00:9::2" || got["2001:db8:200::/48"] != "" {
			t.Fatalf("mode default: kernel has %v, want the IPv6 default and not 2001:db8:200::/48", got)
		}
		k6.removeAll()
		k.sync6(p6, netip.Addr{})
		if got := kernelRoutes(t, h); got["::/0"] != "" || got["2001:db8:100::/48"] != "" || k.errors != 0 || k.len() != 0 {
			t.Fatalf("IPv6 routes not removed: %v (errors %d, %s)", got, k.errors, k.lastErr)
		}
		k.sync6(p6, netip.MustParseAddr("fd00:9::2"))
		sweeper := newKernelFIB(KernelRoutesAll)
		defer sweeper.close()
		if err := sweeper.sweep(); err != nil {
			t.Fatal(err)
		}
		if got := kernelRoutes(t, h); len(got) != 0 {
			t.Fatalf("sweep left %v", got)
		}
		// Unreachable gateways are counted, not fatal.
		k.sync(p, ip4(netip.MustParseAddr("192.0.2.1")))
		if k.errors != 1 {
			t.Fatalf("errors %d after a route via an unreachable gateway", k.errors)
		}
	})
}
