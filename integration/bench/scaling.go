package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/internal/routegen"
)

// ScalingMetrics returns the names of the scaling figures with cores
// forwarding cores: splitplane's rate and the bare redirect's.
func ScalingMetrics(cores int) (splitplane, limit string) {
	c := strconv.Itoa(cores)
	return "forward_pps_cores_" + c, "redirect_limit_pps_cores_" + c
}

// scaling measures the forwarding rate of 64-byte frames with the big table
// against the number of forwarding cores, splitplane against the bare
// redirect, in a topology of its own whose veths have a queue per CPU. With
// k cores, k generator threads run, one pinned on each of the first k
// forwarding CPUs; veth puts each thread's frames on the router's RX queue
// of that CPU, and the CPU forwards them to completion (generator, router
// and sink on one core, as in the single-core figures, times k). CPU 0 is
// the control core and forwards nothing, unless the machine has only two
// CPUs (then both forward: AllOptions.Scaling).
func scaling(ctx context.Context, o *AllOptions, rep *Report, progress func(string, ...any)) (err error) {
	ncpu := runtime.NumCPU()
	var cpus []int
	for c := 1; c < ncpu; c++ {
		cpus = append(cpus, c)
	}
	if ncpu <= 2 {
		cpus = []int{1, 0}[:ncpu]
	}
	t := newFwdTopo("spb")
	t.queues, t.frames = ncpu, o.frames
	defer func() {
		if cerr := t.down(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	progress("scaling: topology %s, %s, %s, %d queues per port", t.ns[roleGen], t.ns[roleRtr], t.ns[roleSink], ncpu)
	if err := t.up(ctx); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	g, err := gen.Load()
	if err != nil {
		return err
	}
	t.closers = append(t.closers, g.Close)
	err = t.in(roleSink, func() error {
		l, err := g.AttachSink(t.ifindex[roleSink])
		if err == nil {
			t.closers = append(t.closers, l.Close)
		}
		return err
	})
	if err != nil {
		return err
	}
	prefixes := routegen.Generate(o.BigRoutes, o.Seed)
	d, _, err := t.loadDatapath(prefixes, false)
	if err != nil {
		return fmt.Errorf("datapath: %w", err)
	}
	t.closers = append(t.closers, d.Close)
	if err := g.SetTraffic(genHeader(), destinations(prefixes, o.Seed)); err != nil {
		return err
	}
	sp := make([][]float64, len(cpus))
	bare := make([][]float64, len(cpus))
	for r := range o.Rounds {
		var line []string
		for k := 1; k <= len(cpus); k++ {
			t.genCPUs = cpus[:k]
			pps, err := t.measureDatapath(ctx, g, d, o.ForwardDuration)
			if err != nil {
				return fmt.Errorf("%d cores, splitplane, round %d: %w", k, r+1, err)
			}
			sp[k-1] = append(sp[k-1], pps)
			lim, err := t.measureBare(ctx, g, o.ForwardDuration)
			if err != nil {
				return fmt.Errorf("%d cores, bare redirect, round %d: %w", k, r+1, err)
			}
			bare[k-1] = append(bare[k-1], lim)
			line = append(line, fmt.Sprintf("%d: %.2f / %.2f Mpps", k, pps/1e6, lim/1e6))
		}
		progress("scaling (cores: splitplane / bare redirect), round %d/%d: %s", r+1, o.Rounds, strings.Join(line, ", "))
	}
	for k := 1; k <= len(cpus); k++ {
		row := ScalingRow{Cores: k, Splitplane: median(sp[k-1]), Limit: median(bare[k-1])}
		rep.Scaling = append(rep.Scaling, row)
		spName, limName := ScalingMetrics(k)
		rep.Metrics = append(rep.Metrics,
			Result{Metric: spName, Value: row.Splitplane, Unit: "pps", Baseline: limName, BaselineValue: row.Limit},
			Result{Metric: limName, Value: row.Limit, Unit: "pps"})
	}
	return nil
}
