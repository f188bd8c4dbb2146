package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/internal/nsthread"
	"github.com/splitplane/splitplane/internal/peer"
	"github.com/splitplane/splitplane/internal/status"
)

// ProbePrefix is the prefix the DoS test has the peer announce and withdraw
// in turn (TEST-NET-3, outside the generated table), and probeDst an
// address in it.
func ProbePrefix() netip.Prefix { return netip.MustParsePrefix("203.0.113.0/24") }

func probeDst() netip.Addr { return netip.AddrFrom4([4]byte{203, 0, 113, 1}) }

// XDP actions, as the FE's program returns them.
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// routeProbe asks the FE's own XDP program whether it forwards to probeDst:
// it runs the program attached to the router's port to-a
// (BPF_PROG_TEST_RUN, no packet sent) on a frame from host A to probeDst,
// which it redirects (forwards) when the route is in the datapath and passes
// to the kernel (no route) otherwise. That is the FE's view where it
// matters, its maps, not the CE's or the FE agent's. Each probe counts as
// one received packet in the FE's counters.
type routeProbe struct {
	prog    *ebpf.Program
	ifindex int
	frame   []byte
}

// newRouteProbe finds the XDP program on to-a; call it on a thread in the
// router's namespace, where probes must run too (the program's context names
// the port by ifindex).
func newRouteProbe() (*routeProbe, error) {
	l, err := netlink.LinkByName("to-a")
	if err != nil {
		return nil, err
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return nil, errors.New("no XDP program on to-a")
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return nil, fmt.Errorf("the FE's XDP program (id %d): %w", x.ProgId, err)
	}
	return &routeProbe{prog: prog, ifindex: l.Attrs().Index, frame: probeFrame(l.Attrs().HardwareAddr)}, nil
}

// probeFrame is a UDP packet from host A to probeDst, in a frame to the
// router's port whose MAC is dst.
func probeFrame(dst net.HardwareAddr) []byte {
	b := make([]byte, 60)
	copy(b[0:6], dst)
	copy(b[6:12], net.HardwareAddr{0x02, 0, 0, 0xd0, 0x5e, 1})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	src, dstIP := HostA().As4(), probeDst().As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dstIP[:])
	binary.BigEndian.PutUint16(ip[10:], gen.Checksum(ip))
	binary.BigEndian.PutUint16(b[34:], 40000)
	binary.BigEndian.PutUint16(b[36:], sinkPort)
	binary.BigEndian.PutUint16(b[38:], 26)
	return b
}

// xdpContext is struct xdp_md, the context of a test run of an XDP program.
type xdpContext struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// routed reports whether the datapath forwards to probeDst.
func (p *routeProbe) routed() (bool, error) {
	ret, err := p.prog.Run(&ebpf.RunOptions{
		Data:    p.frame,
		Context: xdpContext{DataEnd: uint32(len(p.frame)), IngressIfindex: uint32(p.ifindex)},
	})
	if err != nil {
		return false, fmt.Errorf("probe the FE's XDP program: %w", err)
	}
	switch ret {
	case xdpRedirect:
		return true, nil
	case xdpPass:
		return false, nil
	}
	return false, fmt.Errorf("probe the FE's XDP program: action %d for a packet to %s", ret, probeDst())
}

func (p *routeProbe) close() { p.prog.Close() }

// updates is what the update prober saw.
type updates struct {
	Sent    int // announcements and withdrawals made
	Arrived int // of them, seen in the FE's datapath
	// Delays are, for each change, the time from the peer's API call until
	// the datapath had it; for one that never arrived, until the prober
	// gave up (a lower bound).
	Delays []time.Duration
}

// probeUpdates makes the peer announce and withdraw ProbePrefix in turn, one
// change every interval until end, and times each until the FE's datapath
// has it, probing every millisecond. The last change gets until end+grace;
// a change not in the datapath by then, or when ctx ends, has not arrived.
// The prefix must be withdrawn at the start (it may take until grace to
// leave the datapath), and is withdrawn again at the end.
func probeUpdates(ctx context.Context, o *Options, interval time.Duration, end time.Time, grace time.Duration) (updates, error) {
	var u updates
	err := nsthread.Run(o.Namespace("rtr"), func() error {
		p, err := newRouteProbe()
		if err != nil {
			return err
		}
		defer p.close()
		// A run before this one (another attack in the same lab) may
		// have left the prefix announced and withdrawn it at its end.
		for wait := time.Now().Add(grace); ; time.Sleep(10 * time.Millisecond) {
			r, err := p.routed()
			if err != nil {
				return err
			}
			if !r {
				break
			}
			if time.Now().After(wait) {
				return fmt.Errorf("the FE forwards to %s before the test announces it", probeDst())
			}
		}
		announced := false
		defer func() {
			if announced { // leave the prefix withdrawn for the next run
				_ = status.Post(o.Socket("peer"), "/withdraw", url.Values{"prefix": {ProbePrefix().String()}})
			}
		}()
		for next := time.Now(); next.Before(end); next = next.Add(interval) {
			if err := sleepCtx(ctx, time.Until(next)); err != nil {
				return nil
			}
			verb := "announce"
			if announced {
				verb = "withdraw"
			}
			announced = !announced
			t0 := time.Now()
			if err := status.Post(o.Socket("peer"), "/"+verb, url.Values{"prefix": {ProbePrefix().String()}}); err != nil {
				return fmt.Errorf("peer %s %s: %w", verb, ProbePrefix(), err)
			}
			u.Sent++
			for {
				r, err := p.routed()
				if err != nil {
					return err
				}
				if r == announced {
					u.Arrived++
					u.Delays = append(u.Delays, time.Since(t0))
					break
				}
				if ctx.Err() != nil || time.Now().After(end.Add(grace)) {
					u.Delays = append(u.Delays, time.Since(t0))
					return nil
				}
				time.Sleep(time.Millisecond)
			}
			if late := time.Now(); late.After(next.Add(interval)) {
				next = late.Add(-interval) // a late change: the next one goes at once
			}
		}
		return nil
	})
	return u, err
}

// session is what the session watcher saw of the BGP session, from the
// peer's side: how often it left Established, and for how long it was down.
type session struct {
	Drops    int
	Down     time.Duration
	LastDown string // the peer's reason for the last drop
}

// sessionWatch polls the peer's status every 100 ms until stop, counting the
// session's drops by the peer's Established counter (so a flap between two
// polls counts too). The session must be established when it starts.
type sessionWatch struct {
	o    *Options
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	s        session
	first    int
	last     peer.Status
	downFrom time.Time
	err      error
}

func watchSession(ctx context.Context, o *Options) (*sessionWatch, error) {
	var st peer.Status
	if err := status.Get(o.Socket("peer"), "/status", &st); err != nil {
		return nil, fmt.Errorf("peer status: %w", err)
	}
	if st.State != "established" {
		return nil, fmt.Errorf("the BGP session is %s, not established, before the test", st.State)
	}
	w := &sessionWatch{o: o, done: make(chan struct{}), first: st.Established, last: st}
	ctx, w.stop = context.WithCancel(ctx)
	go w.run(ctx)
	return w, nil
}

func (w *sessionWatch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var st peer.Status
		if err := status.Get(w.o.Socket("peer"), "/status", &st); err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("peer status: %w", err)
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		now := time.Now()
		switch up := st.State == "established"; {
		case !up && w.downFrom.IsZero():
			w.downFrom = now
		case up && !w.downFrom.IsZero():
			w.s.Down += now.Sub(w.downFrom)
			w.downFrom = time.Time{}
		}
		w.last = st
		w.mu.Unlock()
	}
}

// result stops the watcher and returns what it saw.
func (w *sessionWatch) result() (session, error) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.s
	s.Drops = w.last.Established - w.first
	if w.last.State != "established" {
		s.Drops++ // down at the end: not re-established yet
		s.Down += time.Since(w.downFrom)
	}
	if s.Drops > 0 {
		s.LastDown = w.last.LastDown
	}
	return s, w.err
}
