package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/internal/nsthread"
	"github.com/splitplane/splitplane/internal/peer"
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

	// withhold makes the sender announce this many routes fewer than Routes
	// while the benchmark waits for Routes (tests of the incomplete case).
	withhold int
}

func (o *ConvergeOptions) defaults() error {
	if o.Routes == 0 {
		o.Routes = 1_000_000
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench converge: the splitplane binary: %w", err)
		}
		o.Binary = b
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Stall == 0 {
		o.Stall = 30 * time.Second
	}
	if o.Settle == 0 {
		o.Settle = 5 * time.Second
	}
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
	MetricConverge1M   = "converge_1m_s"
	MetricBIRDKernel1M = "bird_kernel_1m_s"
	MetricCERSS1M      = "ce_rss_mb_1m"
	MetricBIRDRSS1M    = "bird_rss_mb_1m"
)

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
//     receiving BIRD's VmRSS when its table was complete.
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

	var sp, bk, rss, brss, gb, grss []float64
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
		sp, bk, gb = append(sp, f.all.Seconds()), append(bk, b.all.Seconds()), append(gb, g.all.Seconds())
		rss, brss, grss = append(rss, f.rss), append(brss, b.rss), append(grss, g.rss)
	}
	conv, bird, ceRSS, birdRSS := ConvergeMetrics(opts.Routes)
	gConv, gRSS := GoBGPMetrics(opts.Routes)
	return []Result{
		{Metric: conv, Value: median(sp), Unit: "s", Baseline: bird, BaselineValue: median(bk)},
		{Metric: ceRSS, Value: median(rss), Unit: "MB", Baseline: birdRSS, BaselineValue: median(brss)},
		{Metric: gConv, Value: median(gb), Unit: "s", Baseline: bird, BaselineValue: median(bk)},
		{Metric: gRSS, Value: median(grss), Unit: "MB", Baseline: birdRSS, BaselineValue: median(brss)},
	}, nil
}

// The benchmark's addressing, inside its own namespaces: the sender (AS
// 65010) faces the router (AS 65001) on one link and the receiving BIRD (AS
// 65020) on another.
const (
	cvgSenderASN = 65010
	cvgRouterASN = 65001
	cvgBIRDASN   = 65020
	cvgForCES    = "127.0.0.1:6700"
)

var (
	cvgSenderRtr = netip.MustParseAddr("10.203.1.2") // sender, on the router link
	cvgRouter    = netip.MustParseAddr("10.203.1.1")
	cvgSenderBrd = netip.MustParseAddr("10.203.2.2") // sender, on the BIRD link
	cvgBIRD      = netip.MustParseAddr("10.203.2.1")
)

var convergeSeq atomic.Uint32

// convergeRun is one Converge call: its namespaces, processes and files.
type convergeRun struct {
	opts    ConvergeOptions
	dir     string
	ns      struct{ snd, rtr, brd string }
	created []string // namespaces to delete
	procs   []*cvgProc
	sender  *cvgProc
}

func newConvergeRun(opts ConvergeOptions) *convergeRun {
	c := &convergeRun{opts: opts, dir: opts.Dir}
	prefix := fmt.Sprintf("cvg-%d-%d", os.Getpid(), convergeSeq.Add(1))
	c.ns.snd, c.ns.rtr, c.ns.brd = prefix+"-snd", prefix+"-rtr", prefix+"-brd"
	return c
}

func (c *convergeRun) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "bench converge: "+format+"\n", args...)
	}
}

func (c *convergeRun) path(name string) string { return filepath.Join(c.dir, name) }

// up creates the sender's and the router's namespaces and the link between
// them; the receiving BIRD's namespace is made per round.
func (c *convergeRun) up(ctx context.Context) error {
	for _, ns := range []string{c.ns.snd, c.ns.rtr} {
		if err := c.addNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return c.link(ctx, c.ns.snd, "snd0", cvgSenderRtr, c.ns.rtr, "rtr0", cvgRouter)
}

func (c *convergeRun) addNamespace(ctx context.Context, ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		return fmt.Errorf("namespace %s already exists", ns)
	}
	if err := runCmd(ctx, "ip", "netns", "add", ns); err != nil {
		return err
	}
	c.created = append(c.created, ns)
	if err := runCmd(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	// No IPv6 chatter on the links; the table is IPv4.
	return runCmd(ctx, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
}

func (c *convergeRun) link(ctx context.Context, ns1, if1 string, a1 netip.Addr, ns2, if2 string, a2 netip.Addr) error {
	if err := runCmd(ctx, "ip", "link", "add", if1, "netns", ns1, "type", "veth", "peer", "name", if2, "netns", ns2); err != nil {
		return err
	}
	for _, e := range []struct {
		ns, dev string
		a       netip.Addr
	}{{ns1, if1, a1}, {ns2, if2, a2}} {
		if err := runCmd(ctx, "ip", "-n", e.ns, "addr", "add", e.a.String()+"/24", "dev", e.dev); err != nil {
			return err
		}
		if err := runCmd(ctx, "ip", "-n", e.ns, "link", "set", e.dev, "up"); err != nil {
			return err
		}
	}
	return nil
}

// delNamespace deletes a namespace. Its links go first, each removing its
// routes in one synchronous flush, so that a namespace holding a full table
// is not left for the kernel to clean up in the background while the next
// measurement runs.
func (c *convergeRun) delNamespace(ns string) error {
	ctx := context.Background()
	var errs []error
	for _, dev := range []string{"brd0", "rtr0", "snd0", "snd1"} {
		if exec.Command("ip", "-n", ns, "link", "show", dev).Run() == nil {
			if err := runCmd(ctx, "ip", "-n", ns, "link", "del", dev); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := runCmd(ctx, "ip", "netns", "del", ns); err != nil {
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
		if err := c.procs[i].stop(); err != nil {
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
`, cvgSenderRtr, c.path("routes.conf"), cvgSenderASN, cvgRouter, cvgRouterASN, cvgSenderBrd, cvgBIRD, cvgBIRDASN)
	if err := os.WriteFile(c.path("sender.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	// The BIRD link exists for the whole run; its far end moves into each
	// round's namespace.
	start := time.Now()
	p, err := c.start("sender", c.ns.snd, "bird", "-f", "-c", c.path("sender.conf"), "-s", c.path("sender.ctl"), "-P", c.path("sender.pid"))
	if err != nil {
		return err
	}
	c.sender = p
	want := len(prefixes)
	err = c.poll(ctx, time.Minute, 100*time.Millisecond, fmt.Sprintf("the sender to load %d static routes", want), []*cvgProc{p}, func() (bool, error) {
		lines, err := birdCLI(c.path("sender.ctl"), "show protocols all table4")
		if err != nil {
			return false, nil // not serving yet
		}
		imported, _, ok := birdRouteCounts(lines)
		return ok && imported == want, nil
	})
	if err != nil {
		return err
	}
	c.progress("sender (BIRD, namespace %s) holds %d routes, %.1fs after its start", c.ns.snd, want, time.Since(start).Seconds())
	return nil
}

// tableTimes are the times, from Established, at which the receiver held
// its first route, 99% of them and all of them.
type tableTimes struct{ first, p99, all time.Duration }

type splitplaneFigures struct {
	tableTimes
	skew                time.Duration // the CE's Established time less the sender's
	rss, rssAtEnd, peak float64       // MB
	faults              uint64        // the CE's page faults until convergence
	hugeMB              float64       // of its RSS then, in transparent huge pages
}

// splitplaneRound starts a CE and an FE, waits for the FE to be associated
// and synced (empty), enables the sender's session and times the table into
// the FE's datapath.
func (c *convergeRun) splitplaneRound(ctx context.Context) (f splitplaneFigures, err error) {
	ceConf := fmt.Sprintf(`# CE of 'splitplane bench converge'
id: 1
asn: %d
router_id: %s
bgp_listen_addresses: [%q]
forces_listen: %s
sync_hold: 1ms   # nothing to wait for: the FE is synced (empty) before the session starts
status_socket: %s
api_listen: "off"
neighbors:
  - address: %s
    asn: %d
    connect_retry: 1s
`, cvgRouterASN, cvgRouter, cvgRouter.String(), cvgForCES, c.path("ce.sock"), cvgSenderRtr, cvgSenderASN)
	feConf := fmt.Sprintf(`# FE of 'splitplane bench converge'
id: 1
name: converge-fe
ce_address: %s
ports: [rtr0]
kernel_routes: connected
xdp_mode: native
status_socket: %s
`, cvgForCES, c.path("fe.sock"))
	if err := os.WriteFile(c.path("ce.yaml"), []byte(ceConf), 0o644); err != nil {
		return f, err
	}
	if err := os.WriteFile(c.path("fe.yaml"), []byte(feConf), 0o644); err != nil {
		return f, err
	}
	// The FE and the CE stop before the sender's session goes down, so
	// that none of them spends the stop on a million withdrawals.
	var ceProc, feProc *cvgProc
	enabled := false
	defer c.endRound("to_ce", &enabled, &err, &ceProc, &feProc)
	if ceProc, err = c.start("ce", c.ns.rtr, c.opts.Binary, "ce", "--config", c.path("ce.yaml")); err != nil {
		return f, err
	}
	if feProc, err = c.start("fe", c.ns.rtr, c.opts.Binary, "fe", "--config", c.path("fe.yaml")); err != nil {
		return f, err
	}
	daemons := []*cvgProc{c.sender, ceProc, feProc}
	ceStatus, feStatus := newStatusClient(c.path("ce.sock")), newStatusClient(c.path("fe.sock"))
	defer ceStatus.close()
	defer feStatus.close()

	var assoc time.Time
	err = c.poll(ctx, time.Minute, 50*time.Millisecond, "the FE to be associated and synced", daemons, func() (bool, error) {
		var st ce.Status
		if err := ceStatus.get(&st); err != nil {
			return false, nil
		}
		if len(st.FEs) == 1 && st.FEs[0].Synced {
			assoc = st.FEs[0].AssociatedAt
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return f, err
	}

	enabled = true
	est, err := c.enableSession(ctx, "to_ce", daemons)
	if err != nil {
		return f, err
	}
	f.tableTimes, err = c.waitTable(ctx, est, "routes programmed in the FE", daemons, func() (int, time.Time, error) {
		var st fe.Status
		if err := feStatus.get(&st); err != nil {
			return 0, time.Time{}, err
		}
		return st.Programmed, time.Now(), nil
	})
	if err != nil {
		return f, err
	}
	if f.rssAtEnd, _, err = procMemory(ceProc.pid()); err != nil {
		return f, err
	}
	// Where a page fault is dear they are much of the time (docs/operations.md,
	// "Transparent huge pages"); what cannot be read stays 0.
	f.faults, f.hugeMB, _ = procFaults(ceProc.pid())
	if err := sleepCtx(ctx, c.opts.Settle); err != nil {
		return f, err
	}
	if f.rss, f.peak, err = procMemory(ceProc.pid()); err != nil {
		return f, err
	}
	var st ce.Status
	if err := ceStatus.get(&st); err != nil {
		return f, fmt.Errorf("CE status: %w", err)
	}
	switch {
	case len(st.FEs) != 1 || !st.FEs[0].AssociatedAt.Equal(assoc):
		return f, fmt.Errorf("%w: the FE's association ended or restarted during the transfer", ErrIncomplete)
	case st.FEs[0].Failed != 0:
		return f, fmt.Errorf("%w: the FE failed %d rows", ErrIncomplete, st.FEs[0].Failed)
	case st.Routes != c.opts.Routes:
		return f, fmt.Errorf("%w: the CE holds %d of %d routes", ErrIncomplete, st.Routes, c.opts.Routes)
	}
	for _, n := range st.Neighbors {
		if n.State == "established" {
			f.skew = n.Since.Sub(est)
		}
	}
	return f, nil
}

type birdFigures struct {
	tableTimes
	rss float64 // MB
}

// birdRound starts a BIRD in a fresh namespace, receiving the table from the
// sender and exporting it to the kernel, and times the table into the
// kernel's main table.
func (c *convergeRun) birdRound(ctx context.Context) (b birdFigures, err error) {
	if err := c.addNamespace(ctx, c.ns.brd); err != nil {
		return b, err
	}
	defer func() {
		if derr := c.delNamespace(c.ns.brd); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := c.link(ctx, c.ns.snd, "snd1", cvgSenderBrd, c.ns.brd, "brd0", cvgBIRD); err != nil {
		return b, err
	}
	conf := fmt.Sprintf(`# The receiving BIRD of 'splitplane bench converge' (the baseline)
log stderr { info, warning, error, fatal };
router id %[1]s;
timeformat protocol iso long ms;
protocol device { }
protocol kernel k4 {
  persist;   # leave the routes at exit: the benchmark removes them with the link
  ipv4 { import none; export all; };
}
protocol bgp from_sender {
  local %[1]s as %[2]d;
  neighbor %[3]s as %[4]d;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import all; export none; };
}
`, cvgBIRD, cvgBIRDASN, cvgSenderBrd, cvgSenderASN)
	if err := os.WriteFile(c.path("bird.conf"), []byte(conf), 0o644); err != nil {
		return b, err
	}
	counter, err := newRouteCounter(c.ns.brd, c.opts.Routes)
	if err != nil {
		return b, fmt.Errorf("route notifications: %w", err)
	}
	defer counter.close()
	// The receiving BIRD stops (leaving its routes, persist) before the
	// sender's session goes down, and the namespace goes last.
	var birdProc *cvgProc
	enabled := false
	defer c.endRound("to_bird", &enabled, &err, &birdProc)
	if birdProc, err = c.start("bird", c.ns.brd, "bird", "-f", "-c", c.path("bird.conf"), "-s", c.path("bird.ctl"), "-P", c.path("bird.pid")); err != nil {
		return b, err
	}
	daemons := []*cvgProc{c.sender, birdProc}
	err = c.poll(ctx, time.Minute, 50*time.Millisecond, "the receiving BIRD to serve", daemons, func() (bool, error) {
		_, err := birdCLI(c.path("bird.ctl"), "show status")
		return err == nil, nil
	})
	if err != nil {
		return b, err
	}

	enabled = true
	est, err := c.enableSession(ctx, "to_bird", daemons)
	if err != nil {
		return b, err
	}
	b.tableTimes, err = c.waitTable(ctx, est, "routes in the kernel", daemons, counter.count)
	if err != nil {
		return b, err
	}
	if b.rss, _, err = procMemory(birdProc.pid()); err != nil {
		return b, err
	}
	n, err := countKernelRoutes(c.ns.brd)
	if err != nil {
		return b, fmt.Errorf("count the kernel's routes: %w", err)
	}
	if n != c.opts.Routes {
		return b, fmt.Errorf("%w: the route notifications counted %d routes, a dump of the kernel's table %d, want %d", ErrIncomplete, c.opts.Routes, n, c.opts.Routes)
	}
	return b, nil
}

// gobgpRound starts `splitplane peer` in the CE's place, announcing nothing,
// and times the table into its GoBGP (its status's received count).
func (c *convergeRun) gobgpRound(ctx context.Context) (g birdFigures, err error) {
	var proc *cvgProc
	enabled := false
	defer c.endRound("to_ce", &enabled, &err, &proc)
	sock := c.path("gobgp.sock")
	proc, err = c.start("gobgp", c.ns.rtr, c.opts.Binary, "peer", "--routes", "0",
		"--asn", strconv.Itoa(cvgRouterASN), "--router-id", cvgRouter.String(), "--next-hop", cvgRouter.String(),
		"--neighbor", cvgSenderRtr.String(), "--neighbor-asn", strconv.Itoa(cvgSenderASN), "--control", sock)
	if err != nil {
		return g, err
	}
	daemons := []*cvgProc{c.sender, proc}
	status := newStatusClient(sock)
	status.path = "/status"
	defer status.close()
	err = c.poll(ctx, time.Minute, 50*time.Millisecond, "GoBGP to serve its status", daemons, func() (bool, error) {
		var st peer.Status
		return status.get(&st) == nil, nil
	})
	if err != nil {
		return g, err
	}
	enabled = true
	est, err := c.enableSession(ctx, "to_ce", daemons)
	if err != nil {
		return g, err
	}
	g.tableTimes, err = c.waitTable(ctx, est, "routes received by GoBGP", daemons, func() (int, time.Time, error) {
		var st peer.Status
		if err := status.get(&st); err != nil {
			return 0, time.Time{}, err
		}
		return int(st.Received), time.Now(), nil
	})
	if err != nil {
		return g, err
	}
	if err := sleepCtx(ctx, c.opts.Settle); err != nil {
		return g, err
	}
	g.rss, _, err = procMemory(proc.pid())
	return g, err
}

// enableSession enables one of the sender's sessions and returns when it
// reached Established, as the sender records it.
func (c *convergeRun) enableSession(ctx context.Context, name string, daemons []*cvgProc) (time.Time, error) {
	if _, err := birdCLI(c.path("sender.ctl"), "enable "+name); err != nil {
		return time.Time{}, fmt.Errorf("sender: enable %s: %w", name, err)
	}
	var est time.Time
	err := c.poll(ctx, time.Minute, 20*time.Millisecond, "the sender's session "+name+" to be established", daemons, func() (bool, error) {
		lines, err := birdCLI(c.path("sender.ctl"), "show protocols "+name)
		if err != nil {
			return false, fmt.Errorf("sender: %w", err)
		}
		var ok bool
		est, ok = birdEstablished(lines, name)
		return ok, nil
	})
	return est, err
}

// disableSession disables one of the sender's sessions, setting *err if it
// fails and nothing failed before.
func (c *convergeRun) disableSession(name string, err *error) {
	if _, derr := birdCLI(c.path("sender.ctl"), "disable "+name); derr != nil && *err == nil {
		*err = fmt.Errorf("sender: disable %s: %w", name, derr)
	}
}

// pollInterval is how often a receiver's route count is read while it
// converges.
const pollInterval = 20 * time.Millisecond

// waitTable polls count until it reaches Routes and returns the times
// (since est) of the first route, of 99% and of the last. It fails, wrapping
// ErrIncomplete, when the count stays still for Stall, when Timeout passes or
// when a daemon exits.
func (c *convergeRun) waitTable(ctx context.Context, est time.Time, what string, daemons []*cvgProc, count func() (int, time.Time, error)) (tableTimes, error) {
	var t tableTimes
	want := c.opts.Routes
	last, lastChange := -1, time.Now()
	deadline := est.Add(c.opts.Timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		n, at, err := count()
		if err != nil {
			return t, fmt.Errorf("%w: counting %s: %v", ErrIncomplete, what, err)
		}
		if n > 0 && t.first == 0 {
			t.first = at.Sub(est)
		}
		if n*100 >= want*99 && t.p99 == 0 {
			t.p99 = at.Sub(est)
		}
		if n >= want {
			t.all = at.Sub(est)
			return t, nil
		}
		now := time.Now()
		if n != last {
			last, lastChange = n, now
		}
		switch {
		case now.Sub(lastChange) >= c.opts.Stall:
			return t, fmt.Errorf("%w: %d of %d %s, no change for %s", ErrIncomplete, n, want, what, c.opts.Stall)
		case now.After(deadline):
			return t, fmt.Errorf("%w: %d of %d %s after %s", ErrIncomplete, n, want, what, c.opts.Timeout)
		}
		if err := exitedErr(daemons); err != nil {
			return t, fmt.Errorf("%w: %d of %d %s: %v", ErrIncomplete, n, want, what, err)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-tick.C:
		}
	}
}

// poll calls done every interval until it returns true or an error, failing
// after timeout or when one of the daemons exits.
func (c *convergeRun) poll(ctx context.Context, timeout, interval time.Duration, what string, daemons []*cvgProc, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := exitedErr(daemons); err != nil {
			return fmt.Errorf("%w: waiting for %s: %v", ErrIncomplete, what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: waiting for %s: nothing after %s", ErrIncomplete, what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cvgProc is a daemon the benchmark started, stopped by its pid.
type cvgProc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, once done is closed
}

// start runs a program in a namespace (nsenter execs it, so the pid is the
// program's), in its own process group, logging to DIR/NAME.log.
func (c *convergeRun) start(name, ns string, args ...string) (*cvgProc, error) {
	p := &cvgProc{name: name, log: c.path(name + ".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

func (p *cvgProc) pid() int { return p.cmd.Process.Pid }

// exited returns an error quoting the log if the process has ended.
func (p *cvgProc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) exited (%v); the end of its log:\n%s", p.name, p.pid(), p.err, tail(p.log, 15))
	default:
		return nil
	}
}

func exitedErr(ps []*cvgProc) error {
	for _, p := range ps {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// stop sends SIGTERM and waits; SIGKILL after 15s (a CE with a full table
// may take a while to shut down).
func (p *cvgProc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL", p.name, p.pid())
	}
}

// endRound ends a round: it stops the round's receivers, the last started
// first, and then, if *enabled, disables the sender's session to them, so
// that no receiver spends its stop on the table's withdrawal. Deferred, it
// reads the pointers when the round returns; it sets *err as stopProc.
func (c *convergeRun) endRound(session string, enabled *bool, err *error, procs ...**cvgProc) {
	for i := len(procs) - 1; i >= 0; i-- {
		if p := *procs[i]; p != nil {
			c.stopProc(p, err)
		}
	}
	if *enabled {
		c.disableSession(session, err)
	}
}

// stopProc stops p and forgets it, setting *err if stopping fails and
// nothing failed before.
func (c *convergeRun) stopProc(p *cvgProc, err *error) {
	if serr := p.stop(); serr != nil && *err == nil {
		*err = serr
	}
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// procMemory returns VmRSS and VmHWM (the peak) of a process, in MB.
func procMemory(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		mb, err := kBToMB(v)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, line, err)
		}
		if name == "VmRSS" {
			rss = mb
		} else {
			peak = mb
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, peak, nil
}

// procFaults returns the page faults a process has taken (minor and major,
// from /proc/PID/stat) and how much of its memory is in transparent huge
// pages (AnonHugePages of /proc/PID/smaps_rollup), in MB.
func procFaults(pid int) (faults uint64, hugeMB float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state, ppid, pgrp, session, tty_nr, tpgid, flags,
	// minflt, cminflt, majflt.
	var f []string
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 10 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q: too few fields", pid, b)
	}
	for _, k := range []int{7, 9} {
		n, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, k+3, err)
		}
		faults += n
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return faults, 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			if hugeMB, err = kBToMB(v); err != nil {
				return faults, 0, fmt.Errorf("/proc/%d/smaps_rollup: %s: %w", pid, strings.TrimSpace(line), err)
			}
		}
	}
	return faults, hugeMB, nil
}

// kBToMB reads a /proc value such as "  123456 kB" as MB of 10^6 bytes.
func kBToMB(v string) (float64, error) {
	kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
	return kb * 1024 / 1e6, err
}

// statusClient reads a daemon's status socket over one kept-alive
// connection, so that polling it many times a second costs the daemon no
// new connections.
type statusClient struct {
	c    *http.Client
	t    *http.Transport
	path string // of the status resource: "/" (CE, FE), "/status" (peer)
}

func newStatusClient(socket string) *statusClient {
	t := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &statusClient{c: &http.Client{Timeout: 5 * time.Second, Transport: t}, t: t, path: "/"}
}

func (s *statusClient) get(v any) error {
	resp, err := s.c.Get("http://unix" + s.path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status: %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (s *statusClient) close() { s.t.CloseIdleConnections() }

// birdCLI sends one command to a BIRD control socket and returns the reply's
// lines without their reply codes. A reply code of 8xxx or 9xxx (BIRD's
// errors) is returned as an error.
func birdCLI(socket, command string) ([]string, error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := readBIRDReply(r); err != nil { // the greeting
		return nil, err
	}
	if _, err := io.WriteString(conn, command+"\n"); err != nil {
		return nil, err
	}
	return readBIRDReply(r)
}

// readBIRDReply reads lines up to the last one of a reply ("NNNN text";
// "NNNN-text" and " text" continue it).
func readBIRDReply(r *bufio.Reader) ([]string, error) {
	var out []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out, err
		}
		line = strings.TrimRight(line, "\n")
		if len(line) >= 5 && isDigits(line[:4]) && (line[4] == ' ' || line[4] == '-') {
			code, text := line[:4], line[5:]
			out = append(out, text)
			if line[4] == ' ' {
				if code[0] == '8' || code[0] == '9' {
					return out, fmt.Errorf("bird: %s", text)
				}
				return out, nil
			}
			continue
		}
		if len(line) == 4 && isDigits(line) { // a final code with no text
			return out, nil
		}
		out = append(out, strings.TrimPrefix(line, " "))
	}
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

var (
	birdProtoLine = regexp.MustCompile(`^(\S+)\s+BGP\s+\S+\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+(.*)$`)
	birdRoutes    = regexp.MustCompile(`Routes:\s+(\d+) imported, (?:\d+ filtered, )?(\d+) exported`)
)

// birdEstablished finds protocol name in the reply of `show protocols` and,
// if its session is established, returns since when (the protocol time
// format must be "iso long ms").
func birdEstablished(lines []string, name string) (time.Time, bool) {
	for _, l := range lines {
		m := birdProtoLine.FindStringSubmatch(l)
		if m == nil || m[1] != name || m[2] != "up" || !strings.HasPrefix(m[4], "Established") {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999", m[3], time.Local)
		return t, err == nil
	}
	return time.Time{}, false
}

// birdRouteCounts returns the imported and exported counts of the first
// channel in the reply of `show protocols all NAME`.
func birdRouteCounts(lines []string) (imported, exported int, ok bool) {
	for _, l := range lines {
		if m := birdRoutes.FindStringSubmatch(l); m != nil {
			imported, _ = strconv.Atoi(m[1])
			exported, _ = strconv.Atoi(m[2])
			return imported, exported, true
		}
	}
	return 0, 0, false
}

// routeSocket opens a NETLINK_ROUTE socket in namespace ns, joined to the
// given multicast groups, with a receive timeout.
func routeSocket(ns string, groups uint32, rcvbuf int, timeout time.Duration) (int, error) {
	fd := -1
	err := nsthread.Run(ns, func() error {
		s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		if err := unix.Bind(s, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
			unix.Close(s)
			return err
		}
		fd = s
		return nil
	})
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
		unix.Close(fd)
		return -1, err
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// rtprotBIRD is the protocol number BIRD's kernel protocol marks its routes
// with (RTPROT_BIRD).
const rtprotBIRD = 12

// birdMainRoute reports whether a route message (its payload, a struct
// rtmsg first) is an IPv4 route of BIRD's in the main table.
func birdMainRoute(payload []byte) bool {
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
	return len(payload) >= 12 && payload[0] == unix.AF_INET && payload[4] == unix.RT_TABLE_MAIN && payload[5] == rtprotBIRD
}

// eachNetlinkMessage calls f with the type and payload of every message in b.
func eachNetlinkMessage(b []byte, f func(typ uint16, payload []byte) error) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return fmt.Errorf("netlink message of %d bytes in %d", l, len(b))
		}
		if err := f(binary.NativeEndian.Uint16(b[4:]), b[unix.NLMSG_HDRLEN:l]); err != nil {
			return err
		}
		l = (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return nil
}

// routeCounter counts BIRD's routes in a namespace's main table from the
// kernel's route notifications (RTM_NEWROUTE less RTM_DELROUTE), and records
// when the count first reached its target. It costs the kernel nothing it
// does not do already (BIRD listens to the same notifications), and is
// exact where polling a dump of 1M routes (about a second each) is not.
type routeCounter struct {
	fd      int
	target  int
	stopped atomic.Bool
	done    chan struct{}

	mu      sync.Mutex
	n       int
	reached time.Time
	err     error
}

func newRouteCounter(ns string, target int) (*routeCounter, error) {
	fd, err := routeSocket(ns, unix.RTMGRP_IPV4_ROUTE, 256<<20, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	rc := &routeCounter{fd: fd, target: target, done: make(chan struct{})}
	go rc.run()
	return rc, nil
}

func (rc *routeCounter) run() {
	defer close(rc.done)
	buf := make([]byte, 1<<20)
	for !rc.stopped.Load() {
		n, _, err := unix.Recvfrom(rc.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ENOBUFS: notifications were lost; the count is no longer
			// exact, and the benchmark fails rather than guess.
			rc.mu.Lock()
			rc.err = fmt.Errorf("route notifications: %w", err)
			rc.mu.Unlock()
			return
		}
		delta := 0
		_ = eachNetlinkMessage(buf[:n], func(typ uint16, payload []byte) error {
			if !birdMainRoute(payload) {
				return nil
			}
			switch typ {
			case unix.RTM_NEWROUTE:
				delta++
			case unix.RTM_DELROUTE:
				delta--
			}
			return nil
		})
		if delta != 0 {
			now := time.Now()
			rc.mu.Lock()
			rc.n += delta
			if rc.n >= rc.target && rc.reached.IsZero() {
				rc.reached = now
			}
			rc.mu.Unlock()
		}
	}
}

// count returns the routes counted so far and the time the count holds for:
// when it reached the target, or now.
func (rc *routeCounter) count() (int, time.Time, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.reached.IsZero() {
		return rc.n, rc.reached, rc.err
	}
	return rc.n, time.Now(), rc.err
}

func (rc *routeCounter) close() {
	rc.stopped.Store(true)
	<-rc.done
	unix.Close(rc.fd)
}

// countKernelRoutes dumps the main IPv4 table of namespace ns and counts
// BIRD's routes in it.
func countKernelRoutes(ns string) (int, error) {
	fd, err := routeSocket(ns, 0, 64<<20, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	const seq = 1
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofRtMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[unix.NLMSG_HDRLEN] = unix.AF_INET
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	errDone := errors.New("done")
	buf := make([]byte, 1<<20)
	count := 0
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return count, err
		}
		err = eachNetlinkMessage(buf[:n], func(typ uint16, payload []byte) error {
			switch typ {
			case unix.NLMSG_DONE:
				return errDone
			case unix.NLMSG_ERROR:
				if len(payload) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(payload)); e != 0 {
						return fmt.Errorf("route dump: %w", unix.Errno(-e))
					}
				}
				return errDone
			case unix.RTM_NEWROUTE:
				if birdMainRoute(payload) {
					count++
				}
			}
			return nil
		})
		if errors.Is(err, errDone) {
			return count, nil
		}
		if err != nil {
			return count, err
		}
	}
}
