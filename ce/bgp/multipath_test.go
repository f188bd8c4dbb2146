package bgp

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// path builds a unicast path from neighbour peer (router ID rid, AS as) with
// next hop nh, received at age; a zero nh means a withdrawal.
func path(t *testing.T, pfx, peer, rid string, as uint32, nh string, age int64) *apiutil.Path {
	t.Helper()
	q := netip.MustParsePrefix(pfx)
	nlri, err := gobgp.NewIPAddrPrefix(q)
	if err != nil {
		t.Fatal(err)
	}
	p := &apiutil.Path{
		Family: gobgp.RF_IPv4_UC, Nlri: nlri, Age: age, Withdrawal: nh == "",
		PeerAddress: netip.MustParseAddr(peer), PeerID: netip.MustParseAddr(rid), PeerASN: as,
	}
	if q.Addr().Is6() {
		p.Family = gobgp.RF_IPv6_UC
	}
	if nh == "" {
		return p
	}
	a := netip.MustParseAddr(nh)
	if a.Is4() {
		attr, err := gobgp.NewPathAttributeNextHop(a)
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs = []gobgp.PathAttributeInterface{attr}
	} else {
		attr, err := gobgp.NewPathAttributeMpReachNLRI(gobgp.RF_IPv6_UC, []gobgp.PathNLRI{{NLRI: nlri}}, a)
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs = []gobgp.PathAttributeInterface{attr}
	}
	return p
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// The multipath bookkeeping on hand-built GoBGP events: what each batch of
// deltas must report, with GoBGP's tie-breakers choosing NextHop.
func TestMultipathsApply(t *testing.T) {
	const local = 65001
	p4, p6 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:100::/48")
	m := newMultipaths(local)
	for _, step := range []struct {
		name  string
		paths []*apiutil.Path
		want  []Update
	}{
		{"one path", []*apiutil.Path{path(t, "198.51.100.0/24", "10.0.0.3", "10.0.0.3", 65002, "192.0.2.30", 100)},
			[]Update{{Prefix: p4, NextHop: addrs("192.0.2.30")[0]}}},
		{"a second, younger, from a lower address: the older stays best",
			[]*apiutil.Path{path(t, "198.51.100.0/24", "10.0.0.2", "10.0.0.2", 65003, "192.0.2.10", 101)},
			[]Update{{Prefix: p4, NextHop: addrs("192.0.2.30")[0], NextHops: addrs("192.0.2.10", "192.0.2.30")}}},
		{"a third with a next hop already in the set", []*apiutil.Path{path(t, "198.51.100.0/24", "10.0.0.1", "10.0.0.1", 65002, "192.0.2.10", 101)},
			nil},
		{"the oldest leaves; of the two of the same second, the lower address is best",
			[]*apiutil.Path{path(t, "198.51.100.0/24", "10.0.0.3", "10.0.0.3", 65002, "", 0)},
			[]Update{{Prefix: p4, NextHop: addrs("192.0.2.10")[0]}}},
		{"changed attributes of one, withdrawal of a prefix never seen, another family, IPv6 in one batch",
			[]*apiutil.Path{
				path(t, "198.51.100.0/24", "10.0.0.1", "10.0.0.1", 65002, "192.0.2.11", 102),
				path(t, "203.0.113.0/24", "10.0.0.1", "10.0.0.1", 65002, "", 0),
				{Family: gobgp.RF_IPv4_VPN, PeerAddress: addrs("10.0.0.1")[0]},
				path(t, "2001:db8:100::/48", "fd00::2", "10.0.0.2", 65002, "2001:db8::2", 102),
				path(t, "2001:db8:100::/48", "fd00::1", "10.0.0.1", 65002, "2001:db8::1", 102),
			},
			[]Update{
				{Prefix: p4, NextHop: addrs("192.0.2.10")[0], NextHops: addrs("192.0.2.10", "192.0.2.11")},
				{Prefix: p6, NextHop: addrs("2001:db8::1")[0], NextHops: addrs("2001:db8::1", "2001:db8::2")},
			}},
		{"a path without a next hop counts as gone", []*apiutil.Path{{
			Family: gobgp.RF_IPv6_UC, Nlri: path(t, "2001:db8:100::/48", "fd00::1", "10.0.0.1", 65002, "", 0).Nlri,
			PeerAddress: addrs("fd00::1")[0], PeerASN: 65002,
		}}, []Update{{Prefix: p6, NextHop: addrs("2001:db8::2")[0]}}},
		{"everything leaves", []*apiutil.Path{
			path(t, "198.51.100.0/24", "10.0.0.2", "10.0.0.2", 65003, "", 0),
			path(t, "198.51.100.0/24", "10.0.0.1", "10.0.0.1", 65002, "", 0),
			path(t, "2001:db8:100::/48", "fd00::2", "10.0.0.2", 65002, "", 0),
		}, []Update{{Prefix: p4, Withdraw: true}, {Prefix: p6, Withdraw: true}}},
		{"iBGP: age does not count, the lower router ID does", []*apiutil.Path{
			path(t, "198.51.100.0/24", "10.0.0.1", "10.0.0.9", local, "192.0.2.1", 100),
			path(t, "198.51.100.0/24", "10.0.0.2", "10.0.0.8", local, "192.0.2.2", 200),
		}, []Update{{Prefix: p4, NextHop: addrs("192.0.2.2")[0], NextHops: addrs("192.0.2.1", "192.0.2.2"), IBGP: true}}},
	} {
		if got := m.apply(step.paths); !reflect.DeepEqual(got, step.want) && len(got)+len(step.want) > 0 {
			t.Fatalf("%s:\n got %+v\nwant %+v", step.name, got, step.want)
		}
	}
}
