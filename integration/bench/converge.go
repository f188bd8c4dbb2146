package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/routegen"
)

// ConvergeOptions configures Converge. Zero values take the defaults.
type ConvergeOptions struct {
	// Routes is the size of the table the sender announces (default
	// 1,000,000).
	Routes int
	// Rounds is how many times each system converges, splitplane and BIRD
	// taking turns; the median is reported (default 1: a round of 1M routes
	// takes about a minute).
	Rounds int
	// Seed seeds the route generator (default 1).
	Seed int64
	// Binary is the splitplane executable that runs the CE and the FE (by
	// default the running executable, which is right for `splitplane bench`).
	Binary string
	// Dir keeps the configurations and the daemons' logs; by default a new
	// temporary directory, removed after a successful run and kept (named
	// in the error) after a failed one.
	Dir string
	// Timeout bounds each convergence, from the session's start until the
	// table is complete (default 5 minutes).
	Timeout time.Duration
	// Stall fails a convergence whose route count has not moved for this
	// long (default 30s; BIRD holds its last UPDATE up to 3s).
	Stall time.Duration
	// Settle is how long the CE holds the complete table before its memory
	// is read (default 5s), so that the figure is what it keeps, not the
	// garbage of the transfer.
	Settle time.Duration
	// Progress, if set, receives a line per setup step and per convergence.
	Progress io.Writer
	// TwoProviders adds, to each round, the edge appliance's case
	// (deploy/examples/ce.yaml): two senders, each on its own link and in
	// its own AS, both announcing the whole table to the CE, which keeps
	// both paths of every prefix and programs them as ECMP (bgp_multipath).
	TwoProviders bool

	// withhold makes the sender announce this many routes fewer than Routes
	// while the benchmark waits for Routes (tests of the incomplete case).
	withhold int
}

func (o *ConvergeOptions) defaults() error {
	orDefault(&o.Routes, 1_000_000)
	orDefault(&o.Rounds, 1)
	orDefault(&o.Seed, 1)
	if err := defaultBinary(&o.Binary, "converge"); err != nil {
		return err
	}
	orDefault(&o.Timeout, 5*time.Minute)
	orDefault(&o.Stall, 30*time.Second)
	orDefault(&o.Settle, 5*time.Second)
	switch {
	case o.Routes < 1 || o.Routes > datapath.MaxRoutes:
		return fmt.Errorf("bench converge: routes %d: must be 1 to %d", o.Routes, datapath.MaxRoutes)
	case o.Rounds < 1:
		return fmt.Errorf("bench converge: rounds %d: need at least 1", o.Rounds)
	case o.withhold < 0 || o.withhold >= o.Routes:
		return fmt.Errorf("bench converge: withhold %d of %d routes", o.withhold, o.Routes)
	}
	return nil
}

// Metric names of the convergence benchmark for the default 1M routes;
// ConvergeMetrics gives them for any size.
const (
	MetricConverge1M    = "converge_1m_s"
	MetricBIRDKernel1M  = "bird_kernel_1m_s"
	MetricCERSS1M       = "ce_rss_mb_1m"
	MetricBIRDRSS1M     = "bird_rss_mb_1m"
	MetricVsFRR1M       = "converge_1m_vs_frr_s"
	MetricFRRKernel1M   = "frr_kernel_1m_s"
	MetricCEOverGoBGP1M = "ce_rss_over_gobgp_mb_1m"
	MetricConverge2x1M  = "converge_2x1m_s"
	MetricCERSS2x1M     = "ce_rss_mb_2x1m"
)

// FRRMetrics returns the names of Converge's figures against FRR for a
// table of routes entries: splitplane's convergence time against FRR's
// (bgpd and zebra into the kernel), and the CE's memory against FRR's
// (bgpd's and zebra's, summed).
func FRRMetrics(routes int) (vsFRR, frrKernel, ceRSSVsFRR, frrRSS string) {
	l := fibbench.SizeLabel(routes)
	return "converge_" + l + "_vs_frr_s", "frr_kernel_" + l + "_s", "ce_rss_vs_frr_mb_" + l, "frr_rss_mb_" + l
}

// CEOverGoBGPMetric returns the name of the CE's memory less GoBGP's alone,
// for the same table of routes entries: what splitplane keeps beyond the
// BGP library it embeds.
func CEOverGoBGPMetric(routes int) string {
	return "ce_rss_over_gobgp_mb_" + fibbench.SizeLabel(routes)
}

// TwoProvidersMetrics returns the names of Converge's figures with
// TwoProviders, for two tables of routes entries each: the convergence
// time and the CE's memory.
func TwoProvidersMetrics(routes int) (converge, ceRSS string) {
	l := "2x" + fibbench.SizeLabel(routes)
	return "converge_" + l + "_s", "ce_rss_mb_" + l
}

// GoBGPMetrics returns the names of Converge's figures for GoBGP receiving
// the table of routes entries alone: its time (against BIRD's) and its
// memory (against the receiving BIRD's).
func GoBGPMetrics(routes int) (converge, rss string) {
	l := fibbench.SizeLabel(routes)
	return "gobgp_alone_" + l + "_s", "gobgp_alone_rss_mb_" + l
}

// ConvergeMetrics returns the metric names Converge uses for a table of
// routes entries (fibbench.SizeLabel writes the size: converge_20k_s for
// 20,000): splitplane's convergence time, BIRD's, the CE's memory and the
// receiving BIRD's memory.
func ConvergeMetrics(routes int) (converge, birdKernel, ceRSS, birdRSS string) {
	l := fibbench.SizeLabel(routes)
	return "converge_" + l + "_s", "bird_kernel_" + l + "_s", "ce_rss_mb_" + l, "bird_rss_mb_" + l
}

// Converge measures full-table BGP convergence (needs root, BIRD 2 and the
// splitplane binary), each figure the median over the rounds:
//   - converge_SIZE_s: a sender announces SIZE routegen prefixes over eBGP
//     to a real CE (`splitplane ce`, its own process) with a real FE
//     (`splitplane fe`, its own process, the XDP datapath attached natively
//     to the router's veth port) associated and synced before the session
//     starts; the time from the session reaching Established, as the sender
//     records it (BIRD sends its first UPDATE at once), until the FE's
//     status counts every route programmed in the datapath (polled every
//     20ms). Against bird_kernel_SIZE_s;
//   - bird_kernel_SIZE_s: the same sender, the same table, received by BIRD 2
//     in a namespace of its own, its kernel protocol installing every route
//     into the kernel's main table; the time from Established until the
//     kernel holds them all, counted from the kernel's own route
//     notifications (an RTM_NEWROUTE listener in BIRD's namespace, exact to
//     the route) and checked by a full netlink dump at the end;
//   - gobgp_alone_SIZE_s and gobgp_alone_rss_mb_SIZE: the same table into
//     GoBGP with nothing else to do (`splitplane peer --routes 0` in the
//     CE's place: GoBGP v4 as the CE embeds it, its best-path watcher only
//     counting), timed to its last route, and its VmRSS after Settle: the
//     floor under any CE built on GoBGP;
//   - ce_rss_mb_SIZE: VmRSS of the CE process, in MB of 10^6 bytes, after it
//     has held the complete table for Settle; against bird_rss_mb_SIZE, the
//     receiving BIRD's VmRSS when its table was complete;
//   - converge_SIZE_vs_frr_s: converge_SIZE_s again, against
//     frr_kernel_SIZE_s: the same sender, the same table, received by FRR
//     (bgpd and zebra, Debian's frr, in a namespace of their own), zebra
//     installing every route into the kernel's main table, timed as BIRD's
//     (zebra marks the routes proto bgp); ce_rss_vs_frr_mb_SIZE is the CE's
//     memory against FRR's, bgpd's and zebra's VmRSS summed when the table
//     was complete;
//   - ce_rss_over_gobgp_mb_SIZE: ce_rss_mb_SIZE less gobgp_alone_rss_mb_SIZE
//     (the baseline), what the CE keeps beyond the GoBGP it embeds;
//   - with TwoProviders, converge_2xSIZE_s and ce_rss_mb_2xSIZE: a second
//     sender, a BIRD in AS 65011 on a link of its own (the FE has two
//     ports), announces the same table with its own next hop; the CE runs
//     with bgp_multipath. Both sessions are enabled together; the time runs
//     from the first to reach Established until the CE holds both tables
//     (every prefix received from both neighbours), the FE has every route
//     programmed and the CE has no change pending for it, with its
//     acknowledged changes still for a second (the CE then has handled
//     every path GoBGP chose); against converge_SIZE_s. The CE's VmRSS after
//     Settle, against ce_rss_mb_SIZE.
//
// The sender is one BIRD 2 for the whole run, its static protocol holding the
// table (loaded before any timing) and one BGP session per receiver, enabled
// for that receiver's turn only. The CE and FE, and the receiving BIRD, are
// started afresh for every round. The CE inherits this process's
// environment, so GOGC and GOMEMLIMIT set for the benchmark apply to it.
//
// A convergence that does not reach every route (the count still for Stall,
// Timeout passed, a daemon exited) fails with an error wrapping
// ErrIncomplete, not a figure. Namespaces (cvg-PID-N-*) and processes are
// removed at the end, also on error or cancellation.
func Converge(ctx context.Context, opts ConvergeOptions) (_ []Result, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench converge: needs root (network namespaces, XDP)")
	}
	for _, prog := range []string{"bird", "nsenter", "ip"} {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("bench converge: %s not found (apt-get install bird2 iproute2 util-linux): %w", prog, err)
		}
	}
	if err := checkFRR(); err != nil {
		return nil, fmt.Errorf("bench converge: %w", err)
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("bench converge: the splitplane binary: %w", err)
	}
	c := newConvergeRun(opts)
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "splitplane-converge-"); err != nil {
			return nil, fmt.Errorf("bench converge: %w", err)
		}
		defer func() {
			if err == nil {
				os.RemoveAll(c.dir)
			} else {
				err = fmt.Errorf("%w (configs and logs in %s)", err, c.dir)
			}
		}()
	}
	defer func() {
		if derr := c.down(); derr != nil && err == nil {
			err = fmt.Errorf("bench converge: cleanup: %w", derr)
		}
	}()

	prefixes := routegen.Generate(opts.Routes, opts.Seed)
	if len(prefixes) != opts.Routes {
		return nil, fmt.Errorf("bench converge: route generator returned %d of %d prefixes", len(prefixes), opts.Routes)
	}
	if err := c.up(ctx); err != nil {
		return nil, fmt.Errorf("bench converge: topology: %w", err)
	}
	if err := c.startSender(ctx, prefixes[:opts.Routes-opts.withhold]); err != nil {
		return nil, fmt.Errorf("bench converge: sender: %w", err)
	}

	var sp, bk, rss, brss, gb, grss, fk, frss, two, trss []float64
	for r := range opts.Rounds {
		f, err := c.splitplaneRound(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench converge: splitplane, round %d: %w", r+1, err)
		}
		c.progress("round %d/%d: splitplane %d routes in %.2fs (first route in the FE after %.2fs, 99%% after %.2fs; the CE saw Established %+.3fs from the sender); CE VmRSS %.0f MB (%.0f MB at convergence, %.0f MB of it in huge pages, after %d page faults; peak %.0f MB)",
			r+1, opts.Rounds, opts.Routes, f.all.Seconds(), f.first.Seconds(), f.p99.Seconds(), f.skew.Seconds(), f.rss, f.rssAtEnd, f.hugeMB, f.faults, f.peak)
		b, err := c.birdRound(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench converge: BIRD, round %d: %w", r+1, err)
		}
		c.progress("round %d/%d: BIRD into the kernel %d routes in %.2fs (first after %.2fs, 99%% after %.2fs); BIRD VmRSS %.0f MB",
			r+1, opts.Rounds, opts.Routes, b.all.Seconds(), b.first.Seconds(), b.p99.Seconds(), b.rss)
		g, err := c.gobgpRound(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench converge: GoBGP alone, round %d: %w", r+1, err)
		}
		c.progress("round %d/%d: GoBGP alone %d routes in %.2fs (first after %.2fs, 99%% after %.2fs); VmRSS %.0f MB",
			r+1, opts.Rounds, opts.Routes, g.all.Seconds(), g.first.Seconds(), g.p99.Seconds(), g.rss)
		fr, err := c.frrRound(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench converge: FRR, round %d: %w", r+1, err)
		}
		c.progress("round %d/%d: FRR (bgpd, zebra) into the kernel %d routes in %.2fs (first after %.2fs, 99%% after %.2fs); bgpd and zebra VmRSS %.0f MB",
			r+1, opts.Rounds, opts.Routes, fr.all.Seconds(), fr.first.Seconds(), fr.p99.Seconds(), fr.rss)
		sp, bk, gb, fk = append(sp, f.all.Seconds()), append(bk, b.all.Seconds()), append(gb, g.all.Seconds()), append(fk, fr.all.Seconds())
		rss, brss, grss, frss = append(rss, f.rss), append(brss, b.rss), append(grss, g.rss), append(frss, fr.rss)
		if !opts.TwoProviders {
			continue
		}
		t, err := c.twoProvidersRound(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench converge: two providers, round %d: %w", r+1, err)
		}
		c.progress("round %d/%d: splitplane, two providers, 2x%d paths in %.2fs (the second session up %+.3fs after the first; first route in the FE after %.2fs); CE VmRSS %.0f MB",
			r+1, opts.Rounds, opts.Routes, t.all.Seconds(), t.skew.Seconds(), t.first.Seconds(), t.rss)
		two, trss = append(two, t.all.Seconds()), append(trss, t.rss)
	}
	conv, bird, ceRSS, birdRSS := ConvergeMetrics(opts.Routes)
	gConv, gRSS := GoBGPMetrics(opts.Routes)
	vsFRR, frrKernel, ceVsFRR, frrRSS := FRRMetrics(opts.Routes)
	results := []Result{
		{Metric: conv, Value: median(sp), Unit: "s", Baseline: bird, BaselineValue: median(bk)},
		{Metric: ceRSS, Value: median(rss), Unit: "MB", Baseline: birdRSS, BaselineValue: median(brss)},
		{Metric: gConv, Value: median(gb), Unit: "s", Baseline: bird, BaselineValue: median(bk)},
		{Metric: gRSS, Value: median(grss), Unit: "MB", Baseline: birdRSS, BaselineValue: median(brss)},
		{Metric: vsFRR, Value: median(sp), Unit: "s", Baseline: frrKernel, BaselineValue: median(fk)},
		{Metric: ceVsFRR, Value: median(rss), Unit: "MB", Baseline: frrRSS, BaselineValue: median(frss)},
		{Metric: CEOverGoBGPMetric(opts.Routes), Value: median(rss) - median(grss), Unit: "MB", Baseline: gRSS, BaselineValue: median(grss)},
	}
	if opts.TwoProviders {
		twoConv, twoRSS := TwoProvidersMetrics(opts.Routes)
		results = append(results,
			Result{Metric: twoConv, Value: median(two), Unit: "s", Baseline: conv, BaselineValue: median(sp)},
			Result{Metric: twoRSS, Value: median(trss), Unit: "MB", Baseline: ceRSS, BaselineValue: median(rss)})
	}
	return results, nil
}

// The benchmark's addressing, inside its own namespaces: the sender (AS
// 65010) faces the router (AS 65001) on one link, the receiving BIRD (AS
// 65020) on another and FRR (AS 65030) on a third; with TwoProviders, the
// second sender (AS 65011) faces the router on a link of its own.
const (
	cvgSenderASN  = 65010
	cvgSender2ASN = 65011
	cvgRouterASN  = 65001
	cvgBIRDASN    = 65020
	cvgFRRASN     = 65030
	cvgForCES     = "127.0.0.1:6700"
)

// cvgSenderRtr is the sender's address on the router link, cvgRouter the
// router's; cvgSenderBrd and cvgBIRD are the same on the BIRD link.
func cvgSenderRtr() netip.Addr { return netip.AddrFrom4([4]byte{10, 203, 1, 2}) }
func cvgRouter() netip.Addr    { return netip.AddrFrom4([4]byte{10, 203, 1, 1}) }
func cvgSenderBrd() netip.Addr { return netip.AddrFrom4([4]byte{10, 203, 2, 2}) }
func cvgBIRD() netip.Addr      { return netip.AddrFrom4([4]byte{10, 203, 2, 1}) }

// cvgSenderFRR and cvgFRR are the sender's and FRR's addresses on the FRR
// link; cvgSender2 and cvgRouter2 the second sender's and the router's on
// theirs.
func cvgSenderFRR() netip.Addr { return netip.AddrFrom4([4]byte{10, 203, 3, 2}) }
func cvgFRR() netip.Addr       { return netip.AddrFrom4([4]byte{10, 203, 3, 1}) }
func cvgSender2() netip.Addr   { return netip.AddrFrom4([4]byte{10, 203, 4, 2}) }
func cvgRouter2() netip.Addr   { return netip.AddrFrom4([4]byte{10, 203, 4, 1}) }

// convergeRun is one Converge call: its namespaces, processes and files.
type convergeRun struct {
	opts    ConvergeOptions
	dir     string
	ns      struct{ snd, snd2, rtr, brd, frr string }
	created []string // namespaces to delete
	procs   []*harness.Proc
	sender  *harness.Proc
	sender2 *harness.Proc // with TwoProviders
}

func newConvergeRun(opts ConvergeOptions) *convergeRun {
	c := &convergeRun{opts: opts, dir: opts.Dir}
	prefix := harness.FreePrefix("cvg")
	c.ns.snd, c.ns.snd2, c.ns.rtr = prefix+"-snd", prefix+"-sn2", prefix+"-rtr"
	c.ns.brd, c.ns.frr = prefix+"-brd", prefix+"-frr"
	return c
}

func (c *convergeRun) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "bench converge: "+format+"\n", args...)
	}
}

func (c *convergeRun) path(name string) string { return filepath.Join(c.dir, name) }

// up creates the sender's and the router's namespaces and the link between
// them, and with TwoProviders the second sender's and its link; the
// receiving BIRD's and FRR's namespaces are made per round.
func (c *convergeRun) up(ctx context.Context) error {
	nss := []string{c.ns.snd, c.ns.rtr}
	if c.opts.TwoProviders {
		nss = append(nss, c.ns.snd2)
	}
	for _, ns := range nss {
		if err := c.addNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if err := c.link(ctx, c.ns.snd, "snd0", cvgSenderRtr(), c.ns.rtr, "rtr0", cvgRouter()); err != nil {
		return err
	}
	if !c.opts.TwoProviders {
		return nil
	}
	return c.link(ctx, c.ns.snd2, "snd0", cvgSender2(), c.ns.rtr, "rtr1", cvgRouter2())
}

func (c *convergeRun) addNamespace(ctx context.Context, ns string) error {
	if err := harness.AddNamespace(ctx, ns); err != nil {
		return err
	}
	c.created = append(c.created, ns)
	// No IPv6 chatter on the links; the table is IPv4.
	return harness.NoIPv6(ctx, ns)
}

func (c *convergeRun) link(ctx context.Context, ns1, if1 string, a1 netip.Addr, ns2, if2 string, a2 netip.Addr) error {
	return harness.AddVeth(ctx, harness.Veth{
		A: harness.End{NS: ns1, Dev: if1, Addrs: []netip.Prefix{netip.PrefixFrom(a1, 24)}},
		B: harness.End{NS: ns2, Dev: if2, Addrs: []netip.Prefix{netip.PrefixFrom(a2, 24)}},
	})
}

// delNamespace deletes a namespace. Its links go first, each removing its
// routes in one synchronous flush, so that a namespace holding a full table
// is not left for the kernel to clean up in the background while the next
// measurement runs.
func (c *convergeRun) delNamespace(ns string) error {
	ctx := context.Background()
	var errs []error
	for _, dev := range []string{"brd0", "frr0", "rtr0", "rtr1", "snd0", "snd1", "snd2"} {
		if exec.Command("ip", "-n", ns, "link", "show", dev).Run() == nil {
			if err := harness.Run(ctx, "ip", "-n", ns, "link", "del", dev); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := harness.DelNamespace(ctx, ns); err != nil {
		errs = append(errs, err)
	}
	for i, n := range c.created {
		if n == ns {
			c.created = append(c.created[:i], c.created[i+1:]...)
			break
		}
	}
	return errors.Join(errs...)
}

// down stops every process still running, by pid, and deletes the
// namespaces.
func (c *convergeRun) down() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].Stop(cvgStopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	for len(c.created) > 0 {
		if err := c.delNamespace(c.created[len(c.created)-1]); err != nil {
			errs = append(errs, err)
			c.created = c.created[:len(c.created)-1]
		}
	}
	return errors.Join(errs...)
}

// startSender writes the sender's configuration (the table as static routes,
// a disabled BGP session per receiver) and starts it, waiting until it holds
// the whole table.
func (c *convergeRun) startSender(ctx context.Context, prefixes []netip.Prefix) error {
	f, err := os.Create(c.path("routes.conf"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, p := range prefixes {
		fmt.Fprintf(w, "route %s blackhole;\n", p)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	conf := fmt.Sprintf(`# The sender of 'splitplane bench converge': the table as static routes,
# announced over one eBGP session per receiver, each enabled in its turn.
log stderr { info, warning, error, fatal };
router id %[1]s;
timeformat protocol iso long ms;
protocol device { }
protocol static table4 {
  ipv4;
  include "%[2]s";
}
protocol bgp to_ce {
  disabled;
  local %[1]s as %[3]d;
  neighbor %[4]s as %[5]d;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import none; export all; };
}
protocol bgp to_bird {
  disabled;
  local %[6]s as %[3]d;
  neighbor %[7]s as %[8]d;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import none; export all; };
}
protocol bgp to_frr {
  disabled;
  local %[9]s as %[3]d;
  neighbor %[10]s as %[11]d;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import none; export all; };
}
`, cvgSenderRtr(), c.path("routes.conf"), cvgSenderASN, cvgRouter(), cvgRouterASN, cvgSenderBrd(), cvgBIRD(), cvgBIRDASN,
		cvgSenderFRR(), cvgFRR(), cvgFRRASN)
	if err := os.WriteFile(c.path("sender.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if c.sender, err = c.startBIRDSender(ctx, "sender", c.ns.snd, len(prefixes)); err != nil || !c.opts.TwoProviders {
		return err
	}
	conf = fmt.Sprintf(`# The second sender of 'splitplane bench converge' (two providers): the
# same table, from another AS over another link.
log stderr { info, warning, error, fatal };
router id %[1]s;
timeformat protocol iso long ms;
protocol device { }
protocol static table4 {
  ipv4;
  include "%[2]s";
}
protocol bgp to_ce {
  disabled;
  local %[1]s as %[3]d;
  neighbor %[4]s as %[5]d;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import none; export all; };
}
`, cvgSender2(), c.path("routes.conf"), cvgSender2ASN, cvgRouter2(), cvgRouterASN)
	if err := os.WriteFile(c.path("sender2.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	c.sender2, err = c.startBIRDSender(ctx, "sender2", c.ns.snd2, len(prefixes))
	return err
}

// startBIRDSender starts the sender BIRD configured in DIR/NAME.conf in
// namespace ns and waits until its static protocol holds want routes.
func (c *convergeRun) startBIRDSender(ctx context.Context, name, ns string, want int) (*harness.Proc, error) {
	start := time.Now()
	ctl := c.path(name + ".ctl")
	p, err := c.start(name, ns, "bird", "-f", "-c", c.path(name+".conf"), "-s", ctl, "-P", c.path(name+".pid"))
	if err != nil {
		return nil, err
	}
	err = c.poll(ctx, time.Minute, 100*time.Millisecond, fmt.Sprintf("the %s to load %d static routes", name, want), []*harness.Proc{p}, func() (bool, error) {
		lines, err := birdCLI(ctl, "show protocols all table4")
		if err != nil {
			return false, nil // not serving yet
		}
		imported, _, ok := birdRouteCounts(lines)
		return ok && imported == want, nil
	})
	if err != nil {
		return nil, err
	}
	c.progress("%s (BIRD, namespace %s) holds %d routes, %.1fs after its start", name, ns, want, time.Since(start).Seconds())
	return p, nil
}
