package ce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

func replaceOp(p string, hops ...string) RouteOp {
	return RouteOp{Kind: OpReplace, Prefix: netip.MustParsePrefix(p), NextHops: addrs(hops...)}
}

func TestAPIRoutes(t *testing.T) {
	c := startCE(t, time.Second)
	ctx := context.Background()
	// A batch: two routes, one ECMP.
	n, err := c.ApplyRoutes(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2"), replaceOp("2001:db8:100::/48", "2001:db8::2", "2001:db8::3")})
	if err != nil || n == 0 {
		t.Fatalf("apply: %d changes, %v", n, err)
	}
	if st := statusOf(t, c); st.Routes != 2 {
		t.Fatalf("FIB holds %d routes", st.Routes)
	}
	// Add of an existing prefix, delete of a missing one, bad ops: refused
	// with the operation's index and field; the batch changes nothing.
	for _, tc := range []struct {
		ops  []RouteOp
		want error
		text string
	}{
		{[]RouteOp{replaceOp("192.0.2.0/24", "10.0.0.9"), {Kind: OpAdd, Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHops: addrs("10.0.0.3")}}, ErrRouteExists, "ops[1] route.prefix"},
		{[]RouteOp{replaceOp("192.0.2.0/24", "10.0.0.9"), {Kind: OpDelete, Prefix: netip.MustParsePrefix("203.0.113.0/24")}}, ErrRouteNotFound, "ops[1] prefix"},
		{[]RouteOp{replaceOp("192.0.2.0/24", "2001:db8::1")}, ErrInvalidRoute, `ops[0] route.next_hops[0] "2001:db8::1"`},
		{[]RouteOp{{Kind: OpReplace, Prefix: netip.MustParsePrefix("192.0.2.1/24"), NextHops: addrs("10.0.0.1")}}, ErrInvalidRoute, "host bits"},
		{[]RouteOp{{Kind: OpReplace, Prefix: netip.MustParsePrefix("192.0.2.0/24"), NextHops: make([]netip.Addr, 17)}}, ErrInvalidRoute, "route.next_hops"},
		{[]RouteOp{{Kind: 9, Prefix: netip.MustParsePrefix("192.0.2.0/24")}}, ErrInvalidRoute, "kind"},
	} {
		_, err := c.ApplyRoutes(ctx, tc.ops)
		var re *RouteError
		if !errors.Is(err, tc.want) || !errors.As(err, &re) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%v: err %v, want %v mentioning %q", tc.ops, err, tc.want, tc.text)
		}
	}
	if st := statusOf(t, c); st.Routes != 2 {
		t.Fatalf("a refused batch changed the FIB: %d routes", st.Routes)
	}
	// Within a batch, an operation sees the ones before it.
	if _, err := c.ApplyRoutes(ctx, []RouteOp{{Kind: OpAdd, Prefix: netip.MustParsePrefix("192.0.2.0/24"), NextHops: addrs("10.0.0.9")},
		{Kind: OpDelete, Prefix: netip.MustParsePrefix("192.0.2.0/24")}}); err != nil {
		t.Fatalf("add then delete in one batch: %v", err)
	}

	// Listings: every origin, with what is installed.
	c.updates <- routeUpdates(3, netip.MustParseAddr("10.0.0.7")) // BGP: 100.0.0.0/24, 100.0.1.0/24, 100.0.2.0/24
	c.updates <- []RouteUpdate{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: netip.MustParseAddr("10.0.0.8")}}
	waitFor(t, func() bool { return statusOf(t, c).Routes == 5 })
	all, err := c.ListRoutes(ctx, RouteFilter{})
	if err != nil || len(all) != 6 {
		t.Fatalf("list all: %d routes, %v", len(all), err)
	}
	got, _ := c.ListRoutes(ctx, RouteFilter{Prefix: netip.MustParsePrefix("198.51.100.0/24")})
	if len(got) != 2 || got[0].Origin != "api" || !got[0].Installed || got[1].Origin != "bgp" || got[1].Installed {
		t.Fatalf("198.51.100.0/24 from API (distance 5) and BGP (20): %+v", got)
	}
	if got, _ := c.ListRoutes(ctx, RouteFilter{Prefix: netip.MustParsePrefix("100.0.0.0/16"), Longer: true, Origin: "bgp"}); len(got) != 3 {
		t.Fatalf("longer, bgp: %+v", got)
	}
	if got, _ := c.ListRoutes(ctx, RouteFilter{Family: 6}); len(got) != 1 || !slices.Equal(got[0].Resolved, addrs("2001:db8::2", "2001:db8::3")) {
		t.Fatalf("IPv6: %+v", got)
	}
}

func TestAPIWatch(t *testing.T) {
	c := startCE(t, time.Second)
	ctx := context.Background()
	c.ApplyRoutes(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2")})
	w, err := c.WatchFIB(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unwatch(w)
	if len(w.Current) != 1 || w.Current[0].Prefix.String() != "198.51.100.0/24" {
		t.Fatalf("current FIB %+v", w.Current)
	}
	c.ApplyRoutes(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2", "10.0.0.3"), {Kind: OpDelete, Prefix: netip.MustParsePrefix("198.51.100.0/24")}})
	c.ApplyRoutes(ctx, []RouteOp{replaceOp("203.0.113.0/24", "10.0.0.4")})
	var evs []string
	for len(evs) < 3 {
		select {
		case e := <-w.C:
			evs = append(evs, fmt.Sprint(e.Prefix, e.NextHops))
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far %v", evs)
		}
	}
	// The batch's net effect on 198.51.100.0/24 is its removal.
	if evs[len(evs)-1] != "203.0.113.0/24 [10.0.0.4]" || !slices.Contains(evs, "198.51.100.0/24 []") {
		t.Fatalf("events %v", evs)
	}
	c.Unwatch(w)
	if _, ok := <-w.C; ok {
		t.Fatal("channel open after Unwatch")
	}
	if w.Err() != nil {
		t.Fatalf("Err after Unwatch: %v", w.Err())
	}
}

// A transaction goes to a synced FE as a ForCES transaction; an FE that
// refuses the COMMIT aborts it and the API's routes are put back.
func TestAPITransaction(t *testing.T) {
	c := startCE(t, time.Second)
	ctx := context.Background()
	if _, _, err := c.Transaction(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2")}); !errors.Is(err, ErrNoFE) {
		t.Fatalf("with no FE: %v", err)
	}
	fe, _ := dialFE(t, c, 1)
	fe.fullSync()
	waitFor(t, func() bool {
		st := statusOf(t, c)
		return len(st.FEs) == 1 && st.FEs[0].Synced
	})

	run := func(commit forces.ResultCode, ops []RouteOp) ([]forces.Item, error) {
		res := make(chan error, 1)
		go func() { _, _, err := c.Transaction(ctx, ops); res <- err }()
		var items []forces.Item
		for {
			m := fe.next(forces.MsgConfig)
			if !m.Header.Flags.Atomic {
				t.Fatalf("transaction message without the A flag: %+v", m.Header)
			}
			if hasCommit(m) {
				resp, _ := forces.NewCommitResponse(m, commit)
				fe.conn.WriteMessage(resp)
				end := fe.next(forces.MsgConfig)
				if commit == forces.ResultSuccess && !hasOp(end, forces.OpTRComp) || commit != forces.ResultSuccess && end.Header.Flags.TP != forces.PhaseABT {
					t.Fatalf("after COMMIT %s: %+v", commit, end.Header)
				}
				return items, <-res
			}
			items = append(items, forces.Items(m)...)
		}
	}
	items, err := run(forces.ResultSuccess, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2"), replaceOp("203.0.113.0/24", "10.0.0.2")})
	if err != nil || len(items) != 3 { // the nexthop and two routes
		t.Fatalf("committed transaction: %v, %d rows", err, len(items))
	}
	_, err = run(forces.ResultUnspecifiedError, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.3"), {Kind: OpDelete, Prefix: netip.MustParsePrefix("203.0.113.0/24")}})
	if !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("refused COMMIT: %v", err)
	}
	got, _ := c.ListRoutes(ctx, RouteFilter{Origin: "api"})
	if len(got) != 2 || got[0].NextHops[0].String() != "10.0.0.2" {
		t.Fatalf("after the abort the API's routes are %+v, want both back via 10.0.0.2", got)
	}
}

func hasCommit(m *forces.Message) bool { return hasOp(m, forces.OpCommit) }

func hasOp(m *forces.Message, op forces.OpType) bool {
	for _, l := range m.LFBs {
		for _, o := range l.Ops {
			if o.Type == op {
				return true
			}
		}
	}
	return false
}
