package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestForward runs a short forwarding benchmark through real namespaces:
// every figure must be there and positive, the XDP router must beat the
// kernel, and no namespace may be left behind.
func TestForward(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and attaches XDP programs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const routes = 10_000
	var progress strings.Builder
	results, err := Forward(ctx, ForwardOptions{Routes: routes, Rounds: 1, Duration: time.Second, Progress: &progress})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	fwdName, kernName, vsName := ForwardMetrics(routes)
	if fwdName != "forward_pps_10k" || kernName != "kernel_forward_pps_10k" || vsName != "forward_pps_10k_vs_limit" {
		t.Errorf("metric names %q, %q, %q", fwdName, kernName, vsName)
	}
	got := make(map[string]Result)
	for _, r := range results {
		t.Logf("%-26s %14.3f %-6s %s %.0f", r.Metric, r.Value, r.Unit, r.Baseline, r.BaselineValue)
		if _, dup := got[r.Metric]; dup {
			t.Errorf("metric %s twice", r.Metric)
		}
		got[r.Metric] = r
		if !positive(r.Value) {
			t.Errorf("%s = %v, want > 0", r.Metric, r.Value)
		}
	}
	want := map[string]Result{
		fwdName:                            {Unit: "pps", Baseline: kernName},
		kernName:                           {Unit: "pps"},
		MetricRedirectLimitPPS:             {Unit: "pps"},
		vsName:                             {Unit: "ratio", Baseline: MetricRedirectLimitPPS},
		"lookup_redirect_pps_10k":          {Unit: "pps", Baseline: MetricRedirectLimitPPS},
		"lookup_redirect_pps_10k_vs_limit": {Unit: "ratio", Baseline: MetricRedirectLimitPPS},
		"router_vs_lookup_10k":             {Unit: "pps", Baseline: "lookup_redirect_pps_10k"},
		"forward_pps_10k_edge":             {Unit: "pps", Baseline: MetricRedirectLimitPPS},
		"forward_pps_10k_edge_zipf":        {Unit: "pps", Baseline: MetricRedirectLimitPPS},
		MetricForward6PPSFull:              {Unit: "pps", Baseline: MetricRedirect6LimitPPS},
		MetricRedirect6LimitPPS:            {Unit: "pps", Baseline: MetricRedirectLimitPPS},
	}
	for name, w := range want {
		r, ok := got[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if r.Unit != w.Unit || r.Baseline != w.Baseline {
			t.Errorf("%s: unit %q baseline %q, want %q and %q", name, r.Unit, r.Baseline, w.Unit, w.Baseline)
		}
		if w.Baseline != "" && !positive(r.BaselineValue) {
			t.Errorf("%s: baseline value %v, want > 0", name, r.BaselineValue)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d metrics, want %d", len(got), len(want))
	}
	fwd, kern := got[fwdName], got[kernName]
	if fwd.Value <= kern.Value {
		t.Errorf("XDP router %.0f pps does not beat the kernel's %.0f pps", fwd.Value, kern.Value)
	}
	if fwd.BaselineValue != kern.Value {
		t.Errorf("%s baseline value %v, want %s = %v", fwdName, fwd.BaselineValue, kernName, kern.Value)
	}

	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("spb-%d-", os.Getpid())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

// TestForwardOptions checks that bad options fail before anything is set up.
func TestForwardOptions(t *testing.T) {
	for _, o := range []ForwardOptions{
		{Routes: -1},
		{Routes: 3_000_000},
		{Duration: 500 * time.Millisecond},
		{Rounds: -2},
	} {
		if _, err := Forward(context.Background(), o); err == nil {
			t.Errorf("Forward(%+v) succeeded", o)
		}
	}
}
