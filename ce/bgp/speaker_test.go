package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/splitplane/splitplane/internal/peer"
)

func freePort(t *testing.T, addr string) int32 {
	t.Helper()
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// collector keeps the FIB the speaker's updates describe.
type collector struct {
	mu  sync.Mutex
	fib map[netip.Prefix]netip.Addr
}

func (c *collector) apply(us []Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range us {
		if u.Withdraw {
			delete(c.fib, u.Prefix)
		} else {
			c.fib[u.Prefix] = u.NextHop
		}
	}
}

func (c *collector) snapshot() map[netip.Prefix]netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[netip.Prefix]netip.Addr, len(c.fib))
	for k, v := range c.fib {
		out[k] = v
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startPassive starts a speaker on 127.0.0.1 (AS 65001) waiting for one
// neighbour, 127.0.0.2 in AS 65002, and returns it, its port and the FIB its
// updates build.
func startPassive(ctx context.Context, t *testing.T) (*Speaker, int32, *collector) {
	t.Helper()
	port := freePort(t, "127.0.0.1")
	col := &collector{fib: map[netip.Prefix]netip.Addr{}}
	sp, err := Start(ctx, Config{
		ASN: 65001, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Import: acceptAll}},
		Logger:    slog.New(slog.DiscardHandler),
	}, col.apply)
	if err != nil {
		t.Fatal(err)
	}
	return sp, port, col
}

// The speaker peers with a real BGP speaker over loopback TCP and turns its
// announcements and withdrawals into updates with the announced next hop.
func TestSpeakerLearnsAndForgets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp, port, col := startPassive(ctx, t)
	defer sp.Stop()

	nh := netip.MustParseAddr("192.0.2.10")
	extra := netip.MustParsePrefix("198.51.100.0/24")
	extra6, nh6 := netip.MustParsePrefix("2001:db8:100::/48"), netip.MustParseAddr("2001:db8::10")
	p, err := peer.Start(ctx, peer.Config{
		ASN: 65002, RouterID: netip.MustParseAddr("127.0.0.2"), ListenPort: -1, LocalAddress: netip.MustParseAddr("127.0.0.2"),
		Neighbor: netip.MustParseAddr("127.0.0.1"), NeighborASN: 65001, NeighborPort: uint32(port),
		Routes: 500, Seed: 7, NextHop: nh, Extra: []netip.Prefix{extra, extra6}, NextHop6: nh6,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	eventually(t, "502 routes learned", func() bool { return len(col.snapshot()) == 502 })
	for pfx, got := range col.snapshot() {
		want := nh
		if pfx.Addr().Is6() {
			want = nh6 // from MP_REACH_NLRI
		}
		if got != want {
			t.Fatalf("%s via %s, want %s", pfx, got, want)
		}
	}
	if n := sp.Neighbors(); len(n) != 1 || n[0].State != "established" || n[0].Address != "127.0.0.2" {
		t.Fatalf("neighbours %+v", n)
	}

	if err := p.Withdraw(extra); err != nil {
		t.Fatal(err)
	}
	eventually(t, "withdrawal seen", func() bool { _, ok := col.snapshot()[extra]; return !ok })

	// The peer going away withdraws everything it announced.
	p.Stop()
	eventually(t, "all routes gone after the peer stopped", func() bool { return len(col.snapshot()) == 0 })
	eventually(t, "neighbour no longer established", func() bool { return sp.Neighbors()[0].State != "established" })
}

func TestValidate(t *testing.T) {
	rid := netip.MustParseAddr("192.0.2.1")
	nb := Neighbor{Address: netip.MustParseAddr("192.0.2.2"), ASN: 2}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RouterID: rid}, "asn"},
		{Config{ASN: 1}, "router_id"},
		{Config{ASN: 1, RouterID: rid, ListenAddrs: []string{"0.0.0.0", "x"}}, `bgp_listen_addresses[1] "x"`},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{ASN: 2}}}, "neighbors[0].address"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{nb, {Address: rid, ASN: 2, TTLSecurity: true, EBGPMultihopTTL: 2}}}, "neighbors[1].ttl_security"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, LocalAddress: netip.MustParseAddr("::1")}}}, "neighbors[0].local_address ::1"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, Password: strings.Repeat("k", 81)}}}, "neighbors[0].password"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, Import: &Policy{Rules: []PrefixRule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), LE: 33}}}}}}, "neighbors[0].import.prefix_list[0]: ge 0, le 33"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, MaxPrefixes: &MaxPrefixes{}}}}, "neighbors[0].max_prefixes.limit"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, HoldTime: 9 * time.Second, Keepalive: 9 * time.Second}}},
			"neighbors[0].keepalive 9s: must be less than neighbors[0].hold_time 9s"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, Keepalive: 2 * time.Minute}}},
			"neighbors[0].keepalive 2m0s: must be less than neighbors[0].hold_time 1m30s"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, MaxPrefixes: &MaxPrefixes{Limit: 1, Action: Warn, Restart: time.Minute}}}},
			"neighbors[0].max_prefixes.restart 1m0s: only with action stop"},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{Address: rid, ASN: 2, MaxPrefixes: &MaxPrefixes{Limit: 1, Restart: time.Millisecond}}}},
			"neighbors[0].max_prefixes.restart 1ms"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %q", tc.cfg, err, tc.want)
		}
	}
}

// hopCollector keeps the last update of every prefix the speaker reported.
type hopCollector struct {
	mu       sync.Mutex
	last     map[netip.Prefix]Update
	nextHops bool // some update carried NextHops
}

func (c *hopCollector) apply(us []Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range us {
		if u.Withdraw {
			delete(c.last, u.Prefix)
			continue
		}
		c.last[u.Prefix] = u
		c.nextHops = c.nextHops || u.NextHops != nil
	}
}

func (c *hopCollector) get(pfx netip.Prefix) (Update, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.last[pfx]
	return u, ok
}

// hops is the set of next hops u forwards to.
func (u Update) hops() []netip.Addr {
	if u.NextHops != nil {
		return u.NextHops
	}
	return []netip.Addr{u.NextHop}
}

// waitHops waits until the speaker reports exactly want (sorted) for pfx,
// none meaning withdrawn, and checks the shape of the update: NextHops only
// for two or more next hops, NextHop GoBGP's best path's. It returns NextHop.
func waitHops(t *testing.T, sp *Speaker, col *hopCollector, pfx netip.Prefix, want ...netip.Addr) netip.Addr {
	t.Helper()
	eventually(t, fmt.Sprintf("%s via %v", pfx, want), func() bool {
		u, ok := col.get(pfx)
		if len(want) == 0 {
			return !ok
		}
		return ok && slices.Equal(u.hops(), want)
	})
	if len(want) == 0 {
		return netip.Addr{}
	}
	u, _ := col.get(pfx)
	if len(want) == 1 && u.NextHops != nil {
		t.Errorf("%s: single path reported with NextHops %v", pfx, u.NextHops)
	}
	if best := gobgpBest(t, sp, pfx); u.NextHop != best {
		t.Errorf("%s: NextHop %s, GoBGP's best path has %s", pfx, u.NextHop, best)
	}
	return u.NextHop
}

// gobgpPaths returns the paths GoBGP's global RIB holds for pfx, best first.
func gobgpPaths(t *testing.T, sp *Speaker, pfx netip.Prefix) []*apiutil.Path {
	t.Helper()
	fam := gobgp.RF_IPv4_UC
	if pfx.Addr().Is6() {
		fam = gobgp.RF_IPv6_UC
	}
	var out []*apiutil.Path
	err := sp.srv.ListPath(apiutil.ListPathRequest{
		TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: fam,
		Prefixes: []*apiutil.LookupPrefix{{Prefix: pfx.String()}},
	}, func(_ gobgp.NLRI, paths []*apiutil.Path) { out = append(out, paths...) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gobgpBest is the next hop of the path GoBGP holds best for pfx.
func gobgpBest(t *testing.T, sp *Speaker, pfx netip.Prefix) netip.Addr {
	t.Helper()
	if paths := gobgpPaths(t, sp, pfx); len(paths) > 0 {
		return nextHop(paths[0])
	}
	return netip.Addr{}
}

// goroutines returns the number of goroutines and a dump of them, leaving out
// those parked in an eapache InfiniteChannel's buffer loop: GoBGP v4.8.0's
// cleanInfiniteChannel drains a closed channel without waiting for that loop,
// which then blocks forever if it still held an item (an FSM's outgoing queue,
// a watcher's events). That leak is GoBGP's; the check is for the others.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var kept []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, "eapache/channels.(*InfiniteChannel).infiniteBuffer") {
			kept = append(kept, g)
		}
	}
	return len(kept), strings.Join(kept, "\n\n")
}

// settledGoroutines waits until goroutines() has been the same for 200 ms
// and returns it.
func settledGoroutines() int {
	n, same := 0, 0
	for same < 4 {
		time.Sleep(50 * time.Millisecond)
		if m, _ := goroutines(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// ecmpLab is a speaker with two eBGP neighbours in the same AS, on two
// loopback addresses, announcing the same IPv4 and IPv6 prefix with
// different next hops. GoBGP puts two paths in one multipath set when
// table.Path.Compare finds them equal: both eBGP (or both iBGP), the same
// LOCAL_PREF, AS_PATH length, ORIGIN and MED; it does not compare the
// neighbour's AS. Both peers send AS_PATH [65002], ORIGIN IGP and no MED.
type ecmpLab struct {
	sp         *Speaker
	a, b       *peer.Peer
	col        *hopCollector
	p4, p6     netip.Prefix
	a4, a6     netip.Addr // peer a's next hops
	b4, b6     netip.Addr // peer b's next hops
	goroutines int        // before the lab started
}

func startECMPLab(t *testing.T, multipath bool) *ecmpLab {
	t.Helper()
	l := &ecmpLab{
		col: &hopCollector{last: map[netip.Prefix]Update{}},
		p4:  netip.MustParsePrefix("198.51.100.0/24"), p6: netip.MustParsePrefix("2001:db8:100::/48"),
		a4: netip.MustParseAddr("192.0.2.10"), a6: netip.MustParseAddr("2001:db8::10"),
		b4: netip.MustParseAddr("192.0.2.20"), b6: netip.MustParseAddr("2001:db8::20"),
		goroutines: settledGoroutines(),
	}
	port := freePort(t, "127.0.0.1")
	startPeer := func(addr string, nh, nh6 netip.Addr) *peer.Peer {
		p, err := peer.Start(context.Background(), peer.Config{
			ASN: 65002, RouterID: netip.MustParseAddr(addr), ListenPort: -1, LocalAddress: netip.MustParseAddr(addr),
			Neighbor: netip.MustParseAddr("127.0.0.1"), NeighborASN: 65001, NeighborPort: uint32(port),
			NextHop: nh, NextHop6: nh6, Extra: []netip.Prefix{l.p4, l.p6},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		return p
	}
	// The peers start first: each StartBgp sets GoBGP's process-wide
	// multipath switch, and the speaker's must be the last word. They
	// connect a second later, long after the speaker listens.
	l.a = startPeer("127.0.0.2", l.a4, l.a6)
	l.b = startPeer("127.0.0.3", l.b4, l.b6)
	sp, err := Start(context.Background(), Config{
		ASN: 65001, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: []Neighbor{
			{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Import: acceptAll},
			{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65002, Passive: true, Import: acceptAll},
		},
		Logger:    slog.New(slog.DiscardHandler),
		Multipath: multipath,
	}, l.col.apply)
	if err != nil {
		t.Fatal(err)
	}
	l.sp = sp
	t.Cleanup(sp.Stop) // runs before the peers' Stop
	return l
}

// stop stops everything and checks that no goroutine is left behind.
func (l *ecmpLab) stop(t *testing.T) {
	t.Helper()
	_ = l.a.Stop()
	_ = l.b.Stop()
	l.sp.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, dump := goroutines()
		if n <= l.goroutines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Stop, %d before Start:\n%s", n, l.goroutines, dump)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With multipath, the speaker reports both neighbours' next hops for a prefix
// they both announce, one when the other withdraws, and a withdrawal when
// neither announces it any more; NextHop follows GoBGP's best path.
func TestSpeakerMultipath(t *testing.T) {
	l := startECMPLab(t, true)
	for _, f := range []struct {
		pfx    netip.Prefix
		na, nb netip.Addr
	}{{l.p4, l.a4, l.b4}, {l.p6, l.a6, l.b6}} {
		waitHops(t, l.sp, l.col, f.pfx, f.na, f.nb)
	}
	if n := l.sp.Neighbors(); len(n) != 2 || n[0].State != "established" || n[1].State != "established" {
		t.Fatalf("neighbours %+v", n)
	}

	if err := l.a.Withdraw(l.p4, l.p6); err != nil {
		t.Fatal(err)
	}
	waitHops(t, l.sp, l.col, l.p4, l.b4)
	waitHops(t, l.sp, l.col, l.p6, l.b6)

	// Back from a, in a later second than b's paths: GoBGP prefers the
	// older of two equal eBGP paths (to the second, then the lower
	// neighbour address, which is a's), so b's stays best.
	time.Sleep(time.Until(time.Unix(time.Now().Unix()+1, 0)))
	if err := l.a.Announce(l.p4, l.p6); err != nil {
		t.Fatal(err)
	}
	if nh := waitHops(t, l.sp, l.col, l.p4, l.a4, l.b4); nh != l.b4 {
		t.Errorf("%s: NextHop %s, want the older path's %s", l.p4, nh, l.b4)
	}
	if nh := waitHops(t, l.sp, l.col, l.p6, l.a6, l.b6); nh != l.b6 {
		t.Errorf("%s: NextHop %s, want the older path's %s", l.p6, nh, l.b6)
	}

	// b's session going down takes its paths away.
	if err := l.b.Stop(); err != nil {
		t.Fatal(err)
	}
	waitHops(t, l.sp, l.col, l.p4, l.a4)
	waitHops(t, l.sp, l.col, l.p6, l.a6)

	if err := l.a.Withdraw(l.p4, l.p6); err != nil {
		t.Fatal(err)
	}
	waitHops(t, l.sp, l.col, l.p4)
	waitHops(t, l.sp, l.col, l.p6)
	l.stop(t)
}

// Without multipath the same two paths give one next hop, GoBGP's best, and
// the other once the best is withdrawn.
func TestSpeakerSinglePath(t *testing.T) {
	l := startECMPLab(t, false)
	for _, f := range []struct {
		pfx    netip.Prefix
		na, nb netip.Addr
	}{{l.p4, l.a4, l.b4}, {l.p6, l.a6, l.b6}} {
		eventually(t, fmt.Sprintf("GoBGP holds two paths for %s", f.pfx), func() bool {
			return len(gobgpPaths(t, l.sp, f.pfx)) == 2
		})
		best := gobgpBest(t, l.sp, f.pfx)
		waitHops(t, l.sp, l.col, f.pfx, best)
		// Withdraw the best path; the other one takes over.
		owner, other := l.a, f.nb
		if best == f.nb {
			owner, other = l.b, f.na
		}
		if err := owner.Withdraw(f.pfx); err != nil {
			t.Fatal(err)
		}
		waitHops(t, l.sp, l.col, f.pfx, other)
	}
	l.col.mu.Lock()
	if l.col.nextHops {
		t.Error("an update carried NextHops without multipath")
	}
	l.col.mu.Unlock()
	l.stop(t)
}

// Stop closes a session without graceful restart itself, with a Cease
// (administrative shutdown) sent before GoBGP's own teardown withdraws the
// neighbour's routes from its tables (seconds for a full table), and
// returns within stopWait whatever that teardown takes.
func TestStopClosesSessionsFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp, port, col := startPassive(ctx, t)
	p, err := peer.Start(ctx, peer.Config{
		ASN: 65002, RouterID: netip.MustParseAddr("127.0.0.2"), ListenPort: -1, LocalAddress: netip.MustParseAddr("127.0.0.2"),
		Neighbor: netip.MustParseAddr("127.0.0.1"), NeighborASN: 65001, NeighborPort: uint32(port),
		Routes: 2000, Seed: 7, NextHop: netip.MustParseAddr("192.0.2.10"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	eventually(t, "2000 routes learned", func() bool { return len(col.snapshot()) == 2000 })

	start := time.Now()
	sp.Stop()
	if took := time.Since(start); took > stopWait+time.Second {
		t.Errorf("Stop took %s, want at most stopWait (%s) and a little", took, stopWait)
	}
	eventually(t, "the peer told of the shutdown", func() bool {
		return strings.Contains(p.Status().LastDown, "administrative shutdown")
	})
}

// The keepalive interval defaults to a third of the hold time, so that a
// neighbour configured with a short hold time alone does not flap; one
// that is set is kept.
func TestNeighborTimers(t *testing.T) {
	for _, tc := range []struct {
		hold, keepalive      time.Duration
		wantHold, wantKeepal uint64
	}{
		{0, 0, 90, 30},
		{9 * time.Second, 0, 9, 3},
		{3 * time.Second, 0, 3, 1},
		{10 * time.Second, 0, 10, 3},
		{9 * time.Second, 2 * time.Second, 9, 2},
		{0, 10 * time.Second, 90, 10},
	} {
		n := Neighbor{Address: netip.MustParseAddr("192.0.2.2"), ASN: 2, HoldTime: tc.hold, Keepalive: tc.keepalive}
		if err := n.validate(0); err != nil {
			t.Errorf("hold_time %s, keepalive %s: %v", tc.hold, tc.keepalive, err)
		}
		c := peerRequest(n, false).Peer.Timers.Config
		if c.HoldTime != tc.wantHold || c.KeepaliveInterval != tc.wantKeepal {
			t.Errorf("hold_time %s, keepalive %s: GoBGP gets hold time %ds, keepalive %ds; want %ds, %ds",
				tc.hold, tc.keepalive, c.HoldTime, c.KeepaliveInterval, tc.wantHold, tc.wantKeepal)
		}
	}
}
