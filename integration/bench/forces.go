// Package bench holds the router's benchmarks, as the `splitplane bench NAME`
// commands run them. Each returns its figures as Results, the shape DESIGN.md's
// benchmark output convention prints.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/flatmap"
	"github.com/splitplane/splitplane/internal/prefetch"
	"github.com/splitplane/splitplane/internal/routegen"
)

// Result is one figure of a benchmark. Baseline names a reference measured in
// the same run, in the same unit, and BaselineValue is its value; both are
// empty when the figure has none.
type Result struct {
	Metric        string  `json:"metric"`
	Value         float64 `json:"value"`
	Unit          string  `json:"unit"`
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
}

// ErrIncomplete is wrapped by the error a benchmark returns when the system
// under test did not do all the work it was given (an FE missing routes, a
// change never acknowledged), so that no figure is printed for it.
var ErrIncomplete = errors.New("bench: work not completed")

// ForcesOptions configures Forces. Zero values take the defaults.
type ForcesOptions struct {
	// Routes is the size of the routing table (default 1,000,000).
	Routes int
	// Rounds is how many times every figure is measured; the median is
	// reported (default 3).
	Rounds int
	// Seed seeds the route generator (default 1).
	Seed int64
	// HeartbeatInterval is the CE's heartbeat interval, which it sets as
	// the FE's too at discovery, while measuring (default 50ms; the minimum
	// allowed is 10ms). It is short so a transfer of a few seconds holds
	// enough round trips.
	HeartbeatInterval time.Duration
	// HeartbeatMissLimit is how many silent intervals end an association
	// (default 100, the most the CE allows: 5s at 50ms). With fewer, a long
	// FE commit gets the association torn down, and Forces fails rather
	// than time a second full sync.
	HeartbeatMissLimit int
	// IdleSamples is how many heartbeat round trips the idle baseline waits
	// for (default 50, about as many as a full-table transfer holds).
	IdleSamples int
	// Timeout bounds each wait for the CE or the FE (default 2 minutes); a
	// wait that runs out is an error wrapping ErrIncomplete.
	Timeout time.Duration
	// Progress, if set, receives a line per round.
	Progress io.Writer

	// setRouteErr, if set, makes the FE's datapath fail a route write (tests).
	setRouteErr func(netip.Prefix) error
}

func (o *ForcesOptions) defaults() error {
	if o.Routes == 0 {
		o.Routes = 1_000_000
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 50 * time.Millisecond
	}
	if o.HeartbeatMissLimit == 0 {
		o.HeartbeatMissLimit = 100
	}
	if o.IdleSamples == 0 {
		o.IdleSamples = 50
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	switch {
	case o.Routes < 10:
		return fmt.Errorf("bench forces: routes %d: need at least 10", o.Routes)
	case o.Rounds < 1:
		return fmt.Errorf("bench forces: rounds %d: need at least 1", o.Rounds)
	case o.IdleSamples < 1 || o.IdleSamples > 256:
		return fmt.Errorf("bench forces: idle samples %d: must be 1 to 256 (the CE keeps the last 256)", o.IdleSamples)
	}
	return nil
}

// Metric names of the ForCES benchmark; fixed, so runs can be compared.
const (
	MetricForcesCodec         = "forces_codec_ns_per_entry"
	MetricForcesTransfer      = "forces_transfer_entries_per_s"
	MetricForcesUpdate        = "forces_update_entries_per_s"
	MetricForcesHeartbeatLoad = "forces_heartbeat_p99_ms_under_load"
)

// Forces measures the ForCES path from CE to FE, each figure the median over
// the rounds:
//   - forces_codec_ns_per_entry: encoding a route SET (FULLDATA into a
//     ConfigWriter, as the CE does) and decoding it (Parse, AppendItems,
//     ParseIPv4PrefixInfo, as the FE does), per route, against copying the
//     encoded bytes (each message into one reused buffer);
//   - forces_transfer_entries_per_s: routes per second of a full sync from an
//     in-process CE to an in-process FE over loopback TCP, from the FE's start
//     until the CE has the commit acknowledged and the FE holds every route;
//   - forces_update_entries_per_s: route changes per second after the sync
//     (a tenth of the routes moved to new next hops), from the first change
//     fed to the CE until the FE has acknowledged every row they cause;
//   - forces_heartbeat_p99_ms_under_load: p99 of the CE's heartbeat round
//     trips during the full sync, against the same on an idle association.
//
// The FE programs an in-memory datapath: this measures the protocol and the
// agents, not BPF map updates. Forces fails with ErrIncomplete rather than
// report a figure for work that was not all done.
func Forces(ctx context.Context, opts ForcesOptions) ([]Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	prefixes := routegen.Generate(opts.Routes, opts.Seed)
	if len(prefixes) != opts.Routes {
		return nil, fmt.Errorf("bench forces: route generator returned %d of %d prefixes", len(prefixes), opts.Routes)
	}
	routes, changes := workload(prefixes)
	prefixes = nil
	wantRows := changedRows(routes, changes)

	var codec, memcopy, transfer, update, hbLoad, hbIdle []float64
	for r := range opts.Rounds {
		runtime.GC()
		c, cp, err := codecRound(routes)
		if err != nil {
			return nil, err
		}
		runtime.GC()
		tr, err := transferRound(ctx, opts, routes, changes, wantRows)
		if err != nil {
			return nil, err
		}
		runtime.GC()
		idle, err := idleRound(ctx, opts)
		if err != nil {
			return nil, err
		}
		codec, memcopy = append(codec, c), append(memcopy, cp)
		transfer, update = append(transfer, tr.transfer), append(update, tr.update)
		hbLoad, hbIdle = append(hbLoad, tr.heartbeatP99), append(hbIdle, idle)
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "round %d/%d: codec %.1f ns/entry (copy %.1f); full sync %.0f entries/s in %s; updates %.0f entries/s; heartbeat p99 %.2f ms under load (%d samples), %.2f ms idle\n",
				r+1, opts.Rounds, c, cp, tr.transfer, tr.syncTime.Round(time.Millisecond), tr.update, tr.heartbeatP99, tr.heartbeatSamples, idle)
		}
	}
	return []Result{
		{Metric: MetricForcesCodec, Value: median(codec), Unit: "ns", Baseline: "copy of the encoded bytes", BaselineValue: median(memcopy)},
		{Metric: MetricForcesTransfer, Value: median(transfer), Unit: "entries/s"},
		{Metric: MetricForcesUpdate, Value: median(update), Unit: "entries/s"},
		{Metric: MetricForcesHeartbeatLoad, Value: median(hbLoad), Unit: "ms", Baseline: "idle", BaselineValue: median(hbIdle)},
	}, nil
}

// work is an IPv4 route of the workload, without pointers (a netip.Prefix
// holds one): the million kept across rounds cost the garbage collector
// nothing to scan while the CE and FE it measures run beside them.
type work struct {
	addr, gw [4]byte
	bits     uint8
}

func (w work) prefix() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4(w.addr), int(w.bits)) }

func (w work) update() ce.RouteUpdate {
	return ce.RouteUpdate{Prefix: w.prefix(), NextHop: netip.AddrFrom4(w.gw)}
}

// workload returns the table (prefixes spread over 64 gateways) and the
// changes of the update phase: every tenth route moved to one of 64 other
// gateways.
func workload(prefixes []netip.Prefix) (routes, changes []work) {
	gw := func(net, i int) [4]byte { return [4]byte{10, byte(net), 0, byte(1 + i%64)} }
	routes = make([]work, len(prefixes))
	for i, p := range prefixes {
		routes[i] = work{addr: p.Addr().As4(), bits: uint8(p.Bits()), gw: gw(1, i)}
	}
	changes = make([]work, 0, len(prefixes)/10)
	for i := 0; i+9 < len(prefixes); i += 10 {
		changes = append(changes, work{addr: routes[i].addr, bits: routes[i].bits, gw: gw(2, i/10)})
	}
	return routes, changes
}

// changedRows returns how many rows the CE sends for changes after routes
// (route rows plus new nexthop rows), from a FIB like the CE's: the count of
// acknowledgements to wait for.
func changedRows(routes, changes []work) (n int) {
	fib := ce.NewFIB()
	var out []ce.Change
	for _, w := range routes {
		out, _ = fib.Set(w.prefix(), netip.AddrFrom4(w.gw), out[:0])
	}
	for _, w := range changes {
		out, _ = fib.Set(w.prefix(), netip.AddrFrom4(w.gw), out[:0])
		n += len(out)
	}
	return n
}

// codecRound returns the encode+decode cost and the copy cost, in ns per
// route. It works as a full sync does: rows encoded a chunk at a time into
// messages of at most 64 KiB, each chunk decoded before the next is encoded
// (the buffers stay warm; one buffer for the whole table measured page
// faults more than the codec).
func codecRound(routes []work) (codec, memcopy float64, err error) {
	const chunk, maxMessage = 32768, 64 << 10 // as the CE's full sync
	n := len(routes)
	hdr := forces.Header{
		Src: forces.CEID(0), Dst: forces.FEID(1),
		Flags: forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecContinueOnFailure},
	}
	w := forces.NewConfigWriter(hdr, nil)
	w.MaxMessage = maxMessage
	var (
		scratch [forces.IPv4PrefixInfoLen]byte
		mb      forces.MessageBuffer
		items   []forces.Item
		dst     []byte
		rows    int
		hops    uint64
		elapsed time.Duration
		copied  time.Duration
	)
	for base := 0; base < n; base += chunk {
		start := time.Now()
		// Encoding as the CE does it: rows straight into the wire form.
		for i := base; i < min(base+chunk, n); i++ {
			p := routes[i].prefix()
			data, err := forces.IPv4PrefixInfo{Prefix: p, HopSelector: uint32(1 + i%64)}.AppendFullData(scratch[:0])
			if err != nil {
				return 0, 0, fmt.Errorf("bench forces: encode %s: %w", p, err)
			}
			path := [2]uint32{forces.CompIPv4PrefixTable, uint32(i + 1)}
			if err := w.Add(forces.OpSet, forces.ClassIPv4UcastLPM, 1, path[:], data); err != nil {
				return 0, 0, fmt.Errorf("bench forces: encode %s: %w", p, err)
			}
		}
		wire := w.Flush()
		// Decoding as the FE does it: into one reused buffer.
		for _, b := range wire {
			m, err := mb.Parse(b)
			if err != nil {
				return 0, 0, fmt.Errorf("bench forces: parse: %w", err)
			}
			items = forces.AppendItems(items[:0], m)
			for _, it := range items {
				info, err := forces.ParseIPv4PrefixInfo(it.FullData)
				if err != nil {
					return 0, 0, fmt.Errorf("bench forces: row %v: %w", it.Path, err)
				}
				rows++
				hops += uint64(info.HopSelector)
			}
		}
		elapsed += time.Since(start)
		start = time.Now()
		for _, b := range wire {
			dst = append(dst[:0], b...)
		}
		copied += time.Since(start)
	}
	runtime.KeepAlive(dst)
	if rows != n || hops != hopSum(n) {
		return 0, 0, fmt.Errorf("%w: codec decoded %d of %d rows (HopSelector sum %d, want %d)", ErrIncomplete, rows, n, hops, hopSum(n))
	}
	return float64(elapsed.Nanoseconds()) / float64(n), float64(copied.Nanoseconds()) / float64(n), nil
}

func hopSum(n int) (s uint64) {
	for i := range n {
		s += uint64(1 + i%64)
	}
	return s
}

type transferFigures struct {
	transfer, update float64 // entries per second
	syncTime         time.Duration
	heartbeatP99     float64 // ms
	heartbeatSamples int
}

// transferRound runs one CE and one FE: the full sync of routes, then the
// changes.
func transferRound(ctx context.Context, opts ForcesOptions, routes, changes []work, wantRows int) (transferFigures, error) {
	var f transferFigures
	n := len(routes)
	h, err := startCE(ctx, opts)
	if err != nil {
		return f, err
	}
	defer h.stop()
	if err := h.feed(ctx, routes); err != nil {
		return f, err
	}
	if err := h.waitCE(ctx, opts.Timeout, "the CE to hold every route", func(st ce.Status) bool { return st.Routes == n }); err != nil {
		return f, err
	}
	// The CE syncs FEs once its routes have been quiet for a second (as after
	// a restart); the transfer is timed from then.
	select {
	case <-h.ce.Converged():
	case <-ctx.Done():
		return f, ctx.Err()
	}

	start := time.Now()
	if err := h.startFE(ctx); err != nil {
		return f, err
	}
	var synced ce.FEStatus
	err = h.waitCE(ctx, opts.Timeout, "the full sync", func(st ce.Status) bool {
		if len(st.FEs) != 1 || !st.FEs[0].Synced {
			return false
		}
		synced = st.FEs[0]
		return h.fe.Status().Routes == n
	})
	if err != nil {
		return f, err
	}
	f.syncTime = time.Since(start)
	f.transfer = float64(n) / f.syncTime.Seconds()
	if synced.Failed != 0 || synced.Acked < uint64(n) {
		return f, fmt.Errorf("%w: full sync: CE counts %d rows acknowledged and %d failed, for %d routes", ErrIncomplete, synced.Acked, synced.Failed, n)
	}
	if got := h.dp.routeCount(); got != n {
		return f, fmt.Errorf("%w: full sync: the FE's datapath holds %d of %d routes", ErrIncomplete, got, n)
	}
	// The heartbeats answered during the sync; if none has come back yet, the
	// first (sent at association) is still in flight behind the sync.
	rtt := synced.HeartbeatRTT
	if rtt.Samples == 0 {
		err := h.waitCE(ctx, opts.Timeout, "a heartbeat answer", func(st ce.Status) bool {
			if len(st.FEs) == 1 && st.FEs[0].HeartbeatRTT.Samples > 0 {
				rtt = st.FEs[0].HeartbeatRTT
				return true
			}
			return false
		})
		if err != nil {
			return f, err
		}
	}
	f.heartbeatP99, f.heartbeatSamples = rtt.P99, rtt.Samples

	base := synced.Acked
	writes := h.dp.routeWrites()
	start = time.Now()
	if err := h.feed(ctx, changes); err != nil {
		return f, err
	}
	var last ce.FEStatus
	err = h.waitCE(ctx, opts.Timeout, fmt.Sprintf("%d acknowledged rows for %d route changes", wantRows, len(changes)), func(st ce.Status) bool {
		if len(st.FEs) != 1 {
			return false
		}
		last = st.FEs[0]
		return last.Acked+last.Failed >= base+uint64(wantRows)
	})
	if err != nil {
		return f, err
	}
	elapsed := time.Since(start)
	if last.Failed != 0 || last.Acked != base+uint64(wantRows) {
		return f, fmt.Errorf("%w: updates: %d rows acknowledged and %d failed, want %d acknowledged", ErrIncomplete, last.Acked-base, last.Failed, wantRows)
	}
	if got := h.dp.routeWrites() - writes; got != len(changes) {
		return f, fmt.Errorf("%w: updates: the FE's datapath took %d route writes for %d changed routes", ErrIncomplete, got, len(changes))
	}
	f.update = float64(len(changes)) / elapsed.Seconds()
	return f, h.stop()
}

// idleRound returns the heartbeat p99 of an association with nothing to do.
func idleRound(ctx context.Context, opts ForcesOptions) (float64, error) {
	h, err := startCE(ctx, opts)
	if err != nil {
		return 0, err
	}
	defer h.stop()
	if err := h.startFE(ctx); err != nil {
		return 0, err
	}
	var rtt ce.RTTSummary
	err = h.waitCE(ctx, opts.Timeout, fmt.Sprintf("%d heartbeat answers", opts.IdleSamples), func(st ce.Status) bool {
		if len(st.FEs) != 1 || !st.FEs[0].Synced {
			return false
		}
		rtt = st.FEs[0].HeartbeatRTT
		return rtt.Samples >= opts.IdleSamples
	})
	if err != nil {
		return 0, err
	}
	return rtt.P99, h.stop()
}

// ceHarness is an in-process CE and, once started, one FE associated with it.
type ceHarness struct {
	opts     ForcesOptions
	ce       *ce.CE
	fe       *fe.Agent
	dp       *memDatapath
	cancelCE context.CancelFunc
	ceDone   chan error
	cancelFE context.CancelFunc
	feDone   chan error
	// associatedAt is when the FE's association began, as the CE saw it
	// first: a later time means it was torn down and made again.
	associatedAt time.Time
	once         sync.Once
	err          error
}

// startTimeout bounds the start of a CE, which only has to listen.
const startTimeout = 10 * time.Second

func startCE(ctx context.Context, opts ForcesOptions) (*ceHarness, error) {
	log := slog.New(slog.DiscardHandler)
	c, err := ce.New(ce.Config{
		ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		HeartbeatInterval: opts.HeartbeatInterval, HeartbeatMissLimit: opts.HeartbeatMissLimit,
		// The gateways' subnet, which the FE (with no real ports) does not report.
		StaticRoutes: []ce.StaticRoute{{Prefix: "10.0.0.0/8", Connected: true}},
	}, log)
	if err != nil {
		return nil, err
	}
	h := &ceHarness{opts: opts, ce: c, ceDone: make(chan error, 1)}
	cctx, cancel := context.WithCancel(ctx)
	h.cancelCE = cancel
	go func() { h.ceDone <- c.Run(cctx) }()
	// The CE answers Status from its loop, which starts after it listens:
	// once Status returns, Addr is set.
	ready := make(chan struct{})
	go func() { c.Status(cctx); close(ready) }()
	var runErr error
	select {
	case <-ready:
		if cctx.Err() == nil {
			return h, nil
		}
	case runErr = <-h.ceDone:
		h.ceDone <- runErr
	case <-time.After(startTimeout):
		runErr = fmt.Errorf("not serving after %s", startTimeout)
	}
	h.stop()
	if runErr == nil {
		runErr = ctx.Err()
	}
	return nil, fmt.Errorf("bench forces: CE did not start: %w", runErr)
}

func (h *ceHarness) startFE(ctx context.Context) error {
	h.dp = newMemDatapath(h.opts.Routes)
	h.dp.setRouteErr = h.opts.setRouteErr
	a, err := fe.New(fe.Config{
		// The FE's own interval (default 1s, 3s of silence ending the
		// association) holds only until the CE sets its policy at
		// discovery: shorter, a stall of the process hosting both ends
		// between association and that Config ended the association.
		ID: 1, CEAddress: h.ce.Addr().String(), Ports: []string{"bench0"},
	}, slog.New(slog.DiscardHandler), fe.WithDatapath(h.dp, func(netip.Addr) int { return 0 }))
	if err != nil {
		return err
	}
	h.fe = a
	ctx, cancel := context.WithCancel(ctx)
	h.cancelFE, h.feDone = cancel, make(chan error, 1)
	go func() { h.feDone <- a.Run(ctx) }()
	return nil
}

// feed gives the CE routes in batches of the size a BGP speaker produces.
func (h *ceHarness) feed(ctx context.Context, ws []work) error {
	for chunk := range slices.Chunk(ws, 10_000) {
		us := make([]ce.RouteUpdate, len(chunk)) // the CE keeps it
		for i, w := range chunk {
			us[i] = w.update()
		}
		if err := h.ce.Update(ctx, us); err != nil {
			return err
		}
	}
	return nil
}

// wait polls done every millisecond until it holds, failing after timeout
// or when the CE or FE stops.
func (h *ceHarness) wait(ctx context.Context, timeout time.Duration, what string, done func() bool) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-h.ceDone:
			h.ceDone <- err
			return fmt.Errorf("%w: waiting for %s: the CE stopped: %v", ErrIncomplete, what, err)
		case err := <-h.feDone:
			h.feDone <- err
			return fmt.Errorf("%w: waiting for %s: the FE stopped: %v", ErrIncomplete, what, err)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: waiting for %s: nothing after %s; %s", ErrIncomplete, what, timeout, h.describe(ctx))
		}
	}
	return nil
}

// waitCE waits until done holds for the CE's status. It fails when the FE's
// association ends or restarts: the figures would then include a second
// full sync.
func (h *ceHarness) waitCE(ctx context.Context, timeout time.Duration, what string, done func(ce.Status) bool) error {
	var lost error
	err := h.wait(ctx, timeout, what, func() bool {
		st, err := h.ce.Status(ctx)
		if err != nil {
			lost = err
			return true
		}
		if h.fe != nil {
			switch {
			case len(st.FEs) == 1 && h.associatedAt.IsZero():
				h.associatedAt = st.FEs[0].AssociatedAt
			case !h.associatedAt.IsZero() && (len(st.FEs) != 1 || !st.FEs[0].AssociatedAt.Equal(h.associatedAt)):
				lost = fmt.Errorf("%w: waiting for %s: the FE's association ended or restarted (heartbeats missed for %d intervals of %s?)",
					ErrIncomplete, what, h.opts.HeartbeatMissLimit, h.opts.HeartbeatInterval)
				return true
			}
		}
		return done(st)
	})
	if err != nil {
		return err
	}
	return lost
}

// describe says where things stand, for a timeout's error.
func (h *ceHarness) describe(ctx context.Context) string {
	st, err := h.ce.Status(ctx)
	if err != nil {
		return "CE status: " + err.Error()
	}
	s := fmt.Sprintf("CE holds %d routes", st.Routes)
	for _, f := range st.FEs {
		s += fmt.Sprintf(", FE %s synced=%t acked=%d failed=%d pending=%d", f.ID, f.Synced, f.Acked, f.Failed, f.Pending)
	}
	// Not the agent's Status: it may not be safe before Run has started.
	if h.dp != nil {
		s += fmt.Sprintf("; the FE's datapath holds %d routes", h.dp.routeCount())
	}
	return s
}

// stop stops the FE, then the CE, and waits for both; it returns the first
// error either Run returned.
func (h *ceHarness) stop() error {
	h.once.Do(func() {
		if h.cancelFE != nil {
			h.cancelFE()
			h.err = <-h.feDone
		}
		h.cancelCE()
		if err := <-h.ceDone; h.err == nil {
			h.err = err
		}
	})
	return h.err
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// memDatapath is an in-memory fe.Datapath: maps in place of the BPF maps, so
// the benchmark measures the protocol and the agent, not the kernel.
type memDatapath struct {
	mu       sync.Mutex
	routes   *flatmap.Map[uint64, uint32] // packed prefix: one flat array, like the real FIB's
	nexthops map[uint32]datapath.Nexthop
	rwrites  int // route sets and deletes

	setRouteErr func(netip.Prefix) error
}

// key packs a prefix: the address (16 bytes' worth for IPv6 is not needed
// here) in the low bits and the length above it.
func key(p netip.Prefix) uint64 {
	a := p.Addr().As4()
	return uint64(p.Bits())<<32 | uint64(a[0])<<24 | uint64(a[1])<<16 | uint64(a[2])<<8 | uint64(a[3])
}

// newMemDatapath returns a datapath sized for n routes, as the real FIB's
// arrays are allocated whole.
func newMemDatapath(n int) *memDatapath {
	return &memDatapath{routes: flatmap.New[uint64, uint32](n), nexthops: map[uint32]datapath.Nexthop{}}
}

func (d *memDatapath) Attach(int, datapath.Mode) error { return nil }

func (d *memDatapath) SetRoute(p netip.Prefix, id uint32) error {
	if d.setRouteErr != nil {
		if err := d.setRouteErr(p); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.routes.Put(key(p), id)
	d.rwrites++
	d.mu.Unlock()
	return nil
}

// SetRoutes is all or nothing, like the real datapath's.
func (d *memDatapath) SetRoutes(rs []datapath.Route) error {
	if d.setRouteErr != nil {
		for _, r := range rs {
			if err := d.setRouteErr(r.Prefix); err != nil {
				return err
			}
		}
	}
	d.mu.Lock()
	for i, r := range rs {
		if i+prefetch.Ahead < len(rs) {
			d.routes.Prefetch(key(rs[i+prefetch.Ahead].Prefix)) // as the real FIB does
		}
		d.routes.Put(key(r.Prefix), r.Nexthop)
	}
	d.rwrites += len(rs)
	d.mu.Unlock()
	return nil
}

// DeleteRoutes is all or nothing, like the real datapath's.
func (d *memDatapath) DeleteRoutes(ps []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range ps {
		if !d.routes.Has(key(p)) {
			return datapath.ErrNotFound
		}
	}
	for _, p := range ps {
		d.routes.Del(key(p))
	}
	d.rwrites += len(ps)
	return nil
}

func (d *memDatapath) DeleteRoute(p netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.routes.Del(key(p)) {
		return datapath.ErrNotFound
	}
	d.rwrites++
	return nil
}

func (d *memDatapath) PortCounters() (map[int]datapath.PortCounters, error) { return nil, nil }
func (d *memDatapath) CPUCounters() ([]datapath.Counters, error)            { return nil, nil }

func (d *memDatapath) SetNexthop(id uint32, nh datapath.Nexthop) error {
	d.mu.Lock()
	d.nexthops[id] = nh
	d.mu.Unlock()
	return nil
}

func (d *memDatapath) DeleteNexthop(id uint32) error {
	d.mu.Lock()
	delete(d.nexthops, id)
	d.mu.Unlock()
	return nil
}

func (d *memDatapath) SetNexthopGroup(uint32, []uint32) error              { return nil }
func (d *memDatapath) DeleteNexthopGroup(uint32) error                     { return nil }
func (d *memDatapath) SetNeighbor(int, netip.Addr, net.HardwareAddr) error { return nil }
func (d *memDatapath) DeleteNeighbor(int, netip.Addr) error                { return nil }
func (d *memDatapath) SetLocalAddr(netip.Addr) error                       { return nil }
func (d *memDatapath) Counters() (datapath.Counters, error)                { return datapath.Counters{}, nil }
func (d *memDatapath) Close() error                                        { return nil }

func (d *memDatapath) routeCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.routes.Len()
}

func (d *memDatapath) routeWrites() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rwrites
}
