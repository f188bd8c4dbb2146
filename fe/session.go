package fe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// socketBuffer bounds the kernel's buffering of a ForCES connection: a full
// table queued in socket buffers would put a heartbeat seconds behind the
// configs ahead of it, while a few large messages keep the link busy.
const socketBuffer = 128 << 10

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
	// A teardown on shutdown goes to the CE the association is with, once
	// its Setup Response has named it (a CE drops messages not addressed
	// to its own ID, and would see only the connection close).
	var peer atomic.Uint32
	peer.Store(uint32(forces.CEID(0)))
	stop := context.AfterFunc(ctx, func() {
		_ = conn.WriteMessage(forces.NewAssociationTeardown(a.id, forces.ID(peer.Load()), uint32(forces.TeardownNormal)))
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
	peer.Store(uint32(ce))
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
	// reader stops reading and TCP pushes back on the CE. Messages are read
	// into buffers the applier hands back when done with them, so a full
	// sync's thousands of large Configs allocate nothing each.
	work := make(chan received, 1)
	free := make(chan *forces.MessageBuffer, 3) // one being read, one queued, one being applied
	applied := make(chan error, 1)
	go func() { applied <- a.applier(work, free, write) }()
	defer func() {
		close(work)
		<-applied
	}()
	var mb *forces.MessageBuffer // kept while the reader handles its messages itself
	for {
		_, dead := a.intervals()
		conn.SetReadDeadline(time.Now().Add(dead))
		if mb == nil {
			select {
			case mb = <-free:
			default:
				mb = new(forces.MessageBuffer)
			}
		}
		m, err := conn.ReadMessageInto(mb)
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
			case work <- received{m, mb}:
				mb = nil
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

// received is a message and the buffer it was read into.
type received struct {
	m   *forces.Message
	buf *forces.MessageBuffer
}

// applier applies Configs and answers Queries, in order, until work is
// closed, handing each message's buffer back to free once done with it.
func (a *Agent) applier(work <-chan received, free chan<- *forces.MessageBuffer, write func(*forces.Message) error) error {
	var werr error
	for r := range work {
		if werr == nil { // else drain, so the reader never blocks on a dead applier
			var resp *forces.Message
			switch r.m.Header.Type {
			case forces.MsgConfig:
				resp, _ = a.applyConfig(r.m)
			case forces.MsgQuery:
				resp = a.answerQuery(r.m)
			}
			if resp != nil {
				werr = write(resp)
			}
		}
		select {
		case free <- r.buf:
		default:
		}
	}
	return werr
}
