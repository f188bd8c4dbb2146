package fe

import (
	"context"
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
	// forwarding); the CE's full sync replaces it in one transaction.
	a.log.Info("forces: associated with CE", "ce", ce, "address", a.cfg.CEAddress)
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
	go func() { applied <- a.applier(work, free, assoc.Write) }()
	defer func() {
		close(work)
		<-applied
	}()
	return assoc.Run(ctx)
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
