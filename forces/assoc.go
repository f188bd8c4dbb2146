package forces

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The association state machine both ends run: the CE accepts a connection
// and answers its Association Setup (ReadSetup, AnswerSetup), the FE dials and
// asks (RequestSetup); then each runs an Assoc over the connection, which
// sends heartbeats by its policy, answers the peer's at once, declares the
// peer dead after the dead interval, drops misaddressed messages, tears down
// on a malformed one, and hands every other message to the handler the owner
// plugged in for its type.

// SocketBuffer bounds the kernel's buffering of a ForCES connection: a full
// table queued in socket buffers would put a heartbeat seconds behind the
// configs ahead of it, while a few large messages keep the link busy.
const SocketBuffer = 128 << 10

// DefaultSetupTimeout bounds the wait for an Association Setup, or its
// response, on a new connection.
const DefaultSetupTimeout = 5 * time.Second

// ErrLossOfHeartbeats ends an association whose peer sent nothing for the
// dead interval.
var ErrLossOfHeartbeats = errors.New("loss of heartbeats")

// ErrSetupRefused reports a Setup Response other than success.
var ErrSetupRefused = errors.New("association refused")

// PeerTeardown is how an association ends when the peer tears it down.
type PeerTeardown struct {
	Peer   string // "CE" or "FE", for the message
	Reason TeardownReason
}

func (e *PeerTeardown) Error() string {
	return e.Peer + " tore down the association: " + e.Reason.String()
}

// NormalTeardown reports whether err is the peer's own normal teardown (it is
// shutting down), which is no cause for a warning.
func NormalTeardown(err error) bool {
	var t *PeerTeardown
	return errors.As(err, &t) && t.Reason == TeardownNormal
}

// ReasonOf reads the ASTreason of an Association Teardown.
func ReasonOf(m *Message) TeardownReason {
	if m.ASTReason == nil {
		return TeardownUnspecified
	}
	return TeardownReason(*m.ASTReason)
}

// BoundBuffers bounds a TCP connection's socket buffers to SocketBuffer; a
// TLS connection's underlying one is bounded. Other connections are left as
// they are.
func BoundBuffers(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(SocketBuffer)
		_ = tc.SetWriteBuffer(SocketBuffer)
	}
}

// NewAssocConn wraps a connection for an association: bounded socket buffers
// and, if tap is not nil, the pcap tap (see Conn.SetTap).
func NewAssocConn(nc net.Conn, tap func(raw []byte, sent bool)) *Conn {
	BoundBuffers(nc)
	conn := NewConn(nc)
	if tap != nil {
		conn.SetTap(tap)
	}
	return conn
}

// ReadSetup waits up to timeout for the first message of a new connection,
// which must be an Association Setup; the accepting side then answers it with
// AnswerSetup.
func ReadSetup(conn *Conn, timeout time.Duration) (*Message, error) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	m, err := conn.ReadMessage()
	if err != nil {
		return nil, fmt.Errorf("no association setup: %w", err)
	}
	conn.SetReadDeadline(time.Time{})
	if m.Header.Type != MsgAssociationSetup {
		return nil, fmt.Errorf("expected an Association Setup, got %s", m.Header.Type)
	}
	return m, nil
}

// AnswerSetup sends the Setup Response to req from local (the requester
// addressed a CE before it knew which one would answer).
func AnswerSetup(conn *Conn, local ID, req *Message, result SetupResult) error {
	m := NewAssociationSetupResponse(req, uint32(result))
	m.Header.Src = local
	return conn.WriteMessage(m)
}

// RequestSetup sends an Association Setup from local to peer and waits up to
// timeout for the response, returning the responder's ID. A refusal is an
// error wrapping ErrSetupRefused. The response must come from peer, or from
// any CE when local is an FE asking CEID(0) (an FE that does not know its
// CE's number), be addressed to local and echo the setup's correlator; any
// other is refused with an error wrapping ErrSetupRefused that names the IDs,
// and the association never starts. If ctx ends meanwhile, a normal teardown
// is sent and the connection closed.
func RequestSetup(ctx context.Context, conn *Conn, local, peer ID, corr uint64, timeout time.Duration) (ID, error) {
	stop := context.AfterFunc(ctx, func() {
		conn.SetWriteDeadline(time.Now().Add(teardownWrite))
		_ = conn.WriteMessage(NewAssociationTeardown(local, peer, uint32(TeardownNormal)))
		conn.Close()
	})
	defer stop()
	if err := conn.WriteMessage(NewAssociationSetup(local, peer, corr)); err != nil {
		return 0, err
	}
	conn.SetReadDeadline(time.Now().Add(timeout))
	resp, err := conn.ReadMessage()
	if err != nil {
		return 0, fmt.Errorf("waiting for association setup response: %w", err)
	}
	conn.SetReadDeadline(time.Time{})
	if resp.Header.Type != MsgAssociationSetupResponse || resp.ASResult == nil {
		return 0, fmt.Errorf("expected an Association Setup Response, got %s", resp.Header.Type)
	}
	h := resp.Header
	anyCE := local.IsFE() && peer == CEID(0)
	switch {
	case anyCE && !h.Src.IsCE():
		return 0, fmt.Errorf("%w: Setup Response from %v, which is not a CE ID", ErrSetupRefused, h.Src)
	case !anyCE && h.Src != peer:
		return 0, fmt.Errorf("%w: Setup Response from %v, asked %v", ErrSetupRefused, h.Src, peer)
	case h.Dst != local:
		return 0, fmt.Errorf("%w: Setup Response addressed to %v, not to this end (%v)", ErrSetupRefused, h.Dst, local)
	case h.Correlator != corr:
		return 0, fmt.Errorf("%w: Setup Response correlator %#x, the setup's was %#x", ErrSetupRefused, h.Correlator, corr)
	}
	if r := SetupResult(*resp.ASResult); r != SetupSuccess {
		return 0, fmt.Errorf("%w: %s", ErrSetupRefused, r)
	}
	return h.Src, nil
}

// Handler serves one message type of an association, on its reader. mb is
// the buffer m was read into (nil unless AssocConfig.Buffer is set); a handler
// that keeps m after returning takes mb, returns took true, and hands mb back
// through the owner's Buffer source when done. A non-nil error ends the
// association (without a teardown) with that error.
type Handler func(m *Message, mb *MessageBuffer) (took bool, err error)

// AssocConfig is what the owner of an association plugs in.
type AssocConfig struct {
	// Local and Peer are the two ends' IDs: messages not from Peer to
	// Local are dropped and counted.
	Local, Peer ID
	PeerName    string // "CE" or "FE", for error messages (default: from Peer)

	// Policy returns how often to send heartbeats (0: none for now, asked
	// again a second later) and the dead interval: how long the peer may
	// stay silent before the association ends with a LossOfHeartbeats
	// teardown (0: no limit). It is asked before every heartbeat and every
	// read, so a changed policy applies at once. Nil: no heartbeats, no
	// dead interval (the low-priority channel).
	Policy func() (send, dead time.Duration)
	// HeartbeatACK is the ACK indicator of the heartbeats sent; with
	// AlwaysACK their round trips are measured (RTT).
	HeartbeatACK ACKFlag
	// Correlator numbers the heartbeats sent; nil: the association's own.
	Correlator func() uint64

	// Handlers serve the message types the owner accepts; heartbeats and
	// teardowns are the association's own. Other types are logged
	// (rate-limited) and dropped.
	Handlers map[MessageType]Handler
	// Buffer, when set, gives the reader a buffer to read into when it
	// holds none (see Handler), so steady traffic allocates nothing.
	Buffer func() *MessageBuffer

	// NoTeardown: ending by ctx sends no teardown (the low-priority
	// channel, which ends with its association).
	NoTeardown bool
	// Errors, when set, also counts the protocol errors (misaddressed and
	// malformed messages).
	Errors *atomic.Uint64
	// Log receives the association's warnings (default: slog.Default()).
	Log *slog.Logger
}

// Assoc is one running association over a Conn.
type Assoc struct {
	conn     *Conn
	cfg      AssocConfig
	handlers [256]Handler // cfg.Handlers by type: no map lookup per message
	corr     atomic.Uint64

	lastSeen  atomic.Int64 // unix nanoseconds of the last message from the peer
	wrongIDs  atomic.Uint64
	malformed atomic.Uint64
	rtt       RTTRing
	drops     RateLog

	mu    sync.Mutex
	ended bool
	why   error
	done  chan struct{} // closed when the association ends
}

// NewAssoc returns the association, to be served by Run.
func NewAssoc(conn *Conn, cfg AssocConfig) *Assoc {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.PeerName == "" {
		cfg.PeerName = "peer"
		if cfg.Peer.IsFE() {
			cfg.PeerName = "FE"
		} else if cfg.Peer.IsCE() {
			cfg.PeerName = "CE"
		}
	}
	a := &Assoc{conn: conn, cfg: cfg, done: make(chan struct{})}
	if a.cfg.Correlator == nil {
		a.cfg.Correlator = func() uint64 { return a.corr.Add(1) }
	}
	for t, h := range cfg.Handlers {
		a.handlers[t] = h
	}
	a.lastSeen.Store(time.Now().UnixNano())
	return a
}

// Conn returns the association's connection, for the owner's own writes.
func (a *Assoc) Conn() *Conn { return a.conn }

// Write sends m. Each write is a whole unit under the connection's lock, so
// the heartbeats and the owner's writes interleave between units, never
// inside one.
func (a *Assoc) Write(m *Message) error { return a.conn.WriteMessage(m) }

// LastSeen is when the reader was last done with a well-addressed message
// from the peer (stored before it waits for the next one).
func (a *Assoc) LastSeen() time.Time { return time.Unix(0, a.lastSeen.Load()) }

// WrongIDs counts the messages dropped for their Src or Dst.
func (a *Assoc) WrongIDs() uint64 { return a.wrongIDs.Load() }

// Malformed counts the malformed messages (at most one: it ends the association).
func (a *Assoc) Malformed() uint64 { return a.malformed.Load() }

// RTT summarises the round trips of this end's AlwaysACK heartbeats.
func (a *Assoc) RTT() RTTSummary { return a.rtt.Summary() }

// End ends the association with err, sending nothing: Run returns err (if
// nothing ended it first).
func (a *Assoc) End(err error) { a.finish(err, nil) }

// Teardown sends an Association Teardown with reason and ends the
// association with err.
func (a *Assoc) Teardown(reason TeardownReason, err error) { a.finish(err, &reason) }

// finish records why the association ended (the first reason wins), sends
// the teardown if asked and closes the connection, which ends the reader.
func (a *Assoc) finish(err error, reason *TeardownReason) bool {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		return false
	}
	a.ended, a.why = true, err
	close(a.done)
	a.mu.Unlock()
	if reason != nil {
		// A peer that reads nothing cannot hold the end up: the teardown
		// is sent only if no other write is under way (one blocked on a
		// peer that stopped reading would hold it), and within a bound.
		_ = a.conn.TryWriteMessage(NewAssociationTeardown(a.cfg.Local, a.cfg.Peer, uint32(*reason)), teardownWrite)
	}
	a.conn.Close()
	return true
}

// teardownWrite bounds the write of a teardown.
const teardownWrite = time.Second

func (a *Assoc) isEnded() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func (a *Assoc) reason() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.why
}

// Run serves the association until it ends, and says why: ctx ending (a
// normal teardown is sent unless NoTeardown; the error is ctx's), End or
// Teardown, the peer's teardown (*PeerTeardown), the dead interval
// (ErrLossOfHeartbeats), a malformed message (a protocol error, after an
// Unspecified teardown), a failed read or write, or a handler's error. The
// connection is closed when Run returns.
func (a *Assoc) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		if a.cfg.NoTeardown {
			a.End(ctx.Err())
		} else {
			a.Teardown(TeardownNormal, ctx.Err())
		}
	})
	defer stop()
	var wg sync.WaitGroup
	if a.cfg.Policy != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.heartbeats()
		}()
	}
	a.End(a.read())
	wg.Wait()
	return a.reason()
}

// heartbeats sends this end's heartbeats by the policy until the association
// ends. It runs apart from the owner's writes, so a long full sync never
// delays it by more than one message.
func (a *Assoc) heartbeats() {
	for {
		send, _ := a.cfg.Policy()
		if send > 0 {
			c := a.cfg.Correlator()
			if a.cfg.HeartbeatACK == AlwaysACK {
				a.rtt.Sent(c)
			}
			if err := a.conn.WriteMessage(NewHeartbeat(a.cfg.Local, a.cfg.Peer, c, a.cfg.HeartbeatACK)); err != nil {
				a.End(fmt.Errorf("send heartbeat: %w", err))
				return
			}
		} else {
			send = time.Second // policy: no heartbeats; look again later
		}
		t := time.NewTimer(send)
		select {
		case <-a.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// read consumes the peer's messages until the association ends.
func (a *Assoc) read() error {
	var mb *MessageBuffer // kept while the reader handles its messages itself
	seen := false         // a message came since lastSeen was stored
	for {
		var dead time.Duration
		if a.cfg.Policy != nil {
			_, dead = a.cfg.Policy()
		}
		if seen || dead > 0 {
			// One clock read serves both: the time the last message was
			// handled and the deadline of the next (reading the clock
			// costs as much as the rest of a small message's handling).
			now := time.Now()
			if seen {
				a.lastSeen.Store(now.UnixNano())
				seen = false
			}
			if dead > 0 {
				a.conn.SetReadDeadline(now.Add(dead))
				// A peer that stops reading is as dead as one that
				// stops sending: every write must finish within the
				// dead interval too.
				a.conn.SetWriteTimeout(dead)
			}
		}
		if mb == nil && a.cfg.Buffer != nil {
			mb = a.cfg.Buffer()
		}
		m, err := a.conn.ReadMessageInto(mb)
		if err != nil {
			if a.isEnded() {
				return nil // ended elsewhere; that reason stands
			}
			if IsProtocolError(err) {
				// The stream cannot be trusted any more: say why and end.
				a.malformed.Add(1)
				a.count()
				err = fmt.Errorf("malformed message from the %s: %w", a.cfg.PeerName, err)
				a.Teardown(TeardownUnspecified, err)
				return err
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && dead > 0 {
				err = fmt.Errorf("%w: nothing from the %s for %s", ErrLossOfHeartbeats, a.cfg.PeerName, dead)
				a.Teardown(TeardownLossOfHeartbeats, err)
				return err
			}
			return fmt.Errorf("read from the %s: %w", a.cfg.PeerName, err)
		}
		if m.Header.Src != a.cfg.Peer || m.Header.Dst != a.cfg.Local {
			a.wrongIDs.Add(1)
			a.count()
			a.drops.Warn(a.cfg.Log, "forces: messages with wrong IDs dropped", "peer", a.cfg.Peer, "src", m.Header.Src, "dst", m.Header.Dst, "type", m.Header.Type)
			continue
		}
		seen = true
		switch m.Header.Type {
		case MsgHeartbeat:
			if m.Header.Flags.ACK == AlwaysACK {
				if err := a.conn.WriteMessage(NewHeartbeat(a.cfg.Local, a.cfg.Peer, m.Header.Correlator, NoACK)); err != nil {
					return fmt.Errorf("answer heartbeat: %w", err)
				}
			} else {
				a.rtt.Answered(m.Header.Correlator)
			}
			continue
		case MsgAssociationTeardown:
			return &PeerTeardown{Peer: a.cfg.PeerName, Reason: ReasonOf(m)}
		}
		h := a.handlers[m.Header.Type]
		if h == nil {
			a.drops.Warn(a.cfg.Log, "forces: unexpected messages dropped", "peer", a.cfg.Peer, "type", m.Header.Type)
			continue
		}
		took, err := h(m, mb)
		if err != nil {
			return err
		}
		if took {
			mb = nil
		}
	}
}

func (a *Assoc) count() {
	if a.cfg.Errors != nil {
		a.cfg.Errors.Add(1)
	}
}

// RateLog logs a kind of event at most once a second, with the number of
// them since the last line, so a peer cannot flood the log. The zero value
// is ready to use.
type RateLog struct {
	last       atomic.Int64
	suppressed atomic.Uint64
}

// Warn logs msg with args at warning level, unless a line of this kind went
// out less than a second ago (then it is only counted, and the next line
// says how many were suppressed).
func (r *RateLog) Warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(time.Second) || !r.last.CompareAndSwap(last, now) {
		r.suppressed.Add(1)
		return
	}
	log.Warn(msg, append(args, "suppressed_since_last", r.suppressed.Swap(0))...)
}
