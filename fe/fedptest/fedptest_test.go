package fedptest

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/fe/datapath"
)

// The fake fails where the real datapath fails, deletes in a batch all or
// nothing, and renders its state without IDs.
func TestDatapath(t *testing.T) {
	d := New()
	if d.String() != "" {
		t.Fatalf("empty datapath renders %q", d.String())
	}
	p1, p2 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	d.SetNexthop(5, datapath.Nexthop{Ifindex: 7, Gateway: netip.MustParseAddr("192.0.2.1"), SrcMAC: mac})
	d.SetNexthop(6, datapath.Nexthop{Ifindex: 7, Gateway: netip.MustParseAddr("192.0.2.2"), SrcMAC: mac})
	if err := d.SetNexthopGroup(1, []uint32{5, 6}); !errors.Is(err, datapath.ErrInvalid) {
		t.Fatalf("group ID below GroupIDBase: %v", err)
	}
	d.SetNexthopGroup(datapath.GroupIDBase, []uint32{6, 5})
	d.SetRoutes([]datapath.Route{{Prefix: p1, Nexthop: 5}, {Prefix: p2, Nexthop: datapath.GroupIDBase}})
	if err := d.DeleteRoutes([]netip.Prefix{p1, netip.MustParsePrefix("192.0.2.0/24")}); !errors.Is(err, datapath.ErrNotFound) {
		t.Fatalf("DeleteRoutes with a missing prefix: %v", err)
	}
	if _, ok := d.Route(p1.String()); !ok {
		t.Fatal("a failed DeleteRoutes deleted some")
	}
	if err := d.DeleteRoute(netip.MustParsePrefix("192.0.2.0/24")); !errors.Is(err, datapath.ErrNotFound) {
		t.Fatalf("DeleteRoute of nothing: %v", err)
	}
	d.SetNeighbor(7, netip.MustParseAddr("192.0.2.1"), net.HardwareAddr{2, 0, 0, 0, 0, 1})
	want := `neighbor 192.0.2.1 dev 7 lladdr 02:00:00:00:00:01
nexthop via 192.0.2.1 dev 7 src 02:00:00:00:00:07
nexthop via 192.0.2.2 dev 7 src 02:00:00:00:00:07
group via 192.0.2.1,192.0.2.2
route 198.51.100.0/24 via 192.0.2.1 dev 7
route 203.0.113.0/24 via 192.0.2.1,192.0.2.2
`
	if got := d.String(); got != want {
		t.Fatalf("rendered:\n%s\nwant:\n%s", got, want)
	}
	if d.Writes() != 5 || d.Gateway(p2.String()) != "192.0.2.2,192.0.2.1" {
		t.Fatalf("writes %d, gateway %q", d.Writes(), d.Gateway(p2.String()))
	}
	d.SetCounters([]datapath.Counters{{"rx": 1}, {"rx": 2}}, nil)
	if c, _ := d.Counters(); c["rx"] != 3 {
		t.Fatalf("counters %v, want rx 3", c)
	}
}
