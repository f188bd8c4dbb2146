// Package fe is the forwarding element agent: it attaches the XDP fast path to
// its ports, associates with the CE over ForCES, and turns the CE's
// IPv4UcastLPM and IPv4NextHop rows into datapath entries, with next-hop MACs
// from the kernel's neighbour table. An FE with inter_fe_links is one FE of a
// router made of several (ife.go): the CE's nexthop egress rows make the
// gateways behind other FEs remote nexthops, reached over the inter-FE links.
package fe

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/classifier"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/metrics"
	"github.com/splitplane/splitplane/internal/status"
)

// missedHeartbeats is how many heartbeat intervals of silence make the FE
// declare the CE dead, until the CE sets CEHDI itself.
const missedHeartbeats = 3

// Datapath is what the agent needs of the fast path. *datapath.Datapath is
// the real one; tests of the agent use a fake that records what it was told.
// Its methods are called from more than one goroutine at once: a first full
// sync writes routes on one while the agent sets nexthops on another.
type Datapath interface {
	Attach(ifindex int, mode datapath.Mode) error
	SetRoute(p netip.Prefix, nexthopID uint32) error
	DeleteRoute(p netip.Prefix) error
	SetRoutes(routes []datapath.Route) error    // all or nothing
	DeleteRoutes(prefixes []netip.Prefix) error // all or nothing
	SetNexthop(id uint32, nh datapath.Nexthop) error
	DeleteNexthop(id uint32) error
	SetNexthopGroup(id uint32, members []uint32) error
	DeleteNexthopGroup(id uint32) error
	SetNeighbor(ifindex int, ip netip.Addr, mac net.HardwareAddr) error
	DeleteNeighbor(ifindex int, ip netip.Addr) error
	SetLocalAddr(ip netip.Addr) error
	Counters() (datapath.Counters, error)
	PortCounters() (map[int]datapath.PortCounters, error)
	CPUCounters() ([]datapath.Counters, error)
	Close() error
}

// Agent is a running FE: the wiring of its components. Its mutable state is
// owned by its loop (loop.go); the fields below the owner token are touched
// only by the owner.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	id      forces.ID
	load    func() (Datapath, error)
	noPorts bool          // WithDatapath: no real interfaces
	kick    chan struct{} // wakes the resolver when a next hop arrives
	// lookupEgress returns the port a gateway is reached through (0: none
	// of ours): the kernel's routing table by default, a netlink call the
	// resolver makes outside the loop.
	lookupEgress func(gw netip.Addr) int

	openNIC     nicOpener              // the classifier's NIC access; nil: classifier.OpenNIC
	irqAffinity classifier.IRQAffinity // nil: /proc/irq
	neighbors   neighborTable          // next-hop MACs learned (neighbors.go); its own lock
	associated  atomic.Bool
	fibKept     atomic.Bool  // the datapath held routes when the association began (FIBKeptComponent)
	sendEvery   atomic.Int64 // heartbeat interval (ns), 0: send none
	deadAfter   atomic.Int64 // CE dead interval (ns)

	owner      chan struct{}          // the ownership token (loop.go)
	reqs       chan func()            // requests to the loop
	ports      map[int]*port          // by ifindex; the set is fixed once Run has set them up
	table      *table                 // the rows the CE programmed
	txn        *txn                   // an open transaction, if any
	items      []forces.Item          // applyConfig's buffer, reused message to message
	prog       *programmer            // the datapath's forwarding state
	hb         forces.HeartbeatPolicy // the FE Protocol LFB's heartbeat settings
	classifier classifierState        // control flows steered (classifier.go)
	links      map[int]*ifeLink       // inter-FE links by port (ife.go); nil: not in a cluster
	vlb        *vlb                   // spill shares of the links (vlb.go); nil: not in a cluster
	veths      []*vethPort            // veth ports watched for lost redirects (vethcheck.go), set before the loop runs

	corr       atomic.Uint64                        // correlators of the FE's own messages
	ceID       atomic.Value                         // forces.ID of the associated CE
	lowq       atomic.Pointer[chan *forces.Message] // the low-priority channel's queue, when up
	low        lowStats
	redirector *Redirector
	pcap       *forces.PcapWriter

	protocolErrors atomic.Uint64  // malformed, misaddressed or refused messages from the CE
	refusals       forces.RateLog // warnings of messages refused whole, or unanswerable
	rejects        forces.RateLog // warnings of rejected Config rows
	dial           func(ctx context.Context, d net.Dialer, addr string) (net.Conn, error)
	prom           *metrics.Registry // Prometheus metrics (metrics.go)

	// live is the configuration as last applied (cfg, with what Reload
	// changed at run time); the owner of the agent's state owns it.
	live Config
}

// port is one of the FE's ports; the status reports it as a
// forces.FEPortStatus.
type port struct {
	Name    string
	Ifindex int
	MAC     string
	Addrs   []netip.Prefix
	Mode    string // the XDP attach mode
	Up      bool
	mac     net.HardwareAddr
	mtu     int // 0: unknown (WithPort)
	// rxQueues is the port's receive queue count, from netlink.
	rxQueues int
}

type neighKey struct {
	ifindex int
	addr    netip.Addr
}

// Option changes how New builds an agent.
type Option func(*Agent)

// WithDatapath makes the agent program dp instead of loading the XDP
// datapath, and take gateways as reached through egress (an ifindex, 0 for
// none) instead of asking the kernel. Ports are then not looked up or
// attached: this is for tests and benchmarks of everything above the
// datapath.
func WithDatapath(dp Datapath, egress func(gw netip.Addr) int) Option {
	return func(a *Agent) {
		a.load = func() (Datapath, error) { return dp, nil }
		a.prog.egressPort = egress
		a.lookupEgress = egress
		a.noPorts = true
	}
}

// WithPort adds a port that exists only in the agent's view, for use with
// WithDatapath: the FE reports it to the CE (its addresses are how the CE
// resolves next hops) and routes resolve to it, but nothing is attached.
func WithPort(name string, ifindex int, addrs ...netip.Prefix) Option {
	return func(a *Agent) {
		a.ports[ifindex] = &port{Name: name, Ifindex: ifindex, Up: true, Addrs: slices.Clone(addrs)}
	}
}

// New validates cfg and prepares an agent; Run starts it.
func New(cfg Config, log *slog.Logger, opts ...Option) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	a := &Agent{
		cfg: cfg, live: cfg, log: log, id: forces.FEID(cfg.ID),
		load: func() (Datapath, error) { return datapath.LoadSized(cfg.sizes()) },
		kick: make(chan struct{}, 1), owner: newOwner(), reqs: make(chan func()),
		ports: map[int]*port{}, table: newTable(),
		neighbors: neighborTable{m: map[neighKey]net.HardwareAddr{}},
	}
	a.prog = newProgrammer(log, a.ports, a.kick)
	a.lookupEgress = a.kernelEgressPort
	a.prom = metrics.New(log, &feCollector{a: a})
	a.dial = func(ctx context.Context, d net.Dialer, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		boundBuffers(nc)
		if cfg.TLS == nil {
			return nc, nil
		}
		tc, err := cfg.TLS.ClientTLS(cfg.TLSServerName)
		if err != nil {
			nc.Close()
			return nil, err
		}
		c := tls.Client(nc, tc)
		if err := c.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return c, nil
	}
	for _, o := range opts {
		o(a)
	}
	a.setPolicy(forces.HeartbeatPolicy{
		CEHBPolicy: forces.CEHBPolicy0, CEHDI: uint32(missedHeartbeats * cfg.HeartbeatInterval / time.Millisecond),
		FEHBPolicy: forces.FEHBPolicy1, FEHI: uint32(cfg.HeartbeatInterval / time.Millisecond),
	})
	return a, nil
}

// Run attaches the datapath, associates with the CE (reconnecting with backoff)
// and serves until ctx is cancelled; then it detaches everything.
func (a *Agent) Run(ctx context.Context) error {
	if a.cfg.ForCESPcap != "" {
		f, err := os.Create(a.cfg.ForCESPcap)
		if err != nil {
			return fmt.Errorf("forces_pcap: %w", err)
		}
		defer f.Close()
		if a.pcap, err = forces.NewPcapWriter(f); err != nil {
			return fmt.Errorf("forces_pcap %s: %w", a.cfg.ForCESPcap, err)
		}
	}
	var links []netlink.Link
	if !a.noPorts {
		var err error
		if links, err = a.lookupPorts(); err != nil {
			return err
		}
		a.raiseLinkMTUs(links)
		a.enableKernelForwarding(kernelForwarding)
		a.veths = vethPortsOf(links)
	}
	dp, err := a.load()
	if err != nil {
		return fmt.Errorf("load XDP datapath: %w", err)
	}
	defer dp.Close()
	ports, err := a.setupPorts(dp, links)
	if err != nil {
		return err
	}
	var kernel *kernelFIB // nil with WithDatapath: tests keep the host's kernel alone
	if !a.noPorts {
		kernel = newKernelFIB(a.cfg.KernelRoutes)
		if err := kernel.sweep(); err != nil {
			a.log.Warn("fe: could not remove stale kernel routes", "err", err)
		}
		defer kernel.close()
	}
	a.do(func() {
		a.prog.dp, a.prog.kernel = dp, kernel
		ports.install(a)
		a.startInterFE(dp)
	})
	if kernel != nil {
		defer kernel.removeAll() // once the loop, which copies routes to it, has stopped
	}
	// The loop stops before the datapath closes and after everything that
	// sends it requests has stopped (deferred calls run last to first).
	defer a.startLoop()()
	if !a.noPorts {
		ifindexes := make([]int, len(links))
		for i, l := range links {
			ifindexes[i] = l.Attrs().Index
		}
		r, err := OpenRedirector(ifindexes, a.cfg.RedirectEtherTypes, a.punt)
		if err != nil {
			return fmt.Errorf("packet redirection: %w", err)
		}
		a.redirector = r
		defer r.Close()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !a.noPorts {
		wg.Add(1)
		go func() { defer wg.Done(); a.runProbes(ctx, openProbeSocket) }()
	}
	wg.Add(4)
	go func() { defer wg.Done(); a.watchLinks(ctx) }()
	go func() { defer wg.Done(); a.watchNeighbors(ctx) }()
	go func() { defer wg.Done(); a.resolveLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); a.watchVeths(ctx, dp, a.veths) }()
	if vdp, ok := dp.(vlbDatapath); ok && a.vlb != nil {
		if err := a.prom.Register(vlbCollector{a.vlb}); err != nil {
			a.log.Warn("fe: vlb metrics not registered", "err", err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.vlb.run(ctx, vdp, a) }()
	}
	go func() {
		defer wg.Done()
		if err := a.runClassifier(ctx, dp); err != nil {
			a.log.Error("fe: classifier stopped; control flows are no longer steered", "err", err)
		}
	}()

	if a.cfg.StatusSocket != "" {
		stop, err := status.Serve(a.cfg.StatusSocket, func() any { return a.Status() }, a.statusHandlers())
		if err != nil {
			return err
		}
		defer stop()
	}
	if a.cfg.MetricsListen != "" {
		stop, err := a.prom.Serve(a.cfg.MetricsListen)
		if err != nil {
			return err
		}
		defer stop()
	}

	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := a.associate(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		a.log.Warn("forces: association with CE ended; keeping the last FIB and retrying", "ce", a.cfg.CEAddress, "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}
