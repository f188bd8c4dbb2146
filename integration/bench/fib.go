package bench

import (
	"context"
	"slices"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
)

// FIBSizes are the table sizes `splitplane bench fib` measures lookups at.
func FIBSizes() []int { return []int{1_000, 100_000, 1_000_000} }

// FIB6Sizes are the IPv6 table sizes `splitplane bench fib` measures
// lookups at (random IPv6 tables of 1M routes need about 2.4 GB).
func FIB6Sizes() []int { return []int{1_000, 100_000} }

// FIB measures the XDP datapath's FIBs: lookup cost with random destinations
// at each size (IPv4 DIR-24-8 at sizes, the IPv6 stride table at sizes6,
// each against the kernel's LPM trie at the largest) and the install rate
// of the largest IPv4 table, and the range table with an edge-shaped table
// of the largest size (fibbench.FIBEdge), and the stride table with a
// full-IPv6-table shape (fibbench.FIB6Full). It needs root (it loads BPF).
func FIB(ctx context.Context, sizes, sizes6 []int, rounds int) ([]Result, error) {
	figs, err := fibbench.FIB(ctx, sizes, rounds)
	if err != nil {
		return nil, err
	}
	figs6, err := fibbench.FIB6(ctx, sizes6, rounds)
	if err != nil {
		return nil, err
	}
	figs = append(figs, figs6...)
	if len(sizes6) > 0 {
		full, err := fibbench.FIB6Full(ctx, fibbench.Full6Routes, rounds)
		if err != nil {
			return nil, err
		}
		figs = append(figs, full...)
	}
	if len(sizes) > 0 {
		edge, err := fibbench.FIBEdge(ctx, slices.Max(sizes), rounds)
		if err != nil {
			return nil, err
		}
		figs = append(figs, edge...)
	}
	out := make([]Result, len(figs))
	for i, f := range figs {
		out[i] = Result{Metric: f.Metric, Value: f.Value, Unit: f.Unit, Baseline: f.Baseline, BaselineValue: f.BaselineValue}
	}
	return out, nil
}
