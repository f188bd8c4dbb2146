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
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/host"
	"github.com/splitplane/splitplane/internal/metrics"
	"github.com/splitplane/splitplane/internal/status"
)

// CE is a running control element. Its FIB and FE table are owned by the Run
// goroutine; everything else talks to it through channels.
type CE struct {
	// restoredAPI are the API's routes read from api_routes_file, for the
	// loop to put back.
	restoredAPI []RouteOp
	apiFile     persistStats // api_routes_file's figures (apistate.go)
	listPace    listPacer    // spaces out listings of the whole RIB (api.go)
	verifyLast  verifyStats  // the last check of the FEs against the FIB (verify.go)

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
	// neighborsUp is closed once the BGP neighbours are added: at once,
	// or with graceful restart after the FEs reported whether they kept
	// their FIB (gracefulrestart.go). Reloads wait for it.
	neighborsUp chan struct{}
	feReports   *feReports // what FEs reported at discovery, during that wait
	// forwardingPreserved is what the CE claimed to its graceful-restart
	// neighbours at start; claiming is what bgp.Config.ForwardingPreserved
	// answers: the claim while the start-up neighbours are added, then no.
	forwardingPreserved atomic.Bool
	claiming            atomic.Bool

	speaker     *bgp.Speaker
	listener    net.Listener
	lowListener net.Listener

	redirects      chan Redirected // packets FEs redirected to the CE; nil: count only
	protocolErrors atomic.Uint64   // malformed or misaddressed ForCES messages
	refused        refusals        // connections, setups, messages and addresses refused (guard.go)
	pending        pendingConns    // connections waiting for their setup
	protected      atomic.Pointer[protectedAddrs]
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
	c.log.Info("forces: recording messages", "pcap", c.cfg.ForCESPcap, "decode", "tshark -d tcp.port==6700,forces")
	return func() { f.Close() }, nil
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

		neighborsUp: make(chan struct{}),
		feReports:   newFEReports(),
	}
	c.prom = metrics.New(log, &ceCollector{c: c})
	if err := c.prom.Register(verifyCollector{&c.verifyLast}); err != nil {
		return nil, err
	}
	if err := c.prom.Register(apiFileCollector{&c.apiFile}); err != nil {
		return nil, err
	}
	c.setProtected()
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
		switch {
		case errors.Is(err, ErrAPIRoutesCorrupt):
			c.restoreFailed(c.cfg.APIRoutesFile, err) // moved aside: the CE starts without them
		case err != nil:
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
	c.log.Info("forces: listening for FEs", "address", l.Addr().String(), "tls", c.cfg.TLS != nil)
	if len(c.cfg.ForCESAllowedFEs) == 0 {
		c.log.Info("forces: any FE ID from 1 to 1073741823 may associate (forces_allowed_fes is not set)")
	} else {
		c.log.Info("forces: FE IDs admitted", "forces_allowed_fes", c.cfg.ForCESAllowedFEs)
	}
	if c.cfg.TLS == nil && c.cfg.ForCESAcceptUnauthenticatedFEs {
		c.log.Warn("forces: FEs are not authenticated (no tls, forces_accept_unauthenticated_fes: true): anyone who reaches the ForCES ports can associate as an FE")
	}

	bc, _ := c.cfg.bgpConfig() // validated in New
	bc.Logger = c.log
	bc.APIListen = c.cfg.BGPAPIListen
	bc.ForwardingPreserved = c.claiming.Load
	gr := c.cfg.gracefulRestart()
	neighbors, networks := bc.Neighbors, bc.Networks
	if gr {
		// Added once the FEs have said whether they kept their FIB.
		bc.Neighbors, bc.Networks = nil, nil
	}
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
	startErr := make(chan error, 1)
	if gr {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.startNeighbors(ctx, sp, neighbors, networks); err != nil {
				startErr <- err
				cancel()
				return
			}
			close(c.neighborsUp)
			c.watchConvergence(ctx)
		}()
	} else {
		close(c.neighborsUp)
		go c.watchConvergence(ctx)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.accept(ctx, l, &wg, c.serveFE)
	}()
	go func() {
		defer wg.Done()
		c.accept(ctx, low, &wg, c.serveLow)
	}()
	err = c.loop(ctx)
	select {
	case err = <-startErr:
	default:
	}
	return err
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
