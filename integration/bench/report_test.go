package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
)

// sampleReport is a report of a full run with made-up figures.
func sampleReport(t *testing.T) *Report {
	t.Helper()
	o := AllOptions{Binary: "splitplane"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Command: "splitplane bench all", Started: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC), Elapsed: 600,
		Machine: Machine{CPUs: 2, Kernel: "6.18.0", TransparentHugePages: "madvise", PageFaultUs: 4.87}, Settings: settings(&o),
		Skipped: map[string]string{SectionScaling: "two CPUs"}}
	add := func(name string, v float64, unit, base string, bv float64) {
		rep.Metrics = append(rep.Metrics, Result{Metric: name, Value: v, Unit: unit, Baseline: base, BaselineValue: bv})
	}
	for i, n := range []int{o.SmallRoutes, o.BigRoutes} {
		row := ForwardRow{Routes: n, Splitplane: 5e6 - float64(i)*1e6, Kernel: 1e6, Limit: 7e6}
		rep.Forward = append(rep.Forward, row)
		fwd, kern, vs := ForwardMetrics(n)
		add(fwd, row.Splitplane, "pps", kern, row.Kernel)
		add(kern, row.Kernel, "pps", "", 0)
		add(vs, row.Splitplane/7e6, "ratio", MetricRedirectLimitPPS, 7e6)
	}
	add(MetricRedirectLimitPPS, 7e6, "pps", "", 0)
	for _, p := range o.Payloads {
		row := PayloadRow{Payload: p, Frame: max(60, 42+p), Splitplane: 4e6 - float64(p)*1e3, Kernel: 9e5 - float64(p)*100, Limit: 6e6 - float64(p)*2e3}
		rep.Payload = append(rep.Payload, row)
		pps, kpps, lpps, mbps, kmbps, lmbps := PayloadMetrics(p)
		add(pps, row.Splitplane, "pps", kpps, row.Kernel)
		add(kpps, row.Kernel, "pps", "", 0)
		add(lpps, row.Limit, "pps", "", 0)
		if p > 0 {
			add(mbps, row.Mbps(row.Splitplane), "Mbps", kmbps, row.Mbps(row.Kernel))
			add(kmbps, row.Mbps(row.Kernel), "Mbps", "", 0)
			add(lmbps, row.Mbps(row.Limit), "Mbps", "", 0)
		}
		ov := OverheadRow{Payload: p, Splitplane: Pcts{200, 300, 400, 500, 600}, Bare: Pcts{40, 45, 50, 55, 60},
			SplitplaneBatch: Pcts{60, 70, 80, 90, 100}, BareBatch: Pcts{8, 9, 10, 11, 12}}
		rep.Overhead = append(rep.Overhead, ov)
		lat := LatencyRow{Payload: p, Splitplane: Pcts{1.5, 1.7, 1.8, 2, 2.5}, Kernel: Pcts{2, 2.2, 2.4, 2.6, 3}, Bare: Pcts{1, 1.1, 1.2, 1.3, 1.5}}
		rep.Latency = append(rep.Latency, lat)
		for j, q := range Percentiles() {
			sp, bare := OverheadMetrics(q, p)
			add(sp, ov.Splitplane[j], "ns", bare, ov.Bare[j])
			add(bare, ov.Bare[j], "ns", "", 0)
			spb, bareb := OverheadBatchMetrics(q, p)
			add(spb, ov.SplitplaneBatch[j], "ns", bareb, ov.BareBatch[j])
			add(bareb, ov.BareBatch[j], "ns", "", 0)
			lsp, lk, lb := LatencyMetrics(q, p)
			add(lsp, lat.Splitplane[j], "us", lk, lat.Kernel[j])
			add(lk, lat.Kernel[j], "us", "", 0)
			add(lb, lat.Bare[j], "us", "", 0)
		}
	}
	for i, n := range o.LookupSizes {
		row := LookupRow{Routes: n, FIB: 40 + 15*float64(i), Trie: 150 + 350*float64(i), Kernel: 120 + 30*float64(i)}
		rep.Lookup = append(rep.Lookup, row)
		fib, trie, kern := LookupMetrics(n)
		add(fib, row.FIB, "ns", trie, row.Trie)
		add(trie, row.Trie, "ns", "", 0)
		add(kern, row.Kernel, "ns", "", 0)
	}
	add("fib_install_routes_per_s", 5e6, "routes/s", "", 0)
	lookup, zipf, tbl, tblZipf, bytes, tblBytes, install := fibbench.EdgeMetrics(slices.Max(o.LookupSizes))
	add(lookup, 60, "ns", tbl, 110)
	add(tbl, 110, "ns", "", 0)
	add(zipf, 45, "ns", tblZipf, 70)
	add(tblZipf, 70, "ns", "", 0)
	add(bytes, 4.7e6, "bytes", tblBytes, 72e6)
	add(install, 2.5e6, "routes/s", "", 0)
	add(fibbench.MetricFIB6LookupPrefix+"full", 660, "ns", fibbench.MetricTrie6LookupPrefix+"full", 740)
	add(fibbench.MetricTrie6LookupPrefix+"full", 740, "ns", "", 0)
	rep.Edge = &EdgeRow{Routes: o.BigRoutes, Router: 3.7e6, Lookup: 4.1e6, Limit: 7e6, Edge: 3.6e6, EdgeZipf: 4.8e6, IPv6: 1.2e6, Limit6: 6.8e6, FIBBytes: 4.7e6, DIR24_8Bytes: 72e6}
	lr, _ := LookupRedirectMetrics(o.BigRoutes)
	edge, ezipf, vsLookup := EdgeForwardMetrics(o.BigRoutes)
	add(lr, 4.1e6, "pps", MetricRedirectLimitPPS, 7e6)
	add(vsLookup, 3.7e6, "pps", lr, 4.1e6)
	add(edge, 3.6e6, "pps", MetricRedirectLimitPPS, 7e6)
	add(ezipf, 4.8e6, "pps", MetricRedirectLimitPPS, 7e6)
	add(MetricForward6PPSFull, 1.2e6, "pps", MetricRedirect6LimitPPS, 6.8e6)
	add(MetricRedirect6LimitPPS, 6.8e6, "pps", MetricRedirectLimitPPS, 7e6)
	add(MetricForcesCodec, 250, "ns", "copy of the encoded bytes", 7)
	add(MetricForcesTransfer, 1e6, "entries/s", "", 0)
	add(MetricForcesUpdate, 3e5, "entries/s", "", 0)
	add(MetricForcesHeartbeatLoad, 20, "ms", "idle", 0.2)
	add(MetricAPIBulkRoutesPerSecond, 2.5e5, "routes/s", "fib_install_routes_per_s", 3e6)
	add(MetricAPIBulkTextRoutesPerSecond, 2e5, "routes/s", "fib_install_routes_per_s", 3e6)
	add(MetricAPIBulkColdRoutesPerSecond, 2.5e5, "routes/s", "fib_install_routes_per_s", 3e6)
	add(MetricAPIBulkPageFaults, 7600, "faults", MetricAPIBulkColdPageFaults, 169000)
	add(MetricAPIBulkColdPageFaults, 169000, "faults", "", 0)
	add(MetricAPIAddToForwardP50, 1, "ms", "", 0)
	add(MetricAPIAddToForwardP99, 2.5, "ms", "", 0)
	conv, bird, ceRSS, birdRSS := ConvergeMetrics(o.ProgrammingRoutes)
	add(conv, 17, "s", bird, 6.3)
	add(ceRSS, 1400, "MB", birdRSS, 99)
	gConv, gRSS := GoBGPMetrics(o.ProgrammingRoutes)
	add(gConv, 12, "s", bird, 6.3)
	add(gRSS, 1100, "MB", birdRSS, 99)
	vsFRR, frrKernel, ceVsFRR, frrRSS := FRRMetrics(o.ProgrammingRoutes)
	add(vsFRR, 17, "s", frrKernel, 9.5)
	add(ceVsFRR, 1400, "MB", frrRSS, 450)
	add(CEOverGoBGPMetric(o.ProgrammingRoutes), 300, "MB", gRSS, 1100)
	twoConv, twoRSS := TwoProvidersMetrics(o.ProgrammingRoutes)
	add(twoConv, 30, "s", conv, 17)
	add(twoRSS, 2100, "MB", ceRSS, 1400)
	add(MetricClusterCrossFEPPS, 1.5e6, "pps", MetricClusterLocalPPS, 2.2e6)
	add(MetricClusterLocalPPS, 2.2e6, "pps", "", 0)
	add(MetricClusterCrossVsLocal, 1.5/2.2, "ratio", MetricClusterLocalPPS, 2.2e6)
	add(MetricClusterIngressNS, 120, "ns", MetricClusterLocalNS, 110)
	add(MetricClusterEgressNS, 115, "ns", MetricClusterLocalNS, 110)
	add(MetricClusterLocalNS, 110, "ns", "", 0)
	add(MetricClusterPerServer, 110.0/120, "ratio", MetricClusterLocalNS, 110)
	add(MetricClusterVLBShareFE1, 50.1, "percent", "", 0)
	add(MetricClusterVLBShareFE2, 49.9, "percent", "", 0)
	add(MetricClusterVLBLinkDownShareFE1, 0, "percent", "", 0)
	add(MetricClusterVLBLinkDownShareFE2, 100, "percent", "", 0)
	add(MetricClusterReorderPct, 0, "percent", "", 0)
	add(MetricClusterLostPackets, 0, "packets", "", 0)
	add(MetricClusterReorderFailoverPct, 0, "percent", "", 0)
	add(MetricClusterLostFailover, 0, "packets", "", 0)
	add(MetricClusterReorderLoadedPct, 0, "percent", "", 0)
	add(MetricClusterLostLoaded, 0, "packets", "", 0)
	promoteBaselines(rep)
	return rep
}

// The report of a full run holds every required figure, a table for every
// section, and a readable PNG plot for each.
func TestWriteReport(t *testing.T) {
	rep := sampleReport(t)
	req, err := RequiredMetrics(AllOptions{Binary: "splitplane"})
	if err != nil {
		t.Fatal(err)
	}
	checkRequired(t, rep.Metrics, req)

	dir := t.TempDir()
	if d := os.Getenv("BENCH_REPORT_DIR"); d != "" {
		dir = d // to look at the plots
	}
	if err := WriteReport(dir, rep); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Forwarding rate", "## Throughput against payload size", "## Per-packet forwarding overhead",
		"## End-to-end latency", "## One lookup per packet", "## Lookup cost against table size", "## Route programming", "## Scaling with cores", "Skipped: two CPUs", "## Inter-FE forwarding",
		"`splitplane bench all`", "kernel 6.18.0 (transparent huge pages: madvise; a first touch of a 4 KiB page: 4.87 µs)", "| 1400 | 1442 |", "`" + MetricPayload1400Mbps + "`", "`bird_kernel_1m_s`"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, name := range []string{PlotForward, PlotEdge, PlotPayloadPPS, PlotPayloadMbps, PlotOverhead, PlotLatency, PlotLookup, PlotProgramming} {
		checkPNG(t, filepath.Join(dir, name))
		if !strings.Contains(string(md), "]("+name+")") {
			t.Errorf("report.md does not show %s", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, PlotScaling)); err == nil {
		t.Errorf("%s drawn with no scaling figures", PlotScaling)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Metrics) != len(rep.Metrics) || len(back.Payload) != len(rep.Payload) {
		t.Errorf("results.json: %d metrics, %d payload rows; want %d and %d", len(back.Metrics), len(back.Payload), len(rep.Metrics), len(rep.Payload))
	}
}

// checkRequired fails unless every required figure is in rs, once, with a
// positive value (or 0 for a percent or a count of packets, which the
// cluster's reordering and loss should be) and the baseline required (its
// value positive too).
func checkRequired(t *testing.T, rs []Result, req []Required) {
	t.Helper()
	got := map[string]Result{}
	for _, r := range rs {
		if _, dup := got[r.Metric]; dup {
			t.Errorf("metric %s twice", r.Metric)
		}
		got[r.Metric] = r
	}
	for _, q := range req {
		r, ok := got[q.Metric]
		switch {
		case !ok:
			t.Errorf("metric %s missing", q.Metric)
		case !positive(r.Value) && !(r.Value == 0 && (r.Unit == "percent" || r.Unit == "packets")):
			t.Errorf("%s = %v %s, want > 0", q.Metric, r.Value, r.Unit)
		case q.Baseline != "" && r.Baseline != q.Baseline:
			t.Errorf("%s: baseline %q, want %q", q.Metric, r.Baseline, q.Baseline)
		case q.Baseline != "" && !positive(r.BaselineValue):
			t.Errorf("%s: baseline value %v, want > 0", q.Metric, r.BaselineValue)
		}
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Errorf("%s: %v", filepath.Base(path), err)
		return
	}
	if r := img.Bounds(); r.Dx() < 400 || r.Dy() < 250 {
		t.Errorf("%s: %dx%d pixels", filepath.Base(path), r.Dx(), r.Dy())
	}
}

// The names the issues fix are those of a full run.
func TestRequiredMetricsFull(t *testing.T) {
	req, err := RequiredMetrics(AllOptions{Binary: "splitplane"})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, r := range req {
		have[r.Metric] = r.Baseline
	}
	for metric, baseline := range map[string]string{
		// issue 3
		"forces_codec_ns_per_entry": "", "forces_transfer_entries_per_s": "", "forces_heartbeat_p99_ms_under_load": "",
		// issue 4
		"fib_lookup_ns_1k": "lpm_trie_lookup_ns_1k", "fib_lookup_ns_100k": "lpm_trie_lookup_ns_100k",
		"fib_lookup_ns_1m": "lpm_trie_lookup_ns_1m", "fib_install_routes_per_s": "",
		"forward_pps_1m": "kernel_forward_pps_1m", "forward_pps_1m_vs_limit": "redirect_limit_pps",
		// issue 5
		"converge_1m_s": "bird_kernel_1m_s", "ce_rss_mb_1m": "bird_rss_mb_1m",
		// issue 6
		"api_bulk_routes_per_s": "fib_install_routes_per_s", "api_add_to_forward_p50_ms": "", "api_add_to_forward_p99_ms": "",
		// issue 9
		"payload_1400_mbps": "kernel_payload_1400_mbps", "forward_overhead_p50_ns_64b": "redirect_overhead_p50_ns_64b",
		"forward_overhead_p90_ns_64b": "redirect_overhead_p90_ns_64b", "forward_pps_1k": "kernel_forward_pps_1k",
		"kernel_fib_lookup_ns_1m": "", "forward_latency_p50_us_64b": "kernel_forward_latency_p50_us_64b",
		// issue 24
		"forward_pps_1m_edge": "redirect_limit_pps", "forward_pps_1m_edge_zipf": "redirect_limit_pps",
		"router_vs_lookup_1m": "lookup_redirect_pps_1m", "fib_bytes_1m_edge": "dir24_8_bytes_1m_edge",
		"converge_1m_vs_frr_s": "frr_kernel_1m_s", "frr_kernel_1m_s": "", "ce_rss_over_gobgp_mb_1m": "gobgp_alone_rss_mb_1m",
		"ce_rss_vs_frr_mb_1m": "frr_rss_mb_1m", "frr_rss_mb_1m": "",
		// issue 23
		"cluster_cross_fe_pps": "cluster_local_pps", "cluster_local_pps": "", "cluster_cross_fe_vs_local": "cluster_local_pps",
		"cluster_vlb_share_fe2": "", "cluster_reorder_pct": "", "cluster_reorder_failover_pct": "", "cluster_lost_failover_packets": "",
	} {
		b, ok := have[metric]
		if !ok {
			t.Errorf("%s not required", metric)
		} else if b != baseline {
			t.Errorf("%s: baseline %q, want %q", metric, b, baseline)
		}
	}
	for _, base := range []string{"lpm_trie_lookup_ns_1m", "kernel_forward_pps_1m", "redirect_limit_pps", "bird_kernel_1m_s", "kernel_payload_1400_mbps", "frr_kernel_1m_s", "frr_rss_mb_1m"} {
		if _, ok := have[base]; !ok {
			t.Errorf("baseline %s has no figure of its own", base)
		}
	}
}

func TestAllOptions(t *testing.T) {
	for _, o := range []AllOptions{
		{Rounds: -1},
		{SmallRoutes: 10, BigRoutes: 5},
		{Payloads: []int{2000}},
		{LookupSizes: []int{0}},
		{Only: []string{"nothing"}},
		{Probes: 100_000},
	} {
		o.Binary = "splitplane"
		if err := o.defaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	q := AllOptions{Quick: true, Binary: "splitplane"}
	if err := q.defaults(); err != nil {
		t.Fatal(err)
	}
	if q.BigRoutes >= 1_000_000 || q.Rounds != 1 || q.ProgrammingRoutes >= 1_000_000 {
		t.Errorf("quick options %+v are not small", q)
	}
}
