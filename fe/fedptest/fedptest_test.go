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

// The inter-FE calls fail as the real datapath's do (no local FE, a peer or
// egress FE that is this one, keys out of range, deleting what is not
// there); a remote nexthop replaces a local one of its ID and renders with
// its FE, key and port, the routes and groups through it too.
func TestInterFE(t *testing.T) {
	d := New()
	peer := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	if err := d.SetInterFELink(8, 2, peer); !errors.Is(err, datapath.ErrInvalid) {
		t.Fatalf("a link before the local FE: %v", err)
	}
	for _, id := range []uint32{0, datapath.MaxFEs} {
		if err := d.SetLocalFE(id); !errors.Is(err, datapath.ErrInvalid) {
			t.Fatalf("local FE %d: %v", id, err)
		}
	}
	if err := d.SetLocalFE(1); err != nil {
		t.Fatal(err)
	}
	if err := d.SetInterFELink(8, 1, peer); !errors.Is(err, datapath.ErrInvalid) {
		t.Fatalf("a link to this FE: %v", err)
	}
	if err := d.SetInterFELinkUp(2, false); !errors.Is(err, datapath.ErrNotFound) {
		t.Fatalf("the state of a link that does not exist: %v", err)
	}
	if err := d.SetInterFELink(8, 2, peer); err != nil {
		t.Fatal(err)
	}
	if err := d.SetInterFELinkUp(2, false); err != nil {
		t.Fatal(err)
	}
	if err := d.SetRemoteNexthop(5, datapath.RemoteNexthop{FE: 1, Key: 2}); !errors.Is(err, datapath.ErrInvalid) {
		t.Fatalf("a remote nexthop behind this FE: %v", err)
	}
	if err := d.SetRemoteNexthop(5, datapath.RemoteNexthop{FE: 2, Key: datapath.MaxNexthopKeys}); !errors.Is(err, datapath.ErrInvalid) {
		t.Fatalf("a key out of range: %v", err)
	}
	if err := d.DeleteNexthopKey(3); !errors.Is(err, datapath.ErrNotFound) {
		t.Fatalf("deleting a key not mapped: %v", err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	d.SetNexthop(5, datapath.Nexthop{Ifindex: 7, Gateway: netip.MustParseAddr("192.0.2.1"), SrcMAC: mac})
	d.SetNexthop(6, datapath.Nexthop{Ifindex: 7, Gateway: netip.MustParseAddr("192.0.2.2"), SrcMAC: mac})
	if err := d.SetRemoteNexthop(5, datapath.RemoteNexthop{FE: 2, Key: 2, Port: 9}); err != nil {
		t.Fatal(err)
	}
	d.SetNexthopKey(4, 6)
	d.SetNexthopGroup(datapath.GroupIDBase, []uint32{5, 6})
	d.SetRoute(netip.MustParsePrefix("198.51.100.0/24"), 5)
	d.SetRoute(netip.MustParsePrefix("203.0.113.0/24"), datapath.GroupIDBase)
	want := `local fe 1
ife link to fe 2 dev 8 peer 02:00:00:00:00:02 up false spill 0
nexthop key 4 to 192.0.2.2
nexthop remote fe 2 key 2 port 9
nexthop via 192.0.2.2 dev 7 src 02:00:00:00:00:07
group via 192.0.2.2,fe 2 key 2 port 9
route 198.51.100.0/24 via fe 2 key 2 port 9
route 203.0.113.0/24 via 192.0.2.2,fe 2 key 2 port 9
`
	if got := d.String(); got != want {
		t.Fatalf("rendered\n%s\nwant\n%s", got, want)
	}
	if r, ok := d.Remote("198.51.100.0/24"); !ok || r.Port != 9 {
		t.Fatalf("Remote: %+v %t", r, ok)
	}
	if err := d.DeleteNexthopKey(4); err != nil || len(d.NexthopKeys()) != 0 {
		t.Fatalf("DeleteNexthopKey: %v, keys %v", err, d.NexthopKeys())
	}
}
