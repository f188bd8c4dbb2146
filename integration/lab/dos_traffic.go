package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/internal/nsthread"
	"github.com/splitplane/splitplane/internal/routegen"
)

// The floods of the DoS test, each sent by a generator of its own.
const (
	floodForward = iota // UDP through the router to the peer's routes (host B)
	floodSYN            // TCP SYNs to the router's BGP port from spoofed sources
	floodUDP            // UDP to closed ports of the router from spoofed sources
	floodTTL            // UDP through the router whose TTL expires there (the kernel answers Time Exceeded)
	floodACK            // TCP ACKs to the router's BGP port from spoofed sources: "established" to a naive filter
	floodARP            // ARP requests for the router's address from spoofed senders (broadcast)
	nFloods
)

// floodName names a flood in errors and reports.
func floodName(f int) string {
	return [nFloods]string{"forward", "syn", "udp", "ttl", "ack", "arp"}[f]
}

// attackFloods are the floods at the router itself: all but the forwarded one.
var attackFloods = []int{floodSYN, floodUDP, floodTTL, floodACK, floodARP}

// The floods' fixed header fields. The forwarded flood goes to the discard
// port, which host B's sink counts and drops; its source is in the
// benchmarking range (RFC 2544). The attack's destination ports: BGP, and
// the traceroute range, where nothing listens.
const sinkPort uint16 = 9

func floodFwdSrc() netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, 1}) }

// udpFloodPorts are destination ports 33434 ... 37529.
func udpFloodPorts() gen.Ports { return gen.Ports{Dst: true, Count: 4096} }

// synFloodPorts are source ports 1024 ... 33791.
func synFloodPorts() gen.Ports { return gen.Ports{Count: 32768} }

// genFrames is how many frames one BPF_PROG_RUN sends. Each call costs a
// fixed ~24 ms, which a million frames make small; the generators stop
// within a call, well under a second.
const genFrames = 1 << 20

// genNice is the generator threads' nice value: six threads at nice 8
// weigh about as much as one at nice 0 (6 x 172 against 1024), so that the
// router's receive processing on the same CPU (the flood queue's NAPI
// kthread, nice 0) gets about half of it whatever the number of floods. A
// NIC would need none of that CPU to put the frames in the queue.
const genNice = 8

// floods are the generators of one run: loaded, their templates set, sending
// from the peer's namespace out of its port (the other end of the router's
// to-peer) when started.
type floods struct {
	gens    [nFloods]*gen.Gen // nil for floodARP, which arpFlood sends
	arp     []byte            // floodARP's frame: its sender rotates in arpFlood
	peerMAC net.HardwareAddr
	ns      string
	ifindex int // the peer's eth0, in ns
	cpu     int // where every generator thread runs

	frames  [nFloods]atomic.Uint64
	stop    context.CancelFunc
	wg      sync.WaitGroup
	errMu   sync.Mutex
	err     error
	started time.Time
}

// newFloods loads the generators and sets their traffic: the forwarded flood
// to random hosts inside the peer's routes, the attacks at the router's
// address on the peer link, from random hosts inside the same routes (the
// router answers them through host B), each frame from the next source.
func newFloods(o *Options, cpu int) (_ *floods, err error) {
	f := &floods{ns: o.Namespace("peer"), cpu: cpu}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	var peerMAC, rtrMAC net.HardwareAddr
	if err := nsthread.Run(f.ns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		f.ifindex, peerMAC = ifi.Index, ifi.HardwareAddr
		return nil
	}); err != nil {
		return nil, fmt.Errorf("peer port: %w", err)
	}
	if err := nsthread.Run(o.Namespace("rtr"), func() error {
		ifi, err := net.InterfaceByName("to-peer")
		if err != nil {
			return err
		}
		rtrMAC = ifi.HardwareAddr
		return nil
	}); err != nil {
		return nil, fmt.Errorf("router port: %w", err)
	}
	hosts := randomHosts(routegen.Generate(o.Routes, o.Seed), o.Seed)
	for i := range f.gens {
		if i == floodARP {
			continue
		}
		if f.gens[i], err = gen.Load(); err != nil {
			return nil, err
		}
	}
	f.peerMAC = peerMAC
	h := gen.Header{SrcMAC: peerMAC, DstMAC: rtrMAC, TTL: 64}
	fwd := h
	fwd.Src, fwd.SrcPort, fwd.DstPort = floodFwdSrc(), 40000, sinkPort
	if err := f.gens[floodForward].SetTraffic(fwd, hosts); err != nil {
		return nil, err
	}
	syn := h
	syn.TCP, syn.SrcPort, syn.DstPort = true, 1024, 179
	if err := f.gens[floodSYN].SetFlood(syn, peerLinkRouter(), hosts, synFloodPorts()); err != nil {
		return nil, err
	}
	udp := h
	udp.SrcPort, udp.DstPort = 53, 33434
	if err := f.gens[floodUDP].SetFlood(udp, peerLinkRouter(), hosts, udpFloodPorts()); err != nil {
		return nil, err
	}
	ttl := fwd
	ttl.TTL = 1
	if err := f.gens[floodTTL].SetTraffic(ttl, hosts); err != nil {
		return nil, err
	}
	ack := syn
	ack.TCPFlags = 0x10 // ACK
	if err := f.gens[floodACK].SetFlood(ack, peerLinkRouter(), hosts, synFloodPorts()); err != nil {
		return nil, err
	}
	f.arp = arpRequest(peerMAC, peerLinkRouter())
	return f, nil
}

// arpRequest is a broadcast ARP request for target from srcMAC; arpFlood
// rotates its sender address over arpSender.
func arpRequest(srcMAC net.HardwareAddr, target netip.Addr) []byte {
	b := make([]byte, 60) // the minimum frame, padded
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], srcMAC)
	b[12], b[13] = 0x08, 0x06
	arp := b[14:]
	copy(arp[0:8], []byte{0, 1, 8, 0, 6, 4, 0, 1}) // Ethernet, IPv4, request
	copy(arp[8:14], srcMAC)
	t := target.As4()
	copy(arp[24:28], t[:])
	return b
}

// arpSender is the n-th spoofed sender of the ARP flood: 10.10.3.128/25 on
// the peer link, neither the router nor the peer, so that the router's
// neighbour entry for the peer stays right (this is a flood, not ARP
// spoofing).
func arpSender(n int) [4]byte { return [4]byte{10, 10, 3, byte(128 + n%127)} }

// arpFlood sends f.arp out of the peer's eth0 through an AF_PACKET socket
// until ctx ends, counting the frames in f.frames[floodARP]. It runs on a
// thread in the peer's namespace.
func (f *floods) arpFlood(ctx context.Context) error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: f.ifindex, Halen: 6}
	copy(to.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	frame := append([]byte(nil), f.arp...)
	for n := 0; ctx.Err() == nil; n++ {
		for range 1024 {
			s := arpSender(n)
			copy(frame[28:32], s[:])
			if err := unix.Sendto(fd, frame, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return fmt.Errorf("send ARP: %w", err)
			}
			n++
		}
		f.frames[floodARP].Add(1024)
	}
	return nil
}

// peerLinkRouter is the router's address on the peer link: the BGP session's
// local end, and the attack's target.
func peerLinkRouter() netip.Addr { return netip.AddrFrom4([4]byte{10, 10, 3, 1}) }

// randomHosts returns gen.MaxDsts random host addresses inside prefixes.
func randomHosts(prefixes []netip.Prefix, seed int64) []netip.Addr {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x646f73)) // "dos"
	out := make([]netip.Addr, gen.MaxDsts)
	for i := range out {
		p := prefixes[rng.IntN(len(prefixes))]
		a := p.Addr().As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		v |= rng.Uint32() & (1<<(32-p.Bits()) - 1)
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}

// burst sends n frames of one flood from the generators' CPU, once: the
// calibration of the receive queues.
func (f *floods) burst(kind int, n uint32) error {
	return nsthread.Run(f.ns, func() error {
		if err := pinThreadTo(f.cpu); err != nil {
			return err
		}
		return f.gens[kind].Send(f.ifindex, n)
	})
}

// start starts one thread for each of the floods kinds, each pinned to the
// generators' CPU in the peer's namespace, sending until halt. Floods may
// start again after halt, with other kinds; the counts go on.
func (f *floods) start(ctx context.Context, kinds []int) {
	ctx, f.stop = context.WithCancel(ctx)
	f.started = time.Now()
	for _, i := range kinds {
		g := f.gens[i]
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			err := nsthread.Run(f.ns, func() error {
				if err := pinThreadTo(f.cpu); err != nil {
					return err
				}
				if err := unix.Setpriority(unix.PRIO_PROCESS, 0, genNice); err != nil { // this thread
					return fmt.Errorf("nice %d: %w", genNice, err)
				}
				if i == floodARP {
					return f.arpFlood(ctx)
				}
				for ctx.Err() == nil {
					if err := g.Send(f.ifindex, genFrames); err != nil {
						return err
					}
					f.frames[i].Add(genFrames)
				}
				return nil
			})
			if err != nil {
				f.errMu.Lock()
				f.err = errors.Join(f.err, fmt.Errorf("%s flood: %w", floodName(i), err))
				f.errMu.Unlock()
			}
		}()
	}
}

// sent returns the frames each flood has sent so far.
func (f *floods) sent() [nFloods]uint64 {
	var n [nFloods]uint64
	for i := range n {
		n[i] = f.frames[i].Load()
	}
	return n
}

// halt stops the generators and waits for them; it returns what failed.
func (f *floods) halt() error {
	if f.stop != nil {
		f.stop()
	}
	f.wg.Wait()
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

func (f *floods) close() {
	_ = f.halt()
	for _, g := range f.gens {
		if g != nil {
			g.Close()
		}
	}
}

// sink counts and drops the forwarded flood at host B (UDP to the discard
// port) and passes the rest (ARP, replies to the attack's spoofed sources) to
// its kernel.
type sink struct {
	g     *gen.Gen
	close func() error
}

func newSink(o *Options) (*sink, error) {
	g, err := gen.Load()
	if err != nil {
		return nil, err
	}
	s := &sink{g: g}
	err = nsthread.Run(o.Namespace("b"), func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		l, err := g.AttachSinkUDP(ifi.Index, sinkPort)
		if err != nil {
			return err
		}
		s.close = l.Close
		return nil
	})
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("host B's sink: %w", err)
	}
	return s, nil
}

func (s *sink) packets() (uint64, error) { return s.g.SinkPackets() }

func (s *sink) detach() error {
	err := s.close()
	return errors.Join(err, s.g.Close())
}
