package bench

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestForces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	results, err := Forces(ctx, ForcesOptions{Routes: 20_000, Rounds: 1, IdleSamples: 10, Timeout: 30 * time.Second, Progress: &progress})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		MetricForcesCodec:         "ns",
		MetricForcesTransfer:      "entries/s",
		MetricForcesUpdate:        "entries/s",
		MetricForcesHeartbeatLoad: "ms",
	}
	baselines := map[string]bool{MetricForcesCodec: true, MetricForcesHeartbeatLoad: true}
	for _, r := range results {
		unit, ok := want[r.Metric]
		if !ok {
			t.Errorf("unexpected metric %q", r.Metric)
			continue
		}
		delete(want, r.Metric)
		if r.Unit != unit {
			t.Errorf("%s: unit %q, want %q", r.Metric, r.Unit, unit)
		}
		if !positive(r.Value) {
			t.Errorf("%s: value %v, want positive and finite", r.Metric, r.Value)
		}
		if baselines[r.Metric] != (r.Baseline != "") {
			t.Errorf("%s: baseline %q", r.Metric, r.Baseline)
		}
		if r.Baseline != "" && !positive(r.BaselineValue) {
			t.Errorf("%s: baseline value %v, want positive and finite", r.Metric, r.BaselineValue)
		}
	}
	for m := range want {
		t.Errorf("metric %s missing", m)
	}
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// An FE that does not end up with every route must fail the benchmark, not
// produce a figure.
func TestForcesIncomplete(t *testing.T) {
	// The first prefix written can never be installed (the FE retries a
	// refused batch route by route, so it must fail every time).
	var once sync.Once
	var bad netip.Prefix
	fail := func(p netip.Prefix) error {
		once.Do(func() { bad = p })
		if p == bad {
			return errors.New("map full")
		}
		return nil
	}
	_, err := Forces(context.Background(), ForcesOptions{Routes: 1000, Rounds: 1, IdleSamples: 1, setRouteErr: fail})
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("one route write failed: err = %v, want ErrIncomplete", err)
	}
	t.Log(err)

	// The full sync cannot be done at once.
	_, err = Forces(context.Background(), ForcesOptions{Routes: 1000, Rounds: 1, IdleSamples: 1, Timeout: time.Nanosecond})
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("no time to wait: err = %v, want ErrIncomplete", err)
	}
	t.Log(err)
}

func TestForcesOptions(t *testing.T) {
	for _, o := range []ForcesOptions{{Routes: -1}, {Rounds: -1}, {IdleSamples: 300}} {
		if _, err := Forces(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
