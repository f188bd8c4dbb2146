package ce

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// The CE reports unresolved routes in its status and metrics.
func TestCEReportsUnresolved(t *testing.T) {
	c, err := New(Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0",
		MetricsListen: "127.0.0.1:0",
		StaticRoutes: []StaticRoute{
			{Prefix: "0.0.0.0/0", NextHops: []string{"192.0.2.1", "198.51.100.1"}},
			{Prefix: "203.0.113.0/24", NextHops: []string{"10.9.9.9"}},
			{Prefix: "2001:db8:5::/48", NextHops: []string{"2001:db8:9::1"}},
		}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c)
	waitFor(t, func() bool { return c.MetricsAddr() != nil })
	var st Status
	waitFor(t, func() bool { st = statusOf(t, c); return st.UnresolvedRoutes["loop"] == 2 })
	if st.UnresolvedRoutes["no_route"] != 1 || st.Routes != 0 {
		t.Fatalf("unresolved %v, %d routes in the FIB; want loop 2, no_route 1, no route", st.UnresolvedRoutes, st.Routes)
	}
	if got, want := fmt.Sprint(st.UnresolvedStatic), "[{0.0.0.0/0 loop} {203.0.113.0/24 loop} {2001:db8:5::/48 no_route}]"; got != want {
		t.Fatalf("unresolved static routes %s, want %s", got, want)
	}
	mfs := scrape(t, c.MetricsAddr().String())
	for reason, want := range map[string]float64{"loop": 2, "no_route": 1, "depth": 0, "work": 0} {
		if v, ok := metricValue(mfs, "splitplane_ce_rib_unresolved_routes", "reason", reason); !ok || v != want {
			t.Errorf("splitplane_ce_rib_unresolved_routes{reason=%q} = %v (present: %v), want %v", reason, v, ok, want)
		}
	}
	// Listings say why each route does not resolve; Unresolved lists
	// only those.
	for _, f := range []RouteFilter{{}, {Unresolved: true}, {Family: 4, Unresolved: true}} {
		l, err := c.ListRoutes(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range l {
			got = append(got, fmt.Sprintf("%s %s installed=%v resolved=%v", r.Prefix, r.Unresolved(), r.Installed, r.Resolved))
		}
		want := "[0.0.0.0/0 loop installed=false resolved=[] 203.0.113.0/24 loop installed=false resolved=[] 2001:db8:5::/48 no_route installed=false resolved=[]]"
		if f.Family == 4 {
			want = "[0.0.0.0/0 loop installed=false resolved=[] 203.0.113.0/24 loop installed=false resolved=[]]"
		}
		if fmt.Sprint(got) != want {
			t.Errorf("ListRoutes(%+v):\n%v\nwant\n%s", f, got, want)
		}
	}
}

// A listing of routes that resolve gives no reason, and Unresolved leaves
// them out.
func TestListRoutesResolvedHasNoReason(t *testing.T) {
	r, _ := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("100.64.0.2/30"), nil)
	r.SetStatic(netip.MustParsePrefix("0.0.0.0/0"), addrs("100.64.0.1"), 0, nil)
	r.SetStatic(netip.MustParsePrefix("198.51.100.0/24"), addrs("192.0.2.1"), 0, nil) // through the default
	r.SetStatic(netip.MustParsePrefix("2001:db8::/32"), addrs("2001:db9::1"), 0, nil) // nothing covers it
	var got []string
	for _, ri := range r.list(RouteFilter{}) {
		got = append(got, fmt.Sprintf("%s %q %v", ri.Prefix, ri.Unresolved(), ri.Resolved))
	}
	if want := `[0.0.0.0/0 "" [100.64.0.1] 198.51.100.0/24 "" [100.64.0.1] 2001:db8::/32 "no_route" []]`; fmt.Sprint(got) != want {
		t.Errorf("listed %v, want %s", got, want)
	}
	if l := r.list(RouteFilter{Unresolved: true}); len(l) != 1 || l[0].Prefix.String() != "2001:db8::/32" {
		t.Errorf("unresolved listed %v, want 2001:db8::/32 alone", l)
	}
}

// A static route that stops resolving for a loop is logged once, and again
// when it resolves; one whose port is down (no route) is not.
func TestRIBLogsUnresolvedStatic(t *testing.T) {
	var logs bytes.Buffer
	r, _ := newTestRIB()
	r.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	fe := forces.FEID(1)
	r.SetStatic(netip.MustParsePrefix("2001:db8:5::/48"), addrs("2001:db8:9::1"), 0, nil) // no route: not logged
	r.SetConnected(fe, prefixes("100.64.0.2/30", "100.64.1.2/30"), nil)
	r.SetStatic(netip.MustParsePrefix("0.0.0.0/0"), addrs("100.64.0.1", "100.64.1.1"), 0, nil)
	r.SetConnected(fe, nil, nil)
	r.SetConnected(fe, prefixes("100.64.7.2/30"), nil) // still a loop: no second warning
	r.SetConnected(fe, prefixes("100.64.0.2/30"), nil)
	want := `level=WARN msg="rib: static route does not resolve, not installed" prefix=0.0.0.0/0 next_hops="[100.64.0.1 100.64.1.1]" reason=loop
level=INFO msg="rib: static route resolves again" prefix=0.0.0.0/0 resolved=[100.64.0.1]
`
	if logs.String() != want {
		t.Fatalf("logged:\n%s\nwant:\n%s", logs.String(), want)
	}
}
