package fe

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// clusterAgent is a test agent of FE 1 with inter-FE links to FE 2 (port
// ife2, ifindex 8) and FE 3 (ife3, ifindex 9), started as Run starts it;
// the peers' MACs are not known yet.
func clusterAgent(t *testing.T) (*Agent, *fakeDatapath) {
	t.Helper()
	a, dp := testAgent(t, Config{ID: 1, Ports: []string{"p7", "ife2", "ife3"},
		InterFELinks: []InterFELink{{Port: "ife2", PeerFE: 2}, {Port: "ife3", PeerFE: 3}}})
	a.ports[8] = &port{Name: "ife2", Ifindex: 8, Up: true, mac: net.HardwareAddr{2, 0, 0, 0, 1, 8}}
	a.ports[9] = &port{Name: "ife3", Ifindex: 9, Up: true, mac: net.HardwareAddr{2, 0, 0, 0, 1, 9}}
	a.startInterFE(dp)
	return a, dp
}

func peerMAC(fe byte) net.HardwareAddr { return net.HardwareAddr{2, 0xfe, 0, 0, 0, fe} }

// What FE 1 of a cluster programs as the CE's egress rows come and change,
// rendered by the recording datapath, against testdata/remote.golden: the
// links declared as their peers' MACs are learned and their state followed;
// a gateway behind FE 2 or 3 a remote nexthop (key: the row and its
// family), one behind FE 1 a nexthop key; an ECMP group with a local and a
// remote member; rows moving between FEs, deleted, and a nexthop whose
// routes all go.
func TestRemoteGolden(t *testing.T) {
	a, dp := clusterAgent(t)
	var out strings.Builder
	fmt.Fprintf(&out, "## started, no peer MAC known\n%s", dp)
	a.setPeerMAC(8, peerMAC(2))
	a.setPeerMAC(9, peerMAC(3))
	a.ports[9].Up = false
	a.linkState(9)
	fmt.Fprintf(&out, "## both peers learned, ife3 down\n%s", dp)
	steps := []goldenStep{
		{"gateways behind FE 1, FE 2, FE 3 (IPv6) and none", []forces.TableOp{
			setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"), setNH(3, "198.18.0.1"), setNH6(1, "2001:db8::1"),
			setRoute(1, "198.51.100.0/24", 1), setRoute(2, "203.0.113.0/24", 2), setRoute(3, "0.0.0.0/0", 3),
			setRoute6(1, "2001:db8:1::/48", 1),
			setEgress(false, 1, 1, 7), setEgress(false, 2, 2, 5), setEgress(true, 1, 3, 4)}},
		{"the same again", []forces.TableOp{setEgress(false, 1, 1, 7), setEgress(false, 2, 2, 5), setEgress(true, 1, 3, 4)}},
		{"an ECMP group of a local and a remote gateway", []forces.TableOp{setGroup(10, 1, 2), setECMPRoute(4, "10.1.0.0/16", 10)}},
		{"the FE 2 gateway moves behind FE 1", []forces.TableOp{setEgress(false, 2, 1, 7)}},
		{"the FE 1 gateway moves behind FE 3", []forces.TableOp{setEgress(false, 1, 3, 6)}},
		{"its row is deleted: local again", []forces.TableOp{del(forces.ClassIPv4NexthopEgress, 1)}},
		{"the routes through 192.0.2.2 go", []forces.TableOp{del(forces.ClassIPv4UcastLPM, 2), del(forces.ClassIPv4UcastLPM, 4)}},
	}
	applySteps(t, a, dp, &out, steps)
	checkGolden(t, "remote.golden", out.String())
}

// The remote nexthop carries the egress FE, the key and the port of the
// row; the key of a row behind this FE maps to the gateway's own nexthop;
// IPv4 and IPv6 row 1 get different keys.
func TestRemoteNexthopMapping(t *testing.T) {
	a, dp := clusterAgent(t)
	a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setNH6(1, "2001:db8::1"), setNH(5, "192.0.2.5"),
		setRoute(1, "198.51.100.0/24", 1), setRoute6(1, "2001:db8:1::/48", 1), setRoute(2, "203.0.113.0/24", 5),
		setEgress(false, 1, 2, 11), setEgress(true, 1, 3, 12), setEgress(false, 5, 1, 7)))
	if r, ok := dp.Remote("198.51.100.0/24"); !ok || r != (datapath.RemoteNexthop{FE: 2, Key: 2, Port: 11}) {
		t.Fatalf("IPv4 route: remote %+v %t, want FE 2 key 2 port 11", r, ok)
	}
	if r, ok := dp.Remote("2001:db8:1::/48"); !ok || r != (datapath.RemoteNexthop{FE: 3, Key: 3, Port: 12}) {
		t.Fatalf("IPv6 route: remote %+v %t, want FE 3 key 3 port 12", r, ok)
	}
	id, _ := dp.Route("203.0.113.0/24")
	if keys := dp.NexthopKeys(); len(keys) != 1 || keys[10] != id {
		t.Fatalf("keys %v, want 10 -> %d (the local gateway's nexthop)", keys, id)
	}
	if _, ok := dp.Remote("203.0.113.0/24"); ok || dp.Gateway("203.0.113.0/24") != "192.0.2.5" {
		t.Fatalf("the local gateway's route: %q", dp.Gateway("203.0.113.0/24"))
	}
}

// A row too high for the key space gets no key and stays local; an FE
// without inter-FE links ignores the egress rows altogether.
func TestRemoteNotMapped(t *testing.T) {
	a, dp := clusterAgent(t)
	high := uint32(datapath.ConnectedKeyBase / 2)
	a.applyConfig(configMsg(t, setNH(high, "192.0.2.1"), setRoute(1, "198.51.100.0/24", high), setEgress(false, high, 2, 1)))
	if _, ok := dp.Remote("198.51.100.0/24"); ok || dp.Gateway("198.51.100.0/24") != "192.0.2.1" {
		t.Fatalf("row %d: %q, want the local gateway", high, dp.Gateway("198.51.100.0/24"))
	}
	b, dp2 := testAgent(t, Config{ID: 1})
	b.startInterFE(dp2)
	b.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1), setEgress(false, 1, 2, 1)))
	if _, ok := dp2.Remote("198.51.100.0/24"); ok || strings.Contains(dp2.String(), "local fe") {
		t.Fatalf("an FE without links programmed:\n%s", dp2)
	}
}

// A link is declared once its peer's MAC is known, again when it changes,
// and follows its port's state; a MAC learned on a port that is no link
// changes nothing.
func TestInterFELinkState(t *testing.T) {
	a, dp := clusterAgent(t)
	if _, unknown := a.linkPorts(); len(unknown) != 2 {
		t.Fatalf("ports to solicit: %v, want both", unknown)
	}
	if len(dp.InterFELinks()) != 0 {
		t.Fatalf("links declared before their peers' MACs: %v", dp.InterFELinks())
	}
	a.setPeerMAC(7, peerMAC(9))
	a.setPeerMAC(8, peerMAC(2))
	a.ports[8].Up = false
	a.linkState(8)
	l := dp.InterFELinks()
	if len(l) != 1 || l[2].Ifindex != 8 || l[2].PeerMAC.String() != peerMAC(2).String() || l[2].Up {
		t.Fatalf("links %+v, want FE 2 on 8, down", l)
	}
	a.ports[8].Up = true
	a.linkState(8)
	a.setPeerMAC(8, peerMAC(22))
	if l := dp.InterFELinks()[2]; !l.Up || l.PeerMAC.String() != peerMAC(22).String() {
		t.Fatalf("link to FE 2 %+v, want up with the new MAC", l)
	}
	if _, unknown := a.linkPorts(); len(unknown) != 1 || unknown[0] != "ife3" {
		t.Fatalf("ports to solicit: %v, want ife3", unknown)
	}
}

// A transaction that renumbers the nexthop rows (a restarted CE's full
// sync) changes the remote nexthop's key at COMMIT, not before, though no
// route's gateway changes; an abort after COMMIT puts the old key back.
func TestRemoteTransaction(t *testing.T) {
	a, dp := clusterAgent(t)
	a.applyConfig(configMsg(t, setNH(2, "192.0.2.2"), setRoute(1, "203.0.113.0/24", 2), setEgress(false, 2, 2, 5)))
	want := func(when string, key uint32) {
		t.Helper()
		if r, ok := dp.Remote("203.0.113.0/24"); !ok || r != (datapath.RemoteNexthop{FE: 2, Key: key, Port: 5}) {
			t.Fatalf("%s: remote %+v %t, want FE 2 key %d port 5", when, r, ok, key)
		}
	}
	want("before", 4)
	at := func(tp forces.TransactionPhase) forces.Flags { return forces.Flags{Atomic: true, TP: tp} }
	wholeDel := func(class uint32) forces.TableOp {
		return forces.TableOp{Op: forces.OpDel, ClassID: class, InstanceID: 1, Path: []uint32{1}}
	}
	if _, failed := a.applyConfig(configWith(t, at(forces.PhaseSOT), wholeDel(forces.ClassIPv4UcastLPM),
		wholeDel(forces.ClassIPv4NextHop), wholeDel(forces.ClassIPv4NexthopEgress), setNH(7, "192.0.2.2"))); failed {
		t.Fatal("SOT failed")
	}
	if _, failed := a.applyConfig(configWith(t, at(forces.PhaseEOT), setRoute(3, "203.0.113.0/24", 7), setEgress(false, 7, 2, 5))); failed {
		t.Fatal("EOT failed")
	}
	want("staged", 4)
	if _, failed := a.applyConfig(forces.NewCommit(ceID, forces.FEID(1), 9)); failed {
		t.Fatal("COMMIT failed")
	}
	want("after COMMIT", 14)
	a.applyConfig(&forces.Message{Header: forces.Header{Type: forces.MsgConfig, Src: ceID, Dst: forces.FEID(1), Flags: at(forces.PhaseABT)}})
	want("after ABORT", 4)
}

// A remote slot counts as resolved in the status: its egress is known.
func TestRemoteResolved(t *testing.T) {
	a, _ := clusterAgent(t)
	a.prog.egressPort = func(netip.Addr) int { return 0 } // no local port reaches anything
	a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"), setRoute(1, "198.51.100.0/24", 1),
		setRoute(2, "203.0.113.0/24", 2), setEgress(false, 1, 2, 5)))
	if st := a.Status(); st.Gateways != 2 || st.Resolved != 1 {
		t.Fatalf("%d gateways, %d resolved; want 2 and 1 (the remote one)", st.Gateways, st.Resolved)
	}
}

// The peer of a link is a usable IPv6 link-local neighbour on a link port;
// nothing else is.
func TestPeerNeighbor(t *testing.T) {
	links := map[int]bool{8: true}
	mac := peerMAC(2)
	upd := func(typ uint16, ifindex, family, state int, ip string) netlink.NeighUpdate {
		return netlink.NeighUpdate{Type: typ, Neigh: netlink.Neigh{LinkIndex: ifindex, Family: family, State: state,
			IP: net.ParseIP(ip), HardwareAddr: mac}}
	}
	if i, m, ok := peerNeighbor(upd(unix.RTM_NEWNEIGH, 8, unix.AF_INET6, netlink.NUD_STALE, "fe80::2"), links); !ok || i != 8 || m.String() != mac.String() {
		t.Fatalf("the peer's link-local neighbour: %d %s %t", i, m, ok)
	}
	for what, u := range map[string]netlink.NeighUpdate{
		"deleted":         upd(unix.RTM_DELNEIGH, 8, unix.AF_INET6, netlink.NUD_STALE, "fe80::2"),
		"on another port": upd(unix.RTM_NEWNEIGH, 7, unix.AF_INET6, netlink.NUD_STALE, "fe80::2"),
		"IPv4":            upd(unix.RTM_NEWNEIGH, 8, unix.AF_INET, netlink.NUD_REACHABLE, "169.254.0.2"),
		"not link-local":  upd(unix.RTM_NEWNEIGH, 8, unix.AF_INET6, netlink.NUD_REACHABLE, "2001:db8::2"),
		"failed":          upd(unix.RTM_NEWNEIGH, 8, unix.AF_INET6, netlink.NUD_FAILED, "fe80::2"),
		"being solicited": upd(unix.RTM_NEWNEIGH, 8, unix.AF_INET6, netlink.NUD_INCOMPLETE, "fe80::2"),
	} {
		if _, _, ok := peerNeighbor(u, links); ok {
			t.Errorf("%s: taken for the peer", what)
		}
	}
}
