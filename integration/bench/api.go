package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/splitplane/splitplane/api/packed"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/internal/routegen"
)

// APIOptions configures API. Zero values take the defaults.
type APIOptions struct {
	// Routes is how many routes go through Routes.Bulk (default 1,000,000).
	Routes int
	// Rounds is how many times the whole measurement runs, with a fresh CE
	// and FE each time; each figure is the median (default 3).
	Rounds int
	// Adds is how many single Routes.Add calls are timed until they forward
	// (default 200, at most 65,536).
	Adds int
	// Batch is the number of operations in a RouteBatch (default 10,000),
	// Window how many batches may be sent and not yet acknowledged (default
	// 8).
	Batch, Window int
	// Interval is the time between two frames of the generator during the
	// add measurements (default 100µs): the resolution of the latency.
	Interval time.Duration
	// Seed seeds the route generator (default 1).
	Seed int64
	// Binary is the splitplane executable that runs the CE and the FE (by
	// default the running executable, which is right for `splitplane bench`).
	Binary string
	// Dir keeps the configurations and the daemons' logs; by default a new
	// temporary directory, removed after a successful run and kept (named
	// in the error) after a failed one.
	Dir string
	// Timeout bounds the bulk transfer, from the first batch until the FE
	// holds every route (default 5 minutes); Stall fails it when the FE's
	// count has not moved for this long (default 30s).
	Timeout, Stall time.Duration
	// AddTimeout bounds each add, from the call until its first packet
	// reaches the sink (default 10s).
	AddTimeout time.Duration
	// Progress, if set, receives a line per setup step and per round.
	Progress io.Writer

	// unresolved gives this many of the bulk routes a next hop no FE port
	// reaches, so the FE never holds them all (tests of the incomplete
	// case).
	unresolved int
}

func (o *APIOptions) defaults() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Routes, 1_000_000)
	def(&o.Rounds, 3)
	def(&o.Adds, 200)
	def(&o.Batch, 10_000)
	def(&o.Window, 8)
	if o.Interval == 0 {
		o.Interval = 100 * time.Microsecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench api: the splitplane binary: %w", err)
		}
		o.Binary = b
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Stall == 0 {
		o.Stall = 30 * time.Second
	}
	if o.AddTimeout == 0 {
		o.AddTimeout = 10 * time.Second
	}
	switch {
	case o.Routes < 1 || o.Routes+o.Adds > datapath.MaxRoutes:
		return fmt.Errorf("bench api: routes %d and adds %d: together 1 to %d", o.Routes, o.Adds, datapath.MaxRoutes)
	case o.Rounds < 1:
		return fmt.Errorf("bench api: rounds %d: need at least 1", o.Rounds)
	case o.Adds < 1 || o.Adds > 1<<16:
		return fmt.Errorf("bench api: adds %d: must be 1 to 65536", o.Adds)
	case o.Batch < 1 || o.Window < 1:
		return fmt.Errorf("bench api: batch %d, window %d: need at least 1", o.Batch, o.Window)
	case o.Interval < time.Microsecond:
		return fmt.Errorf("bench api: interval %s: need at least 1µs", o.Interval)
	case o.unresolved < 0 || o.unresolved > o.Routes:
		return fmt.Errorf("bench api: unresolved %d of %d routes", o.unresolved, o.Routes)
	}
	return nil
}

// Metric names of the API benchmark (issue 6).
const (
	MetricAPIBulkRoutesPerSecond     = "api_bulk_routes_per_s"
	MetricAPIBulkTextRoutesPerSecond = "api_bulk_text_routes_per_s"
	MetricAPIAddToForwardP50         = "api_add_to_forward_p50_ms"
	MetricAPIAddToForwardP99         = "api_add_to_forward_p99_ms"
)

// API measures the CE's gRPC API end to end into the XDP datapath (needs
// root and the splitplane binary), each figure the median over the rounds:
//   - api_bulk_routes_per_s: Routes routegen prefixes, next hop a gateway on
//     the subnet of one of the FE's ports, sent through Routes.Bulk in
//     batches of Batch operations as packed_ops (package api/packed),
//     Window batches in flight; timed from the first batch sent until the
//     FE's status (polled every 20ms) counts every route programmed in its
//     datapath. Against fib_install_routes_per_s: the same routes installed
//     into an empty datapath with one SetRoutes call in this process, in the
//     same round (the datapath alone, the ceiling);
//   - api_bulk_text_routes_per_s: the same with the batches' operations as
//     RouteOp messages (prefix and next hops as strings), with a CE and FE
//     of their own;
//   - api_add_to_forward_p50_ms, api_add_to_forward_p99_ms: with the bulk
//     routes in place, Adds single Routes.Add calls, one after the other,
//     each for a new /32 (in 198.18.0.0/15, which no routegen prefix
//     covers) that a generator is already sending UDP frames to, one every
//     Interval; timed from the call until the first frame for that
//     destination reaches the sink. Percentiles over the adds.
//
// The CE (`splitplane ce`, serving the API on a unix socket) and the FE
// (`splitplane fe`, the XDP datapath attached natively to both router
// ports, the kernel not forwarding) run as their own processes in the router
// namespace, started afresh every round and associated before any timing.
// The topology is gen -- router -- sink, as Forward builds it (namespaces
// bapi-PID-N-*); the generator sends from an AF_PACKET socket in gen, and
// an AF_PACKET socket on the sink's port notes when each destination first
// arrives. A bulk transfer the FE never completes (its count still for
// Stall, Timeout passed, a daemon exited), a batch the CE refuses, or a
// destination that never forwards within AddTimeout fails with an error
// wrapping ErrIncomplete, not a figure. Namespaces and processes are
// removed at the end, also on error or cancellation.
func API(ctx context.Context, opts APIOptions) (_ []Result, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench api: needs root (network namespaces, XDP)")
	}
	for _, prog := range []string{"nsenter", "ip", "ethtool"} {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("bench api: %s not found (apt-get install iproute2 util-linux ethtool): %w", prog, err)
		}
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("bench api: the splitplane binary: %w", err)
	}
	a := &apiRun{opts: opts, procs: &convergeRun{
		opts: ConvergeOptions{Routes: opts.Routes, Timeout: opts.Timeout, Stall: opts.Stall},
		dir:  opts.Dir,
	}}
	if a.procs.dir == "" {
		if a.procs.dir, err = os.MkdirTemp("", "splitplane-api-"); err != nil {
			return nil, fmt.Errorf("bench api: %w", err)
		}
		defer func() {
			if err == nil {
				os.RemoveAll(a.procs.dir)
			} else {
				err = fmt.Errorf("%w (configs and logs in %s)", err, a.procs.dir)
			}
		}()
	}

	prefixes := routegen.Generate(opts.Routes, opts.Seed)
	if len(prefixes) != opts.Routes {
		return nil, fmt.Errorf("bench api: route generator returned %d of %d prefixes", len(prefixes), opts.Routes)
	}
	if a.batches, err = bulkPacked(prefixes, opts.Batch, opts.unresolved); err != nil {
		return nil, fmt.Errorf("bench api: %w", err)
	}
	a.textBatches = bulkBatches(prefixes, opts.Batch, opts.unresolved)
	a.fibRoutes = make([]datapath.Route, len(prefixes))
	for i, p := range prefixes {
		a.fibRoutes[i] = datapath.Route{Prefix: p, Nexthop: 1}
	}
	if a.dsts, err = addDestinations(opts.Adds); err != nil {
		return nil, fmt.Errorf("bench api: %w", err)
	}

	a.topo = newFwdTopo()
	prefix := fmt.Sprintf("bapi-%d-%d", os.Getpid(), fwdTopoSeq.Add(1))
	for role, name := range []string{"gen", "rtr", "sink"} {
		a.topo.ns[role] = prefix + "-" + name
	}
	defer func() {
		if cerr := a.topo.down(); cerr != nil && err == nil {
			err = fmt.Errorf("bench api: cleanup: %w", cerr)
		}
	}()
	defer func() {
		if derr := a.procs.down(); derr != nil && err == nil {
			err = fmt.Errorf("bench api: cleanup: %w", derr)
		}
	}()
	a.progress("topology %s, %s, %s", a.topo.ns[roleGen], a.topo.ns[roleRtr], a.topo.ns[roleSink])
	if err := a.up(ctx); err != nil {
		return nil, fmt.Errorf("bench api: topology: %w", err)
	}
	if a.traffic, err = startAPITraffic(a.topo, opts.Interval); err != nil {
		return nil, fmt.Errorf("bench api: traffic: %w", err)
	}
	defer func() {
		if terr := a.traffic.close(); terr != nil && err == nil {
			err = fmt.Errorf("bench api: traffic: %w", terr)
		}
	}()

	var bulk, text, ceiling, p50, p99 []float64
	for r := range opts.Rounds {
		for _, asText := range []bool{false, true} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			form := "packed_ops"
			if asText {
				form = "ops"
			}
			install, err := a.datapathAlone()
			if err != nil {
				return nil, fmt.Errorf("bench api: round %d: the datapath alone: %w", r+1, err)
			}
			// The kernel frees the maps of the last round's FE and of the
			// datapath just closed in the background: that work, and
			// anything else running, should not land in the measurement.
			if waited, busy, err := settle(ctx, 15*time.Second); err != nil {
				return nil, err
			} else if waited > time.Second {
				a.progress("round %d/%d: waited %.1fs for the CPUs to be idle (still %.0f%% busy)", r+1, opts.Rounds, waited.Seconds(), busy*100)
			}
			f, err := a.round(ctx, asText)
			if err != nil {
				return nil, fmt.Errorf("bench api: round %d (%s): %w", r+1, form, err)
			}
			rate := float64(opts.Routes) / f.all.Seconds()
			a.progress("round %d/%d: %d routes as %s through Bulk into the FE's datapath in %.2fs, %.0f routes/s (all acknowledged after %.2fs; the FE had the first after %.2fs, 99%% after %.2fs; page faults: CE %d, FE %d); the datapath alone installs them at %.0f routes/s",
				r+1, opts.Rounds, opts.Routes, form, f.all.Seconds(), rate, f.acked.Seconds(), f.first.Seconds(), f.p99.Seconds(), f.faults[0], f.faults[1], install)
			ceiling = append(ceiling, install)
			if asText {
				text = append(text, rate)
				continue
			}
			a.progress("round %d/%d: %d adds until forwarding: p50 %.2fms, p99 %.2fms, max %.2fms (the Add call itself: p50 %.2fms, p99 %.2fms); generator interval %.0fµs",
				r+1, opts.Rounds, opts.Adds, ms(percentile(f.toForward, 50)), ms(percentile(f.toForward, 99)), ms(percentile(f.toForward, 100)),
				ms(percentile(f.call, 50)), ms(percentile(f.call, 99)), f.interval.Seconds()*1e6)
			bulk = append(bulk, rate)
			p50, p99 = append(p50, ms(percentile(f.toForward, 50))), append(p99, ms(percentile(f.toForward, 99)))
		}
	}
	return []Result{
		{Metric: MetricAPIBulkRoutesPerSecond, Value: median(bulk), Unit: "routes/s", Baseline: fibbench.MetricFIBInstallPerSecond, BaselineValue: median(ceiling)},
		{Metric: MetricAPIBulkTextRoutesPerSecond, Value: median(text), Unit: "routes/s", Baseline: fibbench.MetricFIBInstallPerSecond, BaselineValue: median(ceiling)},
		{Metric: MetricAPIAddToForwardP50, Value: median(p50), Unit: "ms"},
		{Metric: MetricAPIAddToForwardP99, Value: median(p99), Unit: "ms"},
	}, nil
}

// The CE's ForCES address inside the router namespace, and the /16 the
// added /32s come from (inside 198.18.0.0/15, which routegen leaves out).
var (
	apiForCES   = "127.0.0.1:6700"
	apiAddRange = netip.MustParsePrefix("198.18.0.0/16")
	// apiNoRoute is a next hop on no FE port's subnet: it never resolves.
	apiNoRoute = "192.0.2.1"
)

// apiRun is one API call: its topology, daemons and the work it sends.
type apiRun struct {
	opts    APIOptions
	topo    *fwdTopo
	procs   *convergeRun // starts, polls and stops the daemons; its dir holds their files
	traffic *apiTraffic
	batches []*spv1.RouteBatch // packed_ops
	// textBatches hold the same operations as RouteOp messages.
	textBatches []*spv1.RouteBatch
	fibRoutes   []datapath.Route
	dsts        []netip.Addr
}

func (a *apiRun) progress(format string, args ...any) {
	if a.opts.Progress != nil {
		fmt.Fprintf(a.opts.Progress, "bench api: "+format+"\n", args...)
	}
}

// up builds Forward's topology with the router not forwarding in its
// kernel and GRO on the sink's port: with no XDP program there, its NAPI
// must be on for the router's XDP redirects into the veth to arrive.
func (a *apiRun) up(ctx context.Context) error {
	t := a.topo
	if err := t.up(ctx); err != nil {
		return err
	}
	if err := t.setIPForward(ctx, false); err != nil {
		return err
	}
	return runCmd(ctx, "nsenter", "--net=/run/netns/"+t.ns[roleSink], "ethtool", "-K", fwdPort[roleSink], "gro", "on")
}

// bulkBatches makes the Bulk stream's batches: a REPLACE per prefix, next
// hop the sink (the last unresolved ones: a next hop that never resolves).
func bulkBatches(prefixes []netip.Prefix, size, unresolved int) []*spv1.RouteBatch {
	via, nowhere := []string{fwdAddr[roleSink].String()}, []string{apiNoRoute}
	var out []*spv1.RouteBatch
	for start := 0; start < len(prefixes); start += size {
		end := min(start+size, len(prefixes))
		ops := make([]*spv1.RouteOp, end-start)
		routes := make([]spv1.Route, end-start)
		for i := range ops {
			n := start + i
			routes[i] = spv1.Route{Prefix: prefixes[n].String(), NextHops: via}
			if n >= len(prefixes)-unresolved {
				routes[i].NextHops = nowhere
			}
			ops[i] = &spv1.RouteOp{Kind: spv1.RouteOp_KIND_REPLACE, Route: &routes[i]}
		}
		out = append(out, &spv1.RouteBatch{Id: uint64(len(out) + 1), Ops: ops})
	}
	return out
}

// bulkPacked makes the same batches as bulkBatches with the operations in
// packed_ops.
func bulkPacked(prefixes []netip.Prefix, size, unresolved int) ([]*spv1.RouteBatch, error) {
	via, nowhere := []netip.Addr{fwdAddr[roleSink]}, []netip.Addr{netip.MustParseAddr(apiNoRoute)}
	var out []*spv1.RouteBatch
	for start := 0; start < len(prefixes); start += size {
		end := min(start+size, len(prefixes))
		b := make([]byte, 0, (end-start)*13)
		for n := start; n < end; n++ {
			hops := via
			if n >= len(prefixes)-unresolved {
				hops = nowhere
			}
			var err error
			if b, err = packed.AppendReplace(b, prefixes[n], hops, 0); err != nil {
				return nil, err
			}
		}
		out = append(out, &spv1.RouteBatch{Id: uint64(len(out) + 1), PackedOps: b})
	}
	return out, nil
}

// addDestinations returns n host addresses of apiAddRange, after checking
// that routegen keeps out of it.
func addDestinations(n int) ([]netip.Addr, error) {
	excluded := false
	for _, p := range routegen.Excluded() {
		if p.Bits() <= apiAddRange.Bits() && p.Contains(apiAddRange.Addr()) {
			excluded = true
		}
	}
	if !excluded {
		return nil, fmt.Errorf("the route generator does not exclude %s, where the added routes go", apiAddRange)
	}
	base := apiAddRange.Addr().As4()
	out := make([]netip.Addr, n)
	for i := range out {
		// Skip .0 and .255 of every /24, which look like network and
		// broadcast addresses.
		host := i/254<<8 | (i%254 + 1)
		out[i] = netip.AddrFrom4([4]byte{base[0], base[1], byte(host >> 8), byte(host)})
	}
	return out, nil
}

// datapathAlone installs the bulk routes into a fresh datapath with one
// SetRoutes call and returns the rate.
func (a *apiRun) datapathAlone() (float64, error) {
	d, err := datapath.Load()
	if err != nil {
		return 0, err
	}
	defer d.Close()
	start := time.Now()
	if err := d.SetRoutes(a.fibRoutes); err != nil {
		return 0, err
	}
	return float64(len(a.fibRoutes)) / time.Since(start).Seconds(), nil
}

// apiFigures are one round's measurements.
type apiFigures struct {
	tableTimes                    // of the bulk transfer, from the first batch sent
	acked           time.Duration // when the last batch was acknowledged
	toForward, call []time.Duration
	interval        time.Duration // the generator's mean interval between frames
	// faults are the CE's and the FE's page faults during the bulk
	// transfer (docs/operations.md, "Transparent huge pages").
	faults [2]uint64
}

// round starts a CE and an FE, waits for the FE to be associated and synced
// with both ports' subnets known to the CE, then times the bulk transfer
// and the adds.
func (a *apiRun) round(ctx context.Context, asText bool) (f apiFigures, err error) {
	c := a.procs
	apiSock := c.path("api.sock")
	ceConf := fmt.Sprintf(`# CE of 'splitplane bench api'
id: 1
asn: 65001
router_id: %s
bgp_listen_port: -1
forces_listen: %s
sync_hold: 1ms   # no BGP: nothing to wait for
status_socket: %s
api_listen: unix:%s
`, fwdAddr[roleRtrIn], apiForCES, c.path("ce.sock"), apiSock)
	feConf := fmt.Sprintf(`# FE of 'splitplane bench api'
id: 1
name: api-fe
ce_address: %s
ports: [%s, %s]
kernel_routes: connected
xdp_mode: native
status_socket: %s
`, apiForCES, fwdPort[roleRtrIn], fwdPort[roleRtrOut], c.path("fe.sock"))
	if err := os.WriteFile(c.path("ce.yaml"), []byte(ceConf), 0o644); err != nil {
		return f, err
	}
	if err := os.WriteFile(c.path("fe.yaml"), []byte(feConf), 0o644); err != nil {
		return f, err
	}
	os.Remove(apiSock)
	var ceProc, feProc *cvgProc
	defer func() {
		for _, p := range []*cvgProc{feProc, ceProc} {
			if p != nil {
				c.stopProc(p, &err)
			}
		}
	}()
	rtr := a.topo.ns[roleRtr]
	if ceProc, err = c.start("ce", rtr, a.opts.Binary, "ce", "--config", c.path("ce.yaml")); err != nil {
		return f, err
	}
	if feProc, err = c.start("fe", rtr, a.opts.Binary, "fe", "--config", c.path("fe.yaml")); err != nil {
		return f, err
	}
	daemons := []*cvgProc{ceProc, feProc}
	ceStatus, feStatus := newStatusClient(c.path("ce.sock")), newStatusClient(c.path("fe.sock"))
	defer ceStatus.close()
	defer feStatus.close()

	var assoc time.Time
	err = c.poll(ctx, time.Minute, 20*time.Millisecond, "the FE to be associated and synced, its ports' subnets known", daemons, func() (bool, error) {
		var st ce.Status
		if err := ceStatus.get(&st); err != nil || len(st.FEs) != 1 || !st.FEs[0].Synced {
			return false, nil
		}
		assoc = st.FEs[0].AssociatedAt
		known := 0
		for _, p := range st.Connected {
			if p.Contains(fwdAddr[roleRtrIn]) || p.Contains(fwdAddr[roleRtrOut]) {
				known++
			}
		}
		return known == 2, nil
	})
	if err != nil {
		return f, err
	}
	var before fe.Status
	err = c.poll(ctx, time.Minute, 20*time.Millisecond, "the FE's status", daemons, func() (bool, error) {
		return feStatus.get(&before) == nil, nil
	})
	if err != nil {
		return f, err
	}

	cc, err := grpc.NewClient("unix:"+apiSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return f, fmt.Errorf("API client: %w", err)
	}
	defer cc.Close()
	rc := spv1.NewRoutesClient(cc)
	// The API may open its socket after the FE's association: the first
	// call waits for it (without timing), a List of a prefix nothing has.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	ls, err := rc.List(wctx, &spv1.ListRoutesRequest{Prefix: "192.0.2.0/24"}, grpc.WaitForReady(true))
	if err == nil {
		_, err = ls.Recv()
	}
	cancel()
	if err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("the CE's API: %w", err)
	}

	batches := a.batches
	if asText {
		batches = a.textBatches
	}
	var faults [2]uint64 // what cannot be read stays 0
	for i, p := range daemons {
		faults[i], _, _ = procFaults(p.pid())
	}
	start, acked, err := a.bulk(ctx, rc, batches)
	if err != nil {
		return f, err
	}
	f.tableTimes, err = c.waitTable(ctx, start, "routes programmed in the FE", daemons, func() (int, time.Time, error) {
		if err := acked.failure(); err != nil {
			return 0, time.Time{}, err
		}
		var st fe.Status
		if err := feStatus.get(&st); err != nil {
			return 0, time.Time{}, err
		}
		return st.Programmed - before.Programmed, time.Now(), nil
	})
	if err != nil {
		return f, err
	}
	for i, p := range daemons {
		if n, _, err := procFaults(p.pid()); err == nil && faults[i] != 0 {
			f.faults[i] = n - faults[i]
		}
	}
	if f.acked, err = acked.wait(ctx); err != nil {
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
	}

	if asText {
		return f, nil
	}
	if err := a.adds(ctx, rc, &f, daemons); err != nil {
		return f, err
	}
	return f, nil
}

// bulkResult is the outcome of the Bulk stream: when its last
// acknowledgement came (since the first batch), or why it failed.
type bulkResult struct {
	done  chan struct{}
	after time.Duration
	err   error
}

// failure returns the stream's error if it has ended with one, without
// waiting.
func (b *bulkResult) failure() error {
	select {
	case <-b.done:
		return b.err
	default:
		return nil
	}
}

func (b *bulkResult) wait(ctx context.Context) (time.Duration, error) {
	select {
	case <-b.done:
		return b.after, b.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// bulk opens a Bulk stream and sends every batch, at most Window of them
// unacknowledged, in the background. It returns when the first batch went
// out, with the time it did.
func (a *apiRun) bulk(ctx context.Context, rc spv1.RoutesClient, batches []*spv1.RouteBatch) (time.Time, *bulkResult, error) {
	res := &bulkResult{done: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := rc.Bulk(sctx)
	if err != nil {
		cancel()
		return time.Time{}, nil, fmt.Errorf("bulk stream: %w", err)
	}
	window := make(chan struct{}, a.opts.Window)
	started := make(chan time.Time, 1)
	sendErr := make(chan error, 1)
	go func() {
		for i, b := range batches {
			select {
			case window <- struct{}{}:
			case <-sctx.Done():
				sendErr <- sctx.Err()
				return
			}
			if i == 0 {
				started <- time.Now()
			}
			if err := stream.Send(b); err != nil {
				sendErr <- err // the reason comes with Recv
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	var start time.Time
	select {
	case start = <-started:
	case err := <-sendErr:
		cancel()
		return time.Time{}, nil, fmt.Errorf("bulk stream: %w", err)
	}
	go func() {
		defer close(res.done)
		defer cancel()
		applied := 0
		for i := range batches {
			ack, err := stream.Recv()
			if err != nil {
				res.err = fmt.Errorf("%w: Bulk: batch %d of %d: %v", ErrIncomplete, i+1, len(batches), err)
				return
			}
			applied += int(ack.GetApplied())
			<-window
		}
		res.after = time.Since(start)
		if applied != a.opts.Routes {
			res.err = fmt.Errorf("%w: Bulk: the CE applied %d of %d operations", ErrIncomplete, applied, a.opts.Routes)
		}
	}()
	return start, res, nil
}

// adds times the single adds: for each destination, the generator switches
// to it, the sink must not have seen it after a few frames, then Add; the
// time until the sink first sees it is the figure.
func (a *apiRun) adds(ctx context.Context, rc spv1.RoutesClient, f *apiFigures, daemons []*cvgProc) error {
	tr := a.traffic
	tr.forget() // the last round's adds
	via := []string{fwdAddr[roleSink].String()}
	sent0, t0 := tr.sent.Load(), time.Now()
	for i, dst := range a.dsts {
		if err := ctx.Err(); err != nil {
			return err
		}
		mark := tr.sent.Load()
		tr.send(dst)
		// A frame already being built may still carry the last destination.
		for tr.sent.Load() < mark+3 {
			if err := tr.failed(); err != nil {
				return err
			}
			time.Sleep(a.opts.Interval)
		}
		if at, ok := tr.seen(dst); ok {
			return fmt.Errorf("%s arrived at the sink (%s) before its route was added", dst, at.Format(time.StampMicro))
		}
		route := &spv1.Route{Prefix: netip.PrefixFrom(dst, 32).String(), NextHops: via}
		cctx, cancel := context.WithTimeout(ctx, a.opts.AddTimeout)
		start := time.Now()
		_, err := rc.Add(cctx, &spv1.AddRouteRequest{Route: route})
		returned := time.Now()
		cancel()
		if err != nil {
			return fmt.Errorf("%w: add %d of %d (%s): %v", ErrIncomplete, i+1, len(a.dsts), route.Prefix, err)
		}
		at, err := tr.wait(ctx, dst, start.Add(a.opts.AddTimeout))
		if err != nil {
			if xerr := exitedErr(daemons); xerr != nil {
				err = xerr
			}
			return fmt.Errorf("%w: add %d of %d (%s): %v", ErrIncomplete, i+1, len(a.dsts), route.Prefix, err)
		}
		f.toForward = append(f.toForward, at.Sub(start))
		f.call = append(f.call, returned.Sub(start))
	}
	tr.send(netip.Addr{})
	if n := tr.sent.Load() - sent0; n > 0 {
		f.interval = time.Since(t0) / time.Duration(n)
	}
	return nil
}

// apiTraffic is the generator and the sink of the add measurements: a
// thread in the gen namespace sends a UDP frame to the current destination
// every interval from an AF_PACKET socket; a thread in the sink namespace
// reads the sink's port with another and notes when each destination first
// arrived.
type apiTraffic struct {
	dst     atomic.Uint32 // the current destination, 0: none
	sent    atomic.Uint64 // frames sent
	stopped atomic.Bool
	done    chan error // one per thread

	mu     sync.Mutex
	first  map[uint32]time.Time
	notify chan struct{}
	err    error // of a thread that ended early
}

func startAPITraffic(t *fwdTopo, interval time.Duration) (*apiTraffic, error) {
	tr := &apiTraffic{done: make(chan error, 2), first: map[uint32]time.Time{}, notify: make(chan struct{}, 1)}
	rx, err := tr.socket(t, roleSink, unix.ETH_P_IP)
	if err != nil {
		return nil, fmt.Errorf("sink socket: %w", err)
	}
	tx, err := tr.socket(t, roleGen, 0)
	if err != nil {
		unix.Close(rx)
		return nil, fmt.Errorf("generator socket: %w", err)
	}
	go tr.receive(rx)
	go tr.generate(tx, t.ifindex[roleGen], interval)
	return tr, nil
}

// socket opens an AF_PACKET socket on role's port in its namespace: bound to
// protocol, or for sending only (protocol 0, nothing received).
func (tr *apiTraffic) socket(t *fwdTopo, role, protocol int) (int, error) {
	fd := -1
	err := t.in(portNS[role], func() error {
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(uint16(protocol))))
		if err != nil {
			return err
		}
		if protocol != 0 {
			if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(uint16(protocol)), Ifindex: t.ifindex[role]}); err != nil {
				unix.Close(s)
				return err
			}
		}
		fd = s
		return nil
	})
	if err != nil {
		return -1, err
	}
	if protocol != 0 {
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return -1, err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// generate sends from its own locked thread, sleeping with
// clock_nanosleep and a timer slack of 1ns so that the interval is close to
// what was asked.
func (tr *apiTraffic) generate(fd, ifindex int, interval time.Duration) {
	runtime.LockOSThread() // the timer slack is the thread's
	err := func() error {
		defer unix.Close(fd)
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		frame := udpFrame()
		to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_IP), Halen: 6}
		copy(to.Addr[:], fwdMAC[roleRtrIn])
		// Frames go out at absolute times, a multiple of interval apart, so
		// the time a send takes does not stretch the interval; one that is
		// late moves the schedule rather than sending a burst.
		monotonic := func() int64 {
			var ts unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
			return ts.Nano()
		}
		sleepUntil := func(t int64) error {
			ts := unix.NsecToTimespec(t)
			if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("generator: %w", err)
			}
			return nil
		}
		var last uint32
		next := monotonic()
		for !tr.stopped.Load() {
			d := tr.dst.Load()
			if d == 0 {
				// Nothing to send (the bulk transfer): wake up seldom.
				next = monotonic() + time.Millisecond.Nanoseconds()
				if err := sleepUntil(next); err != nil {
					return err
				}
				continue
			}
			if d != last {
				setDestination(frame, d)
				last = d
			}
			if err := unix.Sendto(fd, frame, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return fmt.Errorf("generator: %w", err)
			}
			tr.sent.Add(1)
			next += interval.Nanoseconds()
			if now := monotonic(); next < now {
				next = now
			}
			if err := sleepUntil(next); err != nil {
				return err
			}
		}
		return nil
	}()
	tr.end(err)
}

// receive reads the sink's port and notes each destination's first frame
// from the generator.
func (tr *apiTraffic) receive(fd int) {
	err := func() error {
		defer unix.Close(fd)
		buf := make([]byte, 2048)
		src := fwdAddr[roleGen].As4()
		for !tr.stopped.Load() {
			n, err := unix.Read(fd, buf)
			now := time.Now()
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sink: %w", err)
			}
			b := buf[:n]
			// Ethernet, IPv4 from the generator, UDP.
			if n < 42 || binary.BigEndian.Uint16(b[12:]) != unix.ETH_P_IP || b[23] != unix.IPPROTO_UDP || [4]byte(b[26:30]) != src {
				continue
			}
			d := binary.BigEndian.Uint32(b[30:])
			tr.mu.Lock()
			if _, ok := tr.first[d]; !ok {
				tr.first[d] = now
				select {
				case tr.notify <- struct{}{}:
				default:
				}
			}
			tr.mu.Unlock()
		}
		return nil
	}()
	tr.end(err)
}

func (tr *apiTraffic) end(err error) {
	if err != nil {
		tr.mu.Lock()
		if tr.err == nil {
			tr.err = err
		}
		tr.mu.Unlock()
		select {
		case tr.notify <- struct{}{}:
		default:
		}
	}
	tr.done <- err
}

// send makes the generator send to dst from now on (none: the zero Addr).
func (tr *apiTraffic) send(dst netip.Addr) {
	var v uint32
	if dst.IsValid() {
		v = binary.BigEndian.Uint32(dst.AsSlice())
	}
	tr.dst.Store(v)
}

func (tr *apiTraffic) failed() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.err
}

// forget clears what the sink has seen.
func (tr *apiTraffic) forget() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	clear(tr.first)
}

// seen returns when dst first arrived at the sink.
func (tr *apiTraffic) seen(dst netip.Addr) (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	at, ok := tr.first[binary.BigEndian.Uint32(dst.AsSlice())]
	return at, ok
}

// wait returns when dst first arrived at the sink, waiting for it until
// deadline.
func (tr *apiTraffic) wait(ctx context.Context, dst netip.Addr, deadline time.Time) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if at, ok := tr.seen(dst); ok {
			return at, nil
		}
		if err := tr.failed(); err != nil {
			return time.Time{}, err
		}
		select {
		case <-tr.notify:
		case <-timer.C:
			if at, ok := tr.seen(dst); ok {
				return at, nil
			}
			return time.Time{}, errors.New("no frame for it reached the sink")
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// close stops both threads and returns the first error either had.
func (tr *apiTraffic) close() error {
	tr.stopped.Store(true)
	var errs []error
	for range 2 {
		errs = append(errs, <-tr.done)
	}
	return errors.Join(errs...)
}

// udpFrame is a 60-byte UDP frame from the generator to the router's
// ingress port, its destination to be set.
func udpFrame() []byte {
	b := make([]byte, 60)
	copy(b[0:6], fwdMAC[roleRtrIn])
	copy(b[6:12], fwdMAC[roleGen])
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 60-14)
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	src := fwdAddr[roleGen].As4()
	copy(ip[12:16], src[:])
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 60-34)
	return b
}

// setDestination writes the destination and the IPv4 header checksum.
func setDestination(frame []byte, dst uint32) {
	ip := frame[14:34]
	binary.BigEndian.PutUint32(ip[16:], dst)
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}

// settle waits until the CPUs have been at least 90% idle over 250ms, for
// at most limit, and returns how long it waited and how busy they were in
// the last sample.
func settle(ctx context.Context, limit time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	busy := 1.0
	prevIdle, prevTotal, err := cpuTimes()
	if err != nil {
		return 0, 0, err
	}
	for time.Since(start) < limit {
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return 0, 0, err
		}
		idle, total, err := cpuTimes()
		if err != nil {
			return 0, 0, err
		}
		if total > prevTotal {
			busy = 1 - float64(idle-prevIdle)/float64(total-prevTotal)
		}
		prevIdle, prevTotal = idle, total
		if busy <= 0.1 {
			break
		}
	}
	return time.Since(start), busy, nil
}

// cpuTimes returns the idle (idle and iowait) and total jiffies of all
// CPUs from /proc/stat.
func cpuTimes() (idle, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, nil
}

// percentile returns the q-th percentile (nearest rank) of d.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
