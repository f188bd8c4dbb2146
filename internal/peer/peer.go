// Package peer is the lab's upstream BGP speaker: an embedded GoBGP v4 server
// with one neighbour that announces a generated Internet-like IPv4 table
// (package routegen) with a fixed, third-party NEXT_HOP, and lets tests and
// operators withdraw and re-announce single prefixes.
//
// GoBGP keeps the NEXT_HOP of a locally originated path on eBGP sessions
// (table.UpdatePathAttrs only rewrites it when it is unspecified), so the
// neighbour receives Config.NextHop rather than this speaker's address.
package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/splitplane/splitplane/internal/routegen"
)

var (
	// ErrStopped is returned by operations on a Peer after Stop.
	ErrStopped = errors.New("peer stopped")
	// ErrInvalidPrefix is wrapped by Announce and Withdraw when a prefix is
	// not a masked IPv4 prefix.
	ErrInvalidPrefix = errors.New("invalid prefix")
	// ErrGoBGP is wrapped by errors the embedded GoBGP server returns.
	ErrGoBGP = errors.New("gobgp")
)

// batchSize is the number of paths handed to GoBGP per AddPath/DeletePath
// call: large enough to amortise its management-loop round trip, small
// enough to bound the garbage of one call and to notice cancellation.
const batchSize = 4096

// Status is a snapshot of the speaker, as served on GET /status.
type Status struct {
	Neighbor string `json:"neighbor"`
	// State is the session state: idle, connect, active, opensent,
	// openconfirm, established, or stopped after Stop.
	State string `json:"state"`
	// Announced is the number of prefixes currently announced.
	Announced int `json:"announced"`
	// Received counts the neighbour's routes as GoBGP's best-path watcher
	// reports them: announcements less withdrawals. A prefix announced again
	// with new attributes counts again, so it is exact only while the
	// neighbour announces each prefix once (as `splitplane bench converge`'s
	// sender does, timing GoBGP with nothing else to do).
	Received int64 `json:"received"`
	// Uptime is how long the session has been established (0 otherwise).
	Uptime        Seconds   `json:"uptime_seconds"`
	EstablishedAt time.Time `json:"established_at,omitzero"`
	// Established counts how often the session reached Established, so a
	// flap between two polls is visible.
	Established int `json:"established_count"`
	// LastDown describes why the session last left Established.
	LastDown string `json:"last_down,omitempty"`
}

// Seconds is a duration that encodes to JSON as a number of seconds.
type Seconds time.Duration

// MarshalJSON encodes s as seconds with millisecond precision.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(s).Round(time.Millisecond).Seconds(), 'f', -1, 64), nil
}

// UnmarshalJSON decodes a number of seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("seconds: %w", err)
	}
	*s = Seconds(f * float64(time.Second))
	return nil
}

// Peer is a running speaker. Its methods are safe for concurrent use.
type Peer struct {
	cfg    Config
	log    *slog.Logger
	srv    *server.BgpServer
	attrs  []bgp.PathAttributeInterface // ORIGIN IGP, NEXT_HOP cfg.NextHop; shared by all paths
	cancel context.CancelFunc           // stops the peer-state watcher

	opMu sync.Mutex // serialises Announce, Withdraw and Stop

	received atomic.Int64 // see Status.Received

	mu          sync.Mutex // guards the fields below
	announced   map[netip.Prefix]struct{}
	state       bgp.FSMState
	since       time.Time
	established int
	lastDown    string
	stopped     bool
}

// Start validates cfg, starts an embedded GoBGP server, announces the
// generated table plus cfg.Extra and adds the neighbour. It returns once
// every prefix is in GoBGP's RIB; the session comes up in the background
// (see Status). On error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Peer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("neighbor", cfg.Neighbor.String())
	nh, err := bgp.NewPathAttributeNextHop(cfg.NextHop)
	if err != nil {
		return nil, invalid("NextHop", cfg.NextHop, err.Error())
	}
	p := &Peer{
		cfg:       cfg,
		log:       log,
		srv:       server.NewBgpServer(server.LoggerOption(cfg.Logger.With("component", "gobgp"), nil)),
		attrs:     []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), nh},
		announced: make(map[netip.Prefix]struct{}),
		state:     bgp.BGP_FSM_IDLE,
	}
	go p.srv.Serve()
	if err := p.start(ctx); err != nil {
		p.srv.Stop()
		if p.cancel != nil {
			p.cancel()
		}
		return nil, err
	}
	return p, nil
}

func (p *Peer) start(ctx context.Context) error {
	cfg := p.cfg
	err := p.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:             cfg.ASN,
		RouterId:        cfg.RouterID.String(),
		ListenPort:      cfg.ListenPort,
		ListenAddresses: cfg.ListenAddrs,
	}})
	if err != nil {
		return fmt.Errorf("%w: start (listen port %d, addresses %v): %w", ErrGoBGP, cfg.ListenPort, cfg.ListenAddrs, err)
	}

	// Watch before adding the neighbour so that no transition is missed.
	wctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	err = p.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: p.onPeerUpdate, OnBestPath: p.onBestPath},
		server.WatchPeer(), server.WatchBestPath(false))
	if err != nil {
		return fmt.Errorf("%w: watch peer state and best paths: %w", ErrGoBGP, err)
	}

	// Announce before the neighbour exists: GoBGP then sends the whole table
	// in packed UPDATEs when the session comes up, instead of propagating
	// every path separately.
	prefixes := append(routegen.Generate(cfg.Routes, cfg.Seed), cfg.Extra...)
	if err := p.announce(ctx, prefixes); err != nil {
		return err
	}

	families := []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}}
	if cfg.NextHop6.IsValid() {
		families = append(families, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, Enabled: true}})
	}
	peer := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: cfg.Neighbor.String(), PeerAsn: cfg.NeighborASN},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          uint64(cfg.HoldTime / time.Second),
			KeepaliveInterval: uint64(cfg.Keepalive / time.Second),
			ConnectRetry:      uint64(cfg.ConnectRetry / time.Second),
		}},
		Transport: &api.Transport{PassiveMode: cfg.Passive, RemotePort: cfg.NeighborPort},
		AfiSafis:  families,
	}
	if cfg.LocalAddress.IsValid() {
		peer.Transport.LocalAddress = cfg.LocalAddress.String()
	}
	if gr := uint32(cfg.GracefulRestart / time.Second); gr > 0 {
		// As the CE does it (ce/bgp): the Restart State bit on every start,
		// and graceful restart for each family.
		peer.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: gr, DeferralTime: gr, LocalRestarting: true}
		for _, f := range families {
			f.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
	}
	if err := p.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peer}); err != nil {
		return fmt.Errorf("%w: add neighbor %v AS %d: %w", ErrGoBGP, cfg.Neighbor, cfg.NeighborASN, err)
	}
	p.log.Info("peer started", "asn", cfg.ASN, "neighbor_asn", cfg.NeighborASN,
		"announced", p.Status().Announced, "next_hop", cfg.NextHop.String(), "listen_port", cfg.ListenPort)
	return nil
}

func (p *Peer) onPeerUpdate(ev *apiutil.WatchEventMessage_PeerEvent, t time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE && ev.Type != apiutil.PEER_EVENT_INIT {
		return
	}
	st := ev.Peer.State
	if st.NeighborAddress.Unmap() != p.cfg.Neighbor.Unmap() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || st.SessionState == p.state {
		return
	}
	old := p.state
	p.state = st.SessionState
	switch {
	case st.SessionState == bgp.BGP_FSM_ESTABLISHED:
		p.since = t
		p.established++
		p.log.Info("session established", "remote_id", st.RouterID.String())
	case old == bgp.BGP_FSM_ESTABLISHED:
		p.since = time.Time{}
		p.lastDown = strings.TrimSpace(st.DisconnectReason.String() + " " + st.DisconnectMessage)
		p.log.Warn("session down", "state", stateName(st.SessionState), "reason", p.lastDown)
	default:
		p.log.Debug("session state", "from", stateName(old), "to", stateName(st.SessionState))
	}
}

// onBestPath counts the neighbour's routes (Status.Received).
func (p *Peer) onBestPath(paths []*apiutil.Path, _ time.Time) {
	var n int64
	for _, path := range paths {
		if path.PeerAddress.Unmap() != p.cfg.Neighbor.Unmap() {
			continue // ours
		}
		if path.Withdrawal {
			n--
		} else {
			n++
		}
	}
	p.received.Add(n)
}

// stateName turns GoBGP's BGP_FSM_ESTABLISHED into established.
func stateName(s bgp.FSMState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BGP_FSM_"))
}

// Status returns a snapshot of the session state and the announced count.
func (p *Peer) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{
		Neighbor:      p.cfg.Neighbor.String(),
		State:         stateName(p.state),
		Announced:     len(p.announced),
		Received:      p.received.Load(),
		EstablishedAt: p.since,
		Established:   p.established,
		LastDown:      p.lastDown,
	}
	if p.stopped {
		st.State = "stopped"
		st.EstablishedAt = time.Time{}
	}
	if !st.EstablishedAt.IsZero() {
		st.Uptime = Seconds(time.Since(st.EstablishedAt))
	}
	return st
}

// Announce announces prefixes (masked IPv4) with the configured next hop.
// Prefixes already announced are left alone. Nothing is announced if any
// prefix is invalid.
func (p *Peer) Announce(prefixes ...netip.Prefix) error {
	if err := checkPrefixes(prefixes); err != nil {
		return err
	}
	return p.announce(context.Background(), prefixes)
}

// Withdraw withdraws prefixes (masked IPv4). Prefixes not announced are
// ignored. Nothing is withdrawn if any prefix is invalid.
func (p *Peer) Withdraw(prefixes ...netip.Prefix) error {
	if err := checkPrefixes(prefixes); err != nil {
		return err
	}
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if p.isStopped() {
		return ErrStopped
	}
	todo := p.filter(prefixes, true)
	for len(todo) > 0 {
		if p.isStopped() {
			return ErrStopped
		}
		n := min(len(todo), batchSize)
		batch := todo[:n]
		paths, err := p.paths(batch, true)
		if err != nil {
			return err
		}
		if err := p.srv.DeletePath(apiutil.DeletePathRequest{Paths: paths}); err != nil {
			return p.gobgpErr("withdraw", batch, err)
		}
		p.mu.Lock()
		for _, q := range batch {
			delete(p.announced, q)
		}
		p.mu.Unlock()
		todo = todo[n:]
	}
	return nil
}

func (p *Peer) announce(ctx context.Context, prefixes []netip.Prefix) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if p.isStopped() {
		return ErrStopped
	}
	todo := p.filter(prefixes, false)
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("announce: %w", err)
		}
		if p.isStopped() {
			return ErrStopped
		}
		n := min(len(todo), batchSize)
		batch := todo[:n]
		paths, err := p.paths(batch, false)
		if err != nil {
			return err
		}
		if _, err := p.srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
			return p.gobgpErr("announce", batch, err)
		}
		p.mu.Lock()
		for _, q := range batch {
			p.announced[q] = struct{}{}
		}
		p.mu.Unlock()
		todo = todo[n:]
	}
	return nil
}

// filter returns the distinct prefixes whose announced state differs from
// want.
func (p *Peer) filter(prefixes []netip.Prefix, want bool) []netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]netip.Prefix, 0, len(prefixes))
	seen := make(map[netip.Prefix]struct{}, min(len(prefixes), batchSize))
	for _, q := range prefixes {
		if _, ok := p.announced[q]; ok != want {
			continue
		}
		if _, dup := seen[q]; dup {
			continue
		}
		seen[q] = struct{}{}
		out = append(out, q)
	}
	return out
}

func (p *Peer) paths(prefixes []netip.Prefix, withdraw bool) ([]*apiutil.Path, error) {
	paths := make([]*apiutil.Path, len(prefixes))
	for i, q := range prefixes {
		nlri, err := bgp.NewIPAddrPrefix(q)
		if err != nil {
			return nil, fmt.Errorf("%w %v: %w", ErrInvalidPrefix, q, err)
		}
		// PeerASN 0 makes the path local to GoBGP, which is what keeps
		// its NEXT_HOP on eBGP sessions.
		if q.Addr().Is4() {
			paths[i] = &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: p.attrs, Withdrawal: withdraw}
			continue
		}
		if !p.cfg.NextHop6.IsValid() {
			return nil, fmt.Errorf("%w %v: announcing IPv6 needs NextHop6", ErrInvalidPrefix, q)
		}
		// IPv6 travels in MP_REACH_NLRI (RFC 4760), whose next hop is the
		// IPv6 one.
		reach, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, p.cfg.NextHop6)
		if err != nil {
			return nil, fmt.Errorf("%w %v: %w", ErrInvalidPrefix, q, err)
		}
		paths[i] = &apiutil.Path{Family: bgp.RF_IPv6_UC, Nlri: nlri, Withdrawal: withdraw,
			Attrs: []bgp.PathAttributeInterface{p.attrs[0], reach}}
	}
	return paths, nil
}

func (p *Peer) gobgpErr(op string, batch []netip.Prefix, err error) error {
	if p.isStopped() {
		return ErrStopped
	}
	return fmt.Errorf("%w: %s %d prefixes from %v: %w", ErrGoBGP, op, len(batch), batch[0], err)
}

func (p *Peer) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func checkPrefixes(prefixes []netip.Prefix) error {
	for _, q := range prefixes {
		if err := checkPrefix(q); err != nil {
			return fmt.Errorf("%w %v: %s", ErrInvalidPrefix, q, err)
		}
	}
	return nil
}

// Stop closes the session (sending a Cease NOTIFICATION), stops GoBGP and
// waits for its BGP goroutines. Stopping twice is harmless.
func (p *Peer) Stop() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	p.mu.Unlock()

	p.opMu.Lock() // let a running Announce or Withdraw batch finish
	defer p.opMu.Unlock()
	p.cancel()
	// BgpServer.Stop runs StopBgp (deconfigures the neighbour, closes the
	// listeners, waits for the FSM goroutines and Serve) and stops the BFD
	// loop, which StopBgp alone leaves running.
	p.srv.Stop()
	p.log.Info("peer stopped")
	return nil
}
