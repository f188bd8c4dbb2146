package lab

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/splitplane/splitplane/api/status"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/peer"
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
	if _, err := os.Stat(filepath.Join(o.frrDir(), "bgpd.conf")); err == nil {
		if st.Peer.State, st.Peer.Announced, err = frrStatus(o); err != nil {
			return st, fmt.Errorf("peer: %w", err)
		}
		st.Peer.Neighbor = "10.10.3.1"
	} else if _, err := os.Stat(o.Socket("bird")); err == nil {
		st.Peer.State = "bird" // BIRD has no status socket of ours; the CE's view of the session is below
	} else if err := status.Get(o.Socket("peer"), "/status", &st.Peer); err != nil {
		return st, fmt.Errorf("peer: %w", err)
	}
	st.BGPState = "not configured"
	for _, n := range st.CE.Neighbors {
		st.BGPState = n.State
	}
	st.PeerAnnounced = st.Peer.Announced
	st.CERoutes = st.CE.Routes
	st.FEAssociated = st.FE.Associated
	st.FERoutes = st.FE.Routes
	st.FENexthops, st.FEResolved = st.FE.Gateways, st.FE.Resolved
	st.Counters = st.FE.Counters
	return st, nil
}

// Print writes the status for people.
func (s Status) Print(w io.Writer) {
	fmt.Fprintf(w, "BGP session to the peer (AS %d): %s, %d prefixes announced\n", PeerASN, s.BGPState, s.PeerAnnounced)
	fmt.Fprintf(w, "CE: %d routes in the FIB, %d FE(s) associated\n", s.CERoutes, len(s.CE.FEs))
	for _, f := range s.CE.FEs {
		low := "down"
		if f.LowChannel {
			low = "up"
		}
		fmt.Fprintf(w, "ForCES: %s %q synced=%v, low-priority channel %s, heartbeat rtt p50 %.2f ms p99 %.2f ms, redirected %d, injected %d, events %d\n",
			f.ID, f.Name, f.Synced, low, f.HeartbeatRTT.P50, f.HeartbeatRTT.P99, f.Redirected, f.Injected, f.Events)
	}
	fmt.Fprintf(w, "FE: associated=%v, %d routes from the CE (%d in XDP, %d copied to the kernel), gateways %d/%d resolved, protocol errors %d\n",
		s.FEAssociated, s.FERoutes, s.FE.Programmed, s.FE.KernelRoutes, s.FEResolved, s.FENexthops, s.FE.ProtocolErrors)
	for _, p := range s.FE.Ports {
		fmt.Fprintf(w, "    port %-8s ifindex %-3d xdp %-7s %-16s rx %d pkts %d B, tx %d pkts %d B, to kernel %d\n", p.Name, p.Ifindex, p.Mode,
			fmt.Sprint(p.Addrs), p.Counters.RxPackets, p.Counters.RxBytes, p.Counters.TxPackets, p.Counters.TxBytes, p.Counters.Passed)
	}
	for _, l := range s.FE.Lanes {
		fmt.Fprintf(w, "    lane %s rx-%d: cpus %s (%s)\n", l.Port, l.Queue, l.CPUs, l.Via)
	}
	names := make([]string, 0, len(s.Counters))
	for k := range s.Counters {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		if s.Counters[k] != 0 || k == "forwarded" {
			fmt.Fprintf(&b, " %s=%d", k, s.Counters[k])
		}
	}
	fmt.Fprintf(w, "XDP packets:%s\n", b.String())
}
