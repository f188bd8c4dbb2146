package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/internal/host"
)

// Sections of the suite All runs, in the order it runs them.
const (
	SectionForward     = "forward"     // forwarding rate, 64-byte frames, small and big table
	SectionPayload     = "payload"     // throughput against payload size
	SectionOverhead    = "overhead"    // per-packet cost percentiles, BPF_PROG_TEST_RUN
	SectionLatency     = "latency"     // end-to-end latency percentiles of timestamped probes
	SectionLookup      = "lookup"      // lookup cost against table size
	SectionScaling     = "scaling"     // forwarding rate against FE cores
	SectionCluster     = "cluster"     // inter-FE forwarding: cross-FE rate, VLB shares, reordering
	SectionProgramming = "programming" // FIB install, ForCES, gRPC bulk, BGP convergence
)

// Sections lists every section of the suite, in the order All runs them.
func Sections() []string {
	return []string{SectionForward, SectionPayload, SectionOverhead, SectionLatency, SectionLookup, SectionScaling, SectionCluster, SectionProgramming}
}

// Percentiles are the ones reported for per-packet figures, after the i3
// paper's tables.
func Percentiles() []int { return []int{10, 25, 50, 75, 90} }

// AllOptions configures All. Zero values take the defaults of a full run,
// or with Quick those of a quick one (small tables, short measurements: a
// check that the whole suite works, not figures to quote).
type AllOptions struct {
	// Memory is the machine's memory figures as the caller measured them
	// (host.MeasureMemory), so that the report states what the caller
	// said; zero: All measures them.
	Memory host.Memory
	// Quick takes small tables and short measurements.
	Quick bool
	// Only, if set, runs these sections (names from Sections) and no others.
	Only []string
	// Rounds is how many times every figure is measured, its baseline
	// beside it, the median reported (default 3; quick 1).
	Rounds int
	// SmallRoutes and BigRoutes are the table sizes of the forwarding
	// figures (default 1,000 and 1,000,000; quick 1,000 and 10,000); the
	// payload, overhead and latency figures use the big table.
	SmallRoutes, BigRoutes int
	// LookupSizes are the table sizes of the lookup figures (default 1k,
	// 10k, 100k, 1M; quick 1k and 10k).
	LookupSizes []int
	// Payloads are the UDP payload sizes in bytes of the payload, overhead
	// and latency figures (default 0, 200, ... 1400; quick 0 and 1400).
	Payloads []int
	// ForwardDuration is how long the generator runs for a 64-byte
	// forwarding figure, PayloadDuration for one of the payload sweep; the
	// rate is taken over the middle half (default 4s and 2s; quick 400ms).
	ForwardDuration, PayloadDuration time.Duration
	// ClusterDuration is how long the generator runs for a rate of the
	// cluster section, and its sequenced flow lasts (default 2s; quick
	// 500ms).
	ClusterDuration time.Duration
	// OverheadRuns is how many single BPF_PROG_TEST_RUN runs make a round of
	// an overhead figure (default 5,000; quick 500).
	OverheadRuns int
	// Probes is how many timestamped probes make a round of a latency
	// figure, one every ProbeInterval (default 2,000 every 20µs; quick 200).
	Probes        int
	ProbeInterval time.Duration
	// ProgrammingRoutes is the table of the route-programming figures:
	// ForCES transfer, gRPC bulk, BGP convergence (default 1,000,000;
	// quick 20,000).
	ProgrammingRoutes int
	// ConvergeRounds is how many times splitplane and BIRD each converge
	// (default 3; quick 1); APIAdds how many single route adds are timed
	// until they forward (default 200; quick 20).
	ConvergeRounds, APIAdds int
	// Scaling measures the forwarding rate against FE cores even on a
	// machine of two CPUs, where it is otherwise skipped (tests).
	Scaling bool
	// Seed seeds the route generator and the destinations (default 1).
	Seed int64
	// Binary is the splitplane executable that runs the CE and the FE (by
	// default the running executable, right for `splitplane bench all`).
	Binary string
	// Progress, if set, receives a line per step and per round.
	Progress io.Writer

	// frames is the number of frames per BPF_PROG_RUN of the generator
	// (default sendFrames; quick a quarter of it).
	frames uint32
}

func (o *AllOptions) defaults() error {
	quick := o.Quick
	pick := func(full, q int) int {
		if quick {
			return q
		}
		return full
	}
	def := func(v *int, full, q int) {
		if *v == 0 {
			*v = pick(full, q)
		}
	}
	defDur := func(v *time.Duration, full, q time.Duration) {
		if *v == 0 {
			*v = full
			if quick {
				*v = q
			}
		}
	}
	def(&o.Rounds, 3, 1)
	def(&o.SmallRoutes, 1_000, 1_000)
	def(&o.BigRoutes, 1_000_000, 10_000)
	if o.LookupSizes == nil {
		o.LookupSizes = []int{1_000, 10_000, 100_000, 1_000_000}
		if quick {
			o.LookupSizes = []int{1_000, 10_000}
		}
	}
	if o.Payloads == nil {
		for p := 0; p <= 1400; p += 200 {
			o.Payloads = append(o.Payloads, p)
		}
		if quick {
			o.Payloads = []int{0, 1400}
		}
	}
	defDur(&o.ForwardDuration, 4*time.Second, 400*time.Millisecond)
	defDur(&o.ClusterDuration, 2*time.Second, 500*time.Millisecond)
	defDur(&o.PayloadDuration, 2*time.Second, 400*time.Millisecond)
	def(&o.OverheadRuns, 5_000, 500)
	def(&o.Probes, 2_000, 200)
	defDur(&o.ProbeInterval, 20*time.Microsecond, 20*time.Microsecond)
	def(&o.ProgrammingRoutes, 1_000_000, 20_000)
	def(&o.ConvergeRounds, 3, 1)
	def(&o.APIAdds, 200, 20)
	if o.frames == 0 {
		o.frames = sendFrames
		if quick {
			o.frames = sendFrames / 4
		}
	}
	orDefault(&o.Seed, 1)
	if err := defaultBinary(&o.Binary, "all"); err != nil {
		return err
	}
	o.LookupSizes = slices.Sorted(slices.Values(o.LookupSizes))
	o.LookupSizes = slices.Compact(o.LookupSizes)
	o.Payloads = slices.Sorted(slices.Values(o.Payloads))
	o.Payloads = slices.Compact(o.Payloads)
	for _, s := range o.Only {
		if !slices.Contains(Sections(), s) {
			return fmt.Errorf("bench all: no section %q (sections: %s)", s, strings.Join(Sections(), ", "))
		}
	}
	switch {
	case o.Rounds < 1 || o.ConvergeRounds < 1:
		return fmt.Errorf("bench all: rounds %d, converge rounds %d: need at least 1", o.Rounds, o.ConvergeRounds)
	case o.SmallRoutes < 1 || o.BigRoutes < o.SmallRoutes || o.BigRoutes > datapath.MaxRoutes:
		return fmt.Errorf("bench all: tables of %d and %d routes: need 1 <= small <= big <= %d", o.SmallRoutes, o.BigRoutes, datapath.MaxRoutes)
	case len(o.LookupSizes) == 0 || o.LookupSizes[0] < 1 || o.LookupSizes[len(o.LookupSizes)-1] > datapath.MaxRoutes:
		return fmt.Errorf("bench all: lookup sizes %v: need 1 to %d routes", o.LookupSizes, datapath.MaxRoutes)
	case len(o.Payloads) == 0 || o.Payloads[0] < 0 || o.Payloads[len(o.Payloads)-1] > MaxPayload:
		return fmt.Errorf("bench all: payloads %v: need 0 to %d bytes", o.Payloads, MaxPayload)
	case o.ForwardDuration < 100*time.Millisecond || o.PayloadDuration < 100*time.Millisecond:
		return fmt.Errorf("bench all: durations %s and %s: need at least 100ms", o.ForwardDuration, o.PayloadDuration)
	case o.ClusterDuration < 500*time.Millisecond:
		return fmt.Errorf("bench all: cluster duration %s: need at least 500ms", o.ClusterDuration)
	case o.OverheadRuns < 10 || o.Probes < 10 || o.Probes > 65536:
		return fmt.Errorf("bench all: %d overhead runs, %d probes: need at least 10 of each, at most 65536 probes", o.OverheadRuns, o.Probes)
	case o.ProbeInterval < time.Microsecond:
		return fmt.Errorf("bench all: probe interval %s: need at least 1µs", o.ProbeInterval)
	case o.ProgrammingRoutes < 10 || o.ProgrammingRoutes+o.APIAdds > datapath.MaxRoutes:
		return fmt.Errorf("bench all: %d programming routes: need 10 to %d", o.ProgrammingRoutes, datapath.MaxRoutes-o.APIAdds)
	case o.APIAdds < 1 || o.APIAdds > 1<<16:
		return fmt.Errorf("bench all: %d API adds: need 1 to 65536", o.APIAdds)
	}
	return nil
}

// runs reports whether section is part of the run.
func (o *AllOptions) runs(section string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, section)
}

// MaxPayload is the largest UDP payload the payload figures send: a
// 1500-byte IPv4 packet.
const MaxPayload = gen.MaxPayload

// Report is what All measured: every figure in Metrics (the benchmark
// output convention), the same figures arranged by section for tables and
// plots, and what the run was.
type Report struct {
	// Command is the command line that produced the report (set by the
	// caller, for the report's header).
	Command string    `json:"command,omitempty"`
	Started time.Time `json:"started"`
	// Elapsed is the wall time of the whole run, in seconds.
	Elapsed float64 `json:"elapsed_s"`
	Machine Machine `json:"machine"`
	// Settings are the sizes and durations the run used.
	Settings Settings `json:"settings"`
	Metrics  []Result `json:"metrics"`

	Forward  []ForwardRow  `json:"forward,omitempty"`
	Payload  []PayloadRow  `json:"payload,omitempty"`
	Overhead []OverheadRow `json:"overhead,omitempty"`
	Latency  []LatencyRow  `json:"latency,omitempty"`
	Lookup   []LookupRow   `json:"lookup,omitempty"`
	Edge     *EdgeRow      `json:"edge,omitempty"`
	Scaling  []ScalingRow  `json:"scaling,omitempty"`
	// Skipped says, per section not measured, why.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Errors holds, per section that failed, its error; the other sections
	// still ran.
	Errors map[string]string `json:"errors,omitempty"`
}

// Machine describes where the figures were measured.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemoryGB int    `json:"memory_gb"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	// TransparentHugePages is the kernel's THP mode (always, madvise,
	// never): under madvise the daemons' Go heaps get 4 KiB pages, which
	// on a VM with dear page faults slows the BGP, ForCES and API figures.
	TransparentHugePages string `json:"transparent_hugepages"`
	// PageFaultUs is what a first touch of a fresh 4 KiB page cost when
	// the run started (host.PageFaultCost): well under 1 µs on bare metal,
	// several on a VM that backs guest memory lazily, and then what every
	// page of the daemons' growing heaps costs under madvise.
	PageFaultUs float64 `json:"page_fault_us"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1-, 5- and 15-minute
	// load averages when the run started and when it ended.
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// Settings are the sizes and durations of a run, as the report states them.
type Settings struct {
	Quick             bool    `json:"quick"`
	Rounds            int     `json:"rounds"`
	SmallRoutes       int     `json:"small_routes"`
	BigRoutes         int     `json:"big_routes"`
	LookupSizes       []int   `json:"lookup_sizes"`
	Payloads          []int   `json:"payloads"`
	ForwardSeconds    float64 `json:"forward_s"`
	PayloadSeconds    float64 `json:"payload_s"`
	ClusterSeconds    float64 `json:"cluster_s"`
	OverheadRuns      int     `json:"overhead_runs"`
	Probes            int     `json:"probes"`
	ProbeIntervalUS   float64 `json:"probe_interval_us"`
	ProgrammingRoutes int     `json:"programming_routes"`
	ConvergeRounds    int     `json:"converge_rounds"`
	APIAdds           int     `json:"api_adds"`
}

// ForwardRow is the forwarding rate of 64-byte frames with a table of
// Routes routes, in packets per second: splitplane's XDP datapath, the
// kernel's forwarding and a bare XDP redirect (the machine's limit).
type ForwardRow struct {
	Routes     int     `json:"routes"`
	Splitplane float64 `json:"splitplane_pps"`
	Kernel     float64 `json:"kernel_pps"`
	Limit      float64 `json:"redirect_limit_pps"`
}

// PayloadRow is the forwarding rate of frames carrying Payload bytes of UDP
// payload (Frame bytes without the FCS), in packets per second.
type PayloadRow struct {
	Payload    int     `json:"payload"`
	Frame      int     `json:"frame"`
	Splitplane float64 `json:"splitplane_pps"`
	Kernel     float64 `json:"kernel_pps"`
	Limit      float64 `json:"redirect_pps"`
}

// Mbps converts a packet rate of the row into payload megabits per second.
func (r PayloadRow) Mbps(pps float64) float64 { return pps * float64(r.Payload) * 8 / 1e6 }

// Pcts are the values at Percentiles.
type Pcts []float64

// OverheadRow is the per-packet cost, in ns, of splitplane's XDP program and
// of a bare redirect, for frames of Payload bytes of UDP payload:
// percentiles of single BPF_PROG_TEST_RUN runs, the kernel's own timing of
// each (Splitplane, Bare), and of the per-run time of batches of runs
// (SplitplaneBatch, BareBatch).
type OverheadRow struct {
	Payload         int  `json:"payload"`
	Splitplane      Pcts `json:"splitplane_ns"`
	Bare            Pcts `json:"redirect_ns"`
	SplitplaneBatch Pcts `json:"splitplane_batch_ns"`
	BareBatch       Pcts `json:"redirect_batch_ns"`
}

// LatencyRow is the end-to-end latency, in µs, of timestamped probes from
// the generator's namespace through the router to the sink: splitplane's
// XDP datapath, the kernel's forwarding, and a bare XDP redirect.
type LatencyRow struct {
	Payload    int  `json:"payload"`
	Splitplane Pcts `json:"splitplane_us"`
	Kernel     Pcts `json:"kernel_us"`
	Bare       Pcts `json:"redirect_us"`
}

// LookupRow is the per-packet cost, in ns, of a forwarding program with
// Routes routes and random destinations: splitplane's DIR-24-8 FIB, the
// kernel's LPM trie map, and the kernel's own FIB through bpf_fib_lookup.
type LookupRow struct {
	Routes int     `json:"routes"`
	FIB    float64 `json:"fib_ns"`
	Trie   float64 `json:"lpm_trie_ns"`
	Kernel float64 `json:"kernel_fib_ns"`
}

// ScalingRow is the forwarding rate with Cores forwarding cores.
type ScalingRow struct {
	Cores      int     `json:"cores"`
	Splitplane float64 `json:"splitplane_pps"`
	Limit      float64 `json:"redirect_limit_pps"`
}

// Result returns the figure named metric, if the report has it.
func (r *Report) Result(metric string) (Result, bool) {
	for _, m := range r.Metrics {
		if m.Metric == metric {
			return m, true
		}
	}
	return Result{}, false
}

// All runs the benchmark suite (needs root, BIRD 2 for the convergence
// figures, and the splitplane binary): every figure measured beside its
// baseline, the two taking turns within each round, the median over the
// rounds reported. A section that fails is named in Report.Errors and the
// others still run; All then returns the report and an error.
func All(ctx context.Context, opts AllOptions) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{
		Started:  time.Now(),
		Machine:  machine(opts.Memory),
		Settings: settings(&opts),
		Skipped:  map[string]string{},
		Errors:   map[string]string{},
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "bench all: "+format+"\n", args...)
		}
	}
	progress("%d CPUs, load %.2f %.2f %.2f, kernel %s", rep.Machine.CPUs,
		rep.Machine.LoadBefore[0], rep.Machine.LoadBefore[1], rep.Machine.LoadBefore[2], rep.Machine.Kernel)
	fail := func(section string, err error) {
		progress("%s: %v", section, err)
		rep.Errors[section] = err.Error()
	}

	if opts.runs(SectionForward) || opts.runs(SectionPayload) || opts.runs(SectionOverhead) ||
		opts.runs(SectionLatency) || opts.runs(SectionLookup) {
		s := &fwdSuite{opts: &opts, rep: rep, progress: progress}
		if err := s.run(ctx, fail); err != nil {
			fail("forwarding", err)
		}
	}
	if opts.runs(SectionScaling) && ctx.Err() == nil {
		if rep.Machine.CPUs <= 2 && !opts.Scaling {
			rep.Skipped[SectionScaling] = fmt.Sprintf("this machine has %d CPUs: one control core and one forwarding core leave nothing to scale over (`--scaling` measures it anyway, every CPU forwarding)", rep.Machine.CPUs)
			progress("scaling: skipped: %s", rep.Skipped[SectionScaling])
		} else if err := scaling(ctx, &opts, rep, progress); err != nil {
			fail(SectionScaling, err)
		}
	}
	if opts.runs(SectionCluster) && ctx.Err() == nil {
		progress("cluster: three FEs in a full mesh")
		res, err := Cluster(ctx, ClusterOptions{Duration: opts.ClusterDuration, Rounds: opts.Rounds, Progress: opts.Progress})
		if err != nil {
			fail(SectionCluster, err)
		}
		rep.Metrics = append(rep.Metrics, res...)
	}
	if opts.runs(SectionProgramming) && ctx.Err() == nil {
		programming(ctx, &opts, rep, progress, fail)
	}
	promoteBaselines(rep)
	rep.Machine.LoadAfter = loadAvg()
	rep.Elapsed = time.Since(rep.Started).Seconds()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if len(rep.Errors) > 0 {
		var names []string
		for s := range rep.Errors {
			names = append(names, s)
		}
		slices.Sort(names)
		return rep, fmt.Errorf("bench all: %s failed (the report has the rest)", strings.Join(names, ", "))
	}
	return rep, nil
}

// programming runs the route-programming benchmarks: the FIB install rate
// comes with the lookup figures; here ForCES, the gRPC API and BGP
// convergence against BIRD, each in its own processes and namespaces.
func programming(ctx context.Context, o *AllOptions, rep *Report, progress func(string, ...any), fail func(string, error)) {
	progress("programming: ForCES, %d routes", o.ProgrammingRoutes)
	res, err := Forces(ctx, ForcesOptions{Routes: o.ProgrammingRoutes, Rounds: o.Rounds, Seed: o.Seed, IdleSamples: pickInt(o.Quick, 50, 10), Progress: o.Progress})
	if err != nil {
		fail(SectionProgramming+" (forces)", err)
	}
	rep.Metrics = append(rep.Metrics, res...)
	if ctx.Err() != nil {
		return
	}
	progress("programming: gRPC bulk API, %d routes", o.ProgrammingRoutes)
	res, err = API(ctx, APIOptions{Routes: o.ProgrammingRoutes, Rounds: o.Rounds, Adds: o.APIAdds, Seed: o.Seed, Binary: o.Binary, Progress: o.Progress})
	if err != nil {
		fail(SectionProgramming+" (api)", err)
	}
	rep.Metrics = append(rep.Metrics, res...)
	if ctx.Err() != nil {
		return
	}
	progress("programming: BGP convergence against BIRD, GoBGP alone and FRR, %d routes, and two providers' tables", o.ProgrammingRoutes)
	copts := ConvergeOptions{Routes: o.ProgrammingRoutes, Rounds: o.ConvergeRounds, Seed: o.Seed, Binary: o.Binary, Progress: o.Progress, TwoProviders: true}
	if o.Quick {
		copts.Settle = 500 * time.Millisecond
	}
	res, err = Converge(ctx, copts)
	if err != nil {
		fail(SectionProgramming+" (converge)", err)
	}
	rep.Metrics = append(rep.Metrics, res...)
}

// promoteBaselines adds a figure of its own for every baseline that is
// named like a metric (snake_case) but printed only beside another figure
// (bird_kernel_1m_s beside converge_1m_s), so that every figure has a line.
func promoteBaselines(rep *Report) {
	have := map[string]bool{}
	for _, r := range rep.Metrics {
		have[r.Metric] = true
	}
	for _, r := range rep.Metrics {
		b := r.Baseline
		if b == "" || have[b] || !strings.Contains(b, "_") || strings.ContainsAny(b, " -") {
			continue
		}
		have[b] = true
		rep.Metrics = append(rep.Metrics, Result{Metric: b, Value: r.BaselineValue, Unit: r.Unit})
	}
}

func pickInt(quick bool, full, q int) int {
	if quick {
		return q
	}
	return full
}

func settings(o *AllOptions) Settings {
	return Settings{
		Quick: o.Quick, Rounds: o.Rounds, SmallRoutes: o.SmallRoutes, BigRoutes: o.BigRoutes,
		LookupSizes: o.LookupSizes, Payloads: o.Payloads,
		ForwardSeconds: o.ForwardDuration.Seconds(), PayloadSeconds: o.PayloadDuration.Seconds(),
		ClusterSeconds: o.ClusterDuration.Seconds(),
		OverheadRuns:   o.OverheadRuns, Probes: o.Probes, ProbeIntervalUS: float64(o.ProbeInterval) / 1e3,
		ProgrammingRoutes: o.ProgrammingRoutes, ConvergeRounds: o.ConvergeRounds, APIAdds: o.APIAdds,
	}
}

// machine describes this machine; what cannot be read stays empty.
func machine(mem host.Memory) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAvg()}
	if mem == (host.Memory{}) {
		mem = host.MeasureMemory()
	}
	m.TransparentHugePages, m.PageFaultUs = mem.THP, float64(mem.FirstTouch)/float64(time.Microsecond)
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.Atoi(f[1])
				m.MemoryGB = (kb + 1<<19) >> 20
			}
		}
	}
	return m
}

func loadAvg() (l [3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// Metric names of the figures All adds to those of the single benchmarks.
// Sizes and payloads are part of the names: fibbench.SizeLabel writes the
// table size, payloadTag the payload (64b for 0 bytes, the minimum frame,
// 64 bytes on the wire).
const (
	// MetricPayload1400Mbps is the payload throughput at 1400 bytes
	// (issue 9), against MetricKernelPayload1400Mbps.
	MetricPayload1400Mbps       = "payload_1400_mbps"
	MetricKernelPayload1400Mbps = "kernel_payload_1400_mbps"
	// MetricOverheadP50 and MetricOverheadP90 are the per-packet cost
	// percentiles of minimum-size frames (issue 9).
	MetricOverheadP50 = "forward_overhead_p50_ns_64b"
	MetricOverheadP90 = "forward_overhead_p90_ns_64b"
)

// payloadTag names a payload size in metric names: "64b" for 0 bytes (a
// minimum frame, 64 bytes on the wire), else "payload_N".
func payloadTag(p int) string {
	if p == 0 {
		return "64b"
	}
	return "payload_" + strconv.Itoa(p)
}

// PayloadMetrics returns the names of the payload sweep's figures for
// payload p: packets/s and payload Mbps of splitplane, the kernel and the
// bare redirect.
func PayloadMetrics(p int) (pps, kernelPPS, limitPPS, mbps, kernelMbps, limitMbps string) {
	n := "payload_" + strconv.Itoa(p)
	return n + "_pps", "kernel_" + n + "_pps", "redirect_" + n + "_pps",
		n + "_mbps", "kernel_" + n + "_mbps", "redirect_" + n + "_mbps"
}

// OverheadMetrics returns the names of the per-packet cost figures at
// percentile q for payload p: splitplane's and the bare redirect's.
func OverheadMetrics(q, p int) (splitplane, bare string) {
	s := fmt.Sprintf("_p%d_ns_%s", q, payloadTag(p))
	return "forward_overhead" + s, "redirect_overhead" + s
}

// OverheadBatchMetrics returns the names of the per-packet cost figures of
// batches of runs at percentile q for payload p: splitplane's and the bare
// redirect's.
func OverheadBatchMetrics(q, p int) (splitplane, bare string) {
	s := fmt.Sprintf("_p%d_ns_%s", q, payloadTag(p))
	return "forward_overhead_batch" + s, "redirect_overhead_batch" + s
}

// LatencyMetrics returns the names of the end-to-end latency figures at
// percentile q for payload p: splitplane's, the kernel's and the bare
// redirect's.
func LatencyMetrics(q, p int) (splitplane, kernel, bare string) {
	s := fmt.Sprintf("_p%d_us_%s", q, payloadTag(p))
	return "forward_latency" + s, "kernel_forward_latency" + s, "redirect_latency" + s
}

// LookupMetrics returns the names of the lookup figures for a table of n
// routes: splitplane's FIB, the LPM trie and the kernel FIB.
func LookupMetrics(n int) (fib, trie, kernel string) {
	l := fibbench.SizeLabel(n)
	return fibbench.MetricFIBLookupPrefix + l, fibbench.MetricTrieLookupPrefix + l, "kernel_fib_lookup_ns_" + l
}

// Required is a figure a run must print: its metric name and, if the
// issues name one, its baseline.
type Required struct {
	Metric, Baseline string
}

// RequiredMetrics returns the figures every successful run of All with
// these options prints: those the issues name (with the sizes of the
// options in the names) with the baselines they name, and the rest of the
// suite's.
func RequiredMetrics(opts AllOptions) ([]Required, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	var req []Required
	add := func(metric, baseline string) { req = append(req, Required{metric, baseline}) }
	if opts.runs(SectionForward) {
		for _, n := range []int{opts.SmallRoutes, opts.BigRoutes} {
			fwd, kern, vs := ForwardMetrics(n)
			add(fwd, kern)
			add(kern, "")
			add(vs, MetricRedirectLimitPPS)
		}
		add(MetricRedirectLimitPPS, "")
		lookup, _ := LookupRedirectMetrics(opts.BigRoutes)
		edge, zipf, vsLookup := EdgeForwardMetrics(opts.BigRoutes)
		add(lookup, MetricRedirectLimitPPS)
		add(vsLookup, lookup)
		add(edge, MetricRedirectLimitPPS)
		add(zipf, MetricRedirectLimitPPS)
		add(MetricForward6PPSFull, MetricRedirect6LimitPPS)
		add(MetricRedirect6LimitPPS, MetricRedirectLimitPPS)
	}
	if opts.runs(SectionPayload) {
		for _, p := range opts.Payloads {
			pps, kpps, lpps, mbps, kmbps, lmbps := PayloadMetrics(p)
			add(pps, kpps)
			add(kpps, "")
			add(lpps, "")
			if p > 0 {
				add(mbps, kmbps)
				add(kmbps, "")
				add(lmbps, "")
			}
		}
	}
	if opts.runs(SectionOverhead) {
		for _, p := range opts.Payloads {
			for _, q := range Percentiles() {
				sp, bare := OverheadMetrics(q, p)
				add(sp, bare)
				add(bare, "")
				spb, bareb := OverheadBatchMetrics(q, p)
				add(spb, bareb)
				add(bareb, "")
			}
		}
	}
	if opts.runs(SectionLatency) {
		for _, p := range opts.Payloads {
			for _, q := range Percentiles() {
				sp, kern, bare := LatencyMetrics(q, p)
				add(sp, kern)
				add(kern, "")
				add(bare, "")
			}
		}
	}
	if opts.runs(SectionLookup) {
		for _, n := range opts.LookupSizes {
			fib, trie, kern := LookupMetrics(n)
			add(fib, trie)
			add(trie, "")
			add(kern, "")
		}
		add(fibbench.MetricFIBInstallPerSecond, "")
		lookup, zipf, tbl, tblZipf, bytes, tblBytes, install := fibbench.EdgeMetrics(slices.Max(opts.LookupSizes))
		add(lookup, tbl)
		add(zipf, tblZipf)
		add(bytes, tblBytes)
		add(install, "")
		add(fibbench.MetricFIB6LookupPrefix+"full", fibbench.MetricTrie6LookupPrefix+"full")
		add(fibbench.MetricTrie6LookupPrefix+"full", "")
	}
	if opts.runs(SectionCluster) {
		for _, m := range ClusterMetrics() {
			base := ""
			if m == MetricClusterCrossFEPPS || m == MetricClusterCrossVsLocal {
				base = MetricClusterLocalPPS
			}
			add(m, base)
		}
	}
	if opts.runs(SectionProgramming) {
		add(MetricForcesCodec, "")
		add(MetricForcesTransfer, "")
		add(MetricForcesUpdate, "")
		add(MetricForcesHeartbeatLoad, "")
		add(MetricAPIBulkRoutesPerSecond, fibbench.MetricFIBInstallPerSecond)
		add(MetricAPIBulkTextRoutesPerSecond, fibbench.MetricFIBInstallPerSecond)
		add(MetricAPIBulkColdRoutesPerSecond, fibbench.MetricFIBInstallPerSecond)
		add(MetricAPIBulkPageFaults, MetricAPIBulkColdPageFaults)
		add(MetricAPIBulkColdPageFaults, "")
		add(MetricAPIAddToForwardP50, "")
		add(MetricAPIAddToForwardP99, "")
		conv, bird, ceRSS, birdRSS := ConvergeMetrics(opts.ProgrammingRoutes)
		add(conv, bird)
		add(bird, "")
		add(ceRSS, birdRSS)
		add(birdRSS, "")
		gConv, gRSS := GoBGPMetrics(opts.ProgrammingRoutes)
		add(gConv, bird)
		add(gRSS, birdRSS)
		vsFRR, frrKernel, ceVsFRR, frrRSS := FRRMetrics(opts.ProgrammingRoutes)
		add(vsFRR, frrKernel)
		add(frrKernel, "")
		add(ceVsFRR, frrRSS)
		add(frrRSS, "")
		add(CEOverGoBGPMetric(opts.ProgrammingRoutes), gRSS)
		twoConv, twoRSS := TwoProvidersMetrics(opts.ProgrammingRoutes)
		add(twoConv, conv)
		add(twoRSS, ceRSS)
	}
	return req, nil
}
