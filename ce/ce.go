// Package ce is the control element: it runs BGP through an embedded GoBGP,
// keeps the FIB, and programs every associated FE over ForCES.
package ce

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/host"
	"github.com/splitplane/splitplane/internal/metrics"
	"github.com/splitplane/splitplane/internal/prefetch"
	"github.com/splitplane/splitplane/internal/status"
)

// CE is a running control element. Its FIB and FE table are owned by the Run
// goroutine; everything else talks to it through channels.
type CE struct {
	// restoredAPI are the API's routes read from api_routes_file, for the
	// loop to put back.
	restoredAPI []RouteOp

	cfg Config
	log *slog.Logger
	id  forces.ID

	updates chan []bgp.Update
	joins   chan *session
	leaves  chan *session
	queries chan chan Status

	lookups   chan lookup
	syncs     chan *session // sessions ready for their full sync
	connected chan feConnected
	unheld    chan *hold // an FE's fe_hold_time ran out
	reloads   chan reload
	api       chan any // API operations (api.go)

	// converged is closed once the FIB is worth syncing to FEs after a CE
	// start: every neighbour established and the routes quiet (or SyncHold
	// passed). Until then FEs keep the FIB they have.
	converged  chan struct{}
	lastUpdate atomic.Int64  // unix ns of the last route change
	ready      chan struct{} // closed once the listeners and the speaker are up

	speaker     *bgp.Speaker
	listener    net.Listener
	lowListener net.Listener

	redirects      chan Redirected // packets FEs redirected to the CE; nil: count only
	protocolErrors atomic.Uint64   // malformed or misaddressed ForCES messages
	pcap           *forces.PcapWriter
	prom           *metrics.Registry // Prometheus metrics (metrics.go)
}

// listen opens a ForCES listener, with mutual TLS when configured.
func (c *CE) listen(field, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", field, addr, err)
	}
	if c.cfg.TLS != nil {
		tc, err := c.cfg.TLS.ServerTLS()
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		l = tls.NewListener(l, tc)
	}
	return l, nil
}

// openPcap starts recording every ForCES message into the configured file.
func (c *CE) openPcap() (stop func(), err error) {
	f, err := os.Create(c.cfg.ForCESPcap)
	if err != nil {
		return nil, fmt.Errorf("forces_pcap: %w", err)
	}
	w, err := forces.NewPcapWriter(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("forces_pcap %s: %w", c.cfg.ForCESPcap, err)
	}
	c.pcap = w
	c.log.Info("forces: recording messages", "pcap", c.cfg.ForCESPcap, "decode", "tshark -d udp.port==6700,forces")
	return func() { f.Close() }, nil
}

// Status is a snapshot of the CE for operators.
type Status struct {
	ID             string               `json:"id"`
	ProtocolErrors uint64               `json:"protocol_errors"`
	Routes         int                  `json:"routes"`
	Connected      []netip.Prefix       `json:"connected"` // the FEs' port prefixes next hops resolve through
	Neighbors      []bgp.NeighborStatus `json:"neighbors"`
	FEs            []FEStatus           `json:"fes"`
}

// FEStatus describes one associated FE.
type FEStatus struct {
	ID            string     `json:"id"`
	Num           forces.ID  `json:"-"` // the ID as a number, for FEDetails
	Name          string     `json:"name"`
	LFBs          []string   `json:"lfbs"`
	Ports         []FEPort   `json:"ports"`
	Remote        string     `json:"remote"`
	AssociatedAt  time.Time  `json:"associated_at"`
	Synced        bool       `json:"synced"`
	Pending       int        `json:"pending_changes"`
	Acked         uint64     `json:"acked_changes"`
	Failed        uint64     `json:"failed_changes"`
	LastHeartbeat time.Time  `json:"last_heartbeat"`
	HeartbeatRTT  RTTSummary `json:"heartbeat_rtt"`
	LowChannel    bool       `json:"low_channel"`
	Redirected    uint64     `json:"redirected_packets"`
	Injected      uint64     `json:"injected_packets"`
	Events        uint64     `json:"events"`
}

// FEPort is a port an FE reported.
type FEPort struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	MAC  string `json:"mac"`
	Up   bool   `json:"up"`
}

// New validates cfg and prepares a CE; Run starts it.
func New(cfg Config, log *slog.Logger) (*CE, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	c := &CE{
		cfg: cfg, log: log, id: forces.CEID(cfg.ID),
		updates:   make(chan []bgp.Update, 1024),
		joins:     make(chan *session),
		leaves:    make(chan *session),
		queries:   make(chan chan Status),
		lookups:   make(chan lookup),
		syncs:     make(chan *session),
		connected: make(chan feConnected),
		unheld:    make(chan *hold),
		reloads:   make(chan reload),
		api:       make(chan any),
		converged: make(chan struct{}),
		ready:     make(chan struct{}),
	}
	c.prom = metrics.New(log, &ceCollector{c: c})
	return c, nil
}

// Run listens for FEs, starts BGP and serves until ctx is cancelled.
func (c *CE) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if len(c.cfg.ControlCores) > 0 {
		rep, err := Pin(c.cfg.ControlCores)
		if err != nil {
			return fmt.Errorf("control_cores %v: %w", c.cfg.ControlCores, err)
		}
		c.log.Info("ce: "+rep.String(), "control_cores", rep.Cores)
	}
	if mode, err := host.TransparentHugePages(host.THPEnabled); err == nil && mode != "always" {
		// Worth saying: it costs a full table's convergence about a third
		// where page faults are dear (docs/operations.md).
		c.log.Info("ce: transparent huge pages are not 'always': the heap is faulted in 4 KiB at a time", "transparent_hugepage", mode)
	}
	if c.cfg.APIRoutesFile != "" {
		ops, err := loadAPIRoutes(c.cfg.APIRoutesFile)
		if err != nil {
			return err
		}
		c.restoredAPI = ops
	}
	if c.cfg.ForCESPcap != "" {
		stop, err := c.openPcap()
		if err != nil {
			return err
		}
		defer stop()
	}
	l, err := c.listen("forces_listen", c.cfg.ForCESListen)
	if err != nil {
		return err
	}
	c.listener = l
	defer l.Close()
	c.log.Info("forces: listening for FEs", "address", l.Addr().String())

	bc, _ := c.cfg.bgpConfig() // validated in New
	bc.Logger = c.log
	bc.APIListen = c.cfg.BGPAPIListen
	sp, err := bgp.Start(ctx, bc, func(u []bgp.Update) {
		select {
		case c.updates <- u:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return err
	}
	c.speaker = sp
	defer sp.Stop()
	c.log.Info("bgp: started", "asn", c.cfg.ASN, "router_id", c.cfg.RouterID, "neighbors", len(c.cfg.Neighbors))

	if c.cfg.StatusSocket != "" {
		stop, err := status.Serve(c.cfg.StatusSocket, func() any {
			// Bounded, so a stopped or stuck loop answers 503, not a hang.
			wait, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := c.Status(wait)
			if err != nil {
				return err
			}
			return st
		},
			status.Handlers{"POST /inject": c.serveInject(ctx)})
		if err != nil {
			return err
		}
		defer stop()
	}
	if c.cfg.MetricsListen != "" {
		stop, err := c.prom.Serve(c.cfg.MetricsListen)
		if err != nil {
			return err
		}
		defer stop()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	low, err := c.listen("forces_listen_low", c.cfg.ForCESListenLow)
	if err != nil {
		return err
	}
	c.lowListener = low
	close(c.ready)
	go c.watchConvergence(ctx)
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.accept(ctx, l, &wg, c.serveFE)
	}()
	go func() {
		defer wg.Done()
		c.accept(ctx, low, &wg, c.serveLow)
	}()
	return c.loop(ctx)
}

// serveInject handles POST /inject?fe=N&port=ID with the frame as the body:
// the status socket's way to send a packet out of an FE port.
func (c *CE) serveInject(ctx context.Context) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fe, err1 := strconv.ParseUint(r.URL.Query().Get("fe"), 10, 30)
		port, err2 := strconv.ParseUint(r.URL.Query().Get("port"), 10, 32)
		if err1 != nil || err2 != nil {
			http.Error(w, fmt.Sprintf("fe %q and port %q: want numbers (FE number, port ID)", r.URL.Query().Get("fe"), r.URL.Query().Get("port")), http.StatusBadRequest)
			return
		}
		frame, err := io.ReadAll(io.LimitReader(r.Body, 65536))
		if err != nil || len(frame) < 14 {
			http.Error(w, fmt.Sprintf("frame of %d bytes: want a whole Ethernet frame", len(frame)), http.StatusBadRequest)
			return
		}
		if err := c.Inject(ctx, forces.FEID(uint32(fe)), uint32(port), frame); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrNoFE) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		status.WriteJSON(w, http.StatusOK, map[string]int{"injected_bytes": len(frame)})
	}
}

// RouteUpdate is a change of the best route for a prefix, as the BGP speaker
// produces them: a new next hop, or a withdrawal.
type RouteUpdate = bgp.Update

// Update feeds route changes to the CE as if BGP had produced them. It is how
// benchmarks and tests drive the FIB; it blocks while the CE is busy.
func (c *CE) Update(ctx context.Context, us []RouteUpdate) error {
	select {
	case c.updates <- us:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Converged is closed once the CE's FIB is ready for FE full syncs after its
// start (see Config.SyncHold).
func (c *CE) Converged() <-chan struct{} { return c.converged }

// ErrNoAnswer is what Status returns when the CE's loop did not answer before
// the caller's context ended: the CE has stopped, or is busy past the caller's
// deadline.
var ErrNoAnswer = errors.New("no answer from the CE (stopped, or busy past the deadline)")

// Status returns a snapshot of the CE. When ctx ends before the CE's loop
// answers it returns ErrNoAnswer wrapping ctx's error, never a zero Status
// that a caller could take for an empty CE.
func (c *CE) Status(ctx context.Context) (Status, error) {
	ch := make(chan Status, 1)
	select {
	case c.queries <- ch:
		select {
		case s := <-ch:
			return s, nil
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	return Status{}, fmt.Errorf("%w: %w", ErrNoAnswer, ctx.Err())
}

// LowAddr is the low-priority channel's listening address (valid once Run has
// started listening).
func (c *CE) LowAddr() net.Addr {
	select {
	case <-c.ready:
		return c.lowListener.Addr()
	default:
		return nil
	}
}

// Addr is the ForCES listening address (valid once Run has started listening).
func (c *CE) Addr() net.Addr {
	select {
	case <-c.ready:
		return c.listener.Addr()
	default:
		return nil
	}
}

// accept serves every connection on l with serve until ctx is done.
func (c *CE) accept(ctx context.Context, l net.Listener, wg *sync.WaitGroup, serve func(context.Context, net.Conn)) {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("forces: accept", "address", l.Addr().String(), "err", err)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(ctx, conn)
		}()
	}
}

// feConnected is what an FE's ports say of its connected prefixes (ports
// that are up), for the RIB to resolve next hops through; nil prefixes
// forget the FE.
type feConnected struct {
	fe       forces.ID
	prefixes []netip.Prefix
}

// setConnected tells the loop an FE's connected prefixes.
func (c *CE) setConnected(ctx context.Context, fe forces.ID, ports []forces.PortInfo) {
	var prefixes []netip.Prefix
	for _, p := range ports {
		if p.Up {
			prefixes = append(prefixes, p.Addrs...)
		}
	}
	select {
	case c.connected <- feConnected{fe: fe, prefixes: prefixes}:
	case <-ctx.Done():
	}
}

// hold keeps the connected prefixes of an FE whose association ended for
// fe_hold_time: an FE that restarts comes back to the FIB it left, instead
// of the CE withdrawing every route resolved through its ports and
// installing them all again.
type hold struct {
	fe    forces.ID
	timer *time.Timer
}

// loop owns the RIB, the FIB and the set of associated FEs.
func (c *CE) loop(ctx context.Context) error {
	fib := fibs{v4: NewFIB(), v6: NewFIB()}
	rib := NewRIB(fib, c.cfg.Distances)
	fes := map[forces.ID]*session{}
	holds := map[forces.ID]*hold{}
	defer func() {
		for _, h := range holds {
			h.timer.Stop()
		}
	}()
	var changes []Change
	watches := watchers{}
	defer watches.closeAll()
	send := func() {
		c.lastUpdate.Store(time.Now().UnixNano())
		if len(changes) > 0 {
			for _, s := range fes {
				s.enqueue(changes)
			}
			watches.publish(changes, fib)
		}
	}
	changes = c.setStatics(rib, c.cfg.StaticRoutes, changes[:0])
	// The API's routes on disk (apistate.go): back first, saved when they
	// changed, at most once per persistInterval and when the CE stops.
	var (
		persist    <-chan time.Time
		saver      *apiPersister
		apiChanged bool
		lastSave   time.Time     // when the last save began
		saveEvery  time.Duration // how long until the next may (apistate.go)
	)
	if c.cfg.APIRoutesFile != "" {
		if len(c.restoredAPI) > 0 {
			var err error
			if changes, err = c.applyAPI(rib, c.restoredAPI, changes[:0]); err != nil {
				return fmt.Errorf("api_routes_file %q: %w", c.cfg.APIRoutesFile, err)
			}
			c.log.Info("api: routes restored", "api_routes_file", c.cfg.APIRoutesFile, "routes", len(c.restoredAPI))
			c.restoredAPI = nil
		}
		saver = startAPIPersister(c.cfg.APIRoutesFile, c.log)
		defer func() {
			if apiChanged {
				saver.save(rib.apiRoutes())
			}
			saver.close()
		}()
		t := time.NewTicker(persistInterval)
		defer t.Stop()
		persist = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-persist:
			if apiChanged {
				if t, every := saver.saveFrom(rib, lastSave, saveEvery); t != lastSave {
					lastSave, saveEvery, apiChanged = t, every, false
				}
			}
		case u := <-c.updates:
			changes = c.apply(rib, u, changes[:0])
			// Coalesce a burst: take whatever else is already queued, up
			// to coalesceMax changes (the sessions coalesce further).
			for more := true; more && len(changes) < coalesceMax; {
				select {
				case u := <-c.updates:
					changes = c.apply(rib, u, changes)
				default:
					more = false
				}
			}
			send()
		case m := <-c.api:
			switch m := m.(type) {
			case apiOps:
				apiChanged = true
				if m.txn {
					// The synced FEs get these changes as a transaction,
					// the rest (and the watchers) the usual way.
					changes = c.startTxn(rib, m, fes, changes[:0])
					c.lastUpdate.Store(time.Now().UnixNano())
					watches.publish(changes, fib)
					continue
				}
				var err error
				changes, err = c.applyAPI(rib, m.ops, changes[:0])
				m.done <- apiResult{fibChanges: len(changes), err: err}
				send()
			case apiList:
				m.reply <- rib.list(m.filter)
			case apiWatch:
				watches.add(m, fib)
			case apiUnwatch:
				watches.remove(m.w)
			}
		case r := <-c.reloads:
			var rep ReloadReport
			changes, rep = c.applyReload(ctx, rib, r, changes[:0])
			r.done <- rep
			send()
		case m := <-c.connected:
			changes = rib.SetConnected(m.fe, m.prefixes, changes[:0])
			if len(changes) > 0 {
				c.log.Info("rib: connected prefixes changed", "fe", m.fe, "prefixes", m.prefixes, "fib_changes", len(changes))
			}
			send()
		case s := <-c.joins:
			if old, dup := fes[s.fe]; dup {
				s.reject(fmt.Errorf("FE %s is already associated from %s", s.fe, old.remote))
				continue
			}
			fes[s.fe] = s
			if h := holds[s.fe]; h != nil {
				h.timer.Stop() // back in time: its ports are reported again
				delete(holds, s.fe)
			}
			s.decided <- nil
		case s := <-c.syncs:
			s.accept(fib.Snapshot())
			c.log.Info("forces: FE associated, full sync queued", "fe", s.fe, "remote", s.remote, "routes", fib.Len())
		case s := <-c.leaves:
			if fes[s.fe] == s {
				delete(fes, s.fe)
				if why := s.reason(); normalEnd(why) {
					c.log.Info("forces: FE association ended", "fe", s.fe, "reason", why, "connected_prefixes_kept", c.cfg.FEHoldTime)
				} else {
					c.log.Warn("forces: FE association ended", "fe", s.fe, "reason", why, "connected_prefixes_kept", c.cfg.FEHoldTime)
				}
				h := &hold{fe: s.fe}
				h.timer = time.AfterFunc(c.cfg.FEHoldTime, func() {
					select {
					case c.unheld <- h:
					case <-ctx.Done():
					}
				})
				holds[s.fe] = h
			}
		case h := <-c.unheld:
			if holds[h.fe] != h {
				continue // the FE came back (and maybe went again) meanwhile
			}
			delete(holds, h.fe)
			changes = rib.SetConnected(h.fe, nil, changes[:0])
			c.log.Info("forces: FE did not come back within fe_hold_time; its connected prefixes are withdrawn", "fe", h.fe,
				"fe_hold_time", c.cfg.FEHoldTime, "fib_changes", len(changes))
			send()
		case l := <-c.lookups:
			l.reply <- fes[l.fe]
		case q := <-c.queries:
			st := Status{ID: c.id.String(), Routes: fib.Len(), Connected: rib.Connected(), Neighbors: c.speaker.Neighbors(), ProtocolErrors: c.protocolErrors.Load()}
			for _, s := range fes {
				st.FEs = append(st.FEs, s.status())
			}
			sort.Slice(st.FEs, func(i, j int) bool { return st.FEs[i].ID < st.FEs[j].ID })
			q <- st
		}
	}
}

// coalesceMax bounds the changes the loop gathers from a burst of BGP
// updates before handing them to the sessions, which merge them into what
// they have pending anyway. Unbounded, a full table's burst grew one slice of
// a million changes: over 100 MB kept for good, and each doubling a copy the
// Go scheduler cannot preempt, which stalled every goroutine of the CE
// (heartbeats included) for up to a second on two cores.
const coalesceMax = 1 << 16

// sameFamily reports whether nh can be a next hop of p.
func sameFamily(p netip.Prefix, nh netip.Addr) bool {
	return nh.Is4() == p.Addr().Is4() && !nh.Is4In6()
}

// apply feeds BGP's updates to the RIB.
func (c *CE) apply(rib *RIB, us []bgp.Update, out []Change) []Change {
	var one [1]netip.Addr
	for i, u := range us {
		if i+prefetch.Ahead < len(us) {
			rib.prefetch(srcBGP, us[i+prefetch.Ahead].Prefix)
		}
		if u.Withdraw {
			out = rib.DeleteBGP(u.Prefix, out)
			continue
		}
		if !sameFamily(u.Prefix, u.NextHop) {
			// IPv4 over an IPv6 next hop (RFC 8950) is not supported yet.
			c.log.Warn("rib: next hop of another address family, route not installed", "prefix", u.Prefix, "nexthop", u.NextHop)
			out = rib.DeleteBGP(u.Prefix, out)
			continue
		}
		one[0] = u.NextHop
		hops := one[:]
		if len(u.NextHops) > 1 {
			hops = slices.DeleteFunc(slices.Clone(u.NextHops), func(a netip.Addr) bool { return !sameFamily(u.Prefix, a) })
		}
		var ok bool
		if out, ok = rib.SetBGP(u.Prefix, hops, u.IBGP, out); !ok {
			c.log.Error("rib: nexthop, ECMP group or next-hop set table full, route not installed", "prefix", u.Prefix, "nexthop", u.NextHop)
		}
	}
	return out
}

// configuredConnected is the RIB's name for the connected prefixes of the
// configuration (FE IDs start at 1).
const configuredConnected = forces.ID(0)

// setStatics makes the RIB's static routes those of the configuration,
// changing only the ones that differ.
func (c *CE) setStatics(rib *RIB, routes []StaticRoute, out []Change) []Change {
	want := map[netip.Prefix]StaticRoute{}
	var connected []netip.Prefix
	for _, r := range routes {
		p, _ := netip.ParsePrefix(r.Prefix) // validated with the configuration
		if r.Connected {
			connected = append(connected, p.Masked())
			continue
		}
		want[p.Masked()] = r
	}
	out = rib.SetConnected(configuredConnected, connected, out)
	have := rib.Statics()
	for p := range have {
		if _, ok := want[p]; !ok {
			out = rib.DeleteStatic(p, out)
		}
	}
	for p, r := range want {
		if old, ok := have[p]; ok && slices.Equal(old.NextHops, r.NextHops) && old.Distance == r.Distance {
			continue
		}
		hops := make([]netip.Addr, len(r.NextHops))
		for i, h := range r.NextHops {
			hops[i], _ = netip.ParseAddr(h)
		}
		var ok bool
		if out, ok = rib.SetStatic(p, hops, r.Distance, out); !ok {
			c.log.Error("rib: table full, static route not installed", "prefix", p)
		}
	}
	return out
}
