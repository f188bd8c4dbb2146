package forces

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// stuckConn is a connection whose writes block until it is closed, deadlines
// or not: a peer that stopped reading, on a kernel that keeps the write.
type stuckConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (s *stuckConn) Write([]byte) (int, error) {
	<-s.closed
	return 0, net.ErrClosed
}

func (s *stuckConn) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Conn.Close()
}

func (s *stuckConn) SetWriteDeadline(time.Time) error { return nil }

// A teardown does not wait behind a write blocked on a peer that stopped
// reading: the association ends and its connection is closed, which
// releases the blocked writer.
func TestTeardownDoesNotWaitForBlockedWrite(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	conn := NewConn(&stuckConn{Conn: a, closed: make(chan struct{})})
	as := NewAssoc(conn, AssocConfig{Local: CEID(1), Peer: FEID(1)})
	ran := make(chan error, 1)
	go func() { ran <- as.Run(context.Background()) }()
	wrote := make(chan error, 1)
	go func() { wrote <- conn.WriteMessage(NewHeartbeat(CEID(1), FEID(1), 1, NoACK)) }()
	for conn.wmu.TryLock() { // wait until the write holds the connection
		conn.wmu.Unlock()
		time.Sleep(time.Millisecond)
	}
	ended := make(chan struct{})
	go func() {
		as.Teardown(TeardownLossOfHeartbeats, ErrLossOfHeartbeats)
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Teardown waited on the blocked write")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the blocked write succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked write was not released by the teardown")
	}
	if err := <-ran; !errors.Is(err, ErrLossOfHeartbeats) {
		t.Fatalf("Run: %v", err)
	}
}

// With a write timeout, a write to a peer that reads nothing fails with a
// deadline error instead of blocking for ever.
func TestWriteTimeout(t *testing.T) {
	a, b := net.Pipe() // unbuffered: nothing is written until b reads
	defer b.Close()
	conn := NewConn(a)
	defer conn.Close()
	conn.SetWriteTimeout(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- conn.WriteMessage(NewHeartbeat(CEID(1), FEID(1), 1, NoACK)) }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a peer that reads nothing: %v, want a deadline error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write blocked past its timeout")
	}
	// WriteEncoded too.
	msg, _ := NewHeartbeat(CEID(1), FEID(1), 2, NoACK).MarshalBinary()
	go func() { done <- conn.WriteEncoded(msg) }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("WriteEncoded to a peer that reads nothing: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteEncoded blocked past its timeout")
	}
}

// The association bounds its writes by the dead interval of its policy.
func TestAssocBoundsWritesByDeadInterval(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	conn := NewConn(a)
	as := NewAssoc(conn, AssocConfig{Local: CEID(1), Peer: FEID(1),
		Policy: func() (time.Duration, time.Duration) { return 0, time.Hour }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go as.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for time.Duration(conn.wtimeout.Load()) != time.Hour {
		if time.Now().After(deadline) {
			t.Fatalf("write timeout %s, want the dead interval", time.Duration(conn.wtimeout.Load()))
		}
		time.Sleep(time.Millisecond)
	}
}

// A certificate is bound to FE n by a DNS name fe-n or fe-n.<domain>, and
// by nothing else.
func TestCertBindsFE(t *testing.T) {
	cases := []struct {
		dns  []string
		cn   string
		fe   ID
		want bool
	}{
		{[]string{"fe-1"}, "", FEID(1), true},
		{[]string{"x", "fe-1.fe.example.net"}, "", FEID(1), true},
		{[]string{"fe-10"}, "", FEID(1), false},
		{[]string{"fe-1x.example"}, "", FEID(1), false},
		{[]string{"edge.fe-1.example"}, "", FEID(1), false},
		{nil, "fe-1", FEID(1), false}, // the Common Name does not count
		{[]string{"fe-0"}, "", FEID(0), true},
		{[]string{"fe-1"}, "", CEID(1), false},
		{[]string{"fe-1073741823"}, "", FEID(0x3FFFFFFF), true},
	}
	for _, c := range cases {
		cert := &x509.Certificate{DNSNames: c.dns, Subject: pkix.Name{CommonName: c.cn}}
		if got := CertBindsFE(cert, c.fe); got != c.want {
			t.Errorf("DNS %q CN %q for %s: %v, want %v", c.dns, c.cn, c.fe, got, c.want)
		}
	}
	if CertBindsFE(nil, FEID(1)) {
		t.Error("no certificate binds FE 1")
	}
}
