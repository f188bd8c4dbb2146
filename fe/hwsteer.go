package fe

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/splitplane/splitplane/classifier"
)

// The hardware path of the classifier: on ports whose NIC has n-tuple
// filters and an RSS indirection table, each return control flow also gets
// an n-tuple rule sending it to queue 0, whose interrupt is pinned to the
// control CPU, and RSS spreads everything else over the other queues, pinned
// to the forwarding CPUs. On exit the NICs get back what they had.

// nicOpener opens a port's NIC (classifier.OpenNIC; tests replace it).
type nicOpener func(ifname string) (classifier.NIC, classifier.Capabilities, error)

// hwSteering is the steerers of the ports that can steer in hardware.
type hwSteering struct {
	log      *slog.Logger
	steerers []portSteerer
	reports  []string // one line per port, for the status
}

type portSteerer struct {
	port string
	nic  classifier.NIC
	s    *classifier.Steerer
}

// startHardwareSteering looks at each port's NIC and, with a control CPU
// (>= 0), starts steering on those that can; the others are left to the XDP
// path. Queues other than the control one are pinned to feCPUs in turn
// (none: left as they are).
func startHardwareSteering(log *slog.Logger, ports []string, open nicOpener, affinity classifier.IRQAffinity, controlCPU int, feCPUs []int) *hwSteering {
	hw := &hwSteering{log: log}
	for _, name := range ports {
		nic, caps, err := open(name)
		if err != nil {
			hw.reports = append(hw.reports, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if !caps.CanSteer() || controlCPU < 0 {
			nic.Close()
			hw.reports = append(hw.reports, caps.String())
			continue
		}
		cfg := classifier.SteererConfig{ControlQueue: 0, QueueCPU: map[uint32]int{0: controlCPU}, QueueIRQs: caps.QueueIRQs, Affinity: affinity}
		for q := 1; q < caps.Queues && len(feCPUs) > 0; q++ {
			cfg.QueueCPU[uint32(q)] = feCPUs[(q-1)%len(feCPUs)]
		}
		s := classifier.NewSteerer(nic, cfg)
		if err := s.Start(); err != nil {
			log.Warn("fe: classifier: hardware steering not started; the XDP path steers", "port", name, "err", err)
			if rerr := s.Restore(); rerr != nil {
				log.Warn("fe: classifier: restore", "port", name, "err", rerr)
			}
			nic.Close()
			hw.reports = append(hw.reports, caps.String()+fmt.Sprintf(" (start failed: %v)", err))
			continue
		}
		hw.steerers = append(hw.steerers, portSteerer{port: name, nic: nic, s: s})
		hw.reports = append(hw.reports, caps.String()+" (steering: n-tuple rules to queue 0)")
	}
	return hw
}

// apply makes every steering NIC's rules the return flows of flows.
func (hw *hwSteering) apply(flows []classifier.Flow) (errs int) {
	if len(hw.steerers) == 0 {
		return 0
	}
	matches := make([]classifier.NtupleMatch, 0, len(flows))
	for _, f := range flows {
		matches = append(matches, classifier.NtupleMatch{Src: f.Remote, Dst: f.Local})
	}
	slices.SortFunc(matches, func(a, b classifier.NtupleMatch) int { return a.Src.Compare(b.Src)*2 + a.Dst.Compare(b.Dst) })
	for _, p := range hw.steerers {
		if err := p.s.Apply(matches); err != nil {
			errs++
			hw.log.Warn("fe: classifier: n-tuple rules", "port", p.port, "err", err)
		}
	}
	return errs
}

// stop gives every NIC back its rules, RSS table and interrupt affinities.
func (hw *hwSteering) stop() {
	for _, p := range hw.steerers {
		if err := p.s.Restore(); err != nil {
			hw.log.Warn("fe: classifier: restore the NIC", "port", p.port, "err", err)
		}
		p.nic.Close()
	}
	hw.steerers = nil
}
