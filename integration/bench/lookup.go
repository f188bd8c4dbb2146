package bench

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/internal/routegen"
)

// kernelTableBase numbers the kernel routing tables of the lookup figures'
// sizes: the i-th size's routes go into table kernelTableBase+i (the big
// table's are in main already).
const kernelTableBase = 1001

// rtTableMain is RT_TABLE_MAIN.
const rtTableMain = 254

// lookup measures the per-packet cost of a forwarding program at every
// lookup size, BPF_PROG_TEST_RUN with many repeats (the kernel's time for
// all of them, divided by their number), every table holding a default route
// as well and the same destinations at every size, uniformly random over
// public space (fibbench.Destinations), so that only the table changes:
//   - splitplane's xdp_router with its DIR-24-8 FIB, and the same program
//     with the kernel's LPM trie map (fibbench.FIB, in this process's
//     namespace, its own datapath; it also gives both with destinations
//     inside the table, passed on as they are);
//   - the kernel FIB: probe's xdp_kernel_fib, the same work with the lookup
//     done by bpf_fib_lookup in the router namespace's FIB, in a table that
//     holds the same routes, the frame arriving on the router's ingress
//     port.
//
// The three take turns at every size within each round.
func (s *fwdSuite) lookup(ctx context.Context) (err error) {
	o := s.opts
	t := s.t
	tables := make([]int, len(o.LookupSizes))
	for i, n := range o.LookupSizes {
		if n == o.BigRoutes {
			tables[i] = rtTableMain
		} else {
			prefixes := routegen.Generate(n, o.Seed)
			start := time.Now()
			tables[i] = kernelTableBase + i
			if err := t.installKernelTable(ctx, prefixes, tables[i]); err != nil {
				return fmt.Errorf("kernel table of %d routes: %w", n, err)
			}
			s.progress("lookup: %d routes into kernel table %d in %.1fs", n, tables[i], time.Since(start).Seconds())
		}
		if err := t.defaultRoute(ctx, tables[i], true); err != nil {
			return err
		}
		if tables[i] == rtTableMain { // the forwarding sections run without it
			defer func() {
				if derr := t.defaultRoute(context.Background(), rtTableMain, false); err == nil {
					err = derr
				}
			}()
		}
	}
	dsts := fibbench.Destinations(gen.MaxDsts, o.Seed)
	repeat := uint32(1 << 20)
	if o.Quick {
		repeat = 1 << 16
	}
	var fib, trie, kern [][]float64 = make([][]float64, len(tables)), make([][]float64, len(tables)), make([][]float64, len(tables))
	var install []float64
	inside := map[string][]float64{} // by metric, in the order first seen
	var insideNames []string
	for r := range o.Rounds {
		var line []string
		for i, n := range o.LookupSizes {
			if err := ctx.Err(); err != nil {
				return err
			}
			figs, err := fibbench.FIB(ctx, []int{n}, 1)
			if err != nil {
				return fmt.Errorf("%d routes, round %d: %w", n, r+1, err)
			}
			fibName, trieName, _ := LookupMetrics(n)
			for _, f := range figs {
				switch f.Metric {
				case fibName:
					fib[i] = append(fib[i], f.Value)
				case trieName:
					trie[i] = append(trie[i], f.Value)
				case fibbench.MetricFIBInstallPerSecond:
					if n == o.LookupSizes[len(o.LookupSizes)-1] {
						install = append(install, f.Value)
					}
				default:
					if strings.HasPrefix(f.Metric, fibbench.MetricFIBLookupInsidePrefix) || strings.HasPrefix(f.Metric, fibbench.MetricTrieLookupInsidePrefix) {
						if inside[f.Metric] == nil {
							insideNames = append(insideNames, f.Metric)
						}
						inside[f.Metric] = append(inside[f.Metric], f.Value)
					}
				}
			}
			if len(fib[i]) != r+1 || len(trie[i]) != r+1 {
				return fmt.Errorf("%d routes: bench fib gave %v, want %s and %s", n, figs, fibName, trieName)
			}
			ns, err := s.kernelLookup(ctx, tables[i], dsts, repeat)
			if err != nil {
				return fmt.Errorf("kernel FIB, %d routes, round %d: %w", n, r+1, err)
			}
			kern[i] = append(kern[i], ns)
			line = append(line, fmt.Sprintf("%s: %.0f / %.0f / %.0f ns", fibbench.SizeLabel(n), fib[i][r], trie[i][r], ns))
		}
		s.progress("lookup (FIB / LPM trie / kernel FIB), round %d/%d: %s", r+1, o.Rounds, strings.Join(line, ", "))
	}
	for i, n := range o.LookupSizes {
		row := LookupRow{Routes: n, FIB: median(fib[i]), Trie: median(trie[i]), Kernel: median(kern[i])}
		s.rep.Lookup = append(s.rep.Lookup, row)
		fibName, trieName, kernName := LookupMetrics(n)
		s.rep.Metrics = append(s.rep.Metrics,
			Result{Metric: fibName, Value: row.FIB, Unit: "ns", Baseline: trieName, BaselineValue: row.Trie},
			Result{Metric: trieName, Value: row.Trie, Unit: "ns"},
			Result{Metric: kernName, Value: row.Kernel, Unit: "ns"})
	}
	for _, m := range insideNames {
		s.rep.Metrics = append(s.rep.Metrics, Result{Metric: m, Value: median(inside[m]), Unit: "ns"})
	}
	s.rep.Metrics = append(s.rep.Metrics, Result{Metric: fibbench.MetricFIBInstallPerSecond, Value: median(install), Unit: "routes/s"})
	// The range table with the edge-shaped table of the largest size.
	n := slices.Max(o.LookupSizes)
	figs, err := fibbench.FIBEdge(ctx, n, o.Rounds)
	if err != nil {
		return fmt.Errorf("edge table, %d routes: %w", n, err)
	}
	// The IPv6 stride table with a full-shaped IPv6 table, against the
	// kernel's LPM trie.
	figs6, err := fibbench.FIB6Full(ctx, fibbench.Full6Routes, o.Rounds)
	if err != nil {
		return fmt.Errorf("full IPv6 table: %w", err)
	}
	for _, f := range append(figs, figs6...) {
		s.rep.Metrics = append(s.rep.Metrics, Result{Metric: f.Metric, Value: f.Value, Unit: f.Unit, Baseline: f.Baseline, BaselineValue: f.BaselineValue})
	}
	return nil
}

// kernelLookup runs xdp_kernel_fib repeat times over dsts with table's
// routes, in the router namespace with forwarding on (bpf_fib_lookup
// refuses to forward otherwise), and returns the kernel's time per run.
// Every lookup must have found a route and a resolved neighbour.
func (s *fwdSuite) kernelLookup(ctx context.Context, table int, dsts []netip.Addr, repeat uint32) (ns float64, err error) {
	t := s.t
	if err := t.setIPForward(ctx, true); err != nil {
		return 0, err
	}
	defer func() {
		if ferr := t.setIPForward(context.Background(), false); err == nil {
			err = ferr
		}
	}()
	if err := s.p.SetKernelFIB(uint32(table), dsts); err != nil {
		return 0, err
	}
	frame := gen.Frame(genHeader(), dsts[0], gen.FrameLen-gen.HeaderLen)
	err = t.in(roleRtr, func() error {
		ret, d, err := testRunXDP(s.p.KernelFIB(), frame, t.ifindex[roleRtrIn], repeat)
		if err != nil {
			return err
		}
		rcs, err := s.p.KernelFIBResults()
		if err != nil {
			return err
		}
		if ret != xdpRedirect || rcs[0] != uint64(repeat) {
			return fmt.Errorf("returned %d, %d of %d lookups forwarded (results by code: %v): %w", ret, rcs[0], repeat, rcs, ErrIncomplete)
		}
		ns = float64(d.Nanoseconds())
		return nil
	})
	return ns, err
}
