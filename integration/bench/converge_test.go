package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestConverge(t *testing.T) {
	bin := benchBinary(t, "bird", "nsenter", "ip")
	requireFRR(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	results, err := Converge(ctx, ConvergeOptions{
		Routes: 20_000, Binary: bin, Dir: t.TempDir(), Settle: 500 * time.Millisecond, Progress: &progress, TwoProviders: true,
	})
	t.Log(progress.String())
	noNamespacesOf(t, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	conv, bird, ceRSS, birdRSS := ConvergeMetrics(20_000)
	if conv != "converge_20k_s" {
		t.Errorf("metric name %q for 20k routes", conv)
	}
	gConv, gRSS := GoBGPMetrics(20_000)
	vsFRR, frrKernel, ceVsFRR, frrRSS := FRRMetrics(20_000)
	over := CEOverGoBGPMetric(20_000)
	twoConv, twoRSS := TwoProvidersMetrics(20_000)
	if vsFRR != "converge_20k_vs_frr_s" || frrKernel != "frr_kernel_20k_s" || over != "ce_rss_over_gobgp_mb_20k" || twoConv != "converge_2x20k_s" || twoRSS != "ce_rss_mb_2x20k" {
		t.Errorf("metric names for 20k routes: %s %s %s %s %s", vsFRR, frrKernel, over, twoConv, twoRSS)
	}
	want := map[string][2]string{conv: {"s", bird}, ceRSS: {"MB", birdRSS}, gConv: {"s", bird}, gRSS: {"MB", birdRSS},
		vsFRR: {"s", frrKernel}, ceVsFRR: {"MB", frrRSS}, over: {"MB", gRSS}, twoConv: {"s", conv}, twoRSS: {"MB", ceRSS}}
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Metric] = r
		w, ok := want[r.Metric]
		if !ok {
			t.Errorf("unexpected metric %q", r.Metric)
			continue
		}
		delete(want, r.Metric)
		if r.Unit != w[0] || r.Baseline != w[1] {
			t.Errorf("%s: unit %q baseline %q, want %q and %q", r.Metric, r.Unit, r.Baseline, w[0], w[1])
		}
		// The CE less GoBGP alone may be anything finite; every other
		// figure is a time or a memory.
		if r.Metric != over && !positive(r.Value) || !positive(r.BaselineValue) {
			t.Errorf("%s: value %v, baseline value %v: want both positive and finite", r.Metric, r.Value, r.BaselineValue)
		}
	}
	for m := range want {
		t.Errorf("metric %s missing", m)
	}
	// The same splitplane round against both baselines; the difference is
	// the difference.
	if a, b := byName[conv], byName[vsFRR]; a.Value != b.Value {
		t.Errorf("%s %v and %s %v: the same round, want the same time", conv, a.Value, vsFRR, b.Value)
	}
	if a, g, o := byName[ceRSS], byName[gRSS], byName[over]; math.Abs(a.Value-g.Value-o.Value) > 1e-9 || o.BaselineValue != g.Value {
		t.Errorf("%s %v, %s %v, %s %v (baseline %v): want the difference", ceRSS, a.Value, gRSS, g.Value, over, o.Value, o.BaselineValue)
	}
	// FRR's round counted every route into its kernel table (it fails
	// otherwise) and says how long it took.
	for _, want := range []string{"FRR (bgpd, zebra) into the kernel 20000 routes in", "two providers, 2x20000 paths in"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not say %q", want)
		}
	}
	if a, b, c, d := ConvergeMetrics(1_000_000); a != MetricConverge1M || b != MetricBIRDKernel1M || c != MetricCERSS1M || d != MetricBIRDRSS1M {
		t.Errorf("metric names for 1M routes: %s %s %s %s", a, b, c, d)
	}
	a, b, _, _ := FRRMetrics(1_000_000)
	c, d := TwoProvidersMetrics(1_000_000)
	if a != MetricVsFRR1M || b != MetricFRRKernel1M || CEOverGoBGPMetric(1_000_000) != MetricCEOverGoBGP1M || c != MetricConverge2x1M || d != MetricCERSS2x1M {
		t.Errorf("metric names for 1M routes: %s %s %s %s %s", a, b, CEOverGoBGPMetric(1_000_000), c, d)
	}
}

// requireFRR skips unless Debian's frr package (bgpd, zebra, vtysh) is
// installed: FRR is one of the convergence benchmark's baselines.
func requireFRR(t *testing.T) {
	t.Helper()
	if err := checkFRR(); err != nil {
		t.Skipf("needs FRR as a baseline: %v", err)
	}
}

// A convergence that never reaches every route must fail the benchmark with
// ErrIncomplete, not produce a figure: here the sender holds back ten routes,
// so the FE can never get all of them.
func TestConvergeIncomplete(t *testing.T) {
	bin := benchBinary(t, "bird", "nsenter", "ip")
	requireFRR(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	results, err := Converge(ctx, ConvergeOptions{
		Routes: 5_000, Binary: bin, Dir: t.TempDir(), Stall: 3 * time.Second, withhold: 10,
	})
	noNamespacesOf(t, os.Getpid())
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, %v; want an error wrapping ErrIncomplete", results, err)
	}
	if !strings.Contains(err.Error(), "4990 of 5000 routes programmed in the FE") {
		t.Errorf("error does not say how far the FE got: %v", err)
	}
	t.Logf("failed as it should after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// procFaults reads this process's page faults, which grow as it touches
// fresh memory.
func TestProcFaults(t *testing.T) {
	before, huge, err := procFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before == 0 || huge < 0 {
		t.Fatalf("faults %d, huge pages %.1f MB", before, huge)
	}
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	after, _, err := procFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// 16,384 pages of 4 KiB, or 32 huge pages where the kernel gives them.
	if after < before+32 {
		t.Fatalf("touching 64 MiB took the page faults from %d to %d", before, after)
	}
	if _, _, err := procFaults(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
