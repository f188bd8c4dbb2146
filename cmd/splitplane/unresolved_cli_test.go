package main

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/runtest"

	"github.com/splitplane/splitplane/api/server"
	"github.com/splitplane/splitplane/ce"
)

// startCEAPI runs a CE with static routes and its API on a unix socket, and
// returns the CE and the --api address.
func startCEAPI(t *testing.T, static []ce.StaticRoute) (*ce.CE, string) {
	t.Helper()
	c, err := ce.New(ce.Config{ID: 1, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1,
		ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0", StaticRoutes: static}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, "CE", c.Run, func() bool { return c.Addr() != nil })
	path := filepath.Join(t.TempDir(), "api.sock")
	s, err := server.Start(c, server.Config{Listen: "unix:" + path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return c, "unix:" + path
}

// A static route whose next hop nothing covers, and static routes whose next
// hops only the default itself covers (a loop), are listed by the CLI, from
// a real CE's API, as unresolved with their reason, and counted by reason in
// route summary.
func TestRouteListUnresolved(t *testing.T) {
	c, api := startCEAPI(t, []ce.StaticRoute{
		{Prefix: "10.0.0.0/8", Connected: true},
		{Prefix: "198.18.0.0/15", NextHops: []string{"10.0.0.2"}},              // resolves
		{Prefix: "0.0.0.0/0", NextHops: []string{"192.0.2.1", "198.51.100.1"}}, // only the default covers them: loop
		{Prefix: "203.0.113.0/24", NextHops: []string{"172.16.9.9"}},           // through the default: loop
		{Prefix: "2001:db8:5::/48", NextHops: []string{"2001:db8:9::1"}},       // nothing covers it
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := c.Status(t.Context())
		if err == nil && st.UnresolvedRoutes["loop"] == 2 && st.UnresolvedRoutes["no_route"] == 1 && st.Routes >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CE status not as configured within 15s: %+v, %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	stdout, stderr, code := run(t, "route", "list", "--api", api)
	if code != 0 {
		t.Fatalf("route list: exit %d: %s", code, stderr)
	}
	want := `PREFIX           ORIGIN  DISTANCE  FIB  NEXT HOPS               RESOLVED
0.0.0.0/0        static  1              192.0.2.1,198.51.100.1  unresolved: loop
198.18.0.0/15    static  1         *    10.0.0.2                10.0.0.2
203.0.113.0/24   static  1              172.16.9.9              unresolved: loop
2001:db8:5::/48  static  1              2001:db8:9::1           unresolved: no_route
`
	if stdout != want {
		t.Errorf("route list:\n%s\nwant:\n%s", stdout, want)
	}

	stdout, stderr, code = run(t, "route", "list", "--unresolved", "-o", "json", "--api", api)
	if code != 0 {
		t.Fatalf("route list --unresolved: exit %d: %s", code, stderr)
	}
	var got []routeJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not one JSON array: %v\n%s", err, stdout)
	}
	reasons := map[string]string{}
	for _, r := range got {
		reasons[r.Prefix] = r.UnresolvedReason
		if r.Installed || len(r.ResolvedNextHops) != 0 {
			t.Errorf("unresolved route %s: installed %v, resolved %v", r.Prefix, r.Installed, r.ResolvedNextHops)
		}
	}
	if want := map[string]string{"0.0.0.0/0": "loop", "203.0.113.0/24": "loop", "2001:db8:5::/48": "no_route"}; len(got) != len(want) ||
		reasons["0.0.0.0/0"] != "loop" || reasons["203.0.113.0/24"] != "loop" || reasons["2001:db8:5::/48"] != "no_route" {
		t.Errorf("route list --unresolved -o json: %v, want %v\n%s", reasons, want, stdout)
	}

	stdout, stderr, code = run(t, "route", "summary", "--api", api)
	if code != 0 {
		t.Fatalf("route summary: exit %d: %s", code, stderr)
	}
	want = `FIB routes         1
unresolved routes  3
  no_route         1
  loop             2
  depth            0
  work             0
'splitplane route list --unresolved' lists the unresolved routes
`
	if stdout != want {
		t.Errorf("route summary:\n%s\nwant:\n%s", stdout, want)
	}
	stdout, stderr, code = run(t, "route", "summary", "-o", "json", "--api", api)
	if code != 0 {
		t.Fatalf("route summary -o json: exit %d: %s", code, stderr)
	}
	var sum routeSummaryJSON
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	if sum.FIBRoutes != 1 || sum.UnresolvedTotal != 3 || sum.Unresolved["loop"] != 2 || sum.Unresolved["no_route"] != 1 || sum.Unresolved["depth"] != 0 {
		t.Errorf("route summary -o json: %+v\n%s", sum, stdout)
	}

	stdout, stderr, code = run(t, "top", "--once", "--interval", "10ms", "--api", api)
	if want := "     3 routes unresolved, not installed: no_route 1, loop 2   (splitplane route list --unresolved)\n"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("top --once: exit %d, %s\n%s\nwant it to hold:\n%s", code, stderr, stdout, want)
	}
}
