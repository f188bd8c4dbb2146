package bgp

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// ribWithNextHops returns the server's global RIB, both families, as
// prefix -> next hop.
func (g *gobgpPeer) ribWithNextHops(t *testing.T) map[netip.Prefix]netip.Addr {
	t.Helper()
	out := map[netip.Prefix]netip.Addr{}
	for _, f := range []gobgp.Family{gobgp.RF_IPv4_UC, gobgp.RF_IPv6_UC} {
		err := g.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f},
			func(nlri gobgp.NLRI, paths []*apiutil.Path) {
				if p, ok := nlri.(*gobgp.IPAddrPrefix); ok && len(paths) > 0 {
					out[p.Prefix] = nextHop(paths[0])
				}
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// bgp_networks: the speaker announces its networks, IPv4 and IPv6, with
// its own address as the next hop, follows SetNetworks, and never hands
// its own paths to the RIB: a prefix it originates that a neighbour also
// announces is withdrawn from the RIB while the speaker's path is the best
// one, and comes back when the speaker stops announcing it. With and
// without multipath, which handle best paths apart.
func TestNetworks(t *testing.T) {
	for _, multipath := range []bool{false, true} {
		name := "single"
		if multipath {
			name = "multipath"
		}
		t.Run(name, func(t *testing.T) {
			port := freePort(t, "127.0.0.1")
			// GoBGP's multipath switch is one per process and every
			// server's start sets it: the speaker starts last.
			g := startGoBGP(t, "127.0.0.3", 65003, 0, ceNeighbor(port, false))
			col := &collector{fib: map[netip.Prefix]netip.Addr{}}
			sp, err := Start(context.Background(), Config{
				ASN: ceASN, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
				Multipath: multipath, Logger: slog.New(slog.DiscardHandler),
				Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, Import: acceptAll, Export: acceptAll}},
				Networks:  pfxs("203.0.113.0/24", "2001:db8:f::/48"),
			}, col.apply)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sp.Stop)

			eventually(t, "the neighbour learns both networks from the CE", func() bool {
				rib := g.ribWithNextHops(t)
				return len(rib) == 2 && rib[netip.MustParsePrefix("203.0.113.0/24")] == ceAddr && rib[netip.MustParsePrefix("2001:db8:f::/48")].IsValid()
			})
			if rib := g.ribWithNextHops(t); rib[netip.MustParsePrefix("2001:db8:f::/48")].IsUnspecified() {
				t.Errorf("IPv6 network sent with the unspecified next hop: %v", rib)
			}
			if got := col.snapshot(); len(got) != 0 {
				t.Fatalf("the CE's own networks reached its RIB: %v", got)
			}

			// The neighbour announces one of them too (and another prefix):
			// the speaker's path stays best, nothing reaches the RIB but the
			// other prefix.
			g.announce(t, "127.0.0.3", "203.0.113.0/24", "198.51.100.0/24")
			eventually(t, "the RIB learns 198.51.100.0/24", func() bool { return len(col.snapshot()) == 1 })
			never(t, "203.0.113.0/24 reached the RIB", 300*time.Millisecond, func() bool {
				_, ok := col.snapshot()[netip.MustParsePrefix("203.0.113.0/24")]
				return ok
			})

			// The network withdrawn: the neighbour's route takes its place,
			// towards the neighbour, and the neighbour is told.
			if added, removed, err := sp.SetNetworks(pfxs("2001:db8:f::/48")); err != nil || added != 0 || removed != 1 {
				t.Fatalf("SetNetworks: added %d removed %d, %v", added, removed, err)
			}
			eventually(t, "203.0.113.0/24 in the RIB via the neighbour", func() bool {
				return col.snapshot()[netip.MustParsePrefix("203.0.113.0/24")] == netip.MustParseAddr("127.0.0.3")
			})
			eventually(t, "the neighbour no longer has the CE's 203.0.113.0/24", func() bool {
				return g.ribWithNextHops(t)[netip.MustParsePrefix("203.0.113.0/24")] == netip.MustParseAddr("127.0.0.3")
			})

			// Announced again: the RIB loses the neighbour's route while the
			// speaker's is best (no stale route through the neighbour).
			if _, _, err := sp.SetNetworks(pfxs("203.0.113.0/24", "2001:db8:f::/48")); err != nil {
				t.Fatal(err)
			}
			eventually(t, "203.0.113.0/24 leaves the RIB", func() bool {
				_, ok := col.snapshot()[netip.MustParsePrefix("203.0.113.0/24")]
				return !ok
			})
			if got := sp.Networks(); !slices.Equal(got, pfxs("203.0.113.0/24", "2001:db8:f::/48")) {
				t.Errorf("Networks() = %v", got)
			}
		})
	}
}

func TestNetworksValidation(t *testing.T) {
	for _, c := range []struct {
		nets []netip.Prefix
		want string
	}{
		{pfxs("203.0.113.0/24", "203.0.113.0/24"), "bgp_networks[1] 203.0.113.0/24: listed twice"},
		{[]netip.Prefix{netip.MustParsePrefix("203.0.113.1/24")}, "bgp_networks[0] 203.0.113.1/24: host bits set (the prefix is 203.0.113.0/24)"},
		{[]netip.Prefix{{}}, "bgp_networks[0]: not a prefix"},
	} {
		cfg := Config{ASN: 1, RouterID: netip.MustParseAddr("192.0.2.1"), Networks: c.nets}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v) = %v, want %q", c.nets, err, c.want)
		}
	}
}
