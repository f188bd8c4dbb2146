package bench

import (
	"context"

	"github.com/splitplane/splitplane/fe/datapath"
)

// FIBSizes are the table sizes `splitplane bench fib` measures lookups at.
var FIBSizes = []int{1_000, 100_000, 1_000_000}

// FIB measures the XDP datapath's FIB: lookup cost with random destinations
// at each size (DIR-24-8, against the kernel's LPM trie at the largest) and
// the install rate of the largest table. It needs root (it loads BPF).
func FIB(ctx context.Context, sizes []int, rounds int) ([]Result, error) {
	figs, err := datapath.BenchFIB(ctx, sizes, rounds)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(figs))
	for i, f := range figs {
		out[i] = Result{Metric: f.Metric, Value: f.Value, Unit: f.Unit, Baseline: f.Baseline, BaselineValue: f.BaselineValue}
	}
	return out, nil
}
