package ce

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// A restarting BGP speaker may claim its forwarding state preserved (RFC
// 4724's Restart and Forwarding State bits), so that its graceful-restart
// neighbours go on forwarding along the routes they kept, only when that is
// true: here, when the FEs kept the FIB of before the CE's restart. An FE
// says so at discovery (forces.FIBKeptComponent). So a CE with a
// graceful-restart neighbour adds its neighbours only once the FEs it
// expects have associated, or graceful_restart_fe_wait has passed.

// maxExpectedFEs bounds the FE IDs of forces_allowed_fes the start-up wait
// expects one by one; a longer list is taken for "any FE".
const maxExpectedFEs = 256

// feReports gathers what FEs reported at discovery during the start-up
// wait; after it, nothing more is recorded.
type feReports struct {
	mu      sync.Mutex
	kept    map[forces.ID]bool // by FE: it kept its FIB
	done    bool
	changed chan struct{} // signalled on every report
}

func newFEReports() *feReports {
	return &feReports{kept: map[forces.ID]bool{}, changed: make(chan struct{}, 1)}
}

// add records that fe associated and whether it kept its FIB.
func (r *feReports) add(fe forces.ID, kept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.kept[fe] = kept
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// snapshot returns the reports so far; with stop, it ends their recording.
func (r *feReports) snapshot(stop bool) map[forces.ID]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = r.done || stop
	out := make(map[forces.ID]bool, len(r.kept))
	for fe, k := range r.kept {
		out[fe] = k
	}
	return out
}

// gracefulRestart reports whether any neighbour has graceful restart on.
func (c *Config) gracefulRestart() bool {
	return slices.ContainsFunc(c.Neighbors, func(n NeighborConfig) bool {
		return n.GracefulRestart != nil && n.GracefulRestart.Enabled
	})
}

// expectedFEs lists the FEs the start-up wait waits for: those of
// forces_allowed_fes, when it names few enough; nil: any one FE.
func (c *Config) expectedFEs() []forces.ID {
	n := 0
	for _, r := range c.allowedFEs {
		n += int(r.hi - r.lo + 1)
		if n > maxExpectedFEs {
			return nil
		}
	}
	var out []forces.ID
	for _, r := range c.allowedFEs {
		for id := r.lo; id <= r.hi; id++ {
			out = append(out, forces.FEID(id))
		}
	}
	return out
}

// forwardingClaim is the start-up wait's verdict.
type forwardingClaim struct {
	preserved bool
	reason    string
	fes       int // FEs that reported
}

// decideForwarding claims the forwarding state preserved when at least one
// FE reported and every one kept its FIB.
func decideForwarding(reports map[forces.ID]bool, waited time.Duration) forwardingClaim {
	if len(reports) == 0 {
		return forwardingClaim{reason: fmt.Sprintf("no FE associated within graceful_restart_fe_wait (%s)", waited)}
	}
	var lost []string
	for fe, kept := range reports {
		if !kept {
			lost = append(lost, fe.String())
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		return forwardingClaim{fes: len(reports), reason: strings.Join(lost, ", ") + " came up without the FIB of before the CE's restart"}
	}
	return forwardingClaim{preserved: true, fes: len(reports), reason: "every FE that associated kept its FIB"}
}

// awaitFEs waits until the FEs expected (expectedFEs) have reported, an FE
// reported it lost its FIB (the claim can then only be no), wait has
// passed or ctx ended, and returns the verdict.
func (c *CE) awaitFEs(ctx context.Context, wait time.Duration) forwardingClaim {
	start := time.Now()
	expected := c.cfg.expectedFEs()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		got := c.feReports.snapshot(false)
		enough := len(got) > 0
		for _, fe := range expected {
			if _, ok := got[fe]; !ok {
				enough = false
			}
		}
		for _, kept := range got {
			if !kept {
				enough = true
			}
		}
		if enough {
			break
		}
		select {
		case <-c.feReports.changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		break
	}
	return decideForwarding(c.feReports.snapshot(true), time.Since(start).Round(time.Millisecond))
}

// startNeighbors is the start of BGP with graceful-restart neighbours: it
// waits for the FEs (awaitFEs), then adds the neighbours, claiming the
// forwarding state preserved as the FEs said, and the originated prefixes
// (in that order, as bgp.Start does). Neighbours added later (by a reload)
// are no restart and never claim it.
func (c *CE) startNeighbors(ctx context.Context, sp *bgp.Speaker, neighbors []bgp.Neighbor, networks []netip.Prefix) error {
	claim := c.awaitFEs(ctx, c.cfg.GracefulRestartFEWait)
	if ctx.Err() != nil {
		return nil
	}
	attrs := []any{"fes", claim.fes, "reason", claim.reason}
	if claim.preserved {
		c.log.Info("bgp: graceful restart: claiming the forwarding state preserved (Restart and Forwarding State bits)", attrs...)
	} else {
		c.log.Info("bgp: graceful restart: not claiming the forwarding state preserved (no Restart and Forwarding State bits)", attrs...)
	}
	c.forwardingPreserved.Store(claim.preserved)
	c.claiming.Store(claim.preserved)
	_, err := sp.SetNeighbors(ctx, neighbors)
	c.claiming.Store(false)
	if err != nil {
		return err
	}
	if _, _, err := sp.SetNetworks(networks); err != nil {
		return err
	}
	c.log.Info("bgp: neighbours added", "neighbors", len(neighbors), "networks", len(networks))
	return nil
}
