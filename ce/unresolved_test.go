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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("CE Run: %v", err)
		}
	})
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
