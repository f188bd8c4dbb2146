package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/splitplane/splitplane/internal/logtest"
	"github.com/splitplane/splitplane/internal/peer"
)

// The CE's side in these tests: AS 65001 on 127.0.0.1.
const ceASN = 65001

var ceAddr = netip.MustParseAddr("127.0.0.1")

// startCE starts a speaker on 127.0.0.1 with the given neighbours, feeding
// a collector; it stops with the test.
func startCE(t *testing.T, port int32, log *slog.Logger, ns ...Neighbor) (*Speaker, *collector) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	col := &collector{fib: map[netip.Prefix]netip.Addr{}}
	sp, err := Start(context.Background(), Config{
		ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: ns, Logger: log,
	}, col.apply)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	return sp, col
}

// startPeer starts the lab's GoBGP peer on addr, connecting to the CE.
func startPeer(t *testing.T, addr string, asn uint32, cePort int32, routes int, seed int64, nh string, extra ...netip.Prefix) *peer.Peer {
	t.Helper()
	a := netip.MustParseAddr(addr)
	p, err := peer.Start(context.Background(), peer.Config{
		ASN: asn, RouterID: a, ListenPort: -1, LocalAddress: a,
		Neighbor: ceAddr, NeighborASN: ceASN, NeighborPort: uint32(cePort),
		Routes: routes, Seed: seed, NextHop: netip.MustParseAddr(nh),
		NextHop6: netip.MustParseAddr("2001:db8::10"), Extra: extra,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// gobgpPeer is a plain GoBGP server with one neighbour, for what the lab's
// peer does not configure (MD5, TTL, graceful restart, reading its RIB).
type gobgpPeer struct {
	srv  *server.BgpServer
	addr netip.Addr
}

// startGoBGP starts a GoBGP server with router ID and (with listenPort > 0)
// listening address addr and neighbour n. A neighbour without a local
// address gets addr, so that it connects from there.
func startGoBGP(t *testing.T, addr string, asn uint32, listenPort int32, n *api.Peer) *gobgpPeer {
	t.Helper()
	srv := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), new(slog.LevelVar)))
	go srv.Serve()
	g := &gobgpPeer{srv: srv, addr: netip.MustParseAddr(addr)}
	global := &api.Global{Asn: asn, RouterId: addr, ListenPort: -1}
	if listenPort > 0 {
		global.ListenPort, global.ListenAddresses = listenPort, []string{addr}
	}
	if err := srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: global}); err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop(false) })
	if n.Transport == nil {
		n.Transport = &api.Transport{}
	}
	if n.Transport.LocalAddress == "" {
		n.Transport.LocalAddress = addr
	}
	if n.Timers == nil {
		n.Timers = &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}}
	}
	if len(n.AfiSafis) == 0 {
		for _, f := range []Family{IPv4, IPv6} {
			n.AfiSafis = append(n.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f.api(), Enabled: true}})
		}
	}
	if err := srv.AddPeer(context.Background(), &api.AddPeerRequest{Peer: n}); err != nil {
		t.Fatal(err)
	}
	return g
}

// stop stops the server; with graceful, it closes its sessions without a
// NOTIFICATION where graceful restart was negotiated.
func (g *gobgpPeer) stop(graceful bool) {
	_ = g.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: graceful})
	g.srv.Stop()
}

// announce originates IPv4 prefixes with next hop nh.
func (g *gobgpPeer) announce(t *testing.T, nh string, pfxs ...string) {
	t.Helper()
	attr, err := gobgp.NewPathAttributeNextHop(netip.MustParseAddr(nh))
	if err != nil {
		t.Fatal(err)
	}
	var paths []*apiutil.Path
	for _, s := range pfxs {
		nlri, err := gobgp.NewIPAddrPrefix(netip.MustParsePrefix(s))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, &apiutil.Path{Family: gobgp.RF_IPv4_UC, Nlri: nlri,
			Attrs: []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP), attr}})
	}
	if _, err := g.srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
		t.Fatal(err)
	}
}

// state is the session state with the server's neighbour.
func (g *gobgpPeer) state() gobgp.FSMState {
	st := gobgp.BGP_FSM_IDLE
	_ = g.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
		st = gobgp.FSMState(p.State.SessionState - 1) // the API counts from UNSPECIFIED
	})
	return st
}

// rib returns the IPv4 prefixes in the server's global RIB.
func (g *gobgpPeer) rib(t *testing.T) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	err := g.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgp.RF_IPv4_UC},
		func(nlri gobgp.NLRI, _ []*apiutil.Path) {
			if p, ok := nlri.(*gobgp.IPAddrPrefix); ok {
				out = append(out, p.Prefix)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr())*256 + a.Bits() - b.Bits() })
	return out
}

// ceNeighbor is the CE as a GoBGP neighbour.
func ceNeighbor(port int32, passive bool) *api.Peer {
	return &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: ceAddr.String(), PeerAsn: ceASN},
		Transport: &api.Transport{RemotePort: uint32(port), PassiveMode: passive},
	}
}

func established(sp *Speaker, addr string) bool {
	for _, n := range sp.Neighbors() {
		if n.Address == addr {
			return n.State == "established"
		}
	}
	return false
}

// never fails the test if cond holds at any time within d.
func never(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			t.Fatalf("%s", what)
		}
	}
}

// acceptAll is the policy an eBGP neighbour needs to exchange every route
// (RFC 8212: without one it exchanges none).
var acceptAll = &Policy{Default: Accept}

func pfxs(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// A neighbour restricted to IPv4 does not deliver the IPv6 routes its peer
// offers; one without a restriction does (TestSpeakerLearnsAndForgets).
func TestNeighborFamilies(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	sp, col := startCE(t, port, nil, Neighbor{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Families: []Family{IPv4}, Import: acceptAll})
	v4, v6 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:100::/48")
	startPeer(t, "127.0.0.2", 65002, port, 0, 0, "192.0.2.10", v4, v6)
	eventually(t, "IPv4 route learned", func() bool { _, ok := col.snapshot()[v4]; return ok })
	never(t, "IPv6 route learned over an IPv4-only session", 500*time.Millisecond, func() bool { _, ok := col.snapshot()[v6]; return ok })
	if !established(sp, "127.0.0.2") {
		t.Fatal("session not established")
	}
}

// A neighbour in the CE's own AS is an iBGP neighbour: the session comes up
// (an eBGP OPEN from the CE's own AS would be refused) and its routes are
// reported as iBGP.
func TestNeighborIBGP(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	var mu sync.Mutex
	var got []Update
	sp, err := Start(context.Background(), Config{
		ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.2"), ASN: ceASN, Passive: true}},
		Logger:    slog.New(slog.DiscardHandler),
	}, func(us []Update) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, us...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	pfx := netip.MustParsePrefix("198.51.100.0/24")
	startPeer(t, "127.0.0.2", ceASN, port, 0, 0, "192.0.2.10", pfx)
	eventually(t, "route learned over iBGP", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	u := got[0]
	mu.Unlock()
	if u.Prefix != pfx || u.NextHop != netip.MustParseAddr("192.0.2.10") || !u.IBGP {
		t.Fatalf("update %+v, want %s via 192.0.2.10 from iBGP", u, pfx)
	}
	var typ api.PeerType
	_ = sp.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) { typ = p.Conf.Type })
	if typ != api.PeerType_PEER_TYPE_INTERNAL {
		t.Fatalf("GoBGP has the neighbour as %v", typ)
	}
}

// With a password, the CE only talks to a neighbour signing its segments
// with the same key (TCP MD5, set by GoBGP on its listening socket).
func TestNeighborPassword(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	const key = "s3cret-key"
	sp, _ := startCE(t, port, nil,
		Neighbor{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Password: key},
		Neighbor{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, Password: key},
		Neighbor{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65004, Passive: true, Password: key},
	)
	with := func(pw string) *api.Peer {
		n := ceNeighbor(port, false)
		n.Conf.AuthPassword = pw
		return n
	}
	startGoBGP(t, "127.0.0.2", 65002, 0, with(key))
	startGoBGP(t, "127.0.0.3", 65003, 0, with("wrong"))
	startGoBGP(t, "127.0.0.4", 65004, 0, with(""))
	eventually(t, "session with the right key", func() bool { return established(sp, "127.0.0.2") })
	never(t, "session with a wrong or no key", 3*time.Second, func() bool {
		return established(sp, "127.0.0.3") || established(sp, "127.0.0.4")
	})
}

// The CE connects from local_address: the neighbour only accepts sessions
// from that address.
func TestNeighborLocalAddress(t *testing.T) {
	port := freePort(t, "127.0.0.2")
	n := ceNeighbor(0, true)
	n.Conf.NeighborAddress = "127.0.0.5"
	g := startGoBGP(t, "127.0.0.2", 65002, port, n)
	sp, _ := startCE(t, -1, nil, Neighbor{
		Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Port: uint32(port), ConnectRetry: time.Second,
		LocalAddress: netip.MustParseAddr("127.0.0.5"),
	})
	eventually(t, "session from 127.0.0.5", func() bool { return established(sp, "127.0.0.2") && g.state() == gobgp.BGP_FSM_ESTABLISHED })
}

// ebgp_multihop_ttl sets the TTL of the CE's packets: a neighbour
// requiring at least 250 (IP_MINTTL, as GoBGP's TtlMin sets it) accepts a
// session with TTL 250 and drops one with 249.
func TestNeighborMultihopTTL(t *testing.T) {
	var ns []Neighbor
	var gs []*gobgpPeer
	for _, c := range []struct {
		addr string
		ttl  uint8
	}{{"127.0.0.2", 250}, {"127.0.0.3", 249}} {
		port := freePort(t, c.addr)
		n := ceNeighbor(0, true)
		n.TtlSecurity = &api.TtlSecurity{Enabled: true, TtlMin: 250}
		gs = append(gs, startGoBGP(t, c.addr, 65002, port, n))
		ns = append(ns, Neighbor{
			Address: netip.MustParseAddr(c.addr), ASN: 65002, Port: uint32(port), ConnectRetry: time.Second,
			EBGPMultihopTTL: c.ttl,
		})
	}
	sp, _ := startCE(t, -1, nil, ns...)
	// The neighbours' view: the CE may see a session established whose
	// KEEPALIVE the neighbour dropped.
	eventually(t, "session with TTL 250", func() bool {
		return established(sp, "127.0.0.2") && gs[0].state() == gobgp.BGP_FSM_ESTABLISHED
	})
	never(t, "session with TTL 249", 3*time.Second, func() bool { return gs[1].state() == gobgp.BGP_FSM_ESTABLISHED })
}

// With ttl_security the CE accepts a neighbour whose packets arrive with
// TTL 255 (an adjacent one) and drops one whose packets arrive with 254,
// as from a neighbour one router farther away.
func TestNeighborTTLSecurity(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	sp, _ := startCE(t, port, nil,
		Neighbor{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, TTLSecurity: true},
		Neighbor{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, TTLSecurity: true},
	)
	for _, c := range []struct {
		addr string
		asn  uint32
		ttl  uint32
	}{{"127.0.0.2", 65002, 255}, {"127.0.0.3", 65003, 254}} {
		n := ceNeighbor(port, false)
		n.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: c.ttl}
		startGoBGP(t, c.addr, c.asn, 0, n)
	}
	eventually(t, "session with TTL 255", func() bool { return established(sp, "127.0.0.2") })
	never(t, "session with TTL 254", 3*time.Second, func() bool { return established(sp, "127.0.0.3") })
}

// Import and export prefix lists apply to their own neighbour only: the
// CE learns from a what its import list lets through, advertises to b
// only what b's export list lets through, and everything it learned to c,
// whose export policy accepts all.
func TestNeighborPolicy(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	sp, col := startCE(t, port, nil,
		Neighbor{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Import: &Policy{
			Rules: []PrefixRule{
				{Prefix: netip.MustParsePrefix("10.1.0.0/16"), LE: 24, Action: Accept},
				{Prefix: netip.MustParsePrefix("10.0.0.0/8"), LE: 32, Action: Reject},
			},
			Default: Accept,
		}},
		Neighbor{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, Export: &Policy{
			Rules: []PrefixRule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), GE: 16, LE: 16, Action: Accept}},
		}},
		Neighbor{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65004, Passive: true, Export: acceptAll},
	)
	b := startGoBGP(t, "127.0.0.3", 65003, 0, ceNeighbor(port, false))
	c := startGoBGP(t, "127.0.0.4", 65004, 0, ceNeighbor(port, false))
	startPeer(t, "127.0.0.2", 65002, port, 0, 0, "192.0.2.10", pfxs(
		"10.1.0.0/16", "10.1.1.0/24", "10.1.1.128/25", "10.2.0.0/16", "198.51.100.0/24", "2001:db8:100::/48")...)

	imported := pfxs("10.1.0.0/16", "10.1.1.0/24", "198.51.100.0/24", "2001:db8:100::/48")
	learned := func() []netip.Prefix {
		var out []netip.Prefix
		for p := range col.snapshot() {
			out = append(out, p)
		}
		slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr())*256 + a.Bits() - b.Bits() })
		return out
	}
	eventually(t, fmt.Sprintf("CE learns %v", imported), func() bool { return slices.Equal(learned(), imported) })
	eventually(t, "c gets every IPv4 route the CE learned", func() bool { return slices.Equal(c.rib(t), imported[:3]) })
	eventually(t, "b gets the /16 only", func() bool { return slices.Equal(b.rib(t), imported[:1]) })
	never(t, "more routes", 500*time.Millisecond, func() bool {
		return len(learned()) != 4 || len(b.rib(t)) != 1 || len(c.rib(t)) != 3
	})
	if !established(sp, "127.0.0.2") {
		t.Fatal("a not established")
	}
	// The neighbours' counts: a sent 6 (its import list, in the global
	// table, does not change its Adj-RIB-In); b and c sent nothing.
	counts := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, n := range sp.Neighbors() {
			m[n.Address] = n.Received
		}
		return m
	}
	want := map[string]uint64{"127.0.0.2": 6, "127.0.0.3": 0, "127.0.0.4": 0}
	eventually(t, fmt.Sprintf("prefixes received %v", want), func() bool { return maps.Equal(counts(), want) })
}

// grNeighbor is the CE as a GoBGP neighbour with graceful restart.
func grNeighbor(port int32, restarting bool) *api.Peer {
	n := ceNeighbor(port, false)
	n.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: 30, DeferralTime: 30, LocalRestarting: restarting}
	for _, f := range []Family{IPv4, IPv6} {
		n.AfiSafis = append(n.AfiSafis, &api.AfiSafi{
			Config:            &api.AfiSafiConfig{Family: f.api(), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		})
	}
	return n
}

// restartFlag reports whether g's neighbour sent the Restart State bit in
// the OPEN of the current session, and a Forwarding State bit.
func (g *gobgpPeer) restartFlag() (seen, set, fwd bool) {
	_ = g.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
		for _, c := range p.State.RemoteCap {
			if gr := c.GetGracefulRestart(); gr != nil {
				seen, set = true, gr.Flags&0x08 != 0
				for _, tu := range gr.Tuples {
					fwd = fwd || tu.Flags&0x80 != 0
				}
			}
		}
	})
	return seen, set, fwd
}

// As helper, the CE keeps a restarting neighbour's routes while it is away,
// and after it is back drops those it did not announce again.
func TestGracefulRestartHelper(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	_, col := startCE(t, port, nil, Neighbor{
		Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, GracefulRestart: &GracefulRestart{RestartTime: 30 * time.Second},
		Import: acceptAll,
	})
	p1, p2 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")
	has := func(p netip.Prefix) bool { _, ok := col.snapshot()[p]; return ok }
	g := startGoBGP(t, "127.0.0.2", 65002, 0, grNeighbor(port, false))
	g.announce(t, "192.0.2.10", p1.String(), p2.String())
	eventually(t, "both routes learned", func() bool { return has(p1) && has(p2) })

	g.stop(true) // no NOTIFICATION: the neighbour restarts
	never(t, "routes dropped while the neighbour restarts", 1500*time.Millisecond, func() bool { return !has(p1) || !has(p2) })

	g = startGoBGP(t, "127.0.0.2", 65002, 0, grNeighbor(port, true))
	g.announce(t, "192.0.2.10", p1.String())
	eventually(t, "the route not announced again dropped after End-of-RIB", func() bool { return !has(p2) })
	if !has(p1) {
		t.Fatal("the route announced again is gone")
	}
}

// As restarting speaker, the CE stops without a NOTIFICATION and comes back
// with the Restart State bit; a helper keeps the routes the CE advertised
// to it all along, and the CE sends its routes again only once it has them
// back from its neighbours (End-of-RIB from every one), so none is lost.
// It claims to restart with its forwarding state preserved only when told
// the FEs kept their FIB (Config.ForwardingPreserved).
func TestGracefulRestartRestarting(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	gr := &GracefulRestart{RestartTime: 30 * time.Second}
	ns := []Neighbor{
		{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, GracefulRestart: gr, Import: acceptAll, Export: acceptAll},
		{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, GracefulRestart: gr, Import: acceptAll, Export: acceptAll},
	}
	start := func(preserved bool) *Speaker {
		sp, err := Start(context.Background(), Config{
			ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
			Neighbors: ns, Logger: slog.New(slog.DiscardHandler), ForwardingPreserved: func() bool { return preserved },
		}, func([]Update) {})
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	sp := start(true)
	src := startGoBGP(t, "127.0.0.2", 65002, 0, grNeighbor(port, false))
	src.announce(t, "192.0.2.10", "198.51.100.0/24")
	helper := startGoBGP(t, "127.0.0.3", 65003, 0, grNeighbor(port, false))
	want := pfxs("198.51.100.0/24")
	eventually(t, "the helper learns the route through the CE", func() bool { return slices.Equal(helper.rib(t), want) })

	sp.Stop()
	missing := 0
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if !slices.Equal(helper.rib(t), want) {
				missing++
			}
		}
	}
	watch(time.Second)
	t.Logf("missing while down: %d", missing)
	sp = start(true)
	back := func() bool {
		return established(sp, "127.0.0.2") && established(sp, "127.0.0.3") && helper.state() == gobgp.BGP_FSM_ESTABLISHED
	}
	eventually(t, "CE back", back)
	if seen, set, fwd := helper.restartFlag(); !seen || !set || !fwd {
		t.Errorf("the CE's OPEN: graceful restart capability %v, Restart State bit %v, Forwarding State bit %v; want all", seen, set, fwd)
	}
	watch(2 * time.Second)
	if missing > 0 {
		t.Fatalf("the helper lacked the CE's route %d times while the CE restarted", missing)
	}

	// Restarted without its forwarding state: graceful restart still on,
	// but neither the Restart nor (GoBGP sets them together) the
	// Forwarding State bit, so the helper keeps no stale route of it.
	sp.Stop()
	sp = start(false)
	defer sp.Stop()
	eventually(t, "CE back without forwarding state", back)
	if seen, set, fwd := helper.restartFlag(); !seen || set || fwd {
		t.Errorf("the CE's OPEN: graceful restart capability %v, Restart State bit %v, Forwarding State bit %v; want the capability alone", seen, set, fwd)
	}
	eventually(t, "the helper has the CE's route again", func() bool { return slices.Equal(helper.rib(t), want) })
}

// BFD, against BIRD in a network namespace behind a veth pair (BFD listens
// on UDP port 3784 of every address, so two speakers need two namespaces):
// the BFD session comes up beside BGP, and when BIRD stops answering
// (SIGSTOP: TCP still works, the kernel keeps acknowledging) the CE resets
// the session within a second instead of after the 30s hold time.
func TestNeighborBFD(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	if _, err := os.Stat("/usr/sbin/bird"); err != nil {
		t.Skip("needs BIRD 2 (/usr/sbin/bird)")
	}
	ns := fmt.Sprintf("spbfd%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	veth := fmt.Sprintf("spbfd%d", os.Getpid()%100000)
	run("ip", "link", "add", veth, "type", "veth", "peer", "name", "bfdpeer", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", veth).Run() })
	run("ip", "addr", "add", "10.201.0.1/30", "dev", veth)
	run("ip", "link", "set", veth, "up")
	run("ip", "-n", ns, "addr", "add", "10.201.0.2/30", "dev", "bfdpeer")
	run("ip", "-n", ns, "link", "set", "bfdpeer", "up")
	run("ip", "-n", ns, "link", "set", "lo", "up")

	port := freePort(t, "10.201.0.1")
	dir := t.TempDir()
	conf := fmt.Sprintf(`router id 10.201.0.2;
protocol device {}
protocol static { ipv4; route 203.0.113.0/24 blackhole; }
protocol bfd { interface "bfdpeer" { interval 100 ms; multiplier 3; }; }
protocol bgp ce {
	local 10.201.0.2 as 65002;
	neighbor 10.201.0.1 port %d as 65001;
	hold time 30;
	connect retry time 1;
	bfd on;
	ipv4 { import all; export all; };
}
`, port)
	if err := os.WriteFile(dir+"/bird.conf", []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", ns, "/usr/sbin/bird", "-f", "-c", dir+"/bird.conf", "-s", dir+"/bird.ctl")
	bird.Stdout, bird.Stderr = os.Stderr, os.Stderr
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bird.Process.Signal(syscall.SIGCONT)
		_ = bird.Process.Kill()
		_ = bird.Wait()
	})

	col := &collector{fib: map[netip.Prefix]netip.Addr{}}
	sp, err := Start(context.Background(), Config{
		ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"10.201.0.1"},
		Neighbors: []Neighbor{{
			Address: netip.MustParseAddr("10.201.0.2"), ASN: 65002, Passive: true, HoldTime: 30 * time.Second, Import: acceptAll,
			BFD: &BFD{Interval: 100 * time.Millisecond, Multiplier: 3},
		}},
		Logger: slog.New(slog.DiscardHandler),
	}, col.apply)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	pfx := netip.MustParsePrefix("203.0.113.0/24")
	eventually(t, "BGP and BFD up, BIRD's route learned", func() bool {
		n := sp.Neighbors()[0]
		_, ok := col.snapshot()[pfx]
		return n.State == "established" && n.BFD == "up" && ok
	})
	if err := bird.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, "session reset by BFD", func() bool {
		_, ok := col.snapshot()[pfx]
		return sp.Neighbors()[0].State != "established" && !ok
	})
	if d := time.Since(stopped); d > 5*time.Second {
		t.Fatalf("session reset after %s", d)
	}
	t.Logf("session reset %s after BIRD stopped; BFD now %q", time.Since(stopped).Round(time.Millisecond), sp.Neighbors()[0].BFD)
}

// RFC 8212: an eBGP neighbour without import policy accepts no routes, one
// without export policy is sent none, and the status and the log say so;
// an eBGP neighbour whose policies accept all exchanges everything, and an
// iBGP neighbour without policy too.
func TestNeighborRFC8212(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	rec := &logtest.Recorder{}
	sp, err := Start(context.Background(), Config{
		ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbors: []Neighbor{
			{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true},
			{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, Import: acceptAll, Export: acceptAll},
			{Address: netip.MustParseAddr("127.0.0.4"), ASN: ceASN, Passive: true},
		},
		Networks: pfxs("203.0.113.0/24"),
		Logger:   slog.New(rec),
	}, (&collector{fib: map[netip.Prefix]netip.Addr{}}).apply)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	a := startGoBGP(t, "127.0.0.2", 65002, 0, ceNeighbor(port, false))
	b := startGoBGP(t, "127.0.0.3", 65003, 0, ceNeighbor(port, false))
	c := startGoBGP(t, "127.0.0.4", ceASN, 0, ceNeighbor(port, false))
	a.announce(t, "192.0.2.20", "10.2.0.0/16")
	b.announce(t, "192.0.2.30", "10.3.0.0/16")
	c.announce(t, "192.0.2.40", "10.4.0.0/16")

	// b (eBGP, accept all) gets the network and c's route; c (iBGP) the
	// network and b's route; a gets nothing, and nobody a's route.
	eventually(t, "b learns the CE's network and c's route", func() bool {
		return slices.Equal(b.rib(t), pfxs("10.3.0.0/16", "10.4.0.0/16", "203.0.113.0/24"))
	})
	eventually(t, "c learns the CE's network and b's route", func() bool {
		return slices.Equal(c.rib(t), pfxs("10.3.0.0/16", "10.4.0.0/16", "203.0.113.0/24"))
	})
	never(t, "a's route accepted, or a sent a route", 2*time.Second, func() bool {
		return !slices.Equal(a.rib(t), pfxs("10.2.0.0/16")) || len(b.rib(t)) != 3 || len(c.rib(t)) != 3
	})
	if !established(sp, "127.0.0.2") {
		t.Fatal("the session without policy is not established")
	}
	for _, n := range sp.Neighbors() {
		want := ""
		if n.Address == "127.0.0.2" {
			want = "eBGP neighbour without import and export policy: exchanges no routes (RFC 8212)"
		}
		if n.Warning != want {
			t.Errorf("neighbour %s: warning %q, want %q", n.Address, n.Warning, want)
		}
	}
	if !rec.Has("without policy exchanges no routes", "neighbor=127.0.0.2") || rec.Has("without policy", "neighbor=127.0.0.3") || rec.Has("without policy", "neighbor=127.0.0.4") {
		t.Error("want the policy warning logged for 127.0.0.2 only")
	}
}
