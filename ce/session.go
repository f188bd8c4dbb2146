package ce

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// socketBuffer bounds the kernel's buffering of a ForCES connection.
const socketBuffer = 128 << 10

// setupTimeout bounds how long a new TCP connection may take to send its
// Association Setup.
const setupTimeout = 5 * time.Second

// session is the CE's side of one FE association. The CE loop enqueues changes;
// the session's writer turns them into batched Config messages.
type session struct {
	ce     *CE
	conn   *forces.Conn
	fe     forces.ID
	remote string
	since  time.Time

	decided chan error // the loop's verdict on the association: nil = accepted

	mu      sync.Mutex
	pending *pending // changes not yet sent, coalesced per row
	wake    chan struct{}
	why     error

	corr     atomic.Uint64
	acked    atomic.Uint64
	failed   atomic.Uint64
	lastSeen atomic.Int64 // unix nanoseconds of the last message from the FE

	snapshot  *Snapshot              // the full sync, sent as one transaction
	queries   chan *forces.Message   // Query Responses, from the reader
	syncReady chan struct{}          // the loop has set snapshot
	info      feInfo                 // what discovery learned
	commits   chan forces.ResultCode // COMMIT-RESPONSE results, from the reader
	synced    atomic.Bool            // the full sync has been committed
	hb        heartbeats             // round trips of the CE's heartbeats
	low       atomic.Pointer[lowChannel]
	txns      chan *feTxn // API transactions for this FE, in order
	qmu       sync.Mutex  // one status query at a time
}

// setupResponse answers an Association Setup from this CE's own ID: the FE
// addressed a CE before it knew which one would answer.
func (c *CE) setupResponse(req *forces.Message, result uint32) *forces.Message {
	m := forces.NewAssociationSetupResponse(req, result)
	m.Header.Src = c.id
	return m
}

// newConn wraps a TCP connection in the ForCES TML.
func (c *CE) newConn(nc net.Conn) *forces.Conn {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		// A full table queued in socket buffers would put heartbeats
		// seconds behind the configs ahead of them.
		_ = tc.SetWriteBuffer(socketBuffer)
		_ = tc.SetReadBuffer(socketBuffer)
	}
	conn := forces.NewConn(nc)
	if c.pcap != nil {
		conn.SetTap(c.pcap.Tap(true))
	}
	return conn
}

func (c *CE) serveFE(ctx context.Context, nc net.Conn) {
	conn := c.newConn(nc)
	defer conn.Close()
	log := c.log.With("remote", nc.RemoteAddr().String())

	conn.SetReadDeadline(time.Now().Add(setupTimeout))
	m, err := conn.ReadMessage()
	if err != nil {
		log.Warn("forces: no association setup", "err", err)
		return
	}
	if m.Header.Type != forces.MsgAssociationSetup || !m.Header.Src.IsFE() {
		log.Warn("forces: expected an Association Setup from an FE ID", "type", m.Header.Type, "src", m.Header.Src)
		return
	}
	conn.SetReadDeadline(time.Time{})

	s := &session{
		ce: c, conn: conn, fe: m.Header.Src, remote: nc.RemoteAddr().String(), since: time.Now(),
		decided: make(chan error, 1), wake: make(chan struct{}, 1), commits: make(chan forces.ResultCode, 1), pending: newPending(), syncReady: make(chan struct{}, 1), queries: make(chan *forces.Message, 1),
		txns: make(chan *feTxn, 4),
	}
	s.lastSeen.Store(time.Now().UnixNano())
	select {
	case c.joins <- s:
	case <-ctx.Done():
		return
	}
	if err := <-s.decided; err != nil {
		log.Warn("forces: association refused", "fe", s.fe, "err", err)
		resp := c.setupResponse(m, uint32(forces.SetupPermissionDenied))
		_ = conn.WriteMessage(resp)
		return
	}
	if err := conn.WriteMessage(c.setupResponse(m, uint32(forces.SetupSuccess))); err != nil {
		s.end(fmt.Errorf("send setup response: %w", err))
	} else {
		s.run(ctx)
	}
	select {
	case c.leaves <- s:
	case <-ctx.Done():
	}
}

// accept and reject are called by the CE loop: accept hands the session the
// FIB to sync, and from then on the changes to it.
func (s *session) accept(snapshot *Snapshot) {
	s.snapshot = snapshot
	s.mu.Lock()
	s.pending = newPending()
	s.pending.syncedSnapshot(snapshot)
	s.mu.Unlock()
	s.syncReady <- struct{}{}
}

func (s *session) reject(err error) { s.decided <- err }

// enqueue appends changes for the writer; called by the CE loop.
func (s *session) enqueue(ch []Change) {
	s.mu.Lock()
	s.pending.add(ch)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *session) end(err error) {
	s.mu.Lock()
	if s.why == nil {
		s.why = err
	}
	s.mu.Unlock()
}

func (s *session) reason() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

func (s *session) status() FEStatus {
	s.mu.Lock()
	pending := s.pending.len()
	info := s.info
	s.mu.Unlock()
	var lfbs []string
	for _, l := range info.lfbs {
		lfbs = append(lfbs, l.Name)
	}
	var ports []FEPort
	for _, p := range info.ports {
		ports = append(ports, FEPort{ID: p.ID, Name: p.Name, MAC: net.HardwareAddr(p.MAC[:]).String(), Up: p.Up})
	}
	st := FEStatus{
		ID: s.fe.String(), Num: s.fe, Name: info.name, LFBs: lfbs, Ports: ports, Remote: s.remote, AssociatedAt: s.since, Synced: s.synced.Load(), Pending: pending,
		Acked: s.acked.Load(), Failed: s.failed.Load(), LastHeartbeat: time.Unix(0, s.lastSeen.Load()),
		HeartbeatRTT: s.hb.summary(),
	}
	if low := s.low.Load(); low != nil {
		st.LowChannel = true
		st.Redirected, st.Injected, st.Events = low.redirected.Load(), low.injected.Load(), low.events.Load()
	}
	return st
}

// run serves the association until it ends: a reader for the FE's messages,
// and this goroutine writing configs and heartbeats.
func (s *session) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		s.end(s.read())
		cancel()
	}()
	go func() {
		s.end(s.heartbeat(ctx))
		cancel()
	}()
	defer func() {
		if s.reason() == nil {
			s.end(errors.New("CE shutting down"))
			_ = s.conn.WriteMessage(forces.NewAssociationTeardown(s.ce.id, s.fe, uint32(forces.TeardownNormal)))
		}
		s.conn.Close()
		if low := s.low.Load(); low != nil {
			low.conn.Close()
		}
		// Transactions still waiting for this FE fail at once.
		for {
			select {
			case t := <-s.txns:
				t.staged <- fmt.Errorf("association ended: %v", s.reason())
			default:
				return
			}
		}
	}()

	if err := s.discover(ctx); err != nil {
		s.end(err)
		return
	}
	// Next hops resolve through the FE's ports before its full sync is
	// taken (the loop handles the two in this order).
	s.mu.Lock()
	ports := slices.Clone(s.info.ports)
	s.mu.Unlock()
	s.ce.setConnected(ctx, s.fe, ports)
	// After a CE restart the FE keeps forwarding with the FIB it has until
	// this CE's FIB has converged: syncing a half-learned table would
	// withdraw routes the FE still forwards on.
	select {
	case <-s.ce.converged:
	case <-ctx.Done():
		return
	}
	select {
	case s.ce.syncs <- s:
	case <-ctx.Done():
		return
	}
	select {
	case <-s.syncReady:
	case <-ctx.Done():
		return
	}
	if err := s.fullSync(ctx); err != nil {
		s.end(err)
		return
	}
	s.ce.log.Info("forces: full sync committed", "fe", s.fe, "changes", s.snapshot.Len())
	s.snapshot = nil
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			if err := s.flush(); err != nil {
				s.end(err)
				return
			}
		case t := <-s.txns:
			// Changes made before the transaction go first.
			if err := s.flush(); err != nil {
				t.staged <- err
				s.end(err)
				return
			}
			if err := s.transaction(ctx, t); err != nil {
				s.end(err)
				return
			}
		}
	}
}

// heartbeat sends the CE's heartbeats and tears the association down when
// nothing has come from the FE for missedHeartbeats intervals. It runs apart
// from the config writer so a long full sync never delays it.
func (s *session) heartbeat(ctx context.Context) error {
	interval := s.ce.cfg.HeartbeatInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if since := time.Since(time.Unix(0, s.lastSeen.Load())); since > time.Duration(s.ce.cfg.HeartbeatMissLimit)*interval {
			_ = s.conn.WriteMessage(forces.NewAssociationTeardown(s.ce.id, s.fe, uint32(forces.TeardownLossOfHeartbeats)))
			return fmt.Errorf("loss of heartbeats: nothing from the FE for %s", since.Round(time.Millisecond))
		}
		if err := s.sendHeartbeat(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *session) sendHeartbeat() error {
	c := s.corr.Add(1)
	s.hb.sent(c)
	if err := s.conn.WriteMessage(forces.NewHeartbeat(s.ce.id, s.fe, c, forces.AlwaysACK)); err != nil {
		return fmt.Errorf("send heartbeat: %w", err)
	}
	return nil
}

// read consumes the FE's messages until the connection ends.
func (s *session) read() error {
	for {
		m, err := s.conn.ReadMessage()
		if err != nil {
			if forces.IsProtocolError(err) {
				// The stream cannot be trusted any more: say why and end.
				s.ce.protocolErrors.Add(1)
				_ = s.conn.WriteMessage(forces.NewAssociationTeardown(s.ce.id, s.fe, uint32(forces.TeardownUnspecified)))
				return fmt.Errorf("malformed message from FE: %w", err)
			}
			return fmt.Errorf("read from FE: %w", err)
		}
		if m.Header.Src != s.fe || m.Header.Dst != s.ce.id {
			s.ce.protocolErrors.Add(1)
			s.ce.log.Warn("forces: message with wrong IDs dropped", "fe", s.fe, "src", m.Header.Src, "dst", m.Header.Dst, "type", m.Header.Type)
			continue
		}
		s.lastSeen.Store(time.Now().UnixNano())
		switch m.Header.Type {
		case forces.MsgHeartbeat:
			if m.Header.Flags.ACK == forces.AlwaysACK {
				_ = s.conn.WriteMessage(forces.NewHeartbeat(s.ce.id, s.fe, m.Header.Correlator, forces.NoACK))
			} else {
				s.hb.answered(m.Header.Correlator)
			}
		case forces.MsgConfigResponse:
			if isCommitResponse(m) {
				code, err := forces.CommitResult(m)
				if err != nil {
					code = forces.ResultUnspecifiedError
				}
				select {
				case s.commits <- code:
				default:
				}
				continue
			}
			results, err := forces.ConfigResults(m)
			if err != nil {
				return fmt.Errorf("bad config response from FE: %w", err)
			}
			for _, r := range results {
				if r == forces.ResultSuccess {
					s.acked.Add(1)
				} else {
					s.failed.Add(1)
					s.ce.log.Warn("forces: FE rejected a change", "fe", s.fe, "result", r)
				}
			}
		case forces.MsgQueryResponse:
			select {
			case s.queries <- m:
			default:
				s.ce.log.Warn("forces: unexpected query response", "fe", s.fe, "correlator", m.Header.Correlator)
			}
		case forces.MsgAssociationTeardown:
			return &feTeardown{teardownReason(m)}
		default:
			s.ce.log.Warn("forces: unexpected message from FE", "fe", s.fe, "type", m.Header.Type)
		}
	}
}

// feTeardown is how a session ends when the FE tears the association down.
type feTeardown struct{ reason forces.TeardownReason }

func (e *feTeardown) Error() string { return "FE tore down the association: " + e.reason.String() }

// normalEnd reports whether err is an FE's own normal teardown (it is shutting
// down), which is no cause for a warning.
func normalEnd(err error) bool {
	var t *feTeardown
	return errors.As(err, &t) && t.reason == forces.TeardownNormal
}

// teardownReason reads the ASTreason of an Association Teardown.
func teardownReason(m *forces.Message) forces.TeardownReason {
	if m.ASTReason == nil {
		return forces.TeardownUnspecified
	}
	return forces.TeardownReason(*m.ASTReason)
}
