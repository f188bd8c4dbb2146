package fe

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// Valiant load balancing over the inter-FE links (docs/cluster.md,
// "Direct VLB"). The datapath sends a flow to another FE through an
// intermediate FE when the flow's hash falls in the link's spill share;
// this file sets that share. In direct mode (RouteBricks' "direct VLB")
// it measures, every vlb.interval, the bytes this FE sent on each link and
// the bytes it sent towards each FE whatever the path (the datapath's
// fe_demand_map), and spills just the flows that do not fit under
// max_link_load of the link's capacity. In two_phase mode the share is
// fixed, (N-2)/N; off leaves it at 0.

// vlbDatapath is what VLB needs of the datapath.
type vlbDatapath interface {
	SetSpill(peerFE uint32, permille int) error
	InterFEDemand() (map[uint32]datapath.FEDemand, error)
	PortCounters() (map[int]datapath.PortCounters, error)
}

// vlbHysteresis is the smallest change of a spill share (in thousandths)
// that direct mode makes, but for the return to 0: each change moves
// flows from one path to another, and a moved flow may see its packets
// reordered once.
const vlbHysteresis = 20

// vlbSmoothing weighs a new rate against the smoothed one (an EWMA).
const vlbSmoothing = 0.5

// vlbLink is one inter-FE link as VLB sees it.
type vlbLink struct {
	peerFE   uint32
	port     string
	ifindex  int
	capacity float64 // bytes per second
	// The counters at the last step, and the smoothed rates (bytes/s).
	txBytes, demandBytes uint64
	txRate, otherRate    float64
	demandRate           float64
	primed               bool
	spill                int // thousandths, as the datapath has it
}

// vlb is the VLB state of one FE; its goroutine owns it, Status reads the
// snapshot.
type vlb struct {
	cfg   VLBConfig
	links []*vlbLink

	mu   sync.Mutex
	snap *forces.FEVLBStatus
}

// newVLB returns the VLB of an FE with links (port name, ifindex, peer FE,
// configured capacity), or nil without links.
func newVLB(cfg VLBConfig, links []InterFELink, ifindexOf func(port string) int) *vlb {
	if len(links) == 0 {
		return nil
	}
	v := &vlb{cfg: cfg}
	for _, l := range links {
		mbps := l.CapacityMbps
		if mbps == 0 {
			mbps = portSpeedMbps(l.Port)
		}
		v.links = append(v.links, &vlbLink{peerFE: l.PeerFE, port: l.Port, ifindex: ifindexOf(l.Port), capacity: float64(mbps) * 1e6 / 8})
	}
	v.snapshot()
	return v
}

// portSpeedMbps is the port's speed as the kernel reports it in sysfs, or
// 10000 when it reports none (a virtual device, a link down).
func portSpeedMbps(port string) int {
	b, err := os.ReadFile("/sys/class/net/" + port + "/speed")
	if err == nil {
		if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && s > 0 {
			return s
		}
	}
	return 10000
}

// twoPhaseSpill is the share of flows (thousandths) that two-phase VLB
// sends through an intermediate in a mesh of fes FEs: the intermediate is
// any FE, this one and the egress one being the direct path.
func twoPhaseSpill(fes int) int {
	if fes < 3 {
		return 0
	}
	return (1000*(fes-2) + fes/2) / fes
}

// directSpill is the share of flows (thousandths) towards an FE that
// direct VLB sends through intermediates: none while this FE's demand
// towards that FE (demandRate, bytes/s, by any path) fits in what the link
// has left under budget once its other traffic (otherRate: this FE's flows
// to other FEs through it, frames in transit) is counted, and the part
// that does not fit otherwise.
func directSpill(budget, otherRate, demandRate float64) int {
	room := budget - otherRate
	switch {
	case demandRate <= 0 || room >= demandRate:
		return 0
	case room <= 0:
		return 1000
	}
	return int(math.Round(1000 * (1 - room/demandRate)))
}

// step takes the counters read dt after the last step and returns the
// new spill share of each link whose share should change.
func (v *vlb) step(dt float64, tx map[int]datapath.PortCounters, demand map[uint32]datapath.FEDemand) map[uint32]int {
	changes := map[uint32]int{}
	for _, l := range v.links {
		t, d := tx[l.ifindex].TxBytes, demand[l.peerFE].Bytes
		if !l.primed || t < l.txBytes || d < l.demandBytes || dt <= 0 {
			l.txBytes, l.demandBytes, l.primed = t, d, true
			continue
		}
		// What went direct towards the peer in the last interval went with
		// the share set then; the rest of the link's traffic is other.
		tr, dr := float64(t-l.txBytes)/dt, float64(d-l.demandBytes)/dt
		other := max(0, tr-dr*(1-float64(l.spill)/1000))
		l.txBytes, l.demandBytes = t, d
		l.txRate = vlbSmoothing*tr + (1-vlbSmoothing)*l.txRate
		l.otherRate = vlbSmoothing*other + (1-vlbSmoothing)*l.otherRate
		l.demandRate = vlbSmoothing*dr + (1-vlbSmoothing)*l.demandRate
		if v.cfg.Mode != VLBDirect {
			continue
		}
		want := directSpill(l.capacity*v.cfg.MaxLinkLoad, l.otherRate, l.demandRate)
		if want != l.spill && (want == 0 || abs(want-l.spill) >= vlbHysteresis) {
			changes[l.peerFE] = want
		}
	}
	return changes
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// snapshot publishes the state for Status and the metrics.
func (v *vlb) snapshot() {
	st := &forces.FEVLBStatus{Mode: v.cfg.Mode, MaxLinkLoad: v.cfg.MaxLinkLoad}
	for _, l := range v.links {
		st.Links = append(st.Links, forces.FEVLBLinkStatus{
			PeerFE: l.peerFE, Port: l.port, CapacityMbps: l.capacity * 8 / 1e6,
			LinkMbps: l.txRate * 8 / 1e6, DemandMbps: l.demandRate * 8 / 1e6, SpillPermille: l.spill,
		})
	}
	v.mu.Lock()
	v.snap = st
	v.mu.Unlock()
}

// status returns the last snapshot (nil for an FE without VLB).
func (v *vlb) status() *forces.FEVLBStatus {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.snap
}

// run sets the spill shares until ctx ends: once for two_phase, every
// interval for direct.
func (v *vlb) run(ctx context.Context, dp vlbDatapath, a *Agent) {
	set := func(l *vlbLink, permille int) {
		if err := dp.SetSpill(l.peerFE, permille); err != nil {
			// The link is declared once its peer's MAC is known: until
			// then there is nothing to spill from.
			a.log.Debug("fe: vlb: spill not set", "peer_fe", l.peerFE, "port", l.port, "err", err)
			return
		}
		switch {
		case l.spill == 0 && permille > 0:
			a.log.Info("fe: vlb: link loaded, flows spill through intermediate FEs", "peer_fe", l.peerFE, "port", l.port,
				"spill_permille", permille, "link_mbps", int(l.txRate*8/1e6), "demand_mbps", int(l.demandRate*8/1e6), "capacity_mbps", int(l.capacity*8/1e6))
		case l.spill > 0 && permille == 0:
			a.log.Info("fe: vlb: link has room again, every flow direct", "peer_fe", l.peerFE, "port", l.port)
		}
		l.spill = permille
	}
	t := time.NewTicker(v.cfg.Interval)
	defer t.Stop()
	last := time.Now()
	for {
		if v.cfg.Mode == VLBTwoPhase {
			want := twoPhaseSpill(len(v.links) + 1)
			for _, l := range v.links {
				if l.spill != want {
					set(l, want)
				}
			}
		}
		// The rates are measured in every mode, for the status; step
		// changes shares only in direct mode.
		tx, err1 := dp.PortCounters()
		demand, err2 := dp.InterFEDemand()
		now := time.Now()
		if err1 == nil && err2 == nil {
			changes := v.step(now.Sub(last).Seconds(), tx, demand)
			for _, l := range v.links {
				if permille, ok := changes[l.peerFE]; ok {
					set(l, permille)
				}
			}
		}
		last = now
		v.snapshot()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// vlbCollector exports the VLB snapshot as metrics.
type vlbCollector struct{ v *vlb }

var (
	feSpill = prometheus.NewDesc("splitplane_fe_inter_fe_spill_permille",
		"Share of the flows towards the peer FE sent through intermediate FEs (Valiant load balancing), in thousandths.", []string{"peer_fe"}, nil)
	feDemand = prometheus.NewDesc("splitplane_fe_inter_fe_demand_bits_per_second",
		"What this FE sends towards the peer FE by any path, as VLB last measured it.", []string{"peer_fe"}, nil)
	feLinkLoad = prometheus.NewDesc("splitplane_fe_inter_fe_link_bits_per_second",
		"What this FE sends on its link to the peer FE (its own traffic and transit), as VLB last measured it.", []string{"peer_fe"}, nil)
)

// Describe implements prometheus.Collector.
func (c vlbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- feSpill
	ch <- feDemand
	ch <- feLinkLoad
}

// Collect implements prometheus.Collector.
func (c vlbCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.v.status()
	if st == nil {
		return
	}
	for _, l := range st.Links {
		peer := strconv.FormatUint(uint64(l.PeerFE), 10)
		ch <- prometheus.MustNewConstMetric(feSpill, prometheus.GaugeValue, float64(l.SpillPermille), peer)
		ch <- prometheus.MustNewConstMetric(feDemand, prometheus.GaugeValue, l.DemandMbps*1e6, peer)
		ch <- prometheus.MustNewConstMetric(feLinkLoad, prometheus.GaugeValue, l.LinkMbps*1e6, peer)
	}
}
