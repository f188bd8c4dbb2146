package bgp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/peer"
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

// The speaker peers with a real BGP speaker over loopback TCP and turns its
// announcements and withdrawals into updates with the announced next hop.
func TestSpeakerLearnsAndForgets(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	col := &collector{fib: map[netip.Prefix]netip.Addr{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp, err := Start(ctx, Config{
		ASN: 65001, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true}},
		Logger:    slog.New(slog.DiscardHandler),
	}, col.apply)
	if err != nil {
		t.Fatal(err)
	}
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
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RouterID: rid}, "asn"},
		{Config{ASN: 1}, "router_id"},
		{Config{ASN: 1, RouterID: rid, ListenAddrs: []string{"0.0.0.0", "x"}}, `bgp_listen_addresses[1] "x"`},
		{Config{ASN: 1, RouterID: rid, Neighbors: []Neighbor{{ASN: 2}}}, "neighbors[0].address"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %q", tc.cfg, err, tc.want)
		}
	}
}
