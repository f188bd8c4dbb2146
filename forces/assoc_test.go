package forces

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// peer is the far end of a test association: every message it reads goes
// to msgs.
type peer struct {
	conn *Conn
	msgs chan *Message
}

func newPair(t *testing.T) (*Conn, *peer) {
	t.Helper()
	a, b := net.Pipe()
	p := &peer{conn: NewConn(b), msgs: make(chan *Message, 64)}
	go func() {
		defer close(p.msgs)
		for {
			m, err := p.conn.ReadMessage()
			if err != nil {
				return
			}
			p.msgs <- m
		}
	}()
	t.Cleanup(func() { a.Close(); b.Close() })
	return NewConn(a), p
}

// next returns the next message of type want the peer received.
func (p *peer) next(t *testing.T, want MessageType) *Message {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				t.Fatalf("connection closed waiting for %s", want)
			}
			if m.Header.Type == want {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s within 5s", want)
		}
	}
}

func runAssoc(a *Assoc) <-chan error {
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	return done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("association did not end")
		return nil
	}
}

func TestSetupAcceptedAndRefused(t *testing.T) {
	for _, result := range []SetupResult{SetupSuccess, SetupPermissionDenied} {
		a, b := net.Pipe()
		fe, ce := NewConn(a), NewConn(b)
		got := make(chan error, 1)
		var id ID
		go func() {
			var err error
			id, err = RequestSetup(context.Background(), fe, testFE, testCE, 1, time.Second)
			got <- err
		}()
		req, err := ReadSetup(ce, time.Second)
		if err != nil || req.Header.Src != testFE {
			t.Fatalf("ReadSetup: %v, %+v", err, req)
		}
		if err := AnswerSetup(ce, testCE, req, result); err != nil {
			t.Fatal(err)
		}
		err = <-got
		if result == SetupSuccess && (err != nil || id != testCE) {
			t.Fatalf("accepted setup: id %v err %v", id, err)
		}
		if result != SetupSuccess && !errors.Is(err, ErrSetupRefused) {
			t.Fatalf("refused setup: err %v, want ErrSetupRefused", err)
		}
		a.Close()
		b.Close()
	}
}

func TestReadSetupWantsSetup(t *testing.T) {
	conn, p := newPair(t)
	go p.conn.WriteMessage(NewHeartbeat(testFE, testCE, 1, NoACK))
	if _, err := ReadSetup(conn, time.Second); err == nil {
		t.Fatal("a heartbeat accepted as an association setup")
	}
}

func TestHeartbeatsAnsweredAndMeasured(t *testing.T) {
	conn, p := newPair(t)
	a := NewAssoc(conn, AssocConfig{Local: testCE, Peer: testFE, HeartbeatACK: AlwaysACK,
		Policy: func() (time.Duration, time.Duration) { return 10 * time.Millisecond, time.Minute }})
	done := runAssoc(a)
	// The peer's AlwaysACK heartbeat is answered with its correlator.
	if err := p.conn.WriteMessage(NewHeartbeat(testFE, testCE, 99, AlwaysACK)); err != nil {
		t.Fatal(err)
	}
	for {
		m := p.next(t, MsgHeartbeat)
		if m.Header.Correlator == 99 && m.Header.Flags.ACK == NoACK {
			break
		}
		// Our own heartbeat: answer it, so its round trip is measured.
		if m.Header.Flags.ACK != AlwaysACK || m.Header.Src != testCE || m.Header.Dst != testFE {
			t.Fatalf("heartbeat %+v", m.Header)
		}
		if err := p.conn.WriteMessage(NewHeartbeat(testFE, testCE, m.Header.Correlator, NoACK)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.RTT().Samples == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no round trip measured")
		}
		m := p.next(t, MsgHeartbeat)
		_ = p.conn.WriteMessage(NewHeartbeat(testFE, testCE, m.Header.Correlator, NoACK))
	}
	a.End(errors.New("test over"))
	if err := wait(t, done); err == nil || err.Error() != "test over" {
		t.Fatalf("Run: %v", err)
	}
}

func TestDeadIntervalTearsDown(t *testing.T) {
	conn, p := newPair(t)
	a := NewAssoc(conn, AssocConfig{Local: testFE, Peer: testCE,
		Policy: func() (time.Duration, time.Duration) { return 0, 50 * time.Millisecond }})
	done := runAssoc(a)
	td := p.next(t, MsgAssociationTeardown)
	if ReasonOf(td) != TeardownLossOfHeartbeats {
		t.Fatalf("teardown reason %s", ReasonOf(td))
	}
	if err := wait(t, done); !errors.Is(err, ErrLossOfHeartbeats) {
		t.Fatalf("Run: %v, want loss of heartbeats", err)
	}
}

func TestWrongIDsDroppedAndCounted(t *testing.T) {
	conn, p := newPair(t)
	var errs atomic.Uint64
	got := make(chan *Message, 4)
	a := NewAssoc(conn, AssocConfig{Local: testCE, Peer: testFE, Errors: &errs,
		Handlers: map[MessageType]Handler{MsgQueryResponse: func(m *Message, _ *MessageBuffer) (bool, error) {
			got <- m
			return false, nil
		}}})
	done := runAssoc(a)
	for range 3 {
		_ = p.conn.WriteMessage(NewQuery(FEID(8), testCE, 1)) // not our FE
	}
	_ = p.conn.WriteMessage(NewQuery(testFE, CEID(2), 2)) // not to us
	ok := &Message{Header: Header{Type: MsgQueryResponse, Src: testFE, Dst: testCE, Correlator: 3}}
	if err := p.conn.WriteMessage(ok); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Header.Correlator != 3 {
		t.Fatalf("handler got correlator %d", m.Header.Correlator)
	}
	if a.WrongIDs() != 4 || errs.Load() != 4 {
		t.Fatalf("wrong IDs %d, errors %d; want 4", a.WrongIDs(), errs.Load())
	}
	a.End(errors.New("done"))
	wait(t, done)
}

func TestMalformedTearsDown(t *testing.T) {
	conn, p := newPair(t)
	var errs atomic.Uint64
	a := NewAssoc(conn, AssocConfig{Local: testCE, Peer: testFE, Errors: &errs})
	done := runAssoc(a)
	// Version 2: not ForCES as we speak it.
	go p.conn.c.Write([]byte{0x20, byte(MsgHeartbeat), 0, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	td := p.next(t, MsgAssociationTeardown)
	if ReasonOf(td) != TeardownUnspecified {
		t.Fatalf("teardown reason %s", ReasonOf(td))
	}
	if err := wait(t, done); !IsProtocolError(err) {
		t.Fatalf("Run: %v, want a protocol error", err)
	}
	if a.Malformed() != 1 || errs.Load() != 1 {
		t.Fatalf("malformed %d errors %d", a.Malformed(), errs.Load())
	}
}

func TestPeerTeardownReported(t *testing.T) {
	for _, reason := range []TeardownReason{TeardownNormal, TeardownLossOfHeartbeats} {
		conn, p := newPair(t)
		a := NewAssoc(conn, AssocConfig{Local: testFE, Peer: testCE})
		done := runAssoc(a)
		if err := p.conn.WriteMessage(NewAssociationTeardown(testCE, testFE, uint32(reason))); err != nil {
			t.Fatal(err)
		}
		err := wait(t, done)
		var pt *PeerTeardown
		if !errors.As(err, &pt) || pt.Reason != reason || pt.Peer != "CE" {
			t.Fatalf("Run: %v, want the CE's teardown %s", err, reason)
		}
		if NormalTeardown(err) != (reason == TeardownNormal) {
			t.Fatalf("NormalTeardown(%v) wrong", err)
		}
	}
}

func TestShutdownSendsNormalTeardown(t *testing.T) {
	conn, p := newPair(t)
	a := NewAssoc(conn, AssocConfig{Local: testFE, Peer: testCE})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	cancel()
	if td := p.next(t, MsgAssociationTeardown); ReasonOf(td) != TeardownNormal {
		t.Fatalf("teardown reason %s", ReasonOf(td))
	}
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// The low-priority channel: no heartbeats, no dead interval, redirects to
// the handler, and ending it sends no teardown.
func TestLowChannel(t *testing.T) {
	conn, p := newPair(t)
	got := make(chan Redirect, 1)
	a := NewAssoc(conn, AssocConfig{Local: testCE, Peer: testFE, NoTeardown: true,
		Handlers: map[MessageType]Handler{MsgPacketRedirect: func(m *Message, _ *MessageBuffer) (bool, error) {
			for _, r := range m.Redirects {
				got <- r
			}
			return false, nil
		}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if err := p.conn.WriteMessage(NewPacketRedirect(testFE, testCE, 1, Redirect{Metadata: []Metadata{PortMetadata(3)}, Data: []byte{1, 2, 3}})); err != nil {
		t.Fatal(err)
	}
	if r := <-got; string(r.Data) != "\x01\x02\x03" {
		t.Fatalf("redirect data %x", r.Data)
	}
	cancel()
	wait(t, done)
	select {
	case m, ok := <-p.msgs:
		if ok {
			t.Fatalf("the low channel sent %s", m.Header.Type)
		}
	case <-time.After(time.Second):
		t.Fatal("connection not closed")
	}
}

// Drops are logged at most once a second, not once a message.
func TestDropsLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	conn, p := newPair(t)
	got := make(chan struct{}, 1)
	a := NewAssoc(conn, AssocConfig{Local: testCE, Peer: testFE, Log: log,
		Handlers: map[MessageType]Handler{MsgQueryResponse: func(*Message, *MessageBuffer) (bool, error) {
			got <- struct{}{}
			return false, nil
		}}})
	done := runAssoc(a)
	for range 50 {
		_ = p.conn.WriteMessage(NewQuery(FEID(8), testCE, 1))
	}
	_ = p.conn.WriteMessage(&Message{Header: Header{Type: MsgQueryResponse, Src: testFE, Dst: testCE}})
	<-got
	a.End(errors.New("done"))
	wait(t, done)
	if n := strings.Count(buf.String(), "wrong IDs"); n != 1 || a.WrongIDs() != 50 {
		t.Fatalf("%d log lines for %d drops:\n%s", n, a.WrongIDs(), buf.String())
	}
}

// The first way an association ends is the one reported, whatever follows,
// even a nil reason.
func TestFirstEndWins(t *testing.T) {
	conn, p := newPair(t)
	a := NewAssoc(conn, AssocConfig{Local: testFE, Peer: testCE})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	a.End(nil)
	a.Teardown(TeardownUnspecified, errors.New("second"))
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Run: %v, want the first reason (nil)", err)
	}
	for m := range p.msgs {
		t.Fatalf("sent %s after ending", m.Header.Type)
	}
}

// Socket buffers are bounded on a TCP connection, also under TLS.
func TestBoundBuffersUnderTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	conn := NewAssocConn(tls.Client(nc, &tls.Config{}), nil)
	defer conn.Close()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var snd, rcv int
	raw.Control(func(fd uintptr) {
		snd, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		rcv, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	})
	// Linux doubles the value set, for its bookkeeping.
	if snd != 2*SocketBuffer || rcv != 2*SocketBuffer {
		t.Fatalf("SO_SNDBUF %d, SO_RCVBUF %d; want %d", snd, rcv, 2*SocketBuffer)
	}
}
