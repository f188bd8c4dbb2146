package fe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces/ife"
)

// Liveness of the inter-FE links (docs/cluster.md, "Liveness"). A link's
// carrier says nothing of the FE at its other end: an FE whose process
// died took its XDP program with it, and its kernel drops the inter-FE
// frames sent to it while the link stays up. So the agent probes each
// declared link every inter_fe_probe_interval with a forces/ife Probe,
// which the peer's XDP program answers (ife_probe in bpf/ife.h), and
// after inter_fe_probe_misses intervals in a row without a reply takes
// the link down for the datapath, which then sends the flows to that
// peer, and those it carried as an intermediate, through other FEs. The
// first reply brings it back. The datapath's link state is the port's
// state and the probe's (linkState).

// Probe defaults (Config.InterFEProbeInterval, InterFEProbeMisses).
const (
	defaultProbeInterval = 100 * time.Millisecond
	defaultProbeMisses   = 3
)

// probeConn is a link's probe socket: it sends whole frames on the link
// and reads the frames of EtherType 0xED3E the kernel gets on it (the
// datapath passes it only the probe replies). Close makes a blocked Read
// return.
type probeConn interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
	Close() error
}

// openProbeSocket opens an AF_PACKET socket on port ifindex for frames
// of EtherType 0xED3E, blind to the frames it sends itself.
func openProbeSocket(ifindex int) (probeConn, error) {
	proto := hostToNet16(ife.EtherType)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to ifindex %d: %w", ifindex, err)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("ife-probe:%d", ifindex)), nil
}

// linkProbe is the probing of one inter-FE link: what the prober and the
// status share, in atomics.
type linkProbe struct {
	port    string
	ifindex int
	peerFE  uint32
	self    uint32
	src     [6]byte
	dst     atomic.Pointer[[6]byte] // the peer's MAC; nil until learned, no probe sent before
	// portUp is the port's state: while the port is down the probes
	// pause, as their silence would say nothing of the peer (the port
	// takes the link down anyway), so that the link carries traffic
	// again as soon as the port is back.
	portUp atomic.Bool
	start  time.Time // the clock the probes carry counts from it

	sent, answered atomic.Uint64
	strays         atomic.Uint64 // replies that are not ours or not from the peer (miswired links)
	rtt            atomic.Int64  // the last round trip, ns
	lastReply      atomic.Int64  // since start, ns, of the last reply (0: none)
}

// linkLiveness is the probe state of an inter-FE link.
type linkLiveness struct {
	Sent, Answered uint64
	LastRTT        time.Duration // 0 until a reply
}

func (lp *linkProbe) liveness() linkLiveness {
	return linkLiveness{Sent: lp.sent.Load(), Answered: lp.answered.Load(), LastRTT: time.Duration(lp.rtt.Load())}
}

// setPeer gives the prober the peer's MAC: probes start, or follow it.
func (lp *linkProbe) setPeer(mac net.HardwareAddr) {
	var m [6]byte
	copy(m[:], mac)
	lp.dst.Store(&m)
}

// reply takes frame, read from the link, for a probe reply: it returns
// false for anything else (a frame not parsing, a request, a reply to
// another FE or from another peer).
func (lp *linkProbe) reply(frame []byte) bool {
	_, p, err := ife.DecodeProbe(frame)
	if err != nil || !p.Reply {
		return false
	}
	if p.Sender != lp.self || p.Responder != lp.peerFE {
		lp.strays.Add(1)
		return false
	}
	now := time.Since(lp.start)
	lp.answered.Add(1)
	lp.rtt.Store(int64(now) - int64(p.Time))
	lp.lastReply.Store(int64(now))
	return true
}

// send sends probe seq, if the peer's MAC is known.
func (lp *linkProbe) send(c probeConn, seq uint32, buf []byte) (bool, error) {
	dst := lp.dst.Load()
	if dst == nil {
		return false, nil
	}
	h := ife.Header{Dst: *dst, Src: lp.src}
	frame, err := ife.EncodeProbe(buf[:0], h, ife.Probe{Sender: lp.self, Seq: seq, Time: uint64(time.Since(lp.start))})
	if err != nil {
		return false, err
	}
	if _, err := c.Write(frame); err != nil {
		return false, err
	}
	lp.sent.Add(1)
	return true, nil
}

// silence is how long the peer has not answered, as of now.
func (lp *linkProbe) silence() time.Duration {
	return time.Since(lp.start) - time.Duration(lp.lastReply.Load())
}

// runProbes probes every inter-FE link until ctx ends, each on a socket
// of its own from open (openProbeSocket unless a test gives another).
func (a *Agent) runProbes(ctx context.Context, open func(ifindex int) (probeConn, error)) {
	var probes []*linkProbe
	a.do(func() {
		for _, l := range a.links {
			probes = append(probes, l.probe)
		}
	})
	var wg sync.WaitGroup
	for _, lp := range probes {
		c, err := open(lp.ifindex)
		if err != nil {
			a.log.Error("fe: inter-FE link not probed; its state is its port's alone", "port", lp.port, "peer_fe", lp.peerFE, "err", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.probeLink(ctx, lp, c, a.cfg.InterFEProbeInterval, a.cfg.InterFEProbeMisses)
		}()
	}
	wg.Wait()
}

// probeLink sends a probe on the link every interval, reads the replies
// and takes the link down for the datapath after misses intervals in a
// row without one, up again at the first reply. It closes c when ctx ends.
func (a *Agent) probeLink(ctx context.Context, lp *linkProbe, c probeConn, interval time.Duration, misses int) {
	replies := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, err := c.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || ctx.Err() != nil {
					return
				}
				// The port going down reports ENETDOWN once on the
				// socket; the probes go on, unanswered meanwhile.
				a.log.Debug("fe: inter-FE link probe socket", "port", lp.port, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(interval):
				}
				continue
			}
			if lp.reply(buf[:n]) {
				select {
				case replies <- struct{}{}:
				default:
				}
			}
		}
	}()
	defer func() { c.Close(); <-done }()

	tick := time.NewTicker(interval)
	defer tick.Stop()
	alive, answered, outstanding := true, false, false
	silent, seq := 0, uint32(0)
	buf := make([]byte, 0, ife.ProbeFrameLen)
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-replies:
			answered = true
			if !alive {
				alive = true
				a.log.Info("fe: inter-FE link peer answers again; the link carries traffic", "port", lp.port, "peer_fe", lp.peerFE,
					"rtt", time.Duration(lp.rtt.Load()))
				a.do(func() { a.setLinkAlive(lp.ifindex, true) })
			}
		case <-tick.C:
			if !lp.portUp.Load() {
				silent, answered, outstanding = 0, false, false
				continue
			}
			switch {
			case answered:
				silent = 0
			case outstanding:
				silent++
			}
			answered = false
			if alive && silent >= misses {
				alive = false
				a.log.Warn("fe: inter-FE link peer silent; routing around it", "port", lp.port, "peer_fe", lp.peerFE,
					"silence", lp.silence().Round(time.Millisecond), "unanswered", silent)
				a.do(func() { a.setLinkAlive(lp.ifindex, false) })
			}
			seq++
			sent, err := lp.send(c, seq, buf)
			if err != nil {
				// A port going down fails the write: the port's state
				// takes the link down already; count the probe missed.
				a.log.Debug("fe: inter-FE link probe not sent", "port", lp.port, "err", err)
				sent = true
			}
			outstanding = sent
		}
	}
}

// setLinkAlive records what the probes say of inter-FE link port ifindex
// and tells the datapath. Called in the loop.
func (a *Agent) setLinkAlive(ifindex int, alive bool) {
	l := a.links[ifindex]
	if l == nil {
		return
	}
	l.alive = alive
	a.linkState(ifindex)
}

// checkLinkMTUs returns a warning for each inter-FE link whose MTU is
// below the largest MTU of the other ports plus the datapath's inter-FE
// overhead: the largest packets would not fit the link encapsulated, and
// go to the kernel instead (pass_mtu). mtus is by port name.
func checkLinkMTUs(links []InterFELink, mtus map[string]int) []linkMTUProblem {
	isLink := map[string]bool{}
	for _, l := range links {
		isLink[l.Port] = true
	}
	largest := 0
	for name, mtu := range mtus {
		if !isLink[name] && mtu <= datapath.MaxMTU {
			largest = max(largest, mtu)
		}
	}
	var out []linkMTUProblem
	for _, l := range links {
		mtu, ok := mtus[l.Port]
		if need := largest + datapath.IFEOverhead; ok && largest > 0 && mtu < need {
			out = append(out, linkMTUProblem{port: l.Port, peerFE: l.PeerFE, mtu: mtu, need: need})
		}
	}
	return out
}

// linkMTUProblem is an inter-FE link whose MTU is below what it needs.
type linkMTUProblem struct {
	port      string
	peerFE    uint32
	mtu, need int
}

// warnLinkMTUs logs checkLinkMTUs' findings for the ports' MTUs now.
// Called in the loop.
func (a *Agent) warnLinkMTUs() {
	if len(a.cfg.InterFELinks) == 0 {
		return
	}
	mtus := map[string]int{}
	for _, p := range a.ports {
		if p.mtu > 0 {
			mtus[p.Name] = p.mtu
		}
	}
	for _, pr := range checkLinkMTUs(a.cfg.InterFELinks, mtus) {
		a.log.Warn("fe: inter-FE link MTU too small for the ports' largest packets; those go to the kernel (pass_mtu)",
			"port", pr.port, "peer_fe", pr.peerFE, "mtu", pr.mtu, "mtu_needed", pr.need)
	}
}

// raiseLinkMTUs sets the MTU of each inter-FE link that checkLinkMTUs
// finds too small to what it needs, before the ports are set up: the link
// carries only frames between FEs, and with an MTU of 1500 on both sides
// (veth's and most switches' default) every full-size packet to another FE
// would go to the kernel. Each FE raises its own end; a device that
// refuses keeps its MTU, and warnLinkMTUs says so.
func (a *Agent) raiseLinkMTUs(links []netlink.Link) {
	mtus := map[string]int{}
	byName := map[string]netlink.Link{}
	for _, l := range links {
		mtus[l.Attrs().Name], byName[l.Attrs().Name] = l.Attrs().MTU, l
	}
	for _, pr := range checkLinkMTUs(a.cfg.InterFELinks, mtus) {
		l := byName[pr.port]
		if err := netlink.LinkSetMTU(l, pr.need); err != nil {
			a.log.Warn("fe: inter-FE link MTU could not be raised", "port", pr.port, "peer_fe", pr.peerFE, "mtu", pr.mtu, "mtu_needed", pr.need, "err", err)
			continue
		}
		l.Attrs().MTU = pr.need
		a.log.Info("fe: inter-FE link MTU raised to carry the ports' largest packets encapsulated",
			"port", pr.port, "peer_fe", pr.peerFE, "from", pr.mtu, "to", pr.need)
	}
}
