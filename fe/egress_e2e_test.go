package fe

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
)

// One port space over two FEs, end to end: a real CE and two real FE
// agents (on the fake datapath), each with a port to its own subnet and an
// inter-FE link to the other. Each FE ends up with the same egress rows:
// FE 1's gateways (IPv4 and IPv6) behind FE 1's port, FE 2's behind FE
// 2's, so that for FE 2 the nexthops of FE 1's gateways are remote. The CE's status shows the
// mesh and how many nexthops each FE is the egress of.
func TestEgressRowsEndToEnd(t *testing.T) {
	forcesAddr, lowAddr := freeAddr(t, "127.0.0.1"), freeAddr(t, "127.0.0.1")
	cfg := ce.Config{
		ID: 3, ASN: 65001, RouterID: "192.0.2.1",
		ForCESListen: forcesAddr, ForCESListenLow: lowAddr, ForCESAllowedFEs: []string{"1", "2"},
		HeartbeatInterval: 50 * time.Millisecond, SyncHold: 100 * time.Millisecond,
		StaticRoutes: []ce.StaticRoute{
			{Prefix: "198.51.100.0/24", NextHops: []string{"10.1.0.9"}},
			{Prefix: "198.51.101.0/24", NextHops: []string{"10.2.0.9"}},
			{Prefix: "2001:db8:100::/48", NextHops: []string{"2001:db8:1::9"}},
		},
	}
	c, err := ce.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("CE: %v", err)
		}
	})
	waitUntil(t, "CE listening", func() bool { return c.Addr() != nil })

	startFE := func(id uint32, port string, ifindex int, subnet, subnet6 string, link string, linkIfindex int, peer uint32) *Agent {
		t.Helper()
		a, err := New(Config{ID: id, Ports: []string{port, link}, InterFELinks: []InterFELink{{Port: link, PeerFE: peer}},
			CEAddress: forcesAddr, CEAddressLow: lowAddr, HeartbeatInterval: 50 * time.Millisecond},
			slog.New(slog.DiscardHandler), WithDatapath(newFake(), func(netip.Addr) int { return ifindex }),
			WithPort(port, ifindex, netip.MustParsePrefix(subnet), netip.MustParsePrefix(subnet6)), WithPort(link, linkIfindex))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return a
	}
	fe1 := startFE(1, "p1", 11, "10.1.0.1/24", "2001:db8:1::1/64", "ife2", 12, 2)
	fe2 := startFE(2, "p2", 21, "10.2.0.1/24", "2001:db8:2::1/64", "ife1", 22, 1)

	// rows is an FE's egress rows by gateway.
	rows := func(a *Agent) map[string]EgressRow {
		out := map[string]EgressRow{}
		var gws, gws6 map[uint32]netip.Addr
		a.do(func() { gws, gws6 = a.table.v4.nexthops, a.table.v6.nexthops })
		for _, r := range a.EgressRows() {
			g := gws
			if r.IPv6 {
				g = gws6
			}
			if gw, ok := g[r.Nexthop]; ok {
				out[gw.String()] = r
			}
		}
		return out
	}
	want := func(self uint32) map[string]EgressRow {
		return map[string]EgressRow{
			"10.1.0.9":      {FE: 1, Port: 11, Remote: self != 1},
			"10.2.0.9":      {FE: 2, Port: 21, Remote: self != 2},
			"2001:db8:1::9": {IPv6: true, FE: 1, Port: 11, Remote: self != 1},
		}
	}
	for _, a := range []*Agent{fe1, fe2} {
		self := uint32(a.cfg.ID)
		waitUntil(t, "egress rows in FE "+a.id.String(), func() bool {
			got := rows(a)
			if len(got) != 3 {
				return false
			}
			for gw, w := range want(self) {
				g := got[gw]
				if g.FE != w.FE || g.Port != w.Port || g.Remote != w.Remote || g.IPv6 != w.IPv6 {
					return false
				}
			}
			return true
		})
	}
	if st := fe2.Status(); st.EgressRows != 3 || st.RemoteNexthops != 2 || len(st.InterFELinks) != 1 || st.InterFELinks[0].PeerFE != 1 {
		t.Fatalf("FE 2's status: %d egress rows, %d remote, links %+v", st.EgressRows, st.RemoteNexthops, st.InterFELinks)
	}
	st := ceStatus(t, ctx, c)
	if len(st.FEs) != 2 {
		t.Fatalf("%d FEs associated", len(st.FEs))
	}
	for i, fe := range st.FEs {
		peer := uint32(2 - i)
		if fe.EgressOf != 2-i || len(fe.InterFELinks) != 1 || fe.InterFELinks[0].PeerFE != peer || !fe.InterFELinks[0].Up || !fe.InterFELinks[0].PeerAssociated {
			t.Fatalf("%s in the CE's status: egress of %d nexthops, links %+v", fe.ID, fe.EgressOf, fe.InterFELinks)
		}
	}
}
