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
