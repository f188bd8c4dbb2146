package fe

import (
	"context"
	"fmt"
	"net"

	"github.com/splitplane/splitplane/forces"
)

// boundBuffers bounds the kernel's buffering of a connection to the CE (see
// forces.SocketBuffer).
func boundBuffers(nc net.Conn) { forces.BoundBuffers(nc) }

// tap returns the pcap tap for a new connection, or nil.
func (a *Agent) tap() func(raw []byte, sent bool) {
	if a.pcap == nil {
		return nil
	}
	return a.pcap.Tap(false)
}

// associate runs one association with the CE, from TCP connect to teardown:
// the association machine (forces.Assoc) runs the contract, the FE plugs in
// its applier for Configs and Queries.
func (a *Agent) associate(ctx context.Context) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, forces.DefaultSetupTimeout)
	nc, err := a.dial(dctx, d, a.cfg.CEAddress)
	cancel()
	if err != nil {
		return err
	}
	conn := forces.NewAssocConn(nc, a.tap())
	defer conn.Close()

	next := func() uint64 { return a.corr.Add(1) }
	ce, err := forces.RequestSetup(ctx, conn, a.id, forces.CEID(0), next(), forces.DefaultSetupTimeout)
	if err != nil {
		return err
	}
	// The FIB of an earlier association stays in place (non-stop
	// forwarding); the CE's full sync replaces it in one transaction. The
	// CE learns at discovery whether there is one (FIBKeptComponent):
	// only then may it claim after its own restart that forwarding went on.
	kept := a.programmedRoutes()
	a.fibKept.Store(kept > 0)
	a.log.Info("forces: associated with CE", "ce", ce, "address", a.cfg.CEAddress, "fib_kept", kept > 0, "routes_kept", kept)
	a.associated.Store(true)
	a.ceID.Store(ce)
	defer a.associated.Store(false)

	lowCtx, lowStop := context.WithCancel(ctx)
	lowDone := make(chan struct{})
	defer func() { lowStop(); <-lowDone }()
	go func() {
		defer close(lowDone)
		if err := a.lowChannel(lowCtx, ce, next); err != nil && lowCtx.Err() == nil {
			a.log.Warn("forces: low-priority channel down; redirects and events are dropped until the next association", "err", err)
		}
	}()

	// The reader answers heartbeats at once and hands configs and queries to
	// the applier through a short queue: when the applier falls behind, the
	// reader stops reading and TCP pushes back on the CE. Messages are read
	// into buffers the applier hands back when done with them, so a full
	// sync's thousands of large Configs allocate nothing each.
	work := make(chan received, 1)
	free := make(chan *forces.MessageBuffer, 3) // one being read, one queued, one being applied
	toApplier := func(m *forces.Message, mb *forces.MessageBuffer) (bool, error) {
		select {
		case work <- received{m, mb}:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	assoc := forces.NewAssoc(conn, forces.AssocConfig{
		Local: a.id, Peer: ce, PeerName: "CE",
		// The FE Protocol LFB's policy, as the CE last set it: incoming
		// messages, or their absence, tell the reader the CE is alive.
		Policy:       a.intervals,
		HeartbeatACK: forces.NoACK,
		Correlator:   next,
		Handlers: map[forces.MessageType]forces.Handler{
			forces.MsgConfig: toApplier,
			forces.MsgQuery:  toApplier,
		},
		Buffer: func() *forces.MessageBuffer {
			select {
			case mb := <-free:
				return mb
			default:
				return new(forces.MessageBuffer)
			}
		},
		Errors: &a.protocolErrors,
		Log:    a.log,
	})
	applied := make(chan error, 1)
	go func() {
		applied <- a.applier(work, free, assoc.Write, func(err error) {
			assoc.Teardown(forces.TeardownUnspecified, err)
		})
	}()
	defer func() {
		close(work)
		<-applied
	}()
	return assoc.Run(ctx)
}

// programmedRoutes counts the routes in the datapath.
func (a *Agent) programmedRoutes() (n int) {
	a.do(func() { n = a.prog.routes.len() + a.prog.routes6.len() })
	return n
}

// received is a message and the buffer it was read into.
type received struct {
	m   *forces.Message
	buf *forces.MessageBuffer
}

// applier applies Configs and answers Queries, in order, until work is
// closed, handing each message's buffer back to free once done with it. A
// response it cannot send (one that does not encode, or a failed write)
// ends the association through fail, with the reason: the CE then knows its
// message went unanswered, and an association is never left with heartbeats
// going and nothing applied.
func (a *Agent) applier(work <-chan received, free chan<- *forces.MessageBuffer, write func(*forces.Message) error, fail func(error)) error {
	var werr error
	for r := range work {
		if werr == nil { // else drain, so the reader never blocks on a dead applier
			resp, err := a.respond(r.m)
			if err == nil && resp != nil {
				err = write(resp)
			}
			if err != nil {
				werr = fmt.Errorf("cannot answer the CE's %v (correlator %d): %w", r.m.Header.Type, r.m.Header.Correlator, err)
				a.protocolErrors.Add(1)
				a.log.Error("forces: tearing the association down", "err", werr)
				fail(werr)
			}
		}
		select {
		case free <- r.buf:
		default:
		}
	}
	return werr
}

// respond applies the Config, or answers the Query, m and returns the
// response to send (nil: none). A Config whose response would not encode
// is not applied: that is an error (errUnanswerable).
func (a *Agent) respond(m *forces.Message) (*forces.Message, error) {
	switch m.Header.Type {
	case forces.MsgConfig:
		if err := configResponseFits(m); err != nil && m.Header.Flags.ACK != forces.NoACK {
			return nil, fmt.Errorf("%w: %w; nothing of it applied", errUnanswerable, err)
		}
		resp, _ := a.applyConfig(m)
		return resp, nil
	case forces.MsgQuery:
		return a.answerQuery(m), nil
	}
	return nil, nil
}
