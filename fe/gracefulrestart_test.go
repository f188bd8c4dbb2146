package fe

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/runtest"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe/fedptest"
)

// deleteRecorder is the fake datapath, recording every route deleted.
type deleteRecorder struct {
	*fedptest.Datapath
	mu      sync.Mutex
	deleted []netip.Prefix
}

func (d *deleteRecorder) DeleteRoute(p netip.Prefix) error {
	d.mu.Lock()
	d.deleted = append(d.deleted, p)
	d.mu.Unlock()
	return d.Datapath.DeleteRoute(p)
}

func (d *deleteRecorder) DeleteRoutes(ps []netip.Prefix) error {
	d.mu.Lock()
	d.deleted = append(d.deleted, ps...)
	d.mu.Unlock()
	return d.Datapath.DeleteRoutes(ps)
}

func (d *deleteRecorder) deletions() []netip.Prefix {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.deleted)
}

// freeAddr returns a loopback TCP address nobody listens on.
func freeAddr(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// grPeer is a GoBGP speaker with graceful restart that connects to the CE.
type grPeer struct{ srv *server.BgpServer }

func startGRPeer(t *testing.T, addr string, asn uint32, ceAddr string, cePort int, ceASN uint32) *grPeer {
	t.Helper()
	srv := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), new(slog.LevelVar)))
	go srv.Serve()
	if err := srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: addr, ListenPort: -1}}); err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.StopBgp(context.Background(), &api.StopBgpRequest{})
		srv.Stop()
	})
	p := &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: ceAddr, PeerAsn: ceASN},
		Transport:       &api.Transport{RemotePort: uint32(cePort), LocalAddress: addr},
		Timers:          &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
		GracefulRestart: &api.GracefulRestart{Enabled: true, RestartTime: 30, DeferralTime: 30},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		}},
	}
	if err := srv.AddPeer(context.Background(), &api.AddPeerRequest{Peer: p}); err != nil {
		t.Fatal(err)
	}
	return &grPeer{srv: srv}
}

// open reports, for the current session: whether it is established, and
// whether the CE's OPEN carried the graceful restart capability, its
// Restart State bit and a Forwarding State bit.
func (g *grPeer) open() (up, seen, restart, fwd bool) {
	_ = g.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
		up = p.State.SessionState == api.PeerState_SESSION_STATE_ESTABLISHED
		for _, c := range p.State.RemoteCap {
			if gr := c.GetGracefulRestart(); gr != nil {
				seen, restart = true, gr.Flags&0x08 != 0
				for _, tu := range gr.Tuples {
					fwd = fwd || tu.Flags&0x80 != 0
				}
			}
		}
	})
	return up, seen, restart, fwd
}

// A CE restart with graceful restart, end to end: a real CE, a real FE
// agent (on the fake datapath) and a GoBGP neighbour. The CE claims its
// forwarding state preserved (the Restart and Forwarding State bits in its
// OPEN) only when the FE kept its FIB through the CE's restart: not at the
// first start (the FE had nothing), yes after a CE restart (the FE kept its
// routes, and the CE's full sync replaced them without deleting any), and
// not when the FE restarted too and came back empty.
func TestGracefulRestartClaimFollowsFE(t *testing.T) {
	bgpPort := freeAddr(t, "127.0.0.1")
	_, portStr, _ := net.SplitHostPort(bgpPort)
	cePort, _ := strconv.Atoi(portStr)
	forcesAddr, lowAddr := freeAddr(t, "127.0.0.1"), freeAddr(t, "127.0.0.1")
	route := "198.51.100.0/24"

	startCE := func() (c *ce.CE, stop func()) {
		t.Helper()
		cfg := ce.Config{
			ID: 3, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: int32(cePort), BGPListenAddrs: []string{"127.0.0.1"},
			ForCESListen: forcesAddr, ForCESListenLow: lowAddr, ForCESAllowedFEs: []string{"1"},
			HeartbeatInterval: 50 * time.Millisecond, SyncHold: 2 * time.Second,
			StaticRoutes: []ce.StaticRoute{{Prefix: "192.0.2.0/24", Connected: true}, {Prefix: route, NextHops: []string{"192.0.2.9"}}},
			Neighbors: []ce.NeighborConfig{{
				Address: "127.0.0.2", ASN: 65002, Passive: true,
				GracefulRestart: &ce.GracefulRestartConfig{Enabled: true, RestartTime: 30 * time.Second},
				Import:          &ce.BGPPolicyConfig{Default: "accept"}, Export: &ce.BGPPolicyConfig{Default: "accept"},
			}},
		}
		c, err := ce.New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return c, runtest.Run(t, "CE", c.Run, func() bool { return c.Addr() != nil })
	}
	startFE := func() (*Agent, *deleteRecorder, func()) {
		t.Helper()
		dp := &deleteRecorder{Datapath: newFake()}
		a, err := New(Config{Ports: []string{"unused0"}, CEAddress: forcesAddr, CEAddressLow: lowAddr, HeartbeatInterval: 50 * time.Millisecond},
			slog.New(slog.DiscardHandler), WithDatapath(dp, func(netip.Addr) int { return 7 }))
		if err != nil {
			t.Fatal(err)
		}
		a.ports[7] = &port{Name: "p7", Ifindex: 7}
		return a, dp, runtest.Run(t, "FE", a.Run, func() bool { return true })
	}
	ctx := context.Background()
	synced := func(c *ce.CE) func() bool {
		return func() bool {
			st := ceStatus(t, ctx, c)
			return len(st.FEs) == 1 && st.FEs[0].Synced
		}
	}
	// claimed waits for the session with the CE and returns what the CE's
	// OPEN said and what the CE's status says it claimed.
	claimed := func(g *grPeer, c *ce.CE) (restart, fwd, status bool) {
		t.Helper()
		var seen bool
		waitUntil(t, "BGP session with the CE", func() bool {
			var up bool
			up, seen, restart, fwd = g.open()
			ns := ceStatus(t, ctx, c).Neighbors
			return up && len(ns) == 1 && ns[0].State == "established"
		})
		if !seen {
			t.Fatal("the CE's OPEN has no graceful restart capability")
		}
		return restart, fwd, ceStatus(t, ctx, c).ForwardingPreserved
	}

	// First start: the FE's datapath is empty, so nothing is claimed.
	c, stopCE := startCE()
	waitUntil(t, "CE listening", func() bool { return c.Addr() != nil })
	a, dp, stopFE := startFE()
	peer := startGRPeer(t, "127.0.0.2", 65002, "127.0.0.1", cePort, 65001)
	waitUntil(t, "first full sync", synced(c))
	if r, f, st := claimed(peer, c); r || f || st {
		t.Fatalf("first start, empty FE: Restart State %v, Forwarding State %v, status forwarding_preserved %v; want none", r, f, st)
	}
	waitUntil(t, "route in the datapath", func() bool { return dp.Gateway(route) == "192.0.2.9" })
	if ceStatus(t, ctx, c).FEs[0].FIBKept || a.Status().FIBKept {
		t.Fatal("a fresh FE reported a kept FIB")
	}

	// The CE restarts, the FE runs on with its FIB: both bits claimed.
	stopCE()
	waitUntil(t, "FE sees the CE gone", func() bool { return !a.Status().Associated })
	if dp.Gateway(route) != "192.0.2.9" {
		t.Fatal("the FE dropped its FIB when the CE went away")
	}
	c, stopCE = startCE()
	waitUntil(t, "full sync after the CE's restart", synced(c))
	if r, f, st := claimed(peer, c); !r || !f || !st {
		t.Fatalf("CE restarted, FE kept its FIB: Restart State %v, Forwarding State %v, status forwarding_preserved %v; want all", r, f, st)
	}
	if !ceStatus(t, ctx, c).FEs[0].FIBKept || !a.Status().FIBKept {
		t.Fatal("the FE that kept its FIB did not say so")
	}
	if dp.Gateway(route) != "192.0.2.9" {
		t.Fatalf("after the full sync the route goes to %q", dp.Gateway(route))
	}
	if d := dp.deletions(); len(d) > 0 {
		t.Fatalf("the full sync after the CE's restart deleted routes from the datapath: %v", d)
	}

	// The CE and the FE restart: the FE comes back empty, nothing is claimed.
	stopCE()
	stopFE()
	c, _ = startCE()
	waitUntil(t, "CE listening", func() bool { return c.Addr() != nil })
	a, _, _ = startFE()
	waitUntil(t, "full sync to the new FE", synced(c))
	if r, f, st := claimed(peer, c); r || f || st {
		t.Fatalf("CE and FE restarted: Restart State %v, Forwarding State %v, status forwarding_preserved %v; want none", r, f, st)
	}
	if a.Status().FIBKept {
		t.Fatal("a restarted FE reported a kept FIB")
	}
}
