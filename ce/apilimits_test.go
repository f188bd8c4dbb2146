package ce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// feModel is what an FE holds after a stream of changes: routes by row,
// nexthops and groups by ID.
type feModel struct {
	rows     map[uint32]Change
	nexthops map[uint32]netip.Addr
	groups   map[uint32][]uint32
}

func newFEModel() *feModel {
	return &feModel{rows: map[uint32]Change{}, nexthops: map[uint32]netip.Addr{}, groups: map[uint32][]uint32{}}
}

func (m *feModel) apply(t *testing.T, chs []Change) {
	t.Helper()
	for _, c := range chs {
		switch c.Kind {
		case NexthopSet:
			m.nexthops[c.ID] = c.NextHop
		case NexthopDel:
			delete(m.nexthops, c.ID)
		case GroupSet:
			m.groups[c.ID] = c.Members
		case GroupDel:
			delete(m.groups, c.ID)
		case RouteSet:
			m.rows[c.Row] = c
		case RouteDel:
			delete(m.rows, c.Row)
		}
	}
}

// routes renders what the model forwards, as fibRoutes does the FIB.
func (m *feModel) routes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range m.rows {
		var hops []netip.Addr
		if c.ECMP {
			for _, id := range m.groups[c.ID] {
				hops = append(hops, m.nexthops[id])
			}
		} else {
			hops = []netip.Addr{m.nexthops[c.ID]}
		}
		if slices.Contains(hops, netip.Addr{}) {
			t.Fatalf("FE model: %s through a nexthop it was never given: %+v", c.Prefix, c)
		}
		out = append(out, fmt.Sprint(c.Prefix, hops))
	}
	slices.Sort(out)
	return out
}

func fibRoutes(f fibs) []string {
	var out []string
	for _, fib := range []*FIB{f.v4, f.v6} {
		fib.Prefixes(func(p netip.Prefix, hops []netip.Addr) { out = append(out, fmt.Sprint(p, hops)) })
	}
	slices.Sort(out)
	return out
}

// A batch with a route the FIB cannot take (its next-hop or ECMP group
// table full) is refused with ErrTableFull saying which table, and none of
// it stays: the RIB and the FIB are as before, and the changes sent to the
// FEs leave them holding what the FIB holds.
func TestAPITableFull(t *testing.T) {
	rib, f := newTestRIB()
	f.v4.maxID, f.v4.maxGID = 4, 1
	c := &CE{log: slog.New(slog.DiscardHandler)}
	fe := newFEModel()
	fe.apply(t, rib.SetConnected(1, prefixes("10.0.0.0/8"), nil))
	out, err := c.applyAPI(rib, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.1"), replaceOp("198.51.101.0/24", "10.0.0.2"),
		replaceOp("198.51.102.0/24", "10.0.0.1", "10.0.0.2")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fe.apply(t, out)
	before, beforeList := fibRoutes(f), rib.list(RouteFilter{})
	for _, tc := range []struct {
		name string
		ops  []RouteOp
		idx  int
		why  string
	}{
		{"next hops", []RouteOp{replaceOp("203.0.113.0/24", "10.0.0.3"), replaceOp("198.51.100.0/24", "10.0.0.4"),
			replaceOp("203.0.114.0/24", "10.0.0.5")}, 2, "the next-hop table (4 next hops) is full"},
		{"groups", []RouteOp{{Kind: OpDelete, Prefix: netip.MustParsePrefix("198.51.101.0/24")},
			replaceOp("198.51.100.0/24", "10.0.0.3", "10.0.0.1")}, 1, "the ECMP group table (1 groups) is full"},
		{"replace in place", []RouteOp{replaceOp("198.51.102.0/24", "10.0.0.3", "10.0.0.4")}, 0, "the ECMP group table"},
	} {
		out, err := c.applyAPI(rib, tc.ops, nil)
		var re *RouteError
		if !errors.Is(err, ErrTableFull) || !errors.As(err, &re) || re.Index != tc.idx || !strings.Contains(err.Error(), tc.why) {
			t.Fatalf("%s: %v, want ErrTableFull at ops[%d] saying %q", tc.name, err, tc.idx, tc.why)
		}
		fe.apply(t, out)
		if got := fibRoutes(f); !slices.Equal(got, before) {
			t.Fatalf("%s: the FIB after a refused batch:\n%v\nbefore:\n%v", tc.name, got, before)
		}
		if got := fe.routes(t); !slices.Equal(got, before) {
			t.Fatalf("%s: the FEs after a refused batch:\n%v\nthe FIB:\n%v", tc.name, got, before)
		}
		if got := rib.list(RouteFilter{}); fmt.Sprint(got) != fmt.Sprint(beforeList) {
			t.Fatalf("%s: listed after a refused batch:\n%v\nbefore:\n%v", tc.name, got, beforeList)
		}
	}
	// What fits still goes in.
	if _, err := c.applyAPI(rib, []RouteOp{replaceOp("203.0.113.0/24", "10.0.0.3")}, nil); err != nil {
		t.Fatal(err)
	}
}

// A route the FIB could not take, here BGP's behind the API's, is not
// listed as installed.
func TestListInstalledOnlyWhenInTheFIB(t *testing.T) {
	rib, f := newTestRIB()
	f.v4.maxID = 1
	c := &CE{log: slog.New(slog.DiscardHandler)}
	rib.SetConnected(1, prefixes("10.0.0.0/8"), nil)
	if _, err := c.applyAPI(rib, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.1")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := rib.SetBGP(netip.MustParsePrefix("203.0.113.0/24"), addrs("10.0.0.2"), false, nil); ok {
		t.Fatal("a BGP route through a second next hop fitted a table of one")
	}
	for _, r := range rib.list(RouteFilter{}) {
		if want := r.Origin == "api"; r.Installed != want {
			t.Fatalf("%s %s listed installed %v, want %v", r.Prefix, r.Origin, r.Installed, want)
		}
	}
}

// Martian prefixes are refused with InvalidArgument naming the prefix and
// the block, unless api_allow_martians; routable neighbours and default
// routes are not martians, and a martian route can always be deleted.
func TestAPIMartians(t *testing.T) {
	for _, tc := range []struct {
		p     string
		block string
	}{
		{"127.0.0.0/8", "127.0.0.0/8"}, {"127.1.2.0/24", "127.0.0.0/8"}, {"0.0.0.0/8", "0.0.0.0/8"}, {"0.1.0.0/16", "0.0.0.0/8"},
		{"169.254.0.0/16", "169.254.0.0/16"}, {"224.0.0.0/4", "224.0.0.0/4"}, {"239.1.1.1/32", "224.0.0.0/4"},
		{"240.0.0.0/4", "240.0.0.0/4"}, {"255.255.255.255/32", "255.255.255.255/32"}, {"192.0.0.0/24", "192.0.0.0/24"},
		{"::1/128", "::1/128"}, {"::/128", "::/128"}, {"fe80::/64", "fe80::/10"}, {"ff02::/16", "ff00::/8"},
	} {
		block, _, ok := Martian(netip.MustParsePrefix(tc.p))
		if !ok || block.String() != tc.block {
			t.Errorf("Martian(%s) = %v %v, want %s", tc.p, block, ok, tc.block)
		}
	}
	for _, p := range []string{"0.0.0.0/0", "::/0", "0.0.0.0/1", "10.0.0.0/8", "198.51.100.0/24", "192.0.2.0/24", "1.0.0.0/8",
		"128.0.0.0/1", "2001:db8::/32", "fc00::/7", "2000::/3"} {
		if block, _, ok := Martian(netip.MustParsePrefix(p)); ok {
			t.Errorf("Martian(%s): in %s, want routable", p, block)
		}
	}
	c := startCE(t, time.Second)
	ctx := context.Background()
	_, err := c.ApplyRoutes(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2"), replaceOp("127.0.0.0/8", "10.0.0.2")})
	var re *RouteError
	if !errors.Is(err, ErrInvalidRoute) || !errors.As(err, &re) || re.Index != 1 || re.Value != "127.0.0.0/8" ||
		!strings.Contains(err.Error(), "martian prefix: 127.0.0.0/8 is loopback") || !strings.Contains(err.Error(), "api_allow_martians") {
		t.Fatalf("martian: %v", err)
	}
	_, _, err = c.Transaction(ctx, []RouteOp{replaceOp("ff02::/16", "2001:db8::2")})
	if !errors.Is(err, ErrInvalidRoute) || !strings.Contains(err.Error(), `"ff02::/16"`) {
		t.Fatalf("martian transaction: %v", err)
	}
	if st := statusOf(t, c); st.Routes != 0 {
		t.Fatalf("a refused batch changed the FIB: %d routes", st.Routes)
	}
	allow := startCEWith(t, time.Second, slog.New(slog.DiscardHandler), func(c *Config) { c.APIAllowMartians = true })
	if _, err := allow.ApplyRoutes(ctx, []RouteOp{replaceOp("127.0.0.0/8", "10.0.0.2")}); err != nil {
		t.Fatalf("api_allow_martians: %v", err)
	}
	// Deleting one is not refused as a martian (here: there is none).
	_, err = c.ApplyRoutes(ctx, []RouteOp{{Kind: OpDelete, Prefix: netip.MustParsePrefix("127.0.0.0/8")}})
	if !errors.Is(err, ErrRouteNotFound) {
		t.Fatalf("delete of a martian: %v", err)
	}
}

// Watch(current) brings the whole FIB, both families, ECMP routes with
// every next hop (the copy made off the loop from a snapshot).
func TestWatchCurrentWholeFIB(t *testing.T) {
	c := startCE(t, time.Second)
	ctx := context.Background()
	ops := []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2"), replaceOp("198.51.101.0/24", "10.0.0.3", "10.0.0.2"),
		replaceOp("2001:db8:100::/48", "2001:db8::2"), replaceOp("2001:db8:101::/48", "2001:db8::3", "2001:db8::2")}
	for i := range 300 {
		ops = append(ops, replaceOp(fmt.Sprintf("203.0.%d.%d/32", i/256, i%256), fmt.Sprintf("10.0.%d.%d", i%7, 1+i%3)))
	}
	if _, err := c.ApplyRoutes(ctx, ops); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, op := range ops {
		hops := slices.SortedFunc(slices.Values(op.NextHops), netip.Addr.Compare)
		want = append(want, fmt.Sprint(op.Prefix, hops))
	}
	slices.Sort(want)
	w, err := c.WatchFIB(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unwatch(w)
	var got []string
	for _, e := range w.Current {
		got = append(got, fmt.Sprint(e.Prefix, e.NextHops))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("current:\n%v\nwant:\n%v", got, want)
	}
}

// Listings that scan the whole RIB on the loop are spaced out by what the
// last one cost there, however many clients ask; a listing of one prefix
// is not.
func TestListPaced(t *testing.T) {
	c := startCE(t, time.Second)
	ctx := context.Background()
	if _, err := c.ApplyRoutes(ctx, []RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	c.listPace.cost.Store(int64(10 * time.Second)) // as if the last scan had taken 10 s
	if l, err := c.ListRoutes(ctx, RouteFilter{}); err != nil || len(l) == 0 {
		t.Fatalf("first listing: %v, %v", l, err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.ListRoutes(short, RouteFilter{Longer: true, Prefix: netip.MustParsePrefix("0.0.0.0/0")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second scan right after one that cost 10 s: %v, want to wait its turn", err)
	}
	l, err := c.ListRoutes(ctx, RouteFilter{Prefix: netip.MustParsePrefix("198.51.100.0/24")})
	if err != nil || len(l) != 1 || !l[0].Installed {
		t.Fatalf("listing one prefix: %+v, %v", l, err)
	}
}
