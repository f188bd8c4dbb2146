package ce

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

func TestDiffers(t *testing.T) {
	a := netip.MustParseAddr
	fe1, fe2 := forces.FEID(1), forces.FEID(2)
	gw, gw2 := a("10.0.0.2"), a("10.0.1.2")
	route := RouteLookup{Kind: LookupRoute, Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHops: []netip.Addr{gw},
		Egress: []HopEgress{{Gateway: gw, FE: fe1, Port: 3, Name: "to-b"}}}
	ecmp := RouteLookup{Kind: LookupRoute, Prefix: route.Prefix, NextHops: []netip.Addr{gw, gw2}}
	conn := RouteLookup{Kind: LookupConnected, Prefix: netip.MustParsePrefix("10.0.0.0/24"), Egress: []HopEgress{{FE: fe1, Port: 3}}}
	local := RouteLookup{Kind: LookupLocal, Prefix: conn.Prefix, Egress: conn.Egress, LocalOf: []forces.ID{fe1}}
	fwd := func(hops ...forces.FIBLookupHop) forces.FIBLookup {
		return forces.FIBLookup{Kind: forces.FIBLookupRoute, ID: 1, Hops: hops}
	}
	for _, c := range []struct {
		name string
		ce   RouteLookup
		fe   forces.ID
		l    forces.FIBLookup
		want string // "" or a part of the difference
	}{
		{"same", route, fe1, fwd(forces.FIBLookupHop{Gateway: gw, Port: 3}), ""},
		{"unresolved is no difference", route, fe1, fwd(forces.FIBLookupHop{Gateway: gw, Port: 3, Resolved: false}), ""},
		{"other gateway", route, fe1, fwd(forces.FIBLookupHop{Gateway: gw2, Port: 3}), "via 10.0.1.2"},
		{"no route on the FE", route, fe1, forces.FIBLookup{}, "FE: no_route"},
		{"empty slot", route, fe1, fwd(), "empty nexthop"},
		{"other port", route, fe1, fwd(forces.FIBLookupHop{Gateway: gw, Port: 4}), "port 4"},
		{"ECMP in another order", ecmp, fe1, fwd(forces.FIBLookupHop{Gateway: gw2}, forces.FIBLookupHop{Gateway: gw}), ""},
		{"ECMP member missing", ecmp, fe1, fwd(forces.FIBLookupHop{Gateway: gw}), "FE: via 10.0.0.2"},
		{"route on the FE, none on the CE", RouteLookup{Kind: LookupNone}, fe1, fwd(forces.FIBLookupHop{Gateway: gw}), "CE: no_route"},
		{"connected", conn, fe1, fwd(forces.FIBLookupHop{Port: 3}), ""},
		{"connected through a gateway", conn, fe1, fwd(forces.FIBLookupHop{Gateway: gw, Port: 3}), "connected"},
		{"local", local, fe1, forces.FIBLookup{Kind: forces.FIBLookupLocal}, ""},
		{"local forwarded", local, fe1, fwd(forces.FIBLookupHop{Port: 3}), "CE: local"},
		{"another FE's address", local, fe2, fwd(forces.FIBLookupHop{RemoteFE: 1, RemotePort: 3}), ""},
		{"behind another FE, sent elsewhere", route, fe2, fwd(forces.FIBLookupHop{Gateway: gw, RemoteFE: 3, RemotePort: 3}), "FE 3"},
		{"behind another FE", route, fe2, fwd(forces.FIBLookupHop{Gateway: gw, RemoteFE: 1, RemotePort: 3}), ""},
	} {
		got := differs(c.ce, c.fe, c.l)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: differs = %q, want %q", c.name, got, c.want)
		}
	}
}
