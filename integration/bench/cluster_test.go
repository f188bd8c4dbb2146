package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCluster runs a short cluster benchmark through real namespaces: every
// figure present once with its unit, the rates positive, each pair of VLB
// shares summing to 100 with the spill and the link state they were taken
// with, nothing lost in steady state, and no namespace left behind.
func TestCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and attaches XDP programs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	results, err := Cluster(ctx, ClusterOptions{Rounds: 1, Duration: time.Second, SpillPermille: 250, VLBFrames: 1 << 18, FlowRate: 50_000, Progress: &progress})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]Result)
	var names []string
	for _, r := range results {
		t.Logf("%-32s %14.4f %-8s %s %.0f", r.Metric, r.Value, r.Unit, r.Baseline, r.BaselineValue)
		if _, dup := got[r.Metric]; dup {
			t.Errorf("metric %s twice", r.Metric)
		}
		got[r.Metric] = r
		names = append(names, r.Metric)
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0 {
			t.Errorf("%s = %v", r.Metric, r.Value)
		}
	}
	if fmt.Sprint(names) != fmt.Sprint(ClusterMetrics()) {
		t.Errorf("metrics %v, want %v", names, ClusterMetrics())
	}
	units := map[string]string{
		MetricClusterCrossFEPPS: "pps", MetricClusterLocalPPS: "pps", MetricClusterCrossVsLocal: "ratio",
		MetricClusterVLBShareFE1: "percent", MetricClusterVLBShareFE2: "percent",
		MetricClusterVLBLinkDownShareFE1: "percent", MetricClusterVLBLinkDownShareFE2: "percent",
		MetricClusterReorderPct: "percent", MetricClusterLostPackets: "packets",
		MetricClusterReorderFailoverPct: "percent", MetricClusterLostFailover: "packets",
		MetricClusterReorderLoadedPct: "percent", MetricClusterLostLoaded: "packets",
		MetricClusterIngressNS: "ns", MetricClusterEgressNS: "ns", MetricClusterLocalNS: "ns", MetricClusterPerServer: "ratio",
	}
	for name, unit := range units {
		if got[name].Unit != unit {
			t.Errorf("%s: unit %q, want %q", name, got[name].Unit, unit)
		}
	}
	cross, local := got[MetricClusterCrossFEPPS], got[MetricClusterLocalPPS]
	if !positive(cross.Value) || !positive(local.Value) {
		t.Errorf("cross %v pps, local %v pps: want both > 0", cross.Value, local.Value)
	}
	if cross.Baseline != MetricClusterLocalPPS || cross.BaselineValue != local.Value {
		t.Errorf("cross baseline %s %v, want %s %v", cross.Baseline, cross.BaselineValue, MetricClusterLocalPPS, local.Value)
	}
	if r := got[MetricClusterCrossVsLocal].Value; math.Abs(r-cross.Value/local.Value) > 1e-9 {
		t.Errorf("ratio %v, want %v", r, cross.Value/local.Value)
	}
	// The programs' times: measured (a program runs in tens of ns at
	// least), and the per-server ratio made of them.
	in, eg, loc := got[MetricClusterIngressNS].Value, got[MetricClusterEgressNS].Value, got[MetricClusterLocalNS].Value
	if in < 10 || eg < 10 || loc < 10 {
		t.Errorf("program times: ingress %v ns, egress %v ns, local %v ns; want each measured", in, eg, loc)
	}
	if r := got[MetricClusterPerServer].Value; math.Abs(r-loc/max(in, eg)) > 1e-9 {
		t.Errorf("per-server ratio %v, want local / max(ingress, egress) = %v", r, loc/max(in, eg))
	}
	// Spill 250 is 256/1024 of the hash range: about a quarter of 65,536
	// flows through FE 2.
	for _, c := range []struct {
		fe1, fe2 string
		want2    float64
		within   float64
	}{
		{MetricClusterVLBShareFE1, MetricClusterVLBShareFE2, 25, 3},
		{MetricClusterVLBLinkDownShareFE1, MetricClusterVLBLinkDownShareFE2, 100, 0.5},
	} {
		s1, s2 := got[c.fe1].Value, got[c.fe2].Value
		if math.Abs(s1+s2-100) > 0.5 {
			t.Errorf("%s %.2f + %s %.2f = %.2f, want 100", c.fe1, s1, c.fe2, s2, s1+s2)
		}
		if math.Abs(s2-c.want2) > c.within {
			t.Errorf("%s = %.2f, want %.0f ± %.1f", c.fe2, s2, c.want2, c.within)
		}
	}
	if n := got[MetricClusterLostPackets].Value; n != 0 {
		t.Errorf("%s = %v in steady state, want 0", MetricClusterLostPackets, n)
	}

	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("spc-%d-", os.Getpid())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

// TestReorderCounter feeds crafted sequences: a packet is out of order when
// a higher number came before it, a repeat is a duplicate, a number past
// what was sent is foreign, and what never came is lost.
func TestReorderCounter(t *testing.T) {
	for _, c := range []struct {
		name                    string
		sent                    uint64
		seq                     []uint64
		reordered, dup, foreign uint64
		received, lost          uint64
		pct                     float64
	}{
		{"in order", 5, []uint64{0, 1, 2, 3, 4}, 0, 0, 0, 5, 0, 0},
		{"gap is loss, not reordering", 5, []uint64{0, 1, 3, 4}, 0, 0, 0, 4, 1, 0},
		{"one late", 5, []uint64{0, 2, 3, 1, 4}, 1, 0, 0, 5, 0, 20},
		{"swapped pairs", 4, []uint64{1, 0, 3, 2}, 2, 0, 0, 4, 0, 50},
		{"late after a jump", 6, []uint64{0, 5, 1, 2, 3, 4}, 4, 0, 0, 6, 0, 100 * 4.0 / 6},
		{"duplicates", 3, []uint64{0, 1, 1, 0, 2}, 0, 2, 0, 3, 0, 0},
		{"foreign", 2, []uint64{0, 7, 1}, 0, 0, 1, 2, 0, 0},
		{"first number late too", 3, []uint64{2, 0, 1}, 2, 0, 0, 3, 0, 100 * 2.0 / 3},
		{"nothing", 3, nil, 0, 0, 0, 0, 3, 0},
		{"bitset word boundary", 130, seqRange(0, 130, 64), 1, 0, 0, 130, 0, 100.0 / 130},
	} {
		r := newReorderCounter(c.sent)
		for _, s := range c.seq {
			r.add(s)
		}
		if r.Reordered != c.reordered || r.Duplicates != c.dup || r.Foreign != c.foreign || r.Received != c.received || r.Lost() != c.lost {
			t.Errorf("%s: reordered %d dup %d foreign %d received %d lost %d, want %d %d %d %d %d", c.name,
				r.Reordered, r.Duplicates, r.Foreign, r.Received, r.Lost(), c.reordered, c.dup, c.foreign, c.received, c.lost)
		}
		if math.Abs(r.ReorderedPct()-c.pct) > 1e-9 {
			t.Errorf("%s: %.4f%% reordered, want %.4f%%", c.name, r.ReorderedPct(), c.pct)
		}
	}
}

// seqRange returns from..to-1 in order with late moved after late+1.
func seqRange(from, to, late uint64) []uint64 {
	var s []uint64
	for i := from; i < to; i++ {
		if i == late {
			continue
		}
		s = append(s, i)
		if i == late+1 {
			s = append(s, late)
		}
	}
	return s
}

// TestSeqMatch: the sink takes only the flow's packets.
func TestSeqMatch(t *testing.T) {
	want := make([]byte, 30)
	want[0], want[1], want[2+9] = 0x08, 0x00, 17
	copy(want[2+12:], []byte{10, 202, 0, 2, 10, 213, 0, 2})
	copy(want[22:], []byte{0x9c, 0x41, 0, 10})
	if !seqMatch(want, want) {
		t.Fatal("the flow's own header does not match")
	}
	same := append([]byte(nil), want...)
	same[2+8] = 12 // TTL: routers change it
	same[2+10] = 0xff
	if !seqMatch(same, want) {
		t.Error("a header differing in TTL and checksum does not match")
	}
	for _, off := range []int{0, 1, 2 + 9, 2 + 12, 2 + 19, 22, 25} {
		other := append([]byte(nil), want...)
		other[off] ^= 1
		if seqMatch(other, want) {
			t.Errorf("a header differing at byte %d matches", off)
		}
	}
}

// TestClusterOptions checks that bad options fail before anything is set
// up.
func TestClusterOptions(t *testing.T) {
	for _, o := range []ClusterOptions{
		{Duration: 100 * time.Millisecond},
		{Rounds: -1},
		{SpillPermille: 1001},
		{SpillPermille: -5},
		{FlowRate: 10},
		{FlowRate: 5_000_000},
	} {
		if _, err := Cluster(context.Background(), o); err == nil {
			t.Errorf("Cluster(%+v) succeeded", o)
		}
	}
}
