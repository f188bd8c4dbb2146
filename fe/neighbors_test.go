package fe

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Learning a neighbour programs the datapath on the FE's ports only, once
// per MAC, forgets it when the kernel does, and needs nothing of the owner of
// the agent's state: it proceeds while that owner is busy.
func TestNeighborLearning(t *testing.T) {
	a, dp := testAgent(t, Config{})
	ours := map[int]bool{7: true}
	upd := func(typ uint16, ifindex int, ip string, state int, mac net.HardwareAddr) netlink.NeighUpdate {
		return netlink.NeighUpdate{Type: typ, Neigh: netlink.Neigh{LinkIndex: ifindex, Family: unix.AF_INET, IP: net.ParseIP(ip), State: state, HardwareAddr: mac}}
	}
	mac1, mac2 := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	log := slog.New(slog.DiscardHandler)
	a.do(func() { // while the owner of the agent's state is busy, as with a full-table apply
		a.neighbors.update(upd(unix.RTM_NEWNEIGH, 7, "192.0.2.1", netlink.NUD_REACHABLE, mac1), ours, dp, log)
		a.neighbors.update(upd(unix.RTM_NEWNEIGH, 8, "192.0.2.2", netlink.NUD_REACHABLE, mac2), ours, dp, log) // not our port
		a.neighbors.update(upd(unix.RTM_NEWNEIGH, 7, "192.0.2.3", netlink.NUD_FAILED, mac2), ours, dp, log)    // not usable
	})
	if got, want := dp.String(), "neighbor 192.0.2.1 dev 7 lladdr 02:00:00:00:00:01\n"; got != want {
		t.Fatalf("datapath:\n%s\nwant:\n%s", got, want)
	}
	if !a.neighbors.has(7, netip.MustParseAddr("192.0.2.1")) || a.neighbors.len() != 1 || a.Status().Neighbors != 1 {
		t.Fatalf("neighbours known: %d", a.neighbors.len())
	}
	a.neighbors.update(upd(unix.RTM_NEWNEIGH, 7, "192.0.2.1", netlink.NUD_STALE, mac2), ours, dp, log)
	if got, want := dp.String(), "neighbor 192.0.2.1 dev 7 lladdr 02:00:00:00:00:02\n"; got != want {
		t.Fatalf("after a MAC change:\n%s\nwant:\n%s", got, want)
	}
	a.neighbors.update(upd(unix.RTM_DELNEIGH, 7, "192.0.2.1", 0, nil), ours, dp, log)
	if dp.String() != "" || a.neighbors.len() != 0 {
		t.Fatalf("after the kernel forgot it: %q, %d known", dp.String(), a.neighbors.len())
	}
}
