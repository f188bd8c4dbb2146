package bench

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/bench/gen"
)

// Metric names of `splitplane bench cluster` (Cluster). They are fixed:
// docs/performance.md records them.
const (
	// MetricClusterCrossFEPPS is the rate of packets forwarded across FEs
	// (in at FE 1, over the inter-FE link, out at FE 3), against
	// MetricClusterLocalPPS.
	MetricClusterCrossFEPPS = "cluster_cross_fe_pps"
	// MetricClusterLocalPPS is the rate of packets FE 1 forwards between
	// its own ports, same generator, same FE.
	MetricClusterLocalPPS = "cluster_local_pps"
	// MetricClusterCrossVsLocal is cross / local (ratio; the goal is 0.7).
	MetricClusterCrossVsLocal = "cluster_cross_fe_vs_local"
	// MetricClusterIngressNS and MetricClusterEgressNS are the time FE 1's
	// program (encapsulation) and FE 3's (delivery) spend on a packet that
	// crosses, from the kernel's BPF run-time statistics, against
	// MetricClusterLocalNS, FE 1's program on a packet it forwards locally,
	// in the same rounds. MetricClusterPerServer is local / the larger of
	// the two: what each server of a cluster, doing its own half of the
	// work, forwards across FEs per packet against locally (the goal, 0.7,
	// read per server); cluster_cross_fe_vs_local has one CPU do both
	// halves and the extra veth hop.
	MetricClusterIngressNS = "cluster_ingress_program_ns"
	MetricClusterEgressNS  = "cluster_egress_program_ns"
	MetricClusterLocalNS   = "cluster_local_program_ns"
	MetricClusterPerServer = "cluster_cross_fe_vs_local_per_server"
	// MetricClusterVLBShareFE1 and MetricClusterVLBShareFE2: with FE 1's
	// spill to FE 3 set (ClusterOptions.SpillPermille), the percent of
	// the packets from FE 1 to FE 3 that FE 1 sent straight to FE 3, and
	// that FE 2 carried to FE 3 as the intermediate; they sum to 100.
	MetricClusterVLBShareFE1 = "cluster_vlb_share_fe1"
	MetricClusterVLBShareFE2 = "cluster_vlb_share_fe2"
	// MetricClusterVLBLinkDownShareFE1 and ...FE2: the same with the link
	// between FE 1 and FE 3 down (and spill 0).
	MetricClusterVLBLinkDownShareFE1 = "cluster_vlb_linkdown_share_fe1"
	MetricClusterVLBLinkDownShareFE2 = "cluster_vlb_linkdown_share_fe2"
	// MetricClusterReorderPct is the percent of a sequenced flow's
	// packets, FE 1 to FE 3, that arrived after one with a higher number;
	// MetricClusterLostPackets how many never arrived at the sink's port
	// (what the benchmark's receiving socket dropped is not counted, but
	// printed). Steady state.
	MetricClusterReorderPct  = "cluster_reorder_pct"
	MetricClusterLostPackets = "cluster_lost_packets"
	// MetricClusterReorderFailoverPct and MetricClusterLostFailover: the
	// same while the link between FE 1 and FE 3 goes down a third into
	// the flow and comes back up two thirds into it.
	MetricClusterReorderFailoverPct = "cluster_reorder_failover_pct"
	MetricClusterLostFailover       = "cluster_lost_failover_packets"
	// MetricClusterReorderLoadedPct and MetricClusterLostLoaded: the
	// failover again, with the generator sending to 65,536 other flows
	// to FE 3 at full rate from the other CPU meanwhile, so that the
	// chain runs on both CPUs at once; the loss then counts the packets
	// the overloaded rings dropped too.
	MetricClusterReorderLoadedPct = "cluster_reorder_failover_loaded_pct"
	MetricClusterLostLoaded       = "cluster_lost_failover_loaded_packets"
)

// ClusterMetrics lists Cluster's metric names in the order it returns them.
func ClusterMetrics() []string {
	return []string{
		MetricClusterCrossFEPPS, MetricClusterLocalPPS, MetricClusterCrossVsLocal,
		MetricClusterIngressNS, MetricClusterEgressNS, MetricClusterLocalNS, MetricClusterPerServer,
		MetricClusterVLBShareFE1, MetricClusterVLBShareFE2,
		MetricClusterVLBLinkDownShareFE1, MetricClusterVLBLinkDownShareFE2,
		MetricClusterReorderPct, MetricClusterLostPackets,
		MetricClusterReorderFailoverPct, MetricClusterLostFailover,
		MetricClusterReorderLoadedPct, MetricClusterLostLoaded,
	}
}

// ClusterOptions configures Cluster. Zero values take the defaults.
type ClusterOptions struct {
	// Duration is how long the generator runs for each rate measurement
	// (over its middle half), and how long the sequenced flow lasts
	// (default 2s, at least 500ms).
	Duration time.Duration
	// Rounds is how many times the cross and local rates are measured,
	// taking turns; the medians are reported (default 3).
	Rounds int
	// SpillPermille is FE 1's spill to FE 3 for the VLB share (default
	// 500: half the flows through FE 2).
	SpillPermille int
	// FlowRate is the sequenced flow's rate in packets per second
	// (default 100,000).
	FlowRate int
	// VLBFrames is how many frames the generator sends per VLB share,
	// to 65,536 destinations, that many flows (default 1<<20).
	VLBFrames uint32
	// Progress, if set, receives a line per setup step and measurement.
	Progress io.Writer
}

func (o *ClusterOptions) defaults() error {
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.SpillPermille == 0 {
		o.SpillPermille = 500
	}
	if o.FlowRate == 0 {
		o.FlowRate = 100_000
	}
	if o.VLBFrames == 0 {
		o.VLBFrames = 1 << 20
	}
	switch {
	case o.Duration < 500*time.Millisecond:
		return fmt.Errorf("bench cluster: duration %s: need at least 500ms", o.Duration)
	case o.Rounds < 1:
		return fmt.Errorf("bench cluster: rounds %d: need at least 1", o.Rounds)
	case o.SpillPermille < 1 || o.SpillPermille > 1000:
		return fmt.Errorf("bench cluster: spill %d permille: must be 1 to 1000", o.SpillPermille)
	case o.FlowRate < 1000 || o.FlowRate > 1_000_000:
		return fmt.Errorf("bench cluster: flow rate %d pps: must be 1000 to 1000000", o.FlowRate)
	}
	return nil
}

// Cluster measures forwarding across the FEs of one router (needs root):
// three FEs in namespaces, each with its own fe/datapath programmed through
// the datapath API as the FE agent programs it, in a full mesh of veth
// links, a generator in front of FE 1 and a sink behind FE 1 and FE 3
// (clusterTopo). It returns, in the order of ClusterMetrics:
//   - the rates of 60-byte frames FE 1 forwards to FE 3's port (cross) and
//     to its own (local), the same live-frames generator to 65,536
//     destinations in one prefix or the other, the two taking turns in
//     every round, counted by the sinks' XDP over the middle half of each
//     run; and their ratio;
//   - the share of the packets to FE 3 each FE carried to it under
//     two-phase VLB, from the FEs' counters (ife_encap, ife_via,
//     ife_transit), with FE 1's spill set and with the direct link down;
//   - the reordering and loss of one sequenced flow FE 1 to FE 3 read by a
//     packet socket at the sink, steady and with the direct link going
//     down and up again (SetInterFELinkUp on both ends, as the FEs do
//     when its port goes down), then that again under the generator's
//     load.
//
// The generator is pinned to the last CPU. XDP on veth runs in the
// sender's softirq, so the whole chain (FE 1's program, FE 2's and FE 3's,
// the sink's) runs on that CPU; the sequenced flow's sender, and so its
// chain, on CPU 0 (flowCPU), with the benchmark's Go side. The last
// failover runs the generator meanwhile: both CPUs forward at once.
// A measurement in which nothing arrives is an error wrapping
// ErrIncomplete.
func Cluster(ctx context.Context, opts ClusterOptions) (_ []Result, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "bench cluster: "+format+"\n", args...)
		}
	}
	c := newClusterTopo("spc")
	defer func() {
		if cerr := c.down(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	progress("topology %s (gen, fe1..fe%d, sink)", strings.TrimSuffix(c.ns[cnsGen], "-gen"), clusterFEs)
	if err := c.up(ctx); err != nil {
		return nil, fmt.Errorf("bench cluster: topology: %w", err)
	}
	if cpus := runtime.NumCPU(); cpus > 1 {
		c.genCPUs = []int{cpus - 1}
		progress("the generator runs on CPU %d and with it, in its softirq, every XDP program its frames go through (FE 1, FE 2, FE 3, the sink); the sequenced flow's sender, and with it the programs of its packets, on CPU %d, as the Go side", cpus-1, flowCPU())
	} else {
		progress("one CPU: generator, XDP programs and Go side share it")
	}
	g, err := gen.Load()
	if err != nil {
		return nil, fmt.Errorf("bench cluster: %w", err)
	}
	defer g.Close()
	for _, p := range []cport{cpSink1, cpSink3} {
		err := c.nsRun(p.ns, func() error {
			l, err := g.AttachSinkUDP(c.ifindex[p], 9)
			if err == nil {
				c.closers = append(c.closers, l.Close)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bench cluster: %w", err)
		}
	}
	start := time.Now()
	if err := c.program(); err != nil {
		return nil, fmt.Errorf("bench cluster: datapath: %w", err)
	}
	progress("%d datapaths loaded and programmed in %.1fs", clusterFEs, time.Since(start).Seconds())

	cross, local, err := c.rates(ctx, g, opts, progress)
	if err != nil {
		return nil, fmt.Errorf("bench cluster: %w", err)
	}
	perServer := local.fe1NS / max(cross.fe1NS, cross.fe3NS)
	progress("per packet: FE 1's program %.0f ns encapsulating, FE %d's %.0f ns delivering, FE 1's %.0f ns forwarding locally: per server %.2f of local",
		cross.fe1NS, clusterFEs, cross.fe3NS, local.fe1NS, perServer)
	results := []Result{
		{Metric: MetricClusterCrossFEPPS, Value: cross.pps, Unit: "pps", Baseline: MetricClusterLocalPPS, BaselineValue: local.pps},
		{Metric: MetricClusterLocalPPS, Value: local.pps, Unit: "pps"},
		{Metric: MetricClusterCrossVsLocal, Value: cross.pps / local.pps, Unit: "ratio", Baseline: MetricClusterLocalPPS, BaselineValue: local.pps},
		{Metric: MetricClusterIngressNS, Value: cross.fe1NS, Unit: "ns", Baseline: MetricClusterLocalNS, BaselineValue: local.fe1NS},
		{Metric: MetricClusterEgressNS, Value: cross.fe3NS, Unit: "ns", Baseline: MetricClusterLocalNS, BaselineValue: local.fe1NS},
		{Metric: MetricClusterLocalNS, Value: local.fe1NS, Unit: "ns"},
		{Metric: MetricClusterPerServer, Value: perServer, Unit: "ratio", Baseline: MetricClusterLocalNS, BaselineValue: local.fe1NS},
	}

	shares, err := c.vlbShares(ctx, g, opts, progress)
	if err != nil {
		return nil, fmt.Errorf("bench cluster: %w", err)
	}
	results = append(results, shares...)

	flows, err := c.reordering(ctx, g, opts, progress)
	if err != nil {
		return nil, fmt.Errorf("bench cluster: %w", err)
	}
	return append(results, flows...), nil
}

// setDsts points the generator at 65,536 random destinations in prefix.
func (c *clusterTopo) setDsts(g *gen.Gen, local bool) error {
	p := clusterCrossPrefix
	if local {
		p = clusterLocalPrefix
	}
	return g.SetTraffic(gen.Header{
		SrcMAC: cpGen.mac(), DstMAC: cpIn.mac(), Src: clusterAddr[cpGen],
		SrcPort: 40000, DstPort: 9, TTL: 64,
	}, destinations([]netip.Prefix{p}, 1))
}

// rateSample is one measured rate and, from the kernel's BPF run-time
// statistics over the same time, the mean time FE 1's and the last FE's
// programs spent on a packet.
type rateSample struct {
	pps, fe1NS, fe3NS float64
}

// rates measures the cross and local rates, taking turns (the first of a
// round alternating), and returns the median of each figure.
func (c *clusterTopo) rates(ctx context.Context, g *gen.Gen, opts ClusterOptions, progress func(string, ...any)) (cross, local rateSample, err error) {
	var crossR, localR []rateSample
	for r := range opts.Rounds {
		order := []bool{false, true} // local?
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, isLocal := range order {
			s, err := c.measureRate(ctx, g, isLocal, opts.Duration)
			if err != nil {
				return rateSample{}, rateSample{}, fmt.Errorf("%s, round %d: %w", rateName(isLocal), r+1, err)
			}
			// The programs' times in a run of their own: the kernel's
			// statistics time every run, which costs the rate itself.
			t, err := c.timedRate(ctx, g, isLocal, opts.Duration/2)
			if err != nil {
				return rateSample{}, rateSample{}, fmt.Errorf("%s, round %d, timed: %w", rateName(isLocal), r+1, err)
			}
			s.fe1NS, s.fe3NS = t.fe1NS, t.fe3NS
			if isLocal {
				localR = append(localR, s)
			} else {
				crossR = append(crossR, s)
			}
		}
		progress("round %d/%d: cross-FE %.2f Mpps, local %.2f Mpps", r+1, opts.Rounds, crossR[r].pps/1e6, localR[r].pps/1e6)
	}
	med := func(ss []rateSample) rateSample {
		var pps, fe1, fe3 []float64
		for _, s := range ss {
			pps, fe1, fe3 = append(pps, s.pps), append(fe1, s.fe1NS), append(fe3, s.fe3NS)
		}
		return rateSample{median(pps), median(fe1), median(fe3)}
	}
	return med(crossR), med(localR), nil
}

func rateName(local bool) string {
	if local {
		return "local"
	}
	return "cross-FE"
}

// timedRate is measureRate with the kernel's BPF run-time statistics on.
func (c *clusterTopo) timedRate(ctx context.Context, g *gen.Gen, local bool, dur time.Duration) (rateSample, error) {
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return rateSample{}, fmt.Errorf("BPF run-time statistics: %w", err)
	}
	defer stats.Close()
	return c.measureRate(ctx, g, local, dur)
}

// progStats reads the run-time statistics of FE fe's program.
func (c *clusterTopo) progStats(fe int) (*ebpf.ProgramStats, error) {
	s, err := c.fe[fe].Program().Stats()
	if err != nil {
		return nil, fmt.Errorf("FE %d's program statistics: %w", fe, err)
	}
	return s, nil
}

// nsPerRun is the mean time of a program's runs between two readings.
func nsPerRun(before, after *ebpf.ProgramStats) float64 {
	if after.RunCount <= before.RunCount {
		return 0
	}
	return float64(after.Runtime-before.Runtime) / float64(after.RunCount-before.RunCount)
}

// measureRate measures one rate and checks, from the FEs' counters, that
// the packets took the path measured: across, FE 3 delivered IFE frames;
// locally, FE 1 forwarded and encapsulated nothing.
func (c *clusterTopo) measureRate(ctx context.Context, g *gen.Gen, local bool, dur time.Duration) (rateSample, error) {
	if err := c.setDsts(g, local); err != nil {
		return rateSample{}, err
	}
	before, err := c.counters()
	if err != nil {
		return rateSample{}, err
	}
	var st [2]*ebpf.ProgramStats
	for i, fe := range []int{1, clusterFEs} {
		if st[i], err = c.progStats(fe); err != nil {
			return rateSample{}, err
		}
	}
	pps, err := c.measure(ctx, g, dur)
	if err != nil {
		return rateSample{}, err
	}
	after, err := c.counters()
	if err != nil {
		return rateSample{}, err
	}
	s := rateSample{pps: pps}
	for i, fe := range []int{1, clusterFEs} {
		now, err := c.progStats(fe)
		if err != nil {
			return rateSample{}, err
		}
		if i == 0 {
			s.fe1NS = nsPerRun(st[i], now)
		} else {
			s.fe3NS = nsPerRun(st[i], now)
		}
	}
	d := func(fe int, name string) uint64 { return after[fe][name] - before[fe][name] }
	switch {
	case local && (d(1, "forwarded") == 0 || d(1, "ife_encap") != 0):
		return rateSample{}, fmt.Errorf("FE 1 forwarded %d, encapsulated %d: not the local path: %w", d(1, "forwarded"), d(1, "ife_encap"), ErrIncomplete)
	case !local && (d(clusterFEs, "ife_decap") == 0 || d(1, "ife_via") != 0):
		return rateSample{}, fmt.Errorf("FE %d delivered %d IFE frames, FE 1 sent %d through an intermediate: not the direct cross path: %w",
			clusterFEs, d(clusterFEs, "ife_decap"), d(1, "ife_via"), ErrIncomplete)
	}
	return s, nil
}

// vlbShares sends VLBFrames to 65,536 destinations behind FE 3 with FE 1's
// spill set, then with the direct link down, and returns each FE's share.
func (c *clusterTopo) vlbShares(ctx context.Context, g *gen.Gen, opts ClusterOptions, progress func(string, ...any)) ([]Result, error) {
	if err := c.setDsts(g, false); err != nil {
		return nil, err
	}
	var out []Result
	for _, s := range []struct {
		name       string
		fe1, fe2   string
		set, unset func() error
	}{
		{
			fmt.Sprintf("spill %d‰", opts.SpillPermille), MetricClusterVLBShareFE1, MetricClusterVLBShareFE2,
			func() error { return c.fe[1].SetSpill(clusterFEs, opts.SpillPermille) },
			func() error { return c.fe[1].SetSpill(clusterFEs, 0) },
		},
		{
			"link FE 1 - FE 3 down", MetricClusterVLBLinkDownShareFE1, MetricClusterVLBLinkDownShareFE2,
			func() error { return c.setLink(false) },
			func() error { return c.setLink(true) },
		},
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.set(); err != nil {
			return nil, fmt.Errorf("VLB, %s: %w", s.name, err)
		}
		direct, via, err := c.vlbSend(g, opts.VLBFrames)
		if uerr := s.unset(); err == nil {
			err = uerr
		}
		if err != nil {
			return nil, fmt.Errorf("VLB, %s: %w", s.name, err)
		}
		progress("VLB, %s: FE 1 sent %.1f%% straight to FE %d, FE 2 carried %.1f%%", s.name, direct, clusterFEs, via)
		out = append(out,
			Result{Metric: s.fe1, Value: direct, Unit: "percent"},
			Result{Metric: s.fe2, Value: via, Unit: "percent"})
	}
	return out, nil
}

// vlbSend sends frames from the generator and returns, of the packets FE 1
// encapsulated for FE 3, the percent it sent direct (ife_encap - ife_via)
// and the percent FE 2 relayed (its ife_transit).
func (c *clusterTopo) vlbSend(g *gen.Gen, frames uint32) (direct, via float64, err error) {
	before, err := c.counters()
	if err != nil {
		return 0, 0, err
	}
	err = c.nsRun(cnsGen, func() error { return g.Send(c.ifindex[cpGen], frames) })
	if err != nil {
		return 0, 0, err
	}
	after, err := c.counters()
	if err != nil {
		return 0, 0, err
	}
	d := func(fe int, name string) uint64 { return after[fe][name] - before[fe][name] }
	encap := d(1, "ife_encap")
	if encap == 0 {
		return 0, 0, fmt.Errorf("FE 1 encapsulated nothing: %w", ErrIncomplete)
	}
	return pct(encap-d(1, "ife_via"), encap), pct(d(2, "ife_transit"), encap), nil
}

func pct(n, of uint64) float64 { return 100 * float64(n) / float64(of) }

// reordering runs the sequenced flow steady, then with the direct link
// going down and up again.
func (c *clusterTopo) reordering(ctx context.Context, g *gen.Gen, opts ClusterOptions, progress func(string, ...any)) ([]Result, error) {
	n := uint64(opts.Duration.Seconds() * float64(opts.FlowRate))
	failover := []seqEvent{
		{At: n / 3, Name: "link down", Do: func() error { return c.setLink(false) }},
		{At: 2 * n / 3, Name: "link up", Do: func() error { return c.setLink(true) }},
	}
	if err := c.setDsts(g, false); err != nil {
		return nil, err
	}
	var out []Result
	for _, run := range []struct {
		name          string
		reorder, lost string
		events        []seqEvent
		loaded        bool
	}{
		{"steady", MetricClusterReorderPct, MetricClusterLostPackets, nil, false},
		{"link FE 1 - FE 3 down and up", MetricClusterReorderFailoverPct, MetricClusterLostFailover, failover, false},
		{"link FE 1 - FE 3 down and up, generator at full rate", MetricClusterReorderLoadedPct, MetricClusterLostLoaded, failover, true},
	} {
		before, err := c.counters()
		if err != nil {
			return nil, err
		}
		var stopLoad func() error
		if run.loaded {
			stopLoad = c.startLoad(g)
		}
		res, err := c.runSeqFlow(ctx, n, opts.FlowRate, run.events)
		if stopLoad != nil {
			if lerr := stopLoad(); err == nil && lerr != nil {
				err = fmt.Errorf("generator: %w", lerr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("flow, %s: %w", run.name, err)
		}
		after, err := c.counters()
		if err != nil {
			return nil, err
		}
		via := after[1]["ife_via"] - before[1]["ife_via"]
		r := res.Counter
		// What the benchmark's own socket dropped for want of buffer did
		// reach the sink's port: not the router's loss.
		lost := r.Lost() - min(uint64(res.SocketDrops), r.Lost())
		progress("flow to %s at %d pps, %s: %d sent, %d received, %d out of order (%.4f%%), %d lost by the router (and %d dropped by the receiving socket), %d duplicates; FE 1 sent %d through FE 2",
			seqDst(), opts.FlowRate, run.name, res.Sent, r.Received, r.Reordered, r.ReorderedPct(), lost, res.SocketDrops, r.Duplicates, via)
		if r.Received == 0 {
			return nil, fmt.Errorf("flow, %s: nothing arrived: %w", run.name, ErrIncomplete)
		}
		if run.events != nil && via == 0 {
			return nil, fmt.Errorf("flow, %s: FE 1 sent nothing through FE 2 while the link was down: %w", run.name, ErrIncomplete)
		}
		out = append(out,
			Result{Metric: run.reorder, Value: r.ReorderedPct(), Unit: "percent"},
			Result{Metric: run.lost, Value: float64(lost), Unit: "packets"})
	}
	return out, nil
}
