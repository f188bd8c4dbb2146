package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/splitplane/splitplane/api/packed"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/harness"
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
	orDefault(&o.Routes, 1_000_000)
	orDefault(&o.Rounds, 3)
	orDefault(&o.Adds, 200)
	orDefault(&o.Batch, 10_000)
	orDefault(&o.Window, 8)
	orDefault(&o.Interval, 100*time.Microsecond)
	orDefault(&o.Seed, 1)
	if err := defaultBinary(&o.Binary, "api"); err != nil {
		return err
	}
	orDefault(&o.Timeout, 5*time.Minute)
	orDefault(&o.Stall, 30*time.Second)
	orDefault(&o.AddTimeout, 10*time.Second)
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
	MetricAPIBulkColdRoutesPerSecond = "api_bulk_cold_routes_per_s"
	MetricAPIBulkPageFaults          = "api_bulk_page_faults"
	MetricAPIBulkColdPageFaults      = "api_bulk_cold_page_faults"
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
//     datapath. Each round's CE and FE take the table, delete it (packed
//     deletes, until the FE holds none) and take it again: the figure is
//     the second load, into daemons whose memory already held a table, as a
//     running router's is. Against fib_install_routes_per_s: the same routes
//     installed into an empty datapath with one SetRoutes call in this
//     process, in the same round (the datapath alone, the ceiling);
//   - api_bulk_cold_routes_per_s: the first load, into the fresh daemons,
//     whose heaps are faulted in page by page as they grow: on a host with
//     dear page faults (a VM) that decides the figure;
//   - api_bulk_page_faults: the CE's and the FE's page faults during the
//     second load, against api_bulk_cold_page_faults, the first load's;
//   - api_bulk_text_routes_per_s: the same as api_bulk_routes_per_s with
//     the batches' operations as RouteOp messages (prefix and next hops as
//     strings), with a CE and FE of their own;
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
	if a.deletes, err = bulkDeletes(prefixes, opts.Batch); err != nil {
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

	a.topo = newFwdTopo("bapi")
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

	var bulk, cold, text, ceiling, p50, p99, faults, coldFaults []float64
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
			rate, coldRate := float64(opts.Routes)/f.all.Seconds(), float64(opts.Routes)/f.cold.all.Seconds()
			a.progress("round %d/%d: %d routes as %s through Bulk into the FE's datapath: into the fresh daemons in %.2fs, %.0f routes/s (page faults: CE %d, FE %d); again after deleting them in %.2fs, %.0f routes/s (all acknowledged after %.2fs; the FE had the first after %.2fs, 99%% after %.2fs; page faults: CE %d, FE %d); the datapath alone installs them at %.0f routes/s",
				r+1, opts.Rounds, opts.Routes, form, f.cold.all.Seconds(), coldRate, f.cold.faults[0], f.cold.faults[1],
				f.all.Seconds(), rate, f.acked.Seconds(), f.first.Seconds(), f.p99.Seconds(), f.faults[0], f.faults[1], install)
			ceiling = append(ceiling, install)
			if asText {
				text = append(text, rate)
				continue
			}
			a.progress("round %d/%d: %d adds until forwarding: p50 %.2fms, p99 %.2fms, max %.2fms (the Add call itself: p50 %.2fms, p99 %.2fms); generator interval %.0fµs",
				r+1, opts.Rounds, opts.Adds, ms(percentile(f.toForward, 50)), ms(percentile(f.toForward, 99)), ms(percentile(f.toForward, 100)),
				ms(percentile(f.call, 50)), ms(percentile(f.call, 99)), f.interval.Seconds()*1e6)
			bulk, cold = append(bulk, rate), append(cold, coldRate)
			faults = append(faults, float64(f.faults[0]+f.faults[1]))
			coldFaults = append(coldFaults, float64(f.cold.faults[0]+f.cold.faults[1]))
			p50, p99 = append(p50, ms(percentile(f.toForward, 50))), append(p99, ms(percentile(f.toForward, 99)))
		}
	}
	return []Result{
		{Metric: MetricAPIBulkRoutesPerSecond, Value: median(bulk), Unit: "routes/s", Baseline: fibbench.MetricFIBInstallPerSecond, BaselineValue: median(ceiling)},
		{Metric: MetricAPIBulkColdRoutesPerSecond, Value: median(cold), Unit: "routes/s", Baseline: fibbench.MetricFIBInstallPerSecond, BaselineValue: median(ceiling)},
		{Metric: MetricAPIBulkPageFaults, Value: median(faults), Unit: "faults", Baseline: MetricAPIBulkColdPageFaults, BaselineValue: median(coldFaults)},
		{Metric: MetricAPIBulkColdPageFaults, Value: median(coldFaults), Unit: "faults"},
		{Metric: MetricAPIBulkTextRoutesPerSecond, Value: median(text), Unit: "routes/s", Baseline: fibbench.MetricFIBInstallPerSecond, BaselineValue: median(ceiling)},
		{Metric: MetricAPIAddToForwardP50, Value: median(p50), Unit: "ms"},
		{Metric: MetricAPIAddToForwardP99, Value: median(p99), Unit: "ms"},
	}, nil
}

// The CE's ForCES address inside the router namespace, and a next hop
// that never resolves.
const (
	apiForCES = "127.0.0.1:6700"
	// apiNoRoute is a next hop on no FE port's subnet: it never resolves.
	apiNoRoute = "192.0.2.1"
)

// apiAddRange is the /16 the added /32s come from (inside 198.18.0.0/15,
// which routegen leaves out).
func apiAddRange() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, 0}), 16) }

// apiRun is one API call: its topology, daemons and the work it sends.
type apiRun struct {
	opts    APIOptions
	topo    *fwdTopo
	procs   *convergeRun // starts, polls and stops the daemons; its dir holds their files
	traffic *apiTraffic
	batches []*spv1.RouteBatch // packed_ops
	// deletes remove the batches' routes again, in packed_ops.
	deletes []*spv1.RouteBatch
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
	return harness.Exec(ctx, t.ns[roleSink], "ethtool", "-K", fwdPort(roleSink), "gro", "on")
}

// bulkBatches makes the Bulk stream's batches: a REPLACE per prefix, next
// hop the sink (the last unresolved ones: a next hop that never resolves).
func bulkBatches(prefixes []netip.Prefix, size, unresolved int) []*spv1.RouteBatch {
	via, nowhere := []string{fwdAddr(roleSink).String()}, []string{apiNoRoute}
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
	via, nowhere := []netip.Addr{fwdAddr(roleSink)}, []netip.Addr{netip.MustParseAddr(apiNoRoute)}
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

// bulkDeletes makes batches of packed_ops that delete the prefixes.
func bulkDeletes(prefixes []netip.Prefix, size int) ([]*spv1.RouteBatch, error) {
	var out []*spv1.RouteBatch
	for start := 0; start < len(prefixes); start += size {
		end := min(start+size, len(prefixes))
		b := make([]byte, 0, (end-start)*6)
		for _, p := range prefixes[start:end] {
			var err error
			if b, err = packed.AppendDelete(b, p); err != nil {
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
		if p.Bits() <= apiAddRange().Bits() && p.Contains(apiAddRange().Addr()) {
			excluded = true
		}
	}
	if !excluded {
		return nil, fmt.Errorf("the route generator does not exclude %s, where the added routes go", apiAddRange())
	}
	base := apiAddRange().Addr().As4()
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
	apiLoad // the table into daemons that held it before (the figure)
	// cold is the first table into the fresh daemons.
	cold            apiLoad
	toForward, call []time.Duration
	interval        time.Duration // the generator's mean interval between frames
}

// apiLoad is one bulk transfer's times, from the first batch sent.
type apiLoad struct {
	tableTimes
	acked time.Duration // when the last batch was acknowledged
	// faults are the CE's and the FE's page faults during the transfer
	// (docs/operations.md, "Transparent huge pages").
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
`, fwdAddr(roleRtrIn), apiForCES, c.path("ce.sock"), apiSock)
	feConf := fmt.Sprintf(`# FE of 'splitplane bench api'
id: 1
name: api-fe
ce_address: %s
ports: [%s, %s]
kernel_routes: connected
xdp_mode: native
status_socket: %s
`, apiForCES, fwdPort(roleRtrIn), fwdPort(roleRtrOut), c.path("fe.sock"))
	if err := os.WriteFile(c.path("ce.yaml"), []byte(ceConf), 0o644); err != nil {
		return f, err
	}
	if err := os.WriteFile(c.path("fe.yaml"), []byte(feConf), 0o644); err != nil {
		return f, err
	}
	os.Remove(apiSock)
	var ceProc, feProc *harness.Proc
	defer func() {
		for _, p := range []*harness.Proc{feProc, ceProc} {
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
	daemons := []*harness.Proc{ceProc, feProc}
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
			if p.Contains(fwdAddr(roleRtrIn)) || p.Contains(fwdAddr(roleRtrOut)) {
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

	batches, deletes := a.batches, a.deletes
	if asText {
		batches = a.textBatches
	}
	load := func(batches []*spv1.RouteBatch, want func(programmed int) int) (load apiLoad, err error) {
		var faults [2]uint64 // what cannot be read stays 0
		for i, p := range daemons {
			faults[i], _, _ = procFaults(p.Pid())
		}
		start, acked, err := a.bulk(ctx, rc, batches)
		if err != nil {
			return load, err
		}
		load.tableTimes, err = c.waitTable(ctx, start, "routes programmed in the FE", daemons, func() (int, time.Time, error) {
			if err := acked.failure(); err != nil {
				return 0, time.Time{}, err
			}
			var st fe.Status
			if err := feStatus.get(&st); err != nil {
				return 0, time.Time{}, err
			}
			return want(st.Programmed - before.Programmed), time.Now(), nil
		})
		if err != nil {
			return load, err
		}
		for i, p := range daemons {
			if n, _, err := procFaults(p.Pid()); err == nil && faults[i] != 0 {
				load.faults[i] = n - faults[i]
			}
		}
		load.acked, err = acked.wait(ctx)
		return load, err
	}
	// The cold load fills the fresh daemons' memory; the warm one, after
	// every route was deleted, reuses it.
	if f.cold, err = load(batches, func(n int) int { return n }); err != nil {
		return f, fmt.Errorf("the first table: %w", err)
	}
	if _, err = load(deletes, func(n int) int { return a.opts.Routes - n }); err != nil {
		return f, fmt.Errorf("deleting the first table: %w", err)
	}
	if f.apiLoad, err = load(batches, func(n int) int { return n }); err != nil {
		return f, fmt.Errorf("the table again: %w", err)
	}
	var st ce.Status
	if err := ceStatus.get(&st); err != nil {
		return f, fmt.Errorf("CE status: %w", err)
	}
	if err := checkFE(st, assoc); err != nil {
		return f, err
	}

	if asText {
		return f, nil
	}
	if err := a.adds(ctx, rc, &f, daemons); err != nil {
		return f, err
	}
	return f, nil
}
