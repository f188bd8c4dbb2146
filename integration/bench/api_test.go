package bench

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestAPI(t *testing.T) {
	bin := benchBinary(t, "nsenter", "ip", "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress strings.Builder
	start := time.Now()
	results, err := API(ctx, APIOptions{
		Routes: 20_000, Adds: 20, Rounds: 1, Binary: bin, Dir: t.TempDir(), Progress: &progress,
	})
	t.Log(progress.String())
	noNamespacesOf(t, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
	want := map[string]struct{ unit, baseline string }{
		MetricAPIBulkRoutesPerSecond:     {"routes/s", "fib_install_routes_per_s"},
		MetricAPIBulkTextRoutesPerSecond: {"routes/s", "fib_install_routes_per_s"},
		MetricAPIBulkColdRoutesPerSecond: {"routes/s", "fib_install_routes_per_s"},
		MetricAPIBulkPageFaults:          {"faults", MetricAPIBulkColdPageFaults},
		MetricAPIBulkColdPageFaults:      {"faults", ""},
		MetricAPIAddToForwardP50:         {"ms", ""},
		MetricAPIAddToForwardP99:         {"ms", ""},
	}
	byName := map[string]Result{}
	for _, r := range results {
		w, ok := want[r.Metric]
		if !ok {
			t.Errorf("unexpected metric %q", r.Metric)
			continue
		}
		delete(want, r.Metric)
		byName[r.Metric] = r
		if r.Unit != w.unit || r.Baseline != w.baseline {
			t.Errorf("%s: unit %q baseline %q, want %q and %q", r.Metric, r.Unit, r.Baseline, w.unit, w.baseline)
		}
		if w.unit == "faults" { // a warm load may fault no page at all
			if r.Value < 0 || r.BaselineValue < 0 {
				t.Errorf("%s: value %v, baseline value %v: want at least 0", r.Metric, r.Value, r.BaselineValue)
			}
			continue
		}
		if !positive(r.Value) || (w.baseline != "" && !positive(r.BaselineValue)) {
			t.Errorf("%s: value %v, baseline value %v: want positive and finite", r.Metric, r.Value, r.BaselineValue)
		}
	}
	for m := range want {
		t.Errorf("metric %s missing", m)
	}
	// The second load reuses the memory the first one faulted in.
	if warm, cold := byName[MetricAPIBulkPageFaults].Value, byName[MetricAPIBulkColdPageFaults].Value; warm >= cold {
		t.Errorf("page faults of the second load %v, of the first %v: want fewer", warm, cold)
	}
	if p50, p99 := byName[MetricAPIAddToForwardP50].Value, byName[MetricAPIAddToForwardP99].Value; p50 > p99 {
		t.Errorf("p50 %vms above p99 %vms", p50, p99)
	}
}

// A bulk transfer the FE can never complete must fail the benchmark with
// ErrIncomplete, not produce a figure: here ten routes have a next hop no
// port of the FE reaches, so the CE never installs them.
func TestAPIIncomplete(t *testing.T) {
	bin := benchBinary(t, "nsenter", "ip", "ethtool")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := API(ctx, APIOptions{
		Routes: 5_000, Adds: 1, Rounds: 1, Binary: bin, Dir: t.TempDir(), Stall: 3 * time.Second, unresolved: 10,
	})
	noNamespacesOf(t, os.Getpid())
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, %v; want an error wrapping ErrIncomplete", results, err)
	}
	if !strings.Contains(err.Error(), "4990 of 5000 routes programmed in the FE") {
		t.Errorf("error does not say how far the FE got: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}} {
		if got := percentile(d, c.q); got != c.want {
			t.Errorf("percentile %v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("percentile of one: %v", got)
	}
}

// The generator's frames must carry a valid IPv4 header checksum, or the
// router drops them before any lookup.
func TestUDPFrameChecksum(t *testing.T) {
	f := udpFrame()
	setDestination(f, 0xc6120105) // 198.18.1.5
	var sum uint32
	for i := 14; i < 34; i += 2 {
		sum += uint32(f[i])<<8 | uint32(f[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv4 header % x does not verify (sum %#x)", f[14:34], sum)
	}
}
