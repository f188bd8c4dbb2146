package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
)

// Files WriteReport writes besides the plots.
const (
	ReportMarkdown = "report.md"
	ReportJSON     = "results.json"
)

// WriteReport writes the report into dir (created if missing): report.md
// (tables, the plots, what each figure measures), results.json (every
// figure, the report as All returned it) and the PNG plots.
func WriteReport(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportJSON), append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots, perr := WritePlots(dir, rep)
	f, err := os.Create(filepath.Join(dir, ReportMarkdown))
	if err != nil {
		return err
	}
	writeMarkdown(f, rep, plots)
	if err := f.Close(); err != nil {
		return err
	}
	return perr
}

// Report commands: the command line that produced a report, for its
// header (set by the caller).
func (r *Report) command() string {
	if r.Command == "" {
		return "splitplane bench all"
	}
	return r.Command
}

func mpps(v float64) string { return strconv.FormatFloat(v/1e6, 'f', 2, 64) }

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

func num(v float64, decimals int) string {
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func pctCells(p Pcts, decimals int) string {
	cells := make([]string, len(p))
	for i, v := range p {
		cells[i] = num(v, decimals)
	}
	return strings.Join(cells, " | ")
}

func writeMarkdown(w io.Writer, rep *Report, plots []string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	img := func(name, alt string) {
		if slices.Contains(plots, name) {
			p("\n![%s](%s)\n", alt, name)
		}
	}
	m := rep.Machine
	st := rep.Settings
	p("# splitplane benchmark report")
	p("")
	p("`%s`, started %s, %.0f s (%.1f min).", rep.command(), rep.Started.Format("2006-01-02 15:04:05 MST"), rep.Elapsed, rep.Elapsed/60)
	p("")
	thp := m.TransparentHugePages
	if thp == "" {
		thp = "unknown"
	}
	fault := "not measured"
	if m.PageFaultUs > 0 {
		fault = fmt.Sprintf("%.2f µs", m.PageFaultUs)
	}
	p("Machine: %d CPUs (%s), %d GB, kernel %s (transparent huge pages: %s; a first touch of a 4 KiB page: %s), %s. Load average (1/5/15 min) %.2f / %.2f / %.2f at the start, %.2f / %.2f / %.2f at the end.",
		m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, thp, fault, m.Go, m.LoadBefore[0], m.LoadBefore[1], m.LoadBefore[2], m.LoadAfter[0], m.LoadAfter[1], m.LoadAfter[2])
	p("")
	quick := ""
	if st.Quick {
		quick = " **Quick run** (small tables, short measurements): these figures check that the suite works; do not quote them."
	}
	p("Every figure is measured beside its baseline in the same run, the two taking turns within each round; each is the median of %d rounds.%s Raw figures: [%s](%s) (`metrics` follows the benchmark output convention).", st.Rounds, quick, ReportJSON, ReportJSON)
	if len(rep.Errors) > 0 {
		p("")
		p("## Failed sections")
		p("")
		for _, s := range sortedKeys(rep.Errors) {
			p("- **%s**: %s", s, rep.Errors[s])
		}
	}

	if len(rep.Forward) > 0 {
		p("")
		p("## Forwarding rate, 64-byte frames")
		p("")
		p("gen --veth-- router --veth-- sink in network namespaces, one queue per veth; 60-byte UDP frames (64 on the wire) from the BPF_PROG_RUN live-frames generator to random destinations inside the table, counted by an XDP sink over the middle half of %.1f s; generator, router and sink share one core. Splitplane is the FE's XDP datapath on both router ports; the kernel forwards with the same routes in its FIB; the bare redirect sends every frame port to port with no lookup and no rewrite (the most any forwarder reaches here).", st.ForwardSeconds)
		p("")
		p("| routes | splitplane (Mpps) | kernel (Mpps) | bare redirect (Mpps) | vs kernel | vs limit |")
		p("|---|---|---|---|---|---|")
		limit := 0.0
		if r, ok := rep.Result(MetricRedirectLimitPPS); ok {
			limit = r.Value
		}
		for _, r := range rep.Forward {
			vs := "-"
			if limit > 0 {
				vs = num(r.Splitplane/limit, 2)
			}
			p("| %s | %s | %s | %s | %s | %s |", fibbench.SizeLabel(r.Routes), mpps(r.Splitplane), mpps(r.Kernel), mpps(r.Limit), ratio(r.Splitplane, r.Kernel), vs)
		}
		p("")
		p("\"vs limit\" divides by `redirect_limit_pps`, the median of the bare redirect over both tables (%s Mpps).", mpps(limit))
		img(PlotForward, "forwarding rate")
	}

	if e := rep.Edge; e != nil {
		lookup, _ := LookupRedirectMetrics(e.Routes)
		edge, zipf, vsLookup := EdgeForwardMetrics(e.Routes)
		p("")
		p("## One lookup per packet, and tables and traffic as they are")
		p("")
		p("The same topology and generator, %s routes, all taking turns in every round. `%s`: the router against the bare redirect with one FIB lookup before it and nothing else (what the lookup alone costs). `%s` and `%s`: the router with the edge-shaped table (the same prefixes over four upstreams, next hops per origin) and destinations uniform over its prefixes, then Zipf over them (exponent 1), each against the bare redirect.", fibbench.SizeLabel(e.Routes), vsLookup, edge, zipf)
		p("")
		p("| | Mpps | vs bare redirect | vs lookup + redirect |")
		p("|---|---|---|---|")
		p("| router (`%s`) | %s | %s | %s |", vsLookup, mpps(e.Router), num(e.Router/e.Limit, 2), num(e.Router/e.Lookup, 2))
		p("| lookup + redirect (`%s`) | %s | %s | |", lookup, mpps(e.Lookup), num(e.Lookup/e.Limit, 2))
		p("| router, edge table (`%s`) | %s | %s | |", edge, mpps(e.Edge), num(e.Edge/e.Limit, 2))
		p("| router, edge table, Zipf (`%s`) | %s | %s | |", zipf, mpps(e.EdgeZipf), num(e.EdgeZipf/e.Limit, 2))
		p("| bare redirect | %s | 1 | |", mpps(e.Limit))
		if e.Limit6 > 0 {
			p("| router, IPv6 full-shaped table, 220k routes (`%s`) | %s | %s of the IPv6 bare redirect | |", MetricForward6PPSFull, mpps(e.IPv6), num(e.IPv6/e.Limit6, 2))
			p("| bare redirect, IPv6 frames (`%s`) | %s | %s | |", MetricRedirect6LimitPPS, mpps(e.Limit6), num(e.Limit6/e.Limit, 2))
		}
		if e.FIBBytes > 0 {
			p("")
			p("The edge table's FIB lookups read %.2f MB (the range table), against %.1f MB of DIR-24-8 alone.", float64(e.FIBBytes)/1e6, float64(e.DIR24_8Bytes)/1e6)
		}
		img(PlotEdge, "one lookup per packet, edge table, Zipf")
	}

	if len(rep.Payload) > 0 {
		p("")
		p("## Throughput against payload size")
		p("")
		p("As in the i3 paper's table: UDP payloads of 0 to %d bytes, %s routes, the same topology and generator, %.1f s per measurement. Payload Mbps counts the UDP payload only (pps x payload x 8). A 0-byte payload is a minimum frame (60 bytes, 64 on the wire, padded).", st.Payloads[len(st.Payloads)-1], fibbench.SizeLabel(st.BigRoutes), st.PayloadSeconds)
		p("")
		p("| payload (B) | frame (B) | splitplane (kpps) | splitplane (Mbps) | kernel (kpps) | kernel (Mbps) | bare redirect (kpps) | bare redirect (Mbps) | vs kernel |")
		p("|---|---|---|---|---|---|---|---|---|")
		for _, r := range rep.Payload {
			p("| %d | %d | %s | %s | %s | %s | %s | %s | %s |", r.Payload, r.Frame,
				num(r.Splitplane/1e3, 0), num(r.Mbps(r.Splitplane), 0), num(r.Kernel/1e3, 0), num(r.Mbps(r.Kernel), 0),
				num(r.Limit/1e3, 0), num(r.Mbps(r.Limit), 0), ratio(r.Splitplane, r.Kernel))
		}
		img(PlotPayloadPPS, "packets per second against payload")
		img(PlotPayloadMbps, "payload Mbps against payload")
	}

	if len(rep.Overhead) > 0 {
		p("")
		p("## Per-packet forwarding overhead (BPF_PROG_TEST_RUN)")
		p("")
		p("Splitplane's XDP program against a bare redirect program, %s routes, the frame arriving on the router's ingress port, each call to the next random destination, percentiles over the calls of a round. Two ways of timing, the kernel's clock in both:", fibbench.SizeLabel(st.BigRoutes))
		p("")
		p("- **single runs**: %d calls per round, each one run (repeat 1). A run's time covers the program (parse, checks, lookup, next hop, rewrite, redirect decision) and the test harness's fixed cost around a single run (bottom halves off and on, two clock reads): the bare redirect's figure is that floor. Caches are as the system call leaves them, as for a packet reaching an idle router.", st.OverheadRuns)
		p("- **batches**: %d calls per round of %d runs each on one destination, the call's time divided by its runs: the warm per-packet cost of a router under load (one cold first run spread over the batch).", max(10, st.OverheadRuns/5), overheadBatch)
		p("")
		p("Neither covers copying the frame in, nor transmitting it (a test run decides to redirect but does not send).")
		p("")
		p("| payload (B) | single runs: splitplane p10 | p25 | p50 | p75 | p90 (ns) | bare p10 | p25 | p50 | p75 | p90 (ns) |")
		p("|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rep.Overhead {
			p("| %d | %s | %s |", r.Payload, pctCells(r.Splitplane, 0), pctCells(r.Bare, 0))
		}
		p("")
		p("| payload (B) | batches: splitplane p10 | p25 | p50 | p75 | p90 (ns) | bare p10 | p25 | p50 | p75 | p90 (ns) |")
		p("|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rep.Overhead {
			p("| %d | %s | %s |", r.Payload, pctCells(r.SplitplaneBatch, 0), pctCells(r.BareBatch, 0))
		}
		img(PlotOverhead, "per-packet cost percentiles")
	}

	if len(rep.Latency) > 0 {
		p("")
		p("## End-to-end latency of timestamped packets")
		p("")
		p("%d probes per round, one every %.0f µs (no queueing), from an AF_PACKET socket in the generator's namespace through the router to an XDP sink that subtracts the sender's CLOCK_MONOTONIC stamp (carried in the IPv4 ID and UDP checksum fields) from bpf_ktime_get_ns. The path: the sender's socket and veth, the router, the second veth, the sink. The bare redirect is that path with a router that does nothing; the difference is the router's own latency.", st.Probes, st.ProbeIntervalUS)
		p("")
		p("| payload (B) | splitplane p10 | p25 | p50 | p75 | p90 (µs) | kernel p10 | p25 | p50 | p75 | p90 (µs) | bare p10 | p25 | p50 | p75 | p90 (µs) |")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rep.Latency {
			p("| %d | %s | %s | %s |", r.Payload, pctCells(r.Splitplane, 1), pctCells(r.Kernel, 1), pctCells(r.Bare, 1))
		}
		img(PlotLatency, "latency percentiles")
	}

	if len(rep.Lookup) > 0 {
		p("")
		p("## Lookup cost against table size")
		p("")
		p("ns per packet of a whole forwarding program (parse, lookup, next hop, rewrite, redirect), BPF_PROG_TEST_RUN with many repeats (the kernel's time for all, divided by their number), every run to the next of the same 65,536 destinations at every size, uniformly random over public space, every table holding a default route as well as its routegen routes, so that only the table changes from one size to the next (the figures with each table's own traffic are in results.json, fib_lookup_inside_ns_SIZE and lpm_trie_lookup_inside_ns_SIZE). Splitplane's xdp_router with its DIR-24-8 FIB; the same program with the BPF LPM_TRIE map; and the kernel's own FIB, through bpf_fib_lookup from an XDP program doing the same work, with the same routes in a routing table of the router's namespace.")
		p("")
		p("| routes | splitplane FIB (ns) | LPM_TRIE (ns) | kernel FIB (ns) | trie / FIB | kernel / FIB |")
		p("|---|---|---|---|---|---|")
		for _, r := range rep.Lookup {
			p("| %s | %s | %s | %s | %s | %s |", fibbench.SizeLabel(r.Routes), num(r.FIB, 0), num(r.Trie, 0), num(r.Kernel, 0), ratio(r.Trie, r.FIB), ratio(r.Kernel, r.FIB))
		}
		img(PlotLookup, "lookup cost against table size")
	}

	prog := programmingResults(rep)
	if len(prog) > 0 {
		p("")
		p("## Route programming")
		p("")
		p("%s routes. FIB install: one SetRoutes call into an empty datapath. ForCES: CE and FE in one process over loopback TCP, full sync until the FE holds every route. gRPC: `splitplane ce` and `splitplane fe` processes, Routes.Bulk until the FE's XDP datapath holds every route. BGP: a BIRD sender announces the table to splitplane (CE + FE, until the datapath holds it) and, in turn, to a BIRD that installs it into the kernel (the baseline), to GoBGP alone (the library the CE embeds, with nothing else to do) and to FRR (bgpd and zebra, Debian's, installing it into the kernel). Two providers, where present (`bench converge --two-providers`; not part of `bench all`): a second BIRD sender in another AS on a second FE port announces the same table, together with the first, to a CE with bgp_multipath (deploy/examples/ce.yaml), until the CE holds both tables and the FE every route as ECMP over both.", fibbench.SizeLabel(st.ProgrammingRoutes))
		p("")
		writeResults(p, prog)
		img(PlotProgramming, "route programming rates")
	}

	if cl := clusterResults(rep); len(cl) > 0 {
		p("")
		p("## Inter-FE forwarding")
		p("")
		p("Three FEs in a full mesh of veth links, each its own XDP datapath, generator in front of FE 1, sinks behind FE 1 and FE 3 (`splitplane bench cluster`, docs/performance.md). Cross-FE: 60-byte frames in at FE 1, encapsulated (RFC 8013) over the link to FE 3 and out of its port; local: the same generator, out of FE 1's own port; %.1f s each, taking turns. Every XDP program of the chain runs on the generator's CPU (veth runs XDP in the sender's softirq), so the cross rate pays for two FEs on one CPU. VLB shares: of the packets FE 1 sent to FE 3, the percent sent straight and carried by FE 2, with a spill of 500‰ and with the direct link down. Reordering and loss: one sequenced flow FE 1 to FE 3 at 100,000 packets/s, steady, while the direct link goes down and up, and that again with the generator at full rate on the other CPU.", st.ClusterSeconds)
		p("")
		writeResults(p, cl)
	}

	p("")
	p("## Scaling with cores")
	p("")
	if len(rep.Scaling) > 0 {
		p("| forwarding cores | splitplane (Mpps) | bare redirect (Mpps) |")
		p("|---|---|---|")
		for _, r := range rep.Scaling {
			p("| %d | %s | %s |", r.Cores, mpps(r.Splitplane), mpps(r.Limit))
		}
		img(PlotScaling, "scaling with cores")
	} else if why, ok := rep.Skipped[SectionScaling]; ok {
		p("Skipped: %s.", why)
	} else {
		p("Not run.")
	}

	p("")
	p("## Every figure")
	p("")
	writeResults(p, rep.Metrics)
}

func writeResults(p func(string, ...any), rs []Result) {
	p("| metric | value | unit | baseline | baseline value |")
	p("|---|---|---|---|---|")
	for _, r := range rs {
		base, bval := "", ""
		if r.Baseline != "" {
			base, bval = "`"+r.Baseline+"`", FormatFigure(r.BaselineValue)
		}
		p("| `%s` | %s | %s | %s | %s |", r.Metric, FormatFigure(r.Value), r.Unit, base, bval)
	}
}

// programmingResults picks the route-programming figures from the report.
func programmingResults(rep *Report) []Result {
	n := rep.Settings.ProgrammingRoutes
	conv, bird, ceRSS, birdRSS := ConvergeMetrics(n)
	gConv, gRSS := GoBGPMetrics(n)
	vsFRR, frrKernel, ceVsFRR, frrRSS := FRRMetrics(n)
	twoConv, twoRSS := TwoProvidersMetrics(n)
	names := []string{fibbench.MetricFIBInstallPerSecond, MetricForcesCodec, MetricForcesTransfer, MetricForcesUpdate, MetricForcesHeartbeatLoad,
		MetricAPIBulkRoutesPerSecond, MetricAPIBulkColdRoutesPerSecond, MetricAPIBulkPageFaults, MetricAPIBulkColdPageFaults,
		MetricAPIBulkTextRoutesPerSecond, MetricAPIAddToForwardP50, MetricAPIAddToForwardP99, conv, bird, ceRSS, birdRSS,
		gConv, gRSS, vsFRR, frrKernel, ceVsFRR, frrRSS, CEOverGoBGPMetric(n), twoConv, twoRSS}
	var out []Result
	for _, n := range names {
		if r, ok := rep.Result(n); ok {
			out = append(out, r)
		}
	}
	return out
}

// clusterResults picks the inter-FE figures from the report.
func clusterResults(rep *Report) []Result {
	var out []Result
	for _, n := range ClusterMetrics() {
		if r, ok := rep.Result(n); ok {
			out = append(out, r)
		}
	}
	return out
}

// FormatFigure rounds a figure for reading: whole numbers from 1000 up
// (rates), more decimals below; the JSON has the full value.
func FormatFigure(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
