package ce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"

	"github.com/splitplane/splitplane/forces"
)

// The low-priority channel (RFC 5811's split, on TCP): a second connection
// per FE for packet redirects and events, so a flood of redirected packets
// never queues in front of a heartbeat or a config on the high-priority one.

type lookup struct {
	fe    forces.ID
	reply chan *session
}

// session returns the associated session of an FE, or nil.
func (c *CE) session(ctx context.Context, fe forces.ID) *session {
	l := lookup{fe: fe, reply: make(chan *session, 1)}
	select {
	case c.lookups <- l:
		return <-l.reply
	case <-ctx.Done():
		return nil
	}
}

// Redirected is a packet an FE redirected to the CE.
type Redirected struct {
	FE   forces.ID
	Port uint32 // the ingress port's PHYPortID (0 if the FE did not say)
	Data []byte
}

// lowChannel is the CE's end of an FE's low-priority connection.
type lowChannel struct {
	conn       *forces.Conn
	redirected atomic.Uint64
	injected   atomic.Uint64
	events     atomic.Uint64
}

// serveLow serves a low-priority connection: it is accepted only for an FE
// associated on the high-priority channel, from the same identity (the same
// certificate subject with TLS, the same remote address without).
func (c *CE) serveLow(ctx context.Context, nc net.Conn, release func()) {
	conn := forces.NewAssocConn(nc, c.tap())
	defer conn.Close()
	log := c.log.With("remote", nc.RemoteAddr().String(), "channel", "low")
	m, ok := c.readSetup(conn, nc, log)
	if !ok {
		return
	}
	s := c.session(ctx, m.Header.Src)
	if s == nil {
		c.refuse(refuseLowUnassociated, "forces: low-priority channel of an FE that is not associated", "remote", nc.RemoteAddr().String(), "fe", m.Header.Src)
		_ = forces.AnswerSetup(conn, c.id, m, forces.SetupFEIDInvalid)
		return
	}
	if who, _ := identity(nc); who != s.identity {
		c.refuse(refuseLowIdentity, "forces: low-priority channel from another identity than the FE's association", "remote", nc.RemoteAddr().String(),
			"fe", s.fe, "identity", who, "association", s.identity)
		_ = forces.AnswerSetup(conn, c.id, m, forces.SetupPermissionDenied)
		return
	}
	if !s.attachLow(conn) {
		c.refuse(refuseInUse, "forces: second low-priority channel of an FE", "remote", nc.RemoteAddr().String(), "fe", s.fe)
		_ = forces.AnswerSetup(conn, c.id, m, forces.SetupFEIDInvalid)
		return
	}
	if err := forces.AnswerSetup(conn, c.id, m, forces.SetupSuccess); err != nil {
		return
	}
	release()
	conn.SetWriteTimeout(c.deadInterval())
	log.Info("forces: low-priority channel up", "fe", s.fe)
	low := s.low.Load()
	// No heartbeats here: the association's own channel carries them, and
	// this one ends with it (the session closes it).
	assoc := forces.NewAssoc(conn, forces.AssocConfig{
		Local: c.id, Peer: s.fe, PeerName: "FE", NoTeardown: true,
		Handlers: map[forces.MessageType]forces.Handler{
			forces.MsgPacketRedirect: func(m *forces.Message, _ *forces.MessageBuffer) (bool, error) {
				for _, r := range m.Redirects {
					low.redirected.Add(1)
					port, _ := r.Port()
					if c.redirects != nil {
						select {
						case c.redirects <- Redirected{FE: s.fe, Port: port, Data: r.Data}:
						default: // a slow consumer loses packets, the channel does not stall
						}
					}
				}
				return false, nil
			},
			forces.MsgEventNotification: func(m *forces.Message, _ *forces.MessageBuffer) (bool, error) {
				low.events.Add(1)
				s.event(ctx, m)
				return false, nil
			},
		},
		Errors: &c.protocolErrors,
		Log:    log,
	})
	if err := assoc.Run(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		log.Warn("forces: low-priority channel ended", "fe", s.fe, "err", err)
	}
}

// attachLow gives the session its low-priority channel, once.
func (s *session) attachLow(conn *forces.Conn) bool {
	return s.low.CompareAndSwap(nil, &lowChannel{conn: conn})
}

// event applies an Event Notification: a port that changed state. The RIB
// learns the FE's connected prefixes again.
func (s *session) event(ctx context.Context, m *forces.Message) {
	for _, it := range forces.Items(m) {
		if it.ClassID == forces.PortTableClass && len(it.Path) == 1 && it.Path[0] == forces.InterFELinksComponent && it.HasFullData {
			s.linksEvent(it.FullData)
			continue
		}
		if it.ClassID != forces.PortTableClass || len(it.Path) != 2 || it.Path[0] != forces.PortTableComponent || !it.HasFullData {
			continue
		}
		p, err := forces.ParsePortInfo(it.FullData)
		if err != nil {
			s.rejected.Warn(s.ce.log, "forces: bad port event", "fe", s.fe, "err", err)
			continue
		}
		p = s.vetPorts([]forces.PortInfo{p})[0]
		s.mu.Lock()
		found := false
		for i := range s.info.ports {
			if s.info.ports[i].ID == p.ID {
				s.info.ports[i], found = p, true
			}
		}
		if !found {
			s.info.ports = append(s.info.ports, p)
		}
		ports := slices.Clone(s.info.ports)
		s.mu.Unlock()
		s.ce.log.Info("forces: FE port changed", "fe", s.fe, "port", p.Name, "up", p.Up)
		s.ce.setConnected(ctx, s.fe, ports)
	}
}

// ErrNoFE is returned for an FE that is not associated.
var ErrNoFE = errors.New("FE not associated")

// Inject sends a frame out of an FE's port (its PHYPortID) through a Packet
// Redirect on the low-priority channel.
func (c *CE) Inject(ctx context.Context, fe forces.ID, port uint32, frame []byte) error {
	s := c.session(ctx, fe)
	if s == nil {
		return fmt.Errorf("%w: %s", ErrNoFE, fe)
	}
	low := s.low.Load()
	if low == nil {
		return fmt.Errorf("%w: %s has no low-priority channel", ErrNoFE, fe)
	}
	m := forces.NewPacketRedirect(c.id, fe, s.corr.Add(1), forces.Redirect{
		Metadata: []forces.Metadata{forces.PortMetadata(port)}, Data: frame,
	})
	if err := low.conn.WriteMessage(m); err != nil {
		return fmt.Errorf("inject to %s: %w", fe, err)
	}
	low.injected.Add(1)
	return nil
}
