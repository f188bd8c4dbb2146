// Package bgp embeds a GoBGP v4 speaker behind the small interface the CE needs:
// start it with neighbours, receive best-path changes as plain Go values, read
// neighbour state. Nothing outside this package imports GoBGP.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// ErrConfig is wrapped by every configuration error the speaker returns.
var ErrConfig = errors.New("bgp config")

// Config configures the embedded speaker.
type Config struct {
	ASN         uint32
	RouterID    netip.Addr
	ListenPort  int32 // -1 disables listening
	ListenAddrs []string
	Neighbors   []Neighbor
	Logger      *slog.Logger
	// Multipath turns on GoBGP's multipath: the speaker then reports, for
	// every prefix, all the equal-cost paths GoBGP selects (Update.NextHops).
	// GoBGP keeps this switch in a process-wide variable that every
	// BgpServer.StartBgp overwrites, so all GoBGP servers in one process
	// follow the one started last.
	Multipath bool
	// APIListen, if set, serves GoBGP's own gRPC API on this TCP HOST:PORT
	// (grpcapi.go), unauthenticated, for the gobgp CLI.
	APIListen string
	// Networks are the prefixes the speaker originates (networks.go).
	Networks []netip.Prefix
	// ForwardingPreserved says whether the forwarding state survived the
	// speaker's restart: the FEs kept their FIB and forward with it. It is
	// asked when a neighbour with graceful restart is added; only when it
	// answers true does the speaker come up as a restarting speaker (the
	// Restart State bit, and the Forwarding State bit for every family,
	// RFC 4724 3), so that the neighbour keeps forwarding along the
	// routes it kept. nil answers false: the neighbour then drops the
	// speaker's stale routes as soon as the session is back, instead of
	// sending traffic to a router that may have lost its FIB.
	ForwardingPreserved func() bool
}

// Update is a best-path change for one prefix: a new best next hop (with
// Config.Multipath, a new set of equal-cost next hops), or a withdrawal.
type Update struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	// NextHops, with Config.Multipath, holds the distinct next hops of the
	// equal-cost paths GoBGP selected for the prefix, sorted with
	// netip.Addr.Compare, when there are two or more; NextHop is then the
	// best path's. Otherwise NextHops is nil.
	NextHops []netip.Addr
	// IBGP says the (best) path was learned from an iBGP neighbour, so the
	// CE gives it iBGP's administrative distance.
	IBGP     bool
	Withdraw bool
}

// NeighborStatus is what the CE reports about one neighbour.
type NeighborStatus struct {
	Address string    `json:"address"`
	ASN     uint32    `json:"asn"`
	State   string    `json:"state"`
	Since   time.Time `json:"since"`
	// BFD is the state of the neighbour's BFD session (up, init, down,
	// admin_down), empty without BFD.
	BFD string `json:"bfd,omitempty"`
	// WaitingEndOfRIB: with graceful restart, the session is up but the
	// neighbour has not yet sent End-of-RIB for every family, so its routes
	// are still coming (GoBGP defers route selection until then).
	WaitingEndOfRIB bool `json:"waiting_end_of_rib,omitempty"`
	// Received counts the neighbour's prefixes in its Adj-RIB-In, every
	// family (zero while the session is not established). Accepted is
	// GoBGP's count of those its per-neighbour import policy kept: the
	// CE's import prefix lists apply later, in the global table, so what
	// they reject still counts here.
	Received uint64 `json:"prefixes_received"`
	Accepted uint64 `json:"prefixes_accepted"`
	// Warning says what in the neighbour's configuration keeps it from
	// working as one might expect: an eBGP neighbour without import or
	// export policy exchanges no routes that way (RFC 8212).
	Warning string `json:"warning,omitempty"`
	// MaxPrefixesStopped: the session was closed because the neighbour
	// announced more than max_prefixes (action stop), and stays down until
	// a reset (Speaker.ResetNeighbor) or the configured restart interval.
	MaxPrefixesStopped bool `json:"max_prefixes_stopped,omitempty"`
}

// Speaker is a running GoBGP server feeding best paths to a callback.
type Speaker struct {
	srv    *server.BgpServer
	cancel context.CancelFunc
	log    *slog.Logger
	// asn is the speaker's own AS: a neighbour in another is eBGP, and
	// without policy exchanges no routes (RFC 8212).
	asn uint32

	done chan struct{} // closed when the prefix warner returned
	// listenPort is the port GoBGP listens on: Stop aborts the sessions of
	// neighbours with graceful restart (restart.go).
	listenPort int32

	// forwarding is Config.ForwardingPreserved (never nil).
	forwarding func() bool

	// setMu serialises SetNeighbors (GoBGP's policies are one global set).
	setMu sync.Mutex
	// netMu guards networks, the originated prefixes (SetNetworks).
	netMu    sync.Mutex
	networks []netip.Prefix

	mu        sync.Mutex
	neighbors map[netip.Addr]*NeighborStatus
	// configured are the neighbours as added, by address: SetNeighbors
	// compares against them; BFD, graceful restart and max_prefixes
	// warnings follow them.
	configured map[string]Neighbor
	// restarts are the pending restarts of neighbours stopped by
	// max_prefixes with a restart interval, by address (maxprefix.go).
	restarts map[string]*time.Timer
	// stopping is set by Stop: no restart may start after it.
	stopping bool

	// peers holds the last ListPeer answer. GoBGP counts a neighbour's
	// prefixes by walking its whole Adj-RIB-In, on the loop that also
	// processes UPDATEs: with two full tables one call takes most of a
	// second, and status polled every few milliseconds stalled the
	// speaker. Asked again only once it is older than a multiple of
	// what the last call cost.
	peers costlyCache[map[string]peerState]
}

// Validate checks a configuration without starting anything.
func (c *Config) Validate() error {
	if c.ASN == 0 {
		return fmt.Errorf("%w: asn: must be set (1..4294967295)", ErrConfig)
	}
	if !c.RouterID.Is4() {
		return fmt.Errorf("%w: router_id %q: must be an IPv4 address", ErrConfig, c.RouterID)
	}
	for i, a := range c.ListenAddrs {
		// GoBGP panics on an unparsable listen address, so check here.
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("%w: bgp_listen_addresses[%d] %q: not an IP address", ErrConfig, i, a)
		}
	}
	seen := map[netip.Addr]bool{}
	for i, n := range c.Neighbors {
		if err := n.validate(i); err != nil {
			return err
		}
		if seen[n.Address] {
			return fmt.Errorf("%w: neighbors[%d].address %s: configured twice", ErrConfig, i, n.Address)
		}
		seen[n.Address] = true
	}
	return validateNetworks(c.Networks)
}

// Start starts GoBGP, adds the neighbours and calls onUpdate with every best-path
// change (IPv4 and IPv6 unicast) from then on; with cfg.Multipath, with every
// change of a prefix's set of equal-cost next hops. onUpdate runs on one
// goroutine at a time and must not block for long.
func Start(ctx context.Context, cfg Config, onUpdate func([]Update)) (*Speaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	apiOpts, apiErr := cfg.apiOptions()
	if apiErr != nil {
		return nil, apiErr
	}
	srv := server.NewBgpServer(append(apiOpts, server.LoggerOption(log.With("subsystem", "gobgp"), lv))...)
	go srv.Serve()

	ctx, cancel := context.WithCancel(ctx)
	if cfg.ForwardingPreserved == nil {
		cfg.ForwardingPreserved = func() bool { return false }
	}
	s := &Speaker{srv: srv, forwarding: cfg.ForwardingPreserved, cancel: cancel, log: log, asn: cfg.ASN, neighbors: map[netip.Addr]*NeighborStatus{}, configured: map[string]Neighbor{}, restarts: map[string]*time.Timer{}}
	fail := func(err error) (*Speaker, error) {
		cancel()
		srv.Stop()
		return nil, err
	}

	port := cfg.ListenPort
	if port == 0 {
		port = 179
	}
	s.listenPort = port
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: port, ListenAddresses: cfg.ListenAddrs,
		UseMultiplePaths: cfg.Multipath,
	}}); err != nil {
		return fail(fmt.Errorf("start bgp (asn %d, listen port %d): %w", cfg.ASN, port, err))
	}

	onBest := func(paths []*apiutil.Path, _ time.Time) { onUpdate(toUpdates(paths, cfg.ASN)) }
	if cfg.Multipath {
		mp := newMultipaths(cfg.ASN) // owned by the goroutine calling onBest
		onBest = func(paths []*apiutil.Path, _ time.Time) {
			if us := mp.apply(paths); len(us) > 0 {
				onUpdate(us)
			}
		}
	}
	err := srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnBestPath:   onBest,
		OnPeerUpdate: s.onPeer,
	}, server.WatchBestPath(true), server.WatchPeer())
	if err != nil {
		return fail(fmt.Errorf("watch bgp events: %w", err))
	}

	if _, err := s.SetNeighbors(ctx, cfg.Neighbors); err != nil {
		return fail(err)
	}
	if _, _, err := s.SetNetworks(cfg.Networks); err != nil {
		return fail(err)
	}
	// The warner reads the max_prefixes limits from the configured
	// neighbours at every check, so it follows SetNeighbors.
	w := newPrefixWarner(s.warnLimits, log)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		w.run(ctx, srv)
	}()
	return s, nil
}

// warnLimits returns the max_prefixes limits of the neighbours that want a
// warning, by address.
func (s *Speaker) warnLimits() map[string]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]uint32{}
	for a, n := range s.configured {
		if n.MaxPrefixes != nil && n.MaxPrefixes.Action == Warn {
			out[a] = n.MaxPrefixes.Limit
		}
	}
	return out
}

// toUpdates turns GoBGP best paths into updates; paths of other families are
// skipped, and one without a usable next hop withdraws the prefix. A path from a neighbour in
// asn, the speaker's own, is iBGP.
func toUpdates(paths []*apiutil.Path, asn uint32) []Update {
	out := make([]Update, 0, len(paths))
	for _, p := range paths {
		pfx, ok := unicastPrefix(p)
		if !ok {
			continue
		}
		u := Update{Prefix: pfx, Withdraw: p.Withdrawal, IBGP: p.PeerASN != 0 && p.PeerASN == asn}
		if !u.Withdraw {
			// A best path that cannot be forwarded to (the router's own,
			// networks.go) leaves BGP without a route for the prefix.
			if u.NextHop = nextHop(p); !usable(u.NextHop) {
				u = Update{Prefix: pfx, Withdraw: true}
			}
		}
		out = append(out, u)
	}
	return out
}

// unicastPrefix returns the prefix of an IPv4 or IPv6 unicast path.
func unicastPrefix(p *apiutil.Path) (netip.Prefix, bool) {
	if p.Family != gobgp.RF_IPv4_UC && p.Family != gobgp.RF_IPv6_UC {
		return netip.Prefix{}, false
	}
	nlri, ok := p.Nlri.(*gobgp.IPAddrPrefix)
	if !ok {
		return netip.Prefix{}, false
	}
	return nlri.Prefix.Masked(), true
}

// nextHop returns a path's next hop, the zero Addr if it has none.
func nextHop(p *apiutil.Path) netip.Addr {
	var nh netip.Addr
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *gobgp.PathAttributeNextHop:
			nh = a.Value
		case *gobgp.PathAttributeMpReachNLRI: // IPv6 (RFC 4760)
			nh = a.Nexthop
		}
	}
	return nh
}

func (s *Speaker) onPeer(ev *apiutil.WatchEventMessage_PeerEvent, t time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	// A session's counts and End-of-RIB change with its state: forgotten
	// before the new state shows, so that no one sees it with old counts.
	s.peers.forget()
	addr := ev.Peer.State.NeighborAddress
	state := fsmStateName(ev.Peer.State.SessionState)
	// GoBGP keeps a neighbour that max_prefixes stopped in admin state
	// PFX_CT until it is enabled again (maxprefix.go).
	stopped := ev.Peer.State.AdminState == api.PeerState_ADMIN_STATE_PFX_CT && state != "established"
	s.mu.Lock()
	n, ok := s.neighbors[addr]
	if ok && n.State != state {
		n.State, n.Since = state, t
	}
	newlyStopped := ok && stopped && !n.MaxPrefixesStopped
	if ok {
		n.MaxPrefixesStopped = stopped
	}
	s.mu.Unlock()
	if ok {
		s.log.Info("bgp neighbour state", "neighbor", addr, "state", state)
	}
	if newlyStopped {
		s.maxPrefixesStopped(addr)
	}
}

func fsmStateName(st gobgp.FSMState) string {
	switch st {
	case gobgp.BGP_FSM_IDLE:
		return "idle"
	case gobgp.BGP_FSM_CONNECT:
		return "connect"
	case gobgp.BGP_FSM_ACTIVE:
		return "active"
	case gobgp.BGP_FSM_OPENSENT:
		return "opensent"
	case gobgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case gobgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return fmt.Sprintf("unknown(%d)", st)
}

// Neighbors returns the state of every configured neighbour, sorted by
// address, with its prefix counts.
func (s *Speaker) Neighbors() []NeighborStatus { return s.neighborStatus(true) }

// Sessions is Neighbors without the prefix counts (zero): GoBGP counts a
// neighbour's prefixes by walking its Adj-RIB-In on its own loop, which
// whoever polls often (waiting for convergence) need not make it do.
func (s *Speaker) Sessions() []NeighborStatus { return s.neighborStatus(false) }

func (s *Speaker) neighborStatus(counts bool) []NeighborStatus {
	s.mu.Lock()
	out := make([]NeighborStatus, 0, len(s.neighbors))
	for _, n := range s.neighbors {
		out = append(out, *n)
	}
	s.mu.Unlock()
	s.mu.Lock()
	bfdOn, grOn := map[string]bool{}, false
	for a, n := range s.configured {
		if n.BFD != nil {
			bfdOn[a] = true
		}
		grOn = grOn || n.GracefulRestart != nil
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	if len(out) == 0 || !counts && !grOn && len(bfdOn) == 0 {
		return out
	}
	peers := s.peers.get(time.Now, costlyWait, s.listPeers)
	for i := range out {
		if ps, ok := peers[out[i].Address]; ok {
			if bfdOn[out[i].Address] {
				out[i].BFD = ps.bfd
			}
			out[i].WaitingEndOfRIB = grOn && out[i].State == "established" && ps.waiting
			out[i].Received, out[i].Accepted = ps.received, ps.accepted
		}
	}
	return out
}

// peerState is what ListPeer tells of one neighbour that GoBGP has no
// event for: BFD state, End-of-RIB still awaited, prefix counts.
type peerState struct {
	bfd                string
	waiting            bool
	received, accepted uint64
}

// listPeers asks GoBGP for every neighbour's peerState.
func (s *Speaker) listPeers() map[string]peerState {
	peers := map[string]peerState{}
	_ = s.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
		if p.Conf == nil {
			return
		}
		a := p.Conf.NeighborAddress
		var ps peerState
		if p.State != nil && p.State.BfdState != nil {
			st := strings.TrimPrefix(p.State.BfdState.SessionState.String(), "BFD_SESSION_STATE_")
			ps.bfd = strings.ToLower(st)
		}
		for _, af := range p.AfiSafis {
			if gr := af.GetMpGracefulRestart().GetState(); gr != nil && gr.Received && !gr.EndOfRibReceived {
				ps.waiting = true
			}
			if st := af.GetState(); st != nil {
				ps.received += st.Received
				ps.accepted += st.Accepted
			}
		}
		peers[a] = ps
	})
	return peers
}

// Stop shuts the speaker down. Neighbours without graceful restart see a
// clean session close (a Cease NOTIFICATION) and withdraw this speaker's
// routes; those with graceful restart see the connection close without
// one, so they keep the routes, marked stale, for the restart time
// (RFC 4724), until this speaker comes back.
//
// Every session is closed first, all at once. GoBGP's own shutdown then
// withdraws each neighbour's routes from its tables, one neighbour after
// the other, which takes seconds per million routes and tells nobody
// anything: Stop waits for it at most stopWait, so that a CE holding a full
// table stops in a few seconds instead of being killed for taking too long.
func (s *Speaker) Stop() {
	s.mu.Lock()
	s.stopping = true
	for a, t := range s.restarts {
		t.Stop()
		delete(s.restarts, a)
	}
	s.mu.Unlock()
	s.cancel()
	if s.done != nil {
		<-s.done
	}
	s.mu.Lock()
	var restart, plain []Neighbor
	for _, n := range s.configured {
		if n.GracefulRestart != nil {
			restart = append(restart, n)
		} else {
			plain = append(plain, n)
		}
	}
	s.mu.Unlock()
	if len(restart) > 0 {
		n := abortSessions(restart, s.listenPort)
		s.log.Info("bgp: graceful-restart sessions reset for restart", "sessions", n)
	}
	for _, n := range plain {
		// A Cease (administrative shutdown), and no reconnection.
		_ = s.srv.DisablePeer(context.Background(), &api.DisablePeerRequest{Address: n.Address.String(), Communication: "splitplane stopping"})
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = s.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: true})
		s.srv.Stop()
	}()
	select {
	case <-stopped:
	case <-time.After(stopWait):
		s.log.Info("bgp: sessions closed; not waiting for GoBGP to release its routes", "waited", stopWait)
	}
}

// stopWait is how long Stop waits for GoBGP to release its tables once
// every session is closed.
const stopWait = 2 * time.Second
