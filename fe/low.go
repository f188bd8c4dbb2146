package fe

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// lowQueue bounds the redirects and events waiting for the low-priority
// channel; beyond it they are dropped and counted, never queued without end.
const lowQueue = 1024

// lowStats counts the low-priority channel's traffic.
type lowStats struct {
	redirected atomic.Uint64  // frames sent to the CE
	dropped    atomic.Uint64  // frames dropped: queue full or no association
	injected   atomic.Uint64  // frames the CE sent out of a port
	events     atomic.Uint64  // event notifications sent
	warns      forces.RateLog // warnings of frames of the CE's not sent out, at most one a second
}

// LowStatus is the low-priority channel in the FE's status.
type LowStatus struct {
	Up         bool   `json:"up"`
	Redirected uint64 `json:"redirected_packets"`
	Dropped    uint64 `json:"dropped_redirects"`
	Injected   uint64 `json:"injected_packets"`
	Events     uint64 `json:"events"`
}

// sendLow queues a message for the low-priority channel without blocking.
func (a *Agent) sendLow(m *forces.Message) bool {
	q := a.lowq.Load()
	if q == nil {
		return false
	}
	select {
	case *q <- m:
		return true
	default:
		return false
	}
}

// lowChannel runs the low-priority connection of an association until ctx
// ends or the connection fails: a writer draining the queue, and the
// association machine reading the CE's packet injections.
func (a *Agent) lowChannel(ctx context.Context, ce forces.ID, next func() uint64) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, forces.DefaultSetupTimeout)
	nc, err := a.dial(dctx, d, a.cfg.CEAddressLow)
	cancel()
	if err != nil {
		return fmt.Errorf("low-priority channel %s: %w", a.cfg.CEAddressLow, err)
	}
	conn := forces.NewAssocConn(nc, a.tap())
	defer conn.Close()
	if _, err := forces.RequestSetup(ctx, conn, a.id, ce, next(), forces.DefaultSetupTimeout); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("low-priority channel setup: %w", err)
	}
	q := make(chan *forces.Message, lowQueue)
	a.lowq.Store(&q)
	defer a.lowq.Store(nil)
	a.log.Info("forces: low-priority channel up", "address", a.cfg.CEAddressLow)

	// No heartbeats here: the association's own channel carries them, and
	// this one ends with it.
	assoc := forces.NewAssoc(conn, forces.AssocConfig{
		Local: a.id, Peer: ce, PeerName: "CE", NoTeardown: true,
		Handlers: map[forces.MessageType]forces.Handler{
			forces.MsgPacketRedirect: func(m *forces.Message, _ *forces.MessageBuffer) (bool, error) {
				for _, r := range m.Redirects {
					a.inject(r)
				}
				return false, nil
			},
		},
		Errors: &a.protocolErrors,
		Log:    a.log,
	})
	go func() {
		for {
			select {
			case m := <-q:
				if err := assoc.Write(m); err != nil {
					assoc.End(err)
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := assoc.Run(ctx); ctx.Err() == nil {
		return err
	}
	return nil
}

// inject sends a frame the CE redirected out of the port its metadata names.
func (a *Agent) inject(r forces.Redirect) {
	port, ok := r.Port()
	if !ok || a.redirector == nil {
		a.low.warns.Warn(a.log, "forces: packet redirect without a usable output port", "has_port", ok)
		return
	}
	if err := a.redirector.Inject(int(port), r.Data); err != nil {
		a.low.warns.Warn(a.log, "forces: inject", "port", port, "err", err)
		return
	}
	a.low.injected.Add(1)
}

// punt is the redirector's callback: a frame of a redirected EtherType
// arrived on a port, and goes to the CE with its ingress port.
func (a *Agent) punt(ifindex int, frame []byte) {
	ce, ok := a.ceID.Load().(forces.ID)
	if !ok {
		a.low.dropped.Add(1)
		return
	}
	m := forces.NewPacketRedirect(a.id, ce, a.corr.Add(1), forces.Redirect{
		Metadata: []forces.Metadata{forces.PortMetadata(uint32(ifindex))}, Data: frame,
	})
	if a.sendLow(m) {
		a.low.redirected.Add(1)
	} else {
		a.low.dropped.Add(1)
	}
}

// watchLinks reports port state changes to the CE as Event Notifications.
func (a *Agent) watchLinks(ctx context.Context) {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) { a.log.Warn("fe: link watch", "err", err) },
	}); err != nil {
		a.log.Error("fe: subscribe to link changes; port events will not be sent", "err", err)
		return
	}
	forEach(ctx, ch, a.linkUpdate)
}

func (a *Agent) linkUpdate(u netlink.LinkUpdate) {
	attrs := u.Link.Attrs()
	up := attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown
	var changed bool
	var pi forces.PortInfo
	var dp Datapath
	a.do(func() {
		p, ours := a.ports[attrs.Index]
		if ours {
			dp = a.prog.dp
		}
		if ours && attrs.MTU != 0 && p.mtu != attrs.MTU && u.Header.Type != unix.RTM_DELLINK {
			p.mtu = attrs.MTU
			a.warnLinkMTUs()
		}
		if changed = ours && p.Up != up; changed {
			p.Up = up
			pi = forces.PortInfo{ID: uint32(p.Ifindex), Name: p.Name, Up: up, Addrs: slices.Clone(p.Addrs)}
			copy(pi.MAC[:], p.mac)
			a.linkState(p.Ifindex)
		}
	})
	// The fast path checks frames against the port's MAC and packets
	// against its MTU (an MTU above 65535, loopback's, limits nothing).
	if pl, ok := dp.(interface {
		SetPortLink(ifindex int, mac net.HardwareAddr, mtu int) error
	}); ok && u.Header.Type != unix.RTM_DELLINK {
		mtu := attrs.MTU
		if mtu > datapath.MaxMTU {
			mtu = 0
		}
		if err := pl.SetPortLink(attrs.Index, attrs.HardwareAddr, mtu); err != nil {
			a.log.Warn("fe: port MAC and MTU not updated in the datapath", "ifindex", attrs.Index, "err", err)
		}
	}
	if !changed {
		return
	}
	a.log.Info("fe: port changed", "port", pi.Name, "up", up)
	ce, ok := a.ceID.Load().(forces.ID)
	if !ok {
		return
	}
	data, err := pi.AppendFullData(nil)
	if err != nil {
		return
	}
	m := forces.NewEventNotification(a.id, ce, a.corr.Add(1), forces.PortTableClass, forces.PortTableInstance,
		[]uint32{forces.PortTableComponent, pi.ID}, data)
	a.withLinks(m)
	if a.sendLow(m) {
		a.low.events.Add(1)
	}
}
