package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/internal/host"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/peer"
)

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

// cvgNeighbor is one of the CE's BGP neighbours in the benchmark.
type cvgNeighbor struct {
	addr netip.Addr
	asn  int
}

// router is a round's CE and FE: their processes and status clients, and
// when the FE associated.
type router struct {
	ce, fe             *harness.Proc
	ceStatus, feStatus *statusClient
	assoc              time.Time
}

func (r *router) close() {
	if r.ceStatus != nil {
		r.ceStatus.close()
		r.feStatus.close()
	}
}

// startRouter writes the CE's configuration (peering with neighbors, with
// multipath if set) and the FE's (on ports), starts both and waits for the
// FE to be associated and synced (empty). It fills r as it goes, so that a
// deferred endRound stops what started.
func (c *convergeRun) startRouter(ctx context.Context, r *router, neighbors []cvgNeighbor, multipath bool, ports []string) error {
	var ns strings.Builder
	for _, n := range neighbors {
		fmt.Fprintf(&ns, `  - address: %s
    asn: %d
    connect_retry: 1s
    import: {default: accept}   # eBGP: without it no route is accepted (RFC 8212)
`, n.addr, n.asn)
	}
	ceConf := fmt.Sprintf(`# CE of 'splitplane bench converge'
id: 1
asn: %d
router_id: %s
bgp_listen_addresses: [%s]
bgp_multipath: %t
forces_listen: %s
sync_hold: 1ms   # nothing to wait for: the FE is synced (empty) before the session starts
status_socket: %s
api_listen: "off"
neighbors:
%s`, cvgRouterASN, cvgRouter(), listenAddrs(len(neighbors)), multipath, cvgForCES, c.path("ce.sock"), ns.String())
	feConf := fmt.Sprintf(`# FE of 'splitplane bench converge'
id: 1
name: converge-fe
ce_address: %s
ports: [%s]
kernel_routes: connected
xdp_mode: native
status_socket: %s
`, cvgForCES, strings.Join(ports, ", "), c.path("fe.sock"))
	if err := os.WriteFile(c.path("ce.yaml"), []byte(ceConf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("fe.yaml"), []byte(feConf), 0o644); err != nil {
		return err
	}
	var err error
	if r.ce, err = c.start("ce", c.ns.rtr, c.opts.Binary, "ce", "--config", c.path("ce.yaml")); err != nil {
		return err
	}
	if r.fe, err = c.start("fe", c.ns.rtr, c.opts.Binary, "fe", "--config", c.path("fe.yaml")); err != nil {
		return err
	}
	r.ceStatus, r.feStatus = newStatusClient(c.path("ce.sock")), newStatusClient(c.path("fe.sock"))
	return c.poll(ctx, time.Minute, 50*time.Millisecond, "the FE to be associated and synced", c.routerDaemons(r), func() (bool, error) {
		var st ce.Status
		if err := r.ceStatus.get(&st); err != nil {
			return false, nil
		}
		if len(st.FEs) == 1 && st.FEs[0].Synced {
			r.assoc = st.FEs[0].AssociatedAt
			return true, nil
		}
		return false, nil
	})
}

// listenAddrs is the CE's bgp_listen_addresses: the router's address on
// the first sender's link and, with two neighbours, on the second's.
func listenAddrs(neighbors int) string {
	if neighbors > 1 {
		return fmt.Sprintf("%q, %q", cvgRouter(), cvgRouter2())
	}
	return fmt.Sprintf("%q", cvgRouter())
}

// routerDaemons are the processes a round with the router depends on.
func (c *convergeRun) routerDaemons(r *router) []*harness.Proc {
	ds := []*harness.Proc{c.sender, r.ce, r.fe}
	if c.sender2 != nil {
		ds = append(ds, c.sender2)
	}
	return ds
}

// splitplaneRound starts a CE and an FE, waits for the FE to be associated
// and synced (empty), enables the sender's session and times the table into
// the FE's datapath.
func (c *convergeRun) splitplaneRound(ctx context.Context) (f splitplaneFigures, err error) {
	// The FE and the CE stop before the sender's session goes down, so
	// that none of them spends the stop on a million withdrawals.
	var r router
	enabled := false
	defer c.endRound("to_ce", &enabled, &err, &r.ce, &r.fe)
	defer r.close()
	if err := c.startRouter(ctx, &r, []cvgNeighbor{{cvgSenderRtr(), cvgSenderASN}}, false, []string{"rtr0"}); err != nil {
		return f, err
	}
	ceProc, ceStatus, feStatus, assoc := r.ce, r.ceStatus, r.feStatus, r.assoc
	daemons := c.routerDaemons(&r)

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
	if f.rssAtEnd, _, err = host.ProcessMemory(ceProc.Pid()); err != nil {
		return f, err
	}
	// Where a page fault is dear they are much of the time (docs/operations.md,
	// "Transparent huge pages"); what cannot be read stays 0.
	f.faults, f.hugeMB, _ = procFaults(ceProc.Pid())
	if err := sleepCtx(ctx, c.opts.Settle); err != nil {
		return f, err
	}
	if f.rss, f.peak, err = host.ProcessMemory(ceProc.Pid()); err != nil {
		return f, err
	}
	var st ce.Status
	if err := ceStatus.get(&st); err != nil {
		return f, fmt.Errorf("CE status: %w", err)
	}
	if err := checkFE(st, assoc); err != nil {
		return f, err
	}
	if st.Routes != c.opts.Routes {
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
	if err := c.link(ctx, c.ns.snd, "snd1", cvgSenderBrd(), c.ns.brd, "brd0", cvgBIRD()); err != nil {
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
`, cvgBIRD(), cvgBIRDASN, cvgSenderBrd(), cvgSenderASN)
	if err := os.WriteFile(c.path("bird.conf"), []byte(conf), 0o644); err != nil {
		return b, err
	}
	counter, err := newRouteCounter(c.ns.brd, rtprotBIRD, c.opts.Routes)
	if err != nil {
		return b, fmt.Errorf("route notifications: %w", err)
	}
	defer counter.close()
	// The receiving BIRD stops (leaving its routes, persist) before the
	// sender's session goes down, and the namespace goes last.
	var birdProc *harness.Proc
	enabled := false
	defer c.endRound("to_bird", &enabled, &err, &birdProc)
	if birdProc, err = c.start("bird", c.ns.brd, "bird", "-f", "-c", c.path("bird.conf"), "-s", c.path("bird.ctl"), "-P", c.path("bird.pid")); err != nil {
		return b, err
	}
	daemons := []*harness.Proc{c.sender, birdProc}
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
	if b.rss, _, err = host.ProcessMemory(birdProc.Pid()); err != nil {
		return b, err
	}
	return b, checkKernelTable(c.ns.brd, rtprotBIRD, counter, c.opts.Routes)
}

// gobgpRound starts `splitplane peer` in the CE's place, announcing nothing,
// and times the table into its GoBGP (its status's received count).
func (c *convergeRun) gobgpRound(ctx context.Context) (g birdFigures, err error) {
	var proc *harness.Proc
	enabled := false
	defer c.endRound("to_ce", &enabled, &err, &proc)
	sock := c.path("gobgp.sock")
	proc, err = c.start("gobgp", c.ns.rtr, c.opts.Binary, "peer", "--routes", "0",
		"--asn", strconv.Itoa(cvgRouterASN), "--router-id", cvgRouter().String(), "--next-hop", cvgRouter().String(),
		"--neighbor", cvgSenderRtr().String(), "--neighbor-asn", strconv.Itoa(cvgSenderASN), "--control", sock)
	if err != nil {
		return g, err
	}
	daemons := []*harness.Proc{c.sender, proc}
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
	g.rss, _, err = host.ProcessMemory(proc.Pid())
	return g, err
}

// enableSession enables one of the sender's sessions and returns when it
// reached Established, as the sender records it.
func (c *convergeRun) enableSession(ctx context.Context, name string, daemons []*harness.Proc) (time.Time, error) {
	if _, err := birdCLI(c.path("sender.ctl"), "enable "+name); err != nil {
		return time.Time{}, fmt.Errorf("sender: enable %s: %w", name, err)
	}
	return c.waitEstablished(ctx, c.path("sender.ctl"), name, daemons)
}

// waitEstablished waits for session name of the sender BIRD at control
// socket ctl to reach Established and returns when it did, as that sender
// records it.
func (c *convergeRun) waitEstablished(ctx context.Context, ctl, name string, daemons []*harness.Proc) (time.Time, error) {
	var est time.Time
	sender := strings.TrimSuffix(filepath.Base(ctl), ".ctl")
	err := c.poll(ctx, time.Minute, 20*time.Millisecond, "the "+sender+"'s session "+name+" to be established", daemons, func() (bool, error) {
		lines, err := birdCLI(ctl, "show protocols "+name)
		if err != nil {
			return false, fmt.Errorf("%s: %w", sender, err)
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
	c.disableSessionOn(c.path("sender.ctl"), name, err)
}

// disableSessionOn is disableSession for the sender BIRD at control socket
// ctl.
func (c *convergeRun) disableSessionOn(ctl, name string, err *error) {
	if _, derr := birdCLI(ctl, "disable "+name); derr != nil && *err == nil {
		*err = fmt.Errorf("%s: disable %s: %w", strings.TrimSuffix(filepath.Base(ctl), ".ctl"), name, derr)
	}
}

// pollInterval is how often a receiver's route count is read while it
// converges.
const pollInterval = 20 * time.Millisecond

// waitTable polls count until it reaches Routes and returns the times
// (since est) of the first route, of 99% and of the last. It fails, wrapping
// ErrIncomplete, when the count stays still for Stall, when Timeout passes or
// when a daemon exits.
func (c *convergeRun) waitTable(ctx context.Context, est time.Time, what string, daemons []*harness.Proc, count func() (int, time.Time, error)) (tableTimes, error) {
	return c.waitProgress(ctx, est, what, daemons, func() (int, uint64, time.Time, error) {
		n, at, err := count()
		return n, uint64(n), at, err
	})
}

// waitProgress is waitTable with a count that also returns a measure of
// progress: the convergence stalls when that stays still for Stall.
func (c *convergeRun) waitProgress(ctx context.Context, est time.Time, what string, daemons []*harness.Proc, count func() (int, uint64, time.Time, error)) (tableTimes, error) {
	var t tableTimes
	want := c.opts.Routes
	var last uint64
	lastChange := time.Now()
	deadline := est.Add(c.opts.Timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		n, progress, at, err := count()
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
		if progress != last {
			last, lastChange = progress, now
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
func (c *convergeRun) poll(ctx context.Context, timeout, interval time.Duration, what string, daemons []*harness.Proc, done func() (bool, error)) error {
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

// cvgStopGrace is how long a daemon has between SIGTERM and SIGKILL: a CE
// with a full table may take a while to shut down.
const cvgStopGrace = 15 * time.Second

// start runs a program in a namespace, logging to DIR/NAME.log, and
// remembers it for stopping.
func (c *convergeRun) start(name, ns string, args ...string) (*harness.Proc, error) {
	p, err := harness.Start(name, ns, c.path(name+".log"), args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func exitedErr(ps []*harness.Proc) error {
	for _, p := range ps {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// endRound ends a round: it stops the round's receivers, the last started
// first, and then, if *enabled, disables the sender's session to them, so
// that no receiver spends its stop on the table's withdrawal. Deferred, it
// reads the pointers when the round returns; it sets *err as stopProc.
func (c *convergeRun) endRound(session string, enabled *bool, err *error, procs ...**harness.Proc) {
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
func (c *convergeRun) stopProc(p *harness.Proc, err *error) {
	if serr := p.Stop(cvgStopGrace); serr != nil && *err == nil {
		*err = serr
	}
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
}

type twoProvidersFigures struct {
	tableTimes
	skew time.Duration // the second session's Established less the first's
	rss  float64       // MB
}

// twoProvidersQuiet is how long the CE's acknowledged changes to the FE
// must stay still, with both tables received and nothing pending, for the
// two-provider convergence to count as done: GoBGP counts a path received
// before the CE has seen its best-path change.
const twoProvidersQuiet = time.Second

// twoProvidersRound starts a CE with multipath and an FE on both senders'
// links, enables both senders' sessions together and times both tables
// into the CE and the resulting ECMP routes into the FE's datapath.
func (c *convergeRun) twoProvidersRound(ctx context.Context) (t twoProvidersFigures, err error) {
	var r router
	enabled := false
	defer func() {
		c.endRound("to_ce", &enabled, &err, &r.ce, &r.fe) // stops both, disables the first sender's session
		if enabled {
			c.disableSessionOn(c.path("sender2.ctl"), "to_ce", &err)
		}
	}()
	defer r.close()
	neighbors := []cvgNeighbor{{cvgSenderRtr(), cvgSenderASN}, {cvgSender2(), cvgSender2ASN}}
	if err := c.startRouter(ctx, &r, neighbors, true, []string{"rtr0", "rtr1"}); err != nil {
		return t, err
	}
	daemons := c.routerDaemons(&r)
	enabled = true
	for _, ctl := range []string{c.path("sender.ctl"), c.path("sender2.ctl")} {
		if _, err := birdCLI(ctl, "enable to_ce"); err != nil {
			return t, fmt.Errorf("%s: enable to_ce: %w", ctl, err)
		}
	}
	est1, err := c.waitEstablished(ctx, c.path("sender.ctl"), "to_ce", daemons)
	if err != nil {
		return t, err
	}
	est2, err := c.waitEstablished(ctx, c.path("sender2.ctl"), "to_ce", daemons)
	if err != nil {
		return t, err
	}
	est := est1
	if est2.Before(est) {
		est = est2
	}
	t.skew = est2.Sub(est1)

	// The count followed is the FE's programmed routes, held back until
	// the CE has both tables and the FE all its changes, still for
	// twoProvidersQuiet; the time is when the FE acknowledged its last
	// change (the CE's prefix counts can be seconds old: GoBGP's are dear
	// to ask for with two full tables). The progress is every path
	// received and every change acknowledged.
	want := c.opts.Routes
	var acked uint64
	var since time.Time
	t.tableTimes, err = c.waitProgress(ctx, est, "routes programmed in the FE from both tables", daemons, func() (int, uint64, time.Time, error) {
		var fst fe.Status
		if err := r.feStatus.get(&fst); err != nil {
			return 0, 0, time.Time{}, err
		}
		now := time.Now()
		var st ce.Status
		if err := r.ceStatus.get(&st); err != nil {
			return 0, 0, time.Time{}, err
		}
		progress := uint64(fst.Programmed)
		for _, n := range st.Neighbors {
			progress += n.Received
		}
		if len(st.FEs) == 1 {
			progress += st.FEs[0].Acked
		}
		n := min(fst.Programmed, want-1)
		if len(st.FEs) == 1 && (since.IsZero() || st.FEs[0].Acked != acked) {
			acked, since = st.FEs[0].Acked, now
		}
		if !bothTables(st, want) || fst.Programmed != want || len(st.FEs) != 1 || st.FEs[0].Pending != 0 {
			return n, progress, now, nil
		}
		if now.Sub(since) < twoProvidersQuiet {
			return n, progress, now, nil
		}
		return want, progress, since, nil
	})
	if err != nil {
		return t, err
	}
	if err := sleepCtx(ctx, c.opts.Settle); err != nil {
		return t, err
	}
	if t.rss, _, err = host.ProcessMemory(r.ce.Pid()); err != nil {
		return t, err
	}
	var st ce.Status
	if err := r.ceStatus.get(&st); err != nil {
		return t, fmt.Errorf("CE status: %w", err)
	}
	if err := checkFE(st, r.assoc); err != nil {
		return t, err
	}
	if !bothTables(st, want) {
		return t, fmt.Errorf("%w: the CE holds %d routes, want %d, received from both neighbours (%+v)", ErrIncomplete, st.Routes, want, st.Neighbors)
	}
	var fst fe.Status
	if err := r.feStatus.get(&fst); err != nil {
		return t, fmt.Errorf("FE status: %w", err)
	}
	if fst.Nexthops != 2 || fst.Programmed != want {
		return t, fmt.Errorf("%w: the FE has %d routes programmed over %d next hops, want %d over both senders'", ErrIncomplete, fst.Programmed, fst.Nexthops, want)
	}
	return t, nil
}

// bothTables reports whether the CE holds routes prefixes, each received
// from both of its neighbours.
func bothTables(st ce.Status, routes int) bool {
	if st.Routes != routes || len(st.Neighbors) != 2 {
		return false
	}
	for _, n := range st.Neighbors {
		if n.State != "established" || n.Received != uint64(routes) {
			return false
		}
	}
	return true
}
