package ce

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// An FE of a cluster (it declared inter-FE links) that leaves while other
// FEs remain has its connected prefixes withdrawn at once
// (cluster_fe_hold_time 0), not held for fe_hold_time: the routes through
// its ports leave the FIB. An FE without links keeps fe_hold_time, and so
// does the last FE to leave, links or not.
func TestClusterFEHoldTime(t *testing.T) {
	c := startCEWith(t, time.Second, slog.New(slog.DiscardHandler), func(cfg *Config) { cfg.FEHoldTime = time.Hour })
	// One route behind each FE's port, reachable through nothing else.
	c.updates <- []bgp.Update{
		{Prefix: netip.MustParsePrefix("203.0.113.0/24"), NextHop: netip.MustParseAddr("198.18.1.2")},
		{Prefix: netip.MustParsePrefix("203.0.114.0/24"), NextHop: netip.MustParseAddr("198.18.2.2")},
		{Prefix: netip.MustParsePrefix("203.0.115.0/24"), NextHop: netip.MustParseAddr("198.18.3.2")},
	}
	fes := map[uint32]*fakeFE{}
	ceOf := map[uint32]forces.ID{}
	for n, links := range map[uint32][]forces.InterFELink{
		1: {{Port: 9, PeerFE: 2}},
		2: {{Port: 9, PeerFE: 1}},
		3: nil, // no cluster FE: an FE of a plain multi-FE router
	} {
		f, resp := dialFE(t, c, n)
		ceOf[n] = resp.Header.Src
		f.lfbs = egressLFBs
		f.ports = []forces.PortInfo{port(1, true, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 1}), 24).String()), port(9, true)}
		f.links = links
		f.fullSync()
		go keepAlive(f)
		fes[n] = f
	}
	routes := func() int { return statusOf(t, c).Routes }
	connected := func(p string) bool { return slices.Contains(statusOf(t, c).Connected, netip.MustParsePrefix(p)) }
	waitFor(t, func() bool { return routes() == 3 })
	leave := func(n uint32) {
		t.Helper()
		f := fes[n]
		if err := f.conn.WriteMessage(forces.NewAssociationTeardown(f.id, ceOf[n], uint32(forces.TeardownNormal))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			for _, fe := range statusOf(t, c).FEs {
				if fe.Num == f.id {
					return false
				}
			}
			return true
		})
	}
	// FE 3, no links, leaves: held.
	leave(3)
	// FE 2, with links, leaves while FE 1 remains: withdrawn at once.
	leave(2)
	waitFor(t, func() bool { return routes() == 2 })
	if connected("198.18.2.0/24") {
		t.Errorf("FE 2's prefix still connected after it left a cluster")
	}
	if !connected("198.18.3.0/24") {
		t.Errorf("FE 3's prefix (no links) not held")
	}
	// FE 1 leaves last: held, though it has links.
	leave(1)
	time.Sleep(200 * time.Millisecond)
	if n := routes(); n != 2 || !connected("198.18.1.0/24") {
		t.Errorf("the last FE left: %d routes (want 2), its prefix connected %t (want true)", n, connected("198.18.1.0/24"))
	}
}

func TestClusterFEHoldTimeConfig(t *testing.T) {
	cfg := Config{ASN: 65001, RouterID: "192.0.2.1", ClusterFEHoldTime: -time.Second}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "cluster_fe_hold_time -1s: must not be negative") {
		t.Errorf("negative cluster_fe_hold_time: %v", err)
	}
	cfg = Config{ASN: 65001, RouterID: "192.0.2.1"}
	if err := cfg.Validate(); err != nil || cfg.ClusterFEHoldTime != 0 {
		t.Errorf("default: %v, %s; want 0", err, cfg.ClusterFEHoldTime)
	}
}
