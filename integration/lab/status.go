package lab

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/internal/peer"
	"github.com/splitplane/splitplane/internal/status"
)

// Status is the lab at a glance: the BGP session, the routes in the CE and in
// the FE, and the XDP program's packet counters.
type Status struct {
	BGPState      string            `json:"bgp_state"`
	PeerAnnounced int               `json:"peer_announced"`
	CERoutes      int               `json:"ce_routes"`
	FEAssociated  bool              `json:"fe_associated"`
	FERoutes      int               `json:"fe_routes"`
	FENexthops    int               `json:"fe_nexthops"`
	FEResolved    int               `json:"fe_nexthops_resolved"`
	Counters      map[string]uint64 `json:"xdp_counters"`
	CE            ce.Status         `json:"ce"`
	FE            fe.Status         `json:"fe"`
	Peer          peer.Status       `json:"peer"`
	// Peer2 is the second peer's view of its session, with Options.Peer2.
	Peer2 *peer.Status `json:"peer2,omitempty"`
	// OtherFEs are the status of FE 2, 3... with Options.FEs > 1 (FE, and
	// the FE fields above, are FE 1's); empty (no ID) for an FE that is
	// not running.
	OtherFEs []fe.Status `json:"other_fes,omitempty"`
}

// GetStatus asks the lab's daemons for their status.
func GetStatus(o Options) (Status, error) {
	if err := o.defaults(); err != nil {
		return Status{}, err
	}
	var st Status
	if err := status.Get(o.Socket("ce"), "/", &st.CE); err != nil {
		return st, fmt.Errorf("ce: %w", err)
	}
	if err := status.Get(o.Socket("fe"), "/", &st.FE); err != nil {
		return st, fmt.Errorf("fe: %w", err)
	}
	for n := 2; n <= o.labFEs(); n++ {
		name, _ := FEName(n)
		var f fe.Status
		if err := status.Get(o.Socket(name), "/", &f); err != nil {
			// An FE the lab stopped (lab.Stop) is reported as such,
			// with an empty status: the others still have theirs.
			if _, perr := Pid(o, name); perr == nil {
				return st, fmt.Errorf("%s: %w", name, err)
			}
		}
		st.OtherFEs = append(st.OtherFEs, f)
	}
	var err error
	if st.Peer, err = peerStatus(o, "peer"); err != nil {
		return st, fmt.Errorf("peer: %w", err)
	}
	if o.hasPeer2() {
		p2, err := peerStatus(o, "peer2")
		if err != nil {
			return st, fmt.Errorf("peer2: %w", err)
		}
		st.Peer2 = &p2
	}
	// The session to the peer; with two, the first that is not
	// established, if any.
	st.BGPState = "not configured"
	for _, n := range st.CE.Neighbors {
		st.BGPState = n.State
		if n.State != "established" {
			break
		}
	}
	st.PeerAnnounced = st.Peer.Announced
	st.CERoutes = st.CE.Routes
	st.FEAssociated = st.FE.Associated
	st.FERoutes = st.FE.Routes
	st.FENexthops, st.FEResolved = st.FE.Gateways, st.FE.Resolved
	st.Counters = st.FE.Counters
	return st, nil
}

// labFEs is how many FEs the lab runs, from its files (FE n's
// configuration): callers such as lab status are not told Options.FEs.
func (o *Options) labFEs() int {
	n := 1
	for ; n < MaxFEs; n++ {
		name, _ := FEName(n + 1)
		if _, err := os.Stat(filepath.Join(o.Dir, name+".yaml")); err != nil {
			break
		}
	}
	return n
}

// hasPeer2 reports whether the lab runs a second peer, from its files.
func (o *Options) hasPeer2() bool {
	_, err := os.Stat(filepath.Join(o.frrDir("peer2"), "bgpd.conf"))
	if err == nil {
		return true
	}
	_, err = os.Stat(filepath.Join(o.Dir, "bird2.conf"))
	return err == nil
}

// peerStatus asks one of the lab's peers ("peer" or "peer2") for its view of
// its session: FRR through vtysh, BIRD through birdc, the GoBGP peer through
// its status socket. The lab's files say which it is.
func peerStatus(o Options, role string) (peer.Status, error) {
	var st peer.Status
	var err error
	if role == "peer" {
		st.Neighbor = "10.10.3.1"
	} else {
		st.Neighbor = "10.10.4.1"
	}
	if _, err := os.Stat(filepath.Join(o.frrDir(role), "bgpd.conf")); err == nil {
		st.State, st.Announced, err = frrStatus(o, role)
		return st, err
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "bird"+strings.TrimPrefix(role, "peer")+".conf")); err == nil {
		st.State, st.Announced = birdStatus(o, role)
		return st, nil
	}
	err = status.Get(o.Socket(role), "/status", &st)
	return st, err
}

// birdStatus reads a BIRD peer's session from birdc: its state in BIRD's
// words (established, active, connect...), or "down" when BIRD does not
// answer (stopped, restarting), and the routes it exports over it.
func birdStatus(o Options, role string) (state string, announced int) {
	out, err := exec.Command("birdc", "-s", o.BIRDSocket(role), "show", "protocols", "all", "splitplane").CombinedOutput()
	if err != nil {
		return "down", 0
	}
	state = "unknown"
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "splitplane":
			for _, w := range []string{"Established", "OpenConfirm", "OpenSent", "Active", "Connect", "Idle", "Close"} {
				if strings.Contains(l, w) {
					state = strings.ToLower(w)
					break
				}
			}
		case len(f) >= 5 && f[0] == "Routes:" && strings.HasPrefix(f[4], "exported"):
			n, _ := strconv.Atoi(f[3])
			announced += n
		}
	}
	return state, announced
}

// Print writes the status for people.
func (s Status) Print(w io.Writer) {
	if s.Peer2 == nil {
		fmt.Fprintf(w, "BGP session to the peer (AS %d): %s, %d prefixes announced\n", PeerASN, s.BGPState, s.PeerAnnounced)
	} else {
		fmt.Fprintf(w, "BGP session to the peer (AS %d): %s, %d prefixes announced\n", PeerASN, s.Peer.State, s.PeerAnnounced)
		fmt.Fprintf(w, "BGP session to peer2 (AS %d): %s, %d prefixes announced\n", Peer2ASN, s.Peer2.State, s.Peer2.Announced)
		for _, n := range s.CE.Neighbors {
			fmt.Fprintf(w, "    the CE's neighbour %s (AS %d): %s\n", n.Address, n.ASN, n.State)
		}
	}
	fmt.Fprintf(w, "CE: %d routes in the FIB, %d FE(s) associated\n", s.CERoutes, len(s.CE.FEs))
	printUnresolved(w, s.CE)
	for _, f := range s.CE.FEs {
		low := "down"
		if f.LowChannel {
			low = "up"
		}
		fmt.Fprintf(w, "ForCES: %s %q synced=%v, low-priority channel %s, heartbeat rtt p50 %.2f ms p99 %.2f ms, redirected %d, injected %d, events %d\n",
			f.ID, f.Name, f.Synced, low, f.HeartbeatRTT.P50, f.HeartbeatRTT.P99, f.Redirected, f.Injected, f.Events)
	}
	printMesh(w, s.CE)
	printFE(w, "FE", s.FE)
	for i, f := range s.OtherFEs {
		if f.ID == "" {
			name, _ := FEName(i + 2)
			fmt.Fprintf(w, "FE %d: not running ('splitplane lab restart %s' starts it)\n", i+2, name)
			continue
		}
		printFE(w, fmt.Sprintf("FE %d", i+2), f)
	}
}

// printMesh writes the mesh of a cluster lab as the CE sees it (what
// 'splitplane fe mesh' reads): per FE the nexthops it is the egress of and
// its inter-FE links, up or down, to which FE; nothing when no FE has
// links.
func printMesh(w io.Writer, st ce.Status) {
	if !slices.ContainsFunc(st.FEs, func(f ce.FEStatus) bool { return len(f.InterFELinks) > 0 }) {
		return
	}
	for _, f := range st.FEs {
		var b strings.Builder
		for _, l := range f.InterFELinks {
			fmt.Fprintf(&b, ", %s to FE(%d) %s", l.PortName, l.PeerFE, l.State())
		}
		links := "no inter-FE links"
		if b.Len() > 0 {
			links = "inter-FE links " + b.String()[2:]
		}
		fmt.Fprintf(w, "mesh: %s egress of %d nexthops; %s\n", f.ID, f.EgressOf, links)
	}
}

// unresolvedReasons are the reasons of ce.Status.UnresolvedRoutes, in the
// order lab status prints them.
var unresolvedReasons = []string{"no_route", "loop", "depth", "work"}

// printUnresolved writes the CE's unresolved routes by reason, and its
// unresolved static routes; nothing when every route resolves.
func printUnresolved(w io.Writer, st ce.Status) {
	total := 0
	for _, n := range st.UnresolvedRoutes {
		total += n
	}
	if total == 0 {
		return
	}
	reasons := slices.Clone(unresolvedReasons)
	for r := range st.UnresolvedRoutes {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	var b strings.Builder
	for _, r := range reasons {
		if n := st.UnresolvedRoutes[r]; n > 0 {
			fmt.Fprintf(&b, ", %s %d", r, n)
		}
	}
	fmt.Fprintf(w, "CE: %d routes unresolved, not installed (%s); 'splitplane route list --unresolved' lists them\n", total, b.String()[2:])
	for _, u := range st.UnresolvedStatic {
		fmt.Fprintf(w, "    static %s: %s\n", u.Prefix, u.Reason)
	}
}

// printFE writes one FE's part of the status.
func printFE(w io.Writer, title string, f fe.Status) {
	fmt.Fprintf(w, "%s: associated=%v, %d routes from the CE (%d in XDP, %d copied to the kernel), gateways %d/%d resolved, protocol errors %d\n",
		title, f.Associated, f.Routes, f.Programmed, f.KernelRoutes, f.Resolved, f.Gateways, f.ProtocolErrors)
	for _, p := range f.Ports {
		fmt.Fprintf(w, "    port %-8s ifindex %-3d xdp %-7s %-16s rx %d pkts %d B, tx %d pkts %d B, to kernel %d\n", p.Name, p.Ifindex, p.Mode,
			fmt.Sprint(p.Addrs), p.Counters.RxPackets, p.Counters.RxBytes, p.Counters.TxPackets, p.Counters.TxBytes, p.Counters.Passed)
	}
	for _, l := range f.Lanes {
		fmt.Fprintf(w, "    lane %s rx-%d: cpus %s (%s)\n", l.Port, l.Queue, l.CPUs, l.Via)
	}
	names := make([]string, 0, len(f.Counters))
	for k := range f.Counters {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		if f.Counters[k] != 0 || k == "forwarded" {
			fmt.Fprintf(&b, " %s=%d", k, f.Counters[k])
		}
	}
	fmt.Fprintf(w, "XDP packets:%s\n", b.String())
}
