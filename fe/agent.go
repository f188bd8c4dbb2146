// Package fe is the forwarding element agent: it attaches the XDP fast path to
// its ports, associates with the CE over ForCES, and turns the CE's
// IPv4UcastLPM and IPv4NextHop rows into datapath entries, with next-hop MACs
// from the kernel's neighbour table.
package fe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/api/status"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// missedHeartbeats is how many heartbeat intervals of silence make the FE
// declare the CE dead, until the CE sets CEHDI itself.
const missedHeartbeats = 3

// MaxCENexthopID is the highest nexthop ID (HopSelector) the FE accepts from the
// CE; the IDs above it are the FE's own, for the connected routes of its ports.
const MaxCENexthopID = 0xFBFF

// Datapath is what the agent needs of the fast path. *datapath.Datapath is
// the real one; tests of the agent use a fake that records what it was told.
type Datapath interface {
	Attach(ifindex int, mode datapath.Mode) error
	SetRoute(p netip.Prefix, nexthopID uint32) error
	DeleteRoute(p netip.Prefix) error
	SetRoutes(routes []datapath.Route) error    // all or nothing
	DeleteRoutes(prefixes []netip.Prefix) error // all or nothing
	SetNexthop(id uint32, nh datapath.Nexthop) error
	DeleteNexthop(id uint32) error
	SetNeighbor(ifindex int, ip netip.Addr, mac net.HardwareAddr) error
	DeleteNeighbor(ifindex int, ip netip.Addr) error
	SetLocalAddr(ip netip.Addr) error
	Counters() (datapath.Counters, error)
	PortCounters() (map[int]datapath.PortCounters, error)
	CPUCounters() ([]datapath.Counters, error)
	Close() error
}

// Agent is a running FE.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	id      forces.ID
	load    func() (Datapath, error)
	dp      Datapath
	noPorts bool          // WithDatapath: no real interfaces
	kick    chan struct{} // wakes the resolver when a next hop arrives

	// egressPort returns the port a gateway is reached through (0: none of
	// ours); the kernel's routing table by default, replaced in tests.
	egressPort func(gw netip.Addr) int

	mu         sync.Mutex
	associated bool
	ports      map[int]*port      // by ifindex
	table      *table             // the rows the CE programmed
	txn        *txn               // an open transaction, if any
	prog       *programmed        // what the datapath holds for them
	connected  map[prefix4]uint32 // prefix -> local nexthop ID
	connected6 map[netip.Prefix]uint32
	neighbors  map[neighKey]net.HardwareAddr
	hb         forces.HeartbeatPolicy // the FE Protocol LFB's heartbeat settings
	sendEvery  atomic.Int64           // heartbeat interval (ns), 0: send none
	deadAfter  atomic.Int64           // CE dead interval (ns)

	corr       atomic.Uint64                        // correlators of the FE's own messages
	ceID       atomic.Value                         // forces.ID of the associated CE
	lowq       atomic.Pointer[chan *forces.Message] // the low-priority channel's queue, when up
	low        lowStats
	redirector *Redirector
	pcap       *forces.PcapWriter
	kernel     *kernelFIB // nil with WithDatapath: tests keep the host's kernel alone

	protocolErrors atomic.Uint64 // malformed or misaddressed messages from the CE
	dial           func(ctx context.Context, d net.Dialer, addr string) (net.Conn, error)
}

type port struct {
	Name    string         `json:"name"`
	Ifindex int            `json:"ifindex"`
	MAC     string         `json:"mac"`
	Addrs   []netip.Prefix `json:"addresses"`
	Mode    string         `json:"xdp_mode"`
	Up      bool           `json:"up"`
	// Counters are the XDP program's packets and bytes on this port.
	Counters datapath.PortCounters `json:"counters"`
	mac      net.HardwareAddr
	// rxQueues is the port's receive queue count, from netlink.
	rxQueues int
}

type neighKey struct {
	ifindex int
	addr    netip.Addr
}

// Status is a snapshot of the FE for operators.
type Status struct {
	ID         string `json:"id"`
	Associated bool   `json:"associated"`
	CE         string `json:"ce"`
	Ports      []port `json:"ports"`
	// Routes and Nexthops count the CE's rows; Programmed the routes in the
	// datapath (a route whose nexthop row is missing, or that a connected
	// route shadows, is not); Gateways the distinct next hops and Resolved
	// those whose egress port is known.
	Routes         int               `json:"routes"`
	Nexthops       int               `json:"nexthops"`
	Programmed     int               `json:"programmed_routes"`
	Gateways       int               `json:"gateways"`
	Resolved       int               `json:"gateways_resolved"`
	Neighbors      int               `json:"neighbors"`
	DatapathErrors uint64            `json:"datapath_errors"`
	Lanes          []Lane            `json:"lanes"`
	Low            LowStatus         `json:"low_channel"`
	KernelRoutes   int               `json:"kernel_routes"`
	KernelErrors   uint64            `json:"kernel_route_errors"`
	ProtocolErrors uint64            `json:"protocol_errors"`
	Counters       datapath.Counters `json:"counters"`
	// PerCPU are the same counters for each CPU: which core did the work.
	PerCPU []datapath.Counters `json:"counters_per_cpu"`
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
		a.egressPort = egress
		a.noPorts = true
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
		cfg: cfg, log: log, id: forces.FEID(cfg.ID),
		load:  func() (Datapath, error) { return datapath.Load() },
		kick:  make(chan struct{}, 1),
		ports: map[int]*port{}, table: newTable(), prog: newProgrammed(), connected: map[prefix4]uint32{}, connected6: map[netip.Prefix]uint32{},
		neighbors: map[neighKey]net.HardwareAddr{},
	}
	a.egressPort = a.kernelEgressPort
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
	}
	dp, err := a.load()
	if err != nil {
		return fmt.Errorf("load XDP datapath: %w", err)
	}
	a.mu.Lock()
	a.dp = dp
	a.mu.Unlock()
	defer dp.Close()
	if err := a.setupPorts(links); err != nil {
		return err
	}
	if !a.noPorts {
		kernel := newKernelFIB(a.cfg.KernelRoutes)
		if err := kernel.sweep(); err != nil {
			a.log.Warn("fe: could not remove stale kernel routes", "err", err)
		}
		a.mu.Lock()
		a.kernel = kernel
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.kernel.removeAll()
			a.mu.Unlock()
		}()
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
	wg.Add(3)
	go func() { defer wg.Done(); a.watchLinks(ctx) }()
	go func() { defer wg.Done(); a.watchNeighbors(ctx) }()
	go func() { defer wg.Done(); a.resolveLoop(ctx) }()

	if a.cfg.StatusSocket != "" {
		stop, err := status.Serve(a.cfg.StatusSocket, func() any { return a.Status() }, nil)
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

// Status returns a snapshot of the FE.
func (a *Agent) Status() Status {
	a.mu.Lock()
	st := Status{
		ID: a.id.String(), Associated: a.associated, CE: a.cfg.CEAddress, Routes: len(a.table.v4.routes) + len(a.table.v6.routes),
		Nexthops: len(a.table.v4.nexthops) + len(a.table.v6.nexthops), Gateways: len(a.prog.slots), Neighbors: len(a.neighbors),
		Programmed: len(a.prog.routes) + len(a.prog.routes6), DatapathErrors: a.prog.errors,
	}
	for _, s := range a.prog.slots {
		if s.ifindex != 0 {
			st.Resolved++
		}
	}
	st.ProtocolErrors = a.protocolErrors.Load()
	if a.kernel != nil {
		st.KernelRoutes, st.KernelErrors = len(a.kernel.installed), a.kernel.errors
	}
	st.Low = LowStatus{Up: a.lowq.Load() != nil, Redirected: a.low.redirected.Load(), Dropped: a.low.dropped.Load(),
		Injected: a.low.injected.Load(), Events: a.low.events.Load()}
	for _, name := range a.cfg.Ports {
		for _, p := range a.ports {
			if p.Name == name {
				st.Ports = append(st.Ports, *p)
			}
		}
	}
	dp := a.dp
	var queues []portQueues
	for _, name := range a.cfg.Ports {
		for _, p := range a.ports {
			if p.Name == name {
				queues = append(queues, portQueues{p.Name, p.rxQueues})
			}
		}
	}
	a.mu.Unlock()
	if !a.noPorts {
		st.Lanes = lanes("/sys", "/proc/interrupts", queues)
	}
	if dp != nil {
		st.Counters, _ = dp.Counters()
		st.PerCPU, _ = dp.CPUCounters()
		if pc, err := dp.PortCounters(); err == nil {
			for i := range st.Ports {
				st.Ports[i].Counters = pc[st.Ports[i].Ifindex]
			}
		}
	}
	return st
}

// socketBuffer bounds the kernel's buffering of a ForCES connection: a full
// table queued in socket buffers would put a heartbeat seconds behind the
// configs ahead of it, while a few large messages keep the link busy.
const socketBuffer = 256 << 10

func boundBuffers(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(socketBuffer)
		_ = tc.SetWriteBuffer(socketBuffer)
	}
}

// newConn wraps a connection to the CE in the ForCES TML.
func (a *Agent) newConn(nc net.Conn) *forces.Conn {
	conn := forces.NewConn(nc)
	if a.pcap != nil {
		conn.SetTap(a.pcap.Tap(false))
	}
	return conn
}

// lookupPorts finds every configured port, before anything is loaded, so a
// wrong name is reported first and changes nothing.
func (a *Agent) lookupPorts() ([]netlink.Link, error) {
	links := make([]netlink.Link, len(a.cfg.Ports))
	for i, name := range a.cfg.Ports {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("ports[%d] %q: no such interface: %w", i, name, err)
		}
		if len(l.Attrs().HardwareAddr) != 6 {
			return nil, fmt.Errorf("ports[%d] %q: not an Ethernet interface", i, name)
		}
		links[i] = l
	}
	return links, nil
}

// setupPorts attaches XDP to every port and installs what the FE knows by
// itself: its own addresses (for-us traffic goes to the kernel) and the
// connected routes of its ports.
func (a *Agent) setupPorts(links []netlink.Link) error {
	mode, _ := a.cfg.mode()
	for i, l := range links {
		name := a.cfg.Ports[i]
		attrs := l.Attrs()
		if attrs.Flags&net.FlagUp == 0 {
			if err := netlink.LinkSetUp(l); err != nil {
				return fmt.Errorf("ports[%d] %q: set up: %w", i, name, err)
			}
		}
		portMode := mode
		err := a.dp.Attach(attrs.Index, mode)
		if err != nil && mode == datapath.ModeNative {
			// The driver may lack native XDP: generic mode works everywhere,
			// about three times slower.
			if gerr := a.dp.Attach(attrs.Index, datapath.ModeGeneric); gerr == nil {
				a.log.Warn("fe: native XDP not available, using generic mode (slower)", "port", name, "driver_error", err)
				portMode, err = datapath.ModeGeneric, nil
			}
		}
		if err != nil {
			return fmt.Errorf("ports[%d] %q: attach XDP (%s): %w", i, name, mode, err)
		}
		up := attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown
		p := &port{Name: name, Ifindex: attrs.Index, MAC: attrs.HardwareAddr.String(), Mode: portMode.String(), Up: up, mac: attrs.HardwareAddr, rxQueues: attrs.NumRxQueues}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("ports[%d] %q: list addresses: %w", i, name, err)
		}
		localID := uint32(MaxCENexthopID + 1 + i)
		if err := a.dp.SetNexthop(localID, datapath.Nexthop{Ifindex: attrs.Index, SrcMAC: attrs.HardwareAddr}); err != nil {
			return fmt.Errorf("ports[%d] %q: connected nexthop: %w", i, name, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			if !ok || ip.IsLinkLocalUnicast() {
				continue // link-local traffic always goes to the kernel
			}
			ip = ip.Unmap()
			ones, _ := ad.Mask.Size()
			pfx := netip.PrefixFrom(ip, ones)
			p.Addrs = append(p.Addrs, pfx)
			if err := a.dp.SetLocalAddr(ip); err != nil {
				return err
			}
			if err := a.dp.SetRoute(pfx.Masked(), localID); err != nil {
				return err
			}
			if ip.Is4() {
				a.connected[toPrefix4(pfx)] = localID
			} else {
				a.connected6[pfx.Masked()] = localID
			}
		}
		a.ports[attrs.Index] = p
		a.log.Info("fe: port ready", "port", name, "ifindex", attrs.Index, "xdp", mode.String(), "addresses", p.Addrs)
	}
	return nil
}

// associate runs one association with the CE, from TCP connect to teardown.
func (a *Agent) associate(ctx context.Context) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	nc, err := a.dial(dctx, d, a.cfg.CEAddress)
	cancel()
	if err != nil {
		return err
	}
	conn := a.newConn(nc)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() {
		_ = conn.WriteMessage(forces.NewAssociationTeardown(a.id, forces.CEID(0), uint32(forces.TeardownNormal)))
		conn.Close()
	})
	defer stop()

	next := func() uint64 { return a.corr.Add(1) }
	if err := conn.WriteMessage(forces.NewAssociationSetup(a.id, forces.CEID(0), next())); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := conn.ReadMessage()
	if err != nil {
		return fmt.Errorf("waiting for association setup response: %w", err)
	}
	conn.SetReadDeadline(time.Time{})
	if resp.Header.Type != forces.MsgAssociationSetupResponse || resp.ASResult == nil {
		return fmt.Errorf("expected an Association Setup Response, got %s", resp.Header.Type)
	}
	if forces.SetupResult(*resp.ASResult) != forces.SetupSuccess {
		return fmt.Errorf("CE refused the association: %s", forces.SetupResult(*resp.ASResult))
	}
	ce := resp.Header.Src
	// The FIB of an earlier association stays in place (non-stop
	// forwarding); the CE's full sync replaces it in one transaction.
	a.log.Info("forces: associated with CE", "ce", ce, "address", a.cfg.CEAddress)
	a.mu.Lock()
	a.associated = true
	a.mu.Unlock()
	a.ceID.Store(ce)
	defer func() {
		a.mu.Lock()
		a.associated = false
		a.mu.Unlock()
	}()

	lowCtx, lowStop := context.WithCancel(ctx)
	lowDone := make(chan struct{})
	defer func() { lowStop(); <-lowDone }()
	go func() {
		defer close(lowDone)
		if err := a.lowChannel(lowCtx, ce, next); err != nil && lowCtx.Err() == nil {
			a.log.Warn("forces: low-priority channel down; redirects and events are dropped until the next association", "err", err)
		}
	}()

	// Heartbeats go out from their own goroutine; incoming messages, or their
	// absence, tell the reader that the CE is alive.
	var wmu sync.Mutex
	write := func(m *forces.Message) error { wmu.Lock(); defer wmu.Unlock(); return conn.WriteMessage(m) }
	hbCtx, hbStop := context.WithCancel(ctx)
	defer hbStop()
	go func() {
		for {
			send, _ := a.intervals()
			if send == 0 {
				send = time.Second // policy: no heartbeats; look again later
			}
			select {
			case <-hbCtx.Done():
				return
			case <-time.After(send):
			}
			if s, _ := a.intervals(); s == 0 {
				continue
			}
			if write(forces.NewHeartbeat(a.id, ce, next(), forces.NoACK)) != nil {
				return
			}
		}
	}()

	// The reader answers heartbeats at once and hands configs and queries to
	// the applier through a short queue: when the applier falls behind, the
	// reader stops reading and TCP pushes back on the CE.
	work := make(chan *forces.Message, 1)
	applied := make(chan error, 1)
	go func() { applied <- a.applier(work, write) }()
	defer func() {
		close(work)
		<-applied
	}()
	for {
		_, dead := a.intervals()
		conn.SetReadDeadline(time.Now().Add(dead))
		m, err := conn.ReadMessage()
		if err != nil {
			if forces.IsProtocolError(err) {
				a.protocolErrors.Add(1)
				_ = write(forces.NewAssociationTeardown(a.id, ce, uint32(forces.TeardownUnspecified)))
				return fmt.Errorf("malformed message from the CE: %w", err)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = write(forces.NewAssociationTeardown(a.id, ce, uint32(forces.TeardownLossOfHeartbeats)))
				return fmt.Errorf("loss of heartbeats: nothing from the CE for %s", dead)
			}
			return err
		}
		if m.Header.Dst != a.id || m.Header.Src != ce {
			a.protocolErrors.Add(1)
			a.log.Warn("forces: message with wrong IDs dropped", "src", m.Header.Src, "dst", m.Header.Dst, "type", m.Header.Type)
			continue
		}
		switch m.Header.Type {
		case forces.MsgHeartbeat:
			if m.Header.Flags.ACK == forces.AlwaysACK {
				if err := write(forces.NewHeartbeat(a.id, ce, m.Header.Correlator, forces.NoACK)); err != nil {
					return err
				}
			}
		case forces.MsgConfig, forces.MsgQuery:
			select {
			case work <- m:
			case err := <-applied:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		case forces.MsgAssociationTeardown:
			reason := forces.TeardownUnspecified
			if m.ASTReason != nil {
				reason = forces.TeardownReason(*m.ASTReason)
			}
			return fmt.Errorf("CE tore down the association: %s", reason)
		default:
			a.log.Warn("forces: unexpected message from CE", "type", m.Header.Type)
		}
	}
}

// applier applies Configs and answers Queries, in order, until work is closed.
func (a *Agent) applier(work <-chan *forces.Message, write func(*forces.Message) error) error {
	var werr error
	for m := range work {
		if werr != nil {
			continue // drain, so the reader never blocks on a dead applier
		}
		var resp *forces.Message
		switch m.Header.Type {
		case forces.MsgConfig:
			r, failed := a.applyConfig(m)
			if ack := m.Header.Flags.ACK; ack == forces.AlwaysACK || ack == forces.SuccessACK && !failed || ack == forces.FailureACK && failed {
				resp = r
			}
		case forces.MsgQuery:
			resp = a.answerQuery(m)
		}
		if resp != nil {
			werr = write(resp)
		}
	}
	return werr
}
