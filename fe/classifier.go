package fe

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/splitplane/splitplane/classifier"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// The classifier's side in the FE: the router's own control flows, found in
// its sockets (package classifier), become exact rules in the XDP program
// that steer their return packets to the control CPU through a CPUMAP
// (the software path: veth, virtio and any NIC without n-tuple filters);
// the other traffic addressed to the router is policed per CPU, and GTSM
// protects the BGP port.

// classifierDatapath is what the classifier needs of the datapath; the real
// XDP datapath has it, test datapaths need not.
type classifierDatapath interface {
	SetControlCPU(cpu int) error
	AddControlFlow(f datapath.ControlFlow) error
	DeleteControlFlow(f datapath.ControlFlow) error
	SetPolicers(rates datapath.PoliceRates) error
	SetGTSM(peer netip.Addr, on bool) error
	SetForwardCPUs(cpus []int) error
}

// ClassifierStatus is what the classifier is doing, for the FE's status.
type ClassifierStatus = forces.FEClassifierStatus

// FlowStatus is one control flow the datapath steers.
type FlowStatus = forces.FEFlowStatus

// classifierState is the classifier as the FE's status reports it; the
// owner of the agent's state owns it, the classifier's goroutine sends it
// what changed once the datapath has it.
type classifierState struct {
	status ClassifierStatus
	flows  map[classifier.Flow]bool
}

// runClassifier programs the datapath's control CPU, policer and GTSM peers,
// then keeps its control-flow rules in step with the router's sockets until
// ctx ends. It returns at once when the datapath has no classifier.
func (a *Agent) runClassifier(ctx context.Context, dp Datapath) error {
	cfg := a.cfg.Classifier
	cdp, ok := dp.(classifierDatapath)
	if cfg == nil || !ok {
		return nil
	}
	st := &a.classifier
	a.do(func() {
		st.flows = map[classifier.Flow]bool{}
		st.status = ClassifierStatus{ControlCPU: cfg.ControlCPU, PolicePPS: cfg.PolicePPS, Police: policeStatus(cfg.policeRates()),
			GTSMPeers: slices.Clone(cfg.GTSMPeers), Steering: "none"}
	})

	if err := cdp.SetControlCPU(cfg.ControlCPU); err != nil {
		return fmt.Errorf("classifier.control_cpu %d: %w", cfg.ControlCPU, err)
	}
	steering := "none"
	if cfg.ControlCPU >= 0 {
		steering = fmt.Sprintf("xdp cpumap to CPU %d", cfg.ControlCPU)
		a.do(func() { st.status.Steering = steering })
	}
	if err := cdp.SetForwardCPUs(cfg.ForwardCPUs); err != nil {
		return fmt.Errorf("classifier.forward_cpus %v: %w", cfg.ForwardCPUs, err)
	}
	a.do(func() { st.status.ForwardCPUs = slices.Clone(cfg.ForwardCPUs) })
	if err := cdp.SetPolicers(cfg.policeRates()); err != nil {
		return fmt.Errorf("classifier.police: %w", err)
	}
	for _, p := range cfg.GTSMPeers {
		if err := cdp.SetGTSM(netip.MustParseAddr(p), true); err != nil { // validated
			return fmt.Errorf("classifier.gtsm_peers %s: %w", p, err)
		}
	}
	// What each port's NIC can do in hardware, reported at start; those
	// that can steer get n-tuple rules too. The software path (the XDP
	// program) steers on every port either way.
	var nicPorts []string
	if !a.noPorts || a.openNIC != nil {
		nicPorts = a.cfg.Ports
	}
	open := a.openNIC
	if open == nil {
		open = classifier.OpenNIC
	}
	hw := startHardwareSteering(a.log, nicPorts, open, a.irqAffinity, cfg.ControlCPU, cfg.ForwardCPUs)
	defer hw.stop()
	for _, r := range hw.reports {
		a.log.Info("fe: classifier: port", "nic", r)
	}
	a.do(func() { st.status.NICs = hw.reports })
	a.log.Info("fe: classifier on", "steering", steering, "police_pps", cfg.PolicePPS, "police", policeString(cfg.policeRates()),
		"gtsm_peers", cfg.GTSMPeers)
	if cfg.ControlCPU >= 0 {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go warnUnsteered(wctx, a.log, dp, unsteeredCheck, unsteeredRepeat)
	}

	ports := cfg.Ports
	if len(ports) == 0 {
		ports = classifier.DefaultPorts()
	}
	// The rules are written here, on the watcher's goroutine, which alone
	// changes flows; the loop gets a copy for the status once they are.
	flows := map[classifier.Flow]bool{}
	err := classifier.Watch(ctx, classifier.Config{Ports: ports, Interval: cfg.Interval}, func(added, removed []classifier.Flow) {
		var errs uint64
		for _, f := range removed {
			if err := cdp.DeleteControlFlow(datapath.ControlFlow{Src: f.Remote, Dst: f.Local}); err != nil {
				errs++
				a.log.Warn("fe: classifier: remove rule", "flow", f, "err", err)
			}
			delete(flows, f)
		}
		for _, f := range added {
			if err := cdp.AddControlFlow(datapath.ControlFlow{Src: f.Remote, Dst: f.Local}); err != nil {
				errs++
				a.log.Warn("fe: classifier: add rule", "flow", f, "err", err)
				continue
			}
			flows[f] = true
		}
		if len(added)+len(removed) > 0 {
			errs += uint64(hw.apply(slices.Collect(maps.Keys(flows))))
			a.log.Info("fe: classifier rules changed", "added", len(added), "removed", len(removed), "rules", len(flows))
		}
		now := maps.Clone(flows)
		a.do(func() {
			st.flows = now
			st.status.Errors += errs
		})
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// controlFlowCounts returns the packet counts of the classifier's rules, when
// the datapath keeps them.
func controlFlowCounts(dp Datapath) map[datapath.ControlFlow]datapath.FlowCounts {
	var counts map[datapath.ControlFlow]datapath.FlowCounts
	if c, ok := dp.(interface {
		ControlFlows() ([]datapath.ControlFlow, map[datapath.ControlFlow]datapath.FlowCounts, error)
	}); ok {
		_, counts, _ = c.ControlFlows()
	}
	return counts
}

// classifierStatus reports the classifier's rules, with their packet counts
// from counts; called by the owner of the agent's state.
func (a *Agent) classifierStatus(counts map[datapath.ControlFlow]datapath.FlowCounts) *ClassifierStatus {
	st := &a.classifier
	if st.flows == nil {
		return nil
	}
	out := st.status
	out.Rules = nil
	for _, f := range slices.SortedFunc(maps.Keys(st.flows), func(x, y classifier.Flow) int {
		return x.Local.Compare(y.Local)*2 + x.Remote.Compare(y.Remote)
	}) {
		n := counts[datapath.ControlFlow{Src: f.Remote, Dst: f.Local}]
		out.Rules = append(out.Rules, FlowStatus{Kind: f.Kind, Local: f.Local.String(), Remote: f.Remote.String(),
			Packets: n.Packets, BadChecksum: n.BadChecksum})
	}
	return &out
}

// How often warnUnsteered looks at pass_steer_bad_csum, and how long it
// stays quiet after a warning while the count keeps growing.
const (
	unsteeredCheck  = 10 * time.Second
	unsteeredRepeat = 10 * time.Minute
)

// warnUnsteered warns when control-flow packets stay on the CPU that
// received them because the XDP program could not verify their TCP
// checksum (pass_steer_bad_csum grows): typically a peer on a veth with
// checksum offload on. The flows keep working, unprotected from forwarding
// load, so this is a warning, repeated at most every repeat while it lasts.
func warnUnsteered(ctx context.Context, log *slog.Logger, dp interface {
	Counters() (datapath.Counters, error)
}, every, repeat time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last uint64
	var warned time.Time
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, err := dp.Counters()
		if err != nil {
			continue
		}
		n := c["pass_steer_bad_csum"]
		if !first && n > last && (warned.IsZero() || time.Since(warned) >= repeat) {
			log.Warn("fe: classifier: control-flow packets not steered to the control CPU: their TCP checksum did not verify "+
				"(a sender that offloads checksums, such as a veth; docs/troubleshooting.md, \"The CPUMAP checksum pitfall on veth\")",
				"pass_steer_bad_csum", n, "since_last_check", n-last)
			warned = time.Now()
		}
		first, last = false, n
	}
}
