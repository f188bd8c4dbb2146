//go:build linux

package fibbench

import (
	"context"
	"testing"
)

// TestFIBEdge runs the edge-table figures at 100k routes: every figure is
// there and positive, and the range table reads less memory than DIR-24-8.
func TestFIBEdge(t *testing.T) {
	needRoot(t)
	figs, err := FIBEdge(context.Background(), 100_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	lookup, zipf, tbl, tblZipf, bytes, tblBytes, install := EdgeMetrics(100_000)
	got := map[string]Figure{}
	for _, f := range figs {
		t.Logf("%s = %.4g %s (baseline %s %.4g)", f.Metric, f.Value, f.Unit, f.Baseline, f.BaselineValue)
		got[f.Metric] = f
	}
	for _, m := range []string{lookup, zipf, tbl, tblZipf, bytes, install} {
		if got[m].Value <= 0 {
			t.Errorf("%s missing or not positive: %+v", m, got[m])
		}
	}
	if b := got[bytes]; b.Baseline != tblBytes || b.Value >= b.BaselineValue {
		t.Errorf("%s %v against %s %v: want a baseline of DIR-24-8 above it", bytes, b.Value, b.Baseline, b.BaselineValue)
	}
	if lookup != "fib_lookup_ns_100k_edge" || zipf != "fib_lookup_ns_100k_edge_zipf" || bytes != "fib_bytes_100k_edge" {
		t.Errorf("names %s %s %s", lookup, zipf, bytes)
	}
}
