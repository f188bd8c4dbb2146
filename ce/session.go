package ce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// setupTimeout bounds how long a new TCP connection may take to send its
// Association Setup.
const setupTimeout = forces.DefaultSetupTimeout

// RTTSummary describes recent heartbeat round trips, in milliseconds.
type RTTSummary = forces.RTTSummary

// session is the CE's side of one FE association: the association machine
// (forces.Assoc) runs the contract, the session the CE's part of it. The CE
// loop enqueues changes; the session's writer turns them into batched Config
// messages.
type session struct {
	ce     *CE
	assoc  *forces.Assoc
	conn   *forces.Conn // the association's, for the writer
	fe     forces.ID
	remote string
	// identity is who associated: the certificate's subject with TLS, the
	// remote address without; the low-priority channel must come from it.
	identity string
	since    time.Time

	decided chan error // the loop's verdict on the association: nil = accepted

	mu      sync.Mutex
	pending *pending // changes not yet sent, coalesced per row
	wake    chan struct{}
	why     error

	corr   atomic.Uint64
	acked  atomic.Uint64
	failed atomic.Uint64

	snapshot  *Snapshot            // the full sync, sent as one transaction
	queries   chan *forces.Message // Query Responses, from the reader
	syncReady chan struct{}        // the loop has set snapshot
	info      feInfo               // what discovery learned
	commits   chan commitResult    // COMMIT-RESPONSEs to the awaited COMMIT, from the reader
	commitFor atomic.Uint64        // the correlator of the COMMIT awaited; 0: none
	queryFor  atomic.Uint64        // the correlator of the Query awaited; 0: none
	synced    atomic.Bool          // the full sync has been committed
	low       atomic.Pointer[lowChannel]
	txns      chan *feTxn // API transactions for this FE, in order
	qmu       sync.Mutex  // one status query at a time
	rejected  forces.RateLog
}

// commitResult is an FE's answer to a COMMIT.
type commitResult struct {
	corr uint64
	code forces.ResultCode
}

// tap returns the pcap tap for a new connection, or nil.
func (c *CE) tap() func(raw []byte, sent bool) {
	if c.pcap == nil {
		return nil
	}
	return c.pcap.Tap(true)
}

// deadInterval is how long an FE may stay silent, or leave a write of the
// CE's unread, before its association ends.
func (c *CE) deadInterval() time.Duration {
	return time.Duration(c.cfg.HeartbeatMissLimit) * c.cfg.HeartbeatInterval
}

// readSetup reads a new connection's Association Setup and decides whether
// it may go on (admit); a refusal is answered with its RFC 5810 result, and
// counted. Every write of the setup phase is bounded by setupTimeout.
func (c *CE) readSetup(conn *forces.Conn, nc net.Conn, log *slog.Logger) (*forces.Message, bool) {
	conn.SetWriteTimeout(setupTimeout)
	m, err := forces.ReadSetup(conn, setupTimeout)
	if err != nil {
		c.refuse(refuseNoSetup, "forces: connection closed without an association setup", "remote", nc.RemoteAddr().String(), "err", err)
		return nil, false
	}
	if r, result, err := c.admit(nc, m); err != nil {
		c.refuse(r, "forces: association setup refused", "remote", nc.RemoteAddr().String(), "fe", m.Header.Src, "result", result, "err", err)
		_ = forces.AnswerSetup(conn, c.id, m, result)
		return nil, false
	}
	return m, true
}

func (c *CE) serveFE(ctx context.Context, nc net.Conn, release func()) {
	conn := forces.NewAssocConn(nc, c.tap())
	defer conn.Close()
	log := c.log.With("remote", nc.RemoteAddr().String())

	m, ok := c.readSetup(conn, nc, log)
	if !ok {
		return
	}
	who, _ := identity(nc)

	s := &session{
		ce: c, conn: conn, fe: m.Header.Src, remote: nc.RemoteAddr().String(), identity: who, since: time.Now(),
		decided: make(chan error, 1), wake: make(chan struct{}, 1), commits: make(chan commitResult, 1), pending: newPending(), syncReady: make(chan struct{}, 1), queries: make(chan *forces.Message, 1),
		txns: make(chan *feTxn, 4),
	}
	s.assoc = forces.NewAssoc(conn, forces.AssocConfig{
		Local: c.id, Peer: s.fe, PeerName: "FE",
		// Heartbeats at the CE's interval, measured; the FE is dead after
		// the configured number of silent intervals.
		Policy: func() (time.Duration, time.Duration) {
			return c.cfg.HeartbeatInterval, c.deadInterval()
		},
		HeartbeatACK: forces.AlwaysACK,
		Correlator:   func() uint64 { return s.corr.Add(1) },
		Handlers: map[forces.MessageType]forces.Handler{
			forces.MsgConfigResponse: s.configResponse,
			forces.MsgQueryResponse:  s.queryResponse,
		},
		Errors: &c.protocolErrors,
		Log:    log,
	})
	select {
	case c.joins <- s:
	case <-ctx.Done():
		return
	}
	if err := <-s.decided; err != nil {
		c.refuse(refuseInUse, "forces: association refused", "remote", s.remote, "fe", s.fe, "err", err)
		_ = forces.AnswerSetup(conn, c.id, m, forces.SetupPermissionDenied)
		return
	}
	err := forces.AnswerSetup(conn, c.id, m, forces.SetupSuccess)
	release()
	// From here every write must finish within the dead interval: a peer
	// that stops reading is torn down like one that stops sending.
	conn.SetWriteTimeout(c.deadInterval())
	if err != nil {
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
		Acked: s.acked.Load(), Failed: s.failed.Load(), LastHeartbeat: s.assoc.LastSeen(),
		HeartbeatRTT: s.assoc.RTT(), FIBKept: info.fibKept, InterFELinks: info.interFELinks(),
	}
	if low := s.low.Load(); low != nil {
		st.LowChannel = true
		st.Redirected, st.Injected, st.Events = low.redirected.Load(), low.injected.Load(), low.events.Load()
	}
	return st
}

// run serves the association until it ends: the association machine reads
// the FE's messages and sends heartbeats, and this goroutine writes configs.
func (s *session) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	assocDone := make(chan struct{})
	go func() {
		defer close(assocDone)
		s.end(s.assoc.Run(ctx))
		cancel()
	}()
	defer func() {
		if why := s.reason(); why != nil {
			s.assoc.End(why) // the writer's failure: no teardown
		} else {
			// Ending ctx has the association send a normal teardown.
			s.end(errors.New("CE shutting down"))
		}
		cancel()
		<-assocDone
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

// configResponse takes a Config Response from the reader: the answer to
// the COMMIT awaited (matched by correlator) goes to the transaction waiting
// for it, any other COMMIT-RESPONSE is a stray, counted and dropped; row
// results are counted.
func (s *session) configResponse(m *forces.Message, _ *forces.MessageBuffer) (bool, error) {
	if isCommitResponse(m) {
		if want := s.commitFor.Load(); want == 0 || m.Header.Correlator != want {
			s.ce.refuse(refuseStrayResponse, "forces: COMMIT-RESPONSE to no COMMIT awaited dropped", "fe", s.fe,
				"correlator", m.Header.Correlator, "awaited", want)
			return false, nil
		}
		code, err := forces.CommitResult(m)
		if err != nil {
			code = forces.ResultUnspecifiedError
		}
		select {
		case s.commits <- commitResult{corr: m.Header.Correlator, code: code}:
		default: // a duplicate answer: the first counts
		}
		return false, nil
	}
	results, err := forces.ConfigResults(m)
	if err != nil {
		return false, fmt.Errorf("bad config response from FE: %w", err)
	}
	for _, r := range results {
		if r == forces.ResultSuccess {
			s.acked.Add(1)
		} else {
			s.failed.Add(1)
			s.rejected.Warn(s.ce.log, "forces: FE rejected a change", "fe", s.fe, "result", r)
		}
	}
	return false, nil
}

// queryResponse hands a Query Response to the query waiting for it, matched
// by correlator; any other is a stray, counted and dropped.
func (s *session) queryResponse(m *forces.Message, _ *forces.MessageBuffer) (bool, error) {
	if want := s.queryFor.Load(); want == 0 || m.Header.Correlator != want {
		s.ce.refuse(refuseStrayResponse, "forces: query response to no query awaited dropped", "fe", s.fe, "correlator", m.Header.Correlator, "awaited", want)
		return false, nil
	}
	select {
	case s.queries <- m:
	default: // a duplicate answer: the first counts
	}
	return false, nil
}

// normalEnd reports whether err is an FE's own normal teardown (it is shutting
// down), which is no cause for a warning.
func normalEnd(err error) bool { return forces.NormalTeardown(err) }
