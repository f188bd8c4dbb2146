package lab

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/ce"
)

// lab status says how many routes the CE could not resolve, by reason, and
// which static ones; nothing when every route resolves.
func TestStatusPrintsUnresolved(t *testing.T) {
	var s Status
	s.BGPState = "established"
	s.CE.UnresolvedRoutes = map[string]int{"no_route": 1, "loop": 2, "depth": 0, "work": 0}
	s.CE.UnresolvedStatic = []ce.UnresolvedRoute{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Reason: "loop"},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24"), Reason: "loop"},
	}
	var b strings.Builder
	s.Print(&b)
	want := "CE: 3 routes unresolved, not installed (no_route 1, loop 2); 'splitplane route list --unresolved' lists them\n" +
		"    static 0.0.0.0/0: loop\n" +
		"    static 203.0.113.0/24: loop\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant it to hold:\n%s", b.String(), want)
	}

	s.CE.UnresolvedRoutes = map[string]int{"no_route": 0, "loop": 0, "depth": 0, "work": 0}
	s.CE.UnresolvedStatic = nil
	b.Reset()
	s.Print(&b)
	if strings.Contains(b.String(), "unresolved") {
		t.Errorf("status with every route resolved mentions unresolved ones:\n%s", b.String())
	}
}

// lab status prints the mesh as the CE sees it, one line per FE, only
// when some FE has inter-FE links.
func TestStatusPrintsMesh(t *testing.T) {
	var s Status
	s.CE.FEs = []ce.FEStatus{
		{ID: "FE(1)", EgressOf: 4, InterFELinks: []ce.FELink{
			{Port: 9, PortName: "ife2", PeerFE: 2, Up: true, PeerAssociated: true},
			{Port: 10, PortName: "ife3", PeerFE: 3, Up: false, PeerAssociated: true},
		}},
		{ID: "FE(2)", EgressOf: 2, InterFELinks: []ce.FELink{
			{Port: 4, PortName: "ife1", PeerFE: 1, Up: true, PeerAssociated: true},
			{Port: 5, PortName: "ife3", PeerFE: 3, Up: true, PeerAssociated: false},
		}},
		{ID: "FE(5)"},
	}
	var b strings.Builder
	s.Print(&b)
	for _, want := range []string{
		"mesh: FE(1) egress of 4 nexthops; inter-FE links ife2 to FE(2) up, ife3 to FE(3) down\n",
		"mesh: FE(2) egress of 2 nexthops; inter-FE links ife1 to FE(1) up, ife3 to FE(3) up (peer not associated)\n",
		"mesh: FE(5) egress of 0 nexthops; no inter-FE links\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status:\n%s\nwant it to hold:\n%s", b.String(), want)
		}
	}

	s.CE.FEs = []ce.FEStatus{{ID: "FE(1)"}, {ID: "FE(2)"}}
	b.Reset()
	s.Print(&b)
	if strings.Contains(b.String(), "mesh:") {
		t.Errorf("status of FEs without links shows a mesh:\n%s", b.String())
	}
}
