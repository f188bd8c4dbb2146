package classifier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// The lab: the router's namespace (the test's, from netnstest.Run) holds r0,
// 10.0.0.1/24 and fd00::1/64; a peer namespace holds its veth peer p0,
// 10.0.0.2/24 and fd00::2/64. Sockets opened on the test's locked thread are
// the router's; peer sockets are opened after switching that thread into the
// peer namespace for the call.
var (
	routerV4 = netip.MustParseAddr("10.0.0.1")
	peerV4   = netip.MustParseAddr("10.0.0.2")
	routerV6 = netip.MustParseAddr("fd00::1")
	peerV6   = netip.MustParseAddr("fd00::2")
)

type lab struct {
	t      *testing.T
	router netns.NsHandle
	peer   netns.NsHandle
	closer []func()
}

// newLab builds the lab from inside netnstest.Run. With samePeer the peer's
// end and addresses stay in the router's namespace: both ends of every
// connection are then the router's own.
func newLab(t *testing.T, h *netlink.Handle, samePeer bool) *lab {
	t.Helper()
	l := &lab{t: t}
	var err error
	if l.router, err = netns.Get(); err != nil {
		t.Fatal(err)
	}
	l.peer = l.router
	if !samePeer {
		if l.peer, err = netns.New(); err != nil { // switches this thread into it
			t.Fatal(err)
		}
		if err := netns.Set(l.router); err != nil {
			t.Fatal(err)
		}
	}
	l.closer = append(l.closer, func() {
		if l.peer != l.router {
			l.peer.Close()
		}
		l.router.Close()
	})
	ph, err := netlink.NewHandleAt(l.peer)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "r0"}, PeerName: "p0", PeerNamespace: netlink.NsFd(l.peer)}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("add veth r0-p0: %v", err)
	}
	setup := func(h *netlink.Handle, name string, addrs ...string) {
		link, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				t.Fatal(err)
			}
			addr.Flags = unix.IFA_F_NODAD // usable at once
			if err := h.AddrAdd(link, addr); err != nil {
				t.Fatalf("%s: add %s: %v", name, a, err)
			}
		}
		if err := h.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
	setup(h, "lo")
	setup(h, "r0", "10.0.0.1/24", "fd00::1/64")
	setup(ph, "p0", "10.0.0.2/24", "fd00::2/64")
	return l
}

func (l *lab) close() {
	for _, c := range slices.Backward(l.closer) {
		c()
	}
}

// inPeer runs fn with the test's thread in the peer namespace.
func (l *lab) inPeer(fn func()) {
	l.t.Helper()
	if err := netns.Set(l.peer); err != nil {
		l.t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(l.router); err != nil {
			panic(err) // the thread would stay in the wrong namespace
		}
	}()
	fn()
}

// listen listens on addr in the current thread's namespace.
func (l *lab) listen(addr netip.AddrPort) net.Listener {
	l.t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		l.t.Fatal(err)
	}
	l.closer = append(l.closer, func() { ln.Close() })
	return ln
}

// conn is both ends of one connection, to close together.
type conn struct{ client, server net.Conn }

func (c conn) close() {
	c.client.Close()
	c.server.Close()
}

func addrPort(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// dial connects from the current thread's namespace to ln's address (to).
func (l *lab) dial(ln net.Listener, to netip.AddrPort) conn {
	l.t.Helper()
	return l.dialFrom(ln, netip.AddrPort{}, to)
}

// dialFrom is dial from a given local address (none: the kernel's choice).
func (l *lab) dialFrom(ln net.Listener, from, to netip.AddrPort) conn {
	l.t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(from)
	}
	c, err := d.Dial("tcp", to.String()) // literal address: the socket is made on this thread
	if err != nil {
		l.t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		l.t.Fatal("accept failed")
	}
	cn := conn{c, s}
	l.closer = append(l.closer, cn.close)
	return cn
}

// step runs one part of a test and names it in the log. Not t.Run: a subtest
// runs on a goroutine of its own, off the thread that is in the namespace.
func step(t *testing.T, name string, fn func()) {
	t.Helper()
	t.Logf("-- %s", name)
	fn()
}

func mustFlows(t *testing.T, cfg Config) []Flow {
	t.Helper()
	f, err := Flows(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func assertFlows(t *testing.T, what string, got []Flow, want ...Flow) {
	t.Helper()
	slices.SortFunc(want, compareFlows)
	if !slices.Equal(got, want) {
		t.Errorf("%s: flows\n  %v\nwant exactly\n  %v", what, got, want)
	}
}

// A connection of the router's own on a control port is reported exactly,
// router side only, whichever side opened it; a listener, a connection on
// another port and a connection to the peer that never answered are told
// apart; IPv6 and dual-stack (IPv4-mapped) sockets alike.
func TestFlowsExactConnections(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		l := newLab(t, h, false)
		defer l.close()
		cfg := Config{Ports: map[uint16]string{179: "bgp", 6700: "forces"}}

		for _, fam := range []struct {
			name         string
			router, peer netip.Addr
		}{{"IPv4", routerV4, peerV4}, {"IPv6", routerV6, peerV6}} {
			step(t, fam.name, func() {
				// A listener alone is not a flow.
				bgp := l.listen(netip.AddrPortFrom(fam.router, 179))
				other := l.listen(netip.AddrPortFrom(fam.router, 8080))
				assertFlows(t, "listeners only", mustFlows(t, cfg))

				// A connection on another port is not one either.
				var web conn
				l.inPeer(func() { web = l.dial(other, netip.AddrPortFrom(fam.router, 8080)) })
				assertFlows(t, "a connection to port 8080", mustFlows(t, cfg))

				// The peer connects to the router's BGP port (router passive).
				var in conn
				l.inPeer(func() { in = l.dial(bgp, netip.AddrPortFrom(fam.router, 179)) })
				passive := Flow{Kind: "bgp", Local: addrPort(in.server.LocalAddr()), Remote: addrPort(in.client.LocalAddr())}
				if passive.Local != netip.AddrPortFrom(fam.router, 179) || passive.Remote.Addr() != fam.peer {
					t.Fatalf("connection is %v, not between the lab's addresses", passive)
				}
				assertFlows(t, "the peer connected to 179", mustFlows(t, cfg), passive)

				// The router connects to the peer's BGP port (router active).
				var peerBGP net.Listener
				l.inPeer(func() { peerBGP = l.listen(netip.AddrPortFrom(fam.peer, 179)) })
				out := l.dial(peerBGP, netip.AddrPortFrom(fam.peer, 179))
				active := Flow{Kind: "bgp", Local: addrPort(out.client.LocalAddr()), Remote: netip.AddrPortFrom(fam.peer, 179)}
				assertFlows(t, "both sessions", mustFlows(t, cfg), passive, active)

				// The kernel's filter alone already leaves the port-8080 connection out.
				d, err := newDumper(cfg)
				if err != nil {
					t.Fatal(err)
				}
				raw := func() (n int, web bool) {
					for _, f := range []uint8{unix.AF_INET, unix.AF_INET6} {
						if err := d.dump(f, func(s diagSocket) {
							n++
							web = web || s.local.Port() == 8080 || s.remote.Port() == 8080
						}); err != nil {
							t.Fatal(err)
						}
					}
					return n, web
				}
				if n, sawWeb := raw(); n != 2 || sawWeb {
					t.Errorf("kernel-filtered dump: %d sockets (want the 2 BGP ones), port-8080 socket among them: %v", n, sawWeb)
				}
				d.filter = nil
				if n, sawWeb := raw(); n != 3 || !sawWeb {
					t.Errorf("unfiltered dump: %d sockets (want 3), port-8080 socket among them: %v (want true)", n, sawWeb)
				}

				// Closed, they are gone.
				in.close()
				out.close()
				web.close()
				assertFlows(t, "all closed", mustFlows(t, cfg))
			})
		}

		// A session being set up (SYN_SENT) is a flow: 10.0.0.3 never answers.
		step(t, "SYN_SENT", func() {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			err = unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{10, 0, 0, 3}, Port: 179})
			if !errors.Is(err, unix.EINPROGRESS) {
				t.Fatalf("connect to a silent peer: %v, want EINPROGRESS", err)
			}
			sa, err := unix.Getsockname(fd)
			if err != nil {
				t.Fatal(err)
			}
			local := netip.AddrPortFrom(routerV4, uint16(sa.(*unix.SockaddrInet4).Port))
			assertFlows(t, "connecting", mustFlows(t, cfg), Flow{Kind: "bgp", Local: local, Remote: netip.MustParseAddrPort("10.0.0.3:179")})
		})

		// A half-open connection (SYN_RECV) is not a flow: a spoofed SYN
		// makes one, here from 10.0.0.9, which nobody answers ARP for, so
		// the router's SYN-ACK never leaves and the request stays.
		step(t, "SYN_RECV", func() {
			ln := l.listen(netip.MustParseAddrPort("10.0.0.1:6702"))
			defer ln.Close()
			from := netip.MustParseAddrPort("10.0.0.9:40001")
			l.inPeer(func() { sendSYN(t, from, netip.MustParseAddrPort("10.0.0.1:6702")) })
			deadline := time.Now().Add(5 * time.Second)
			for !synRecv(t, from) {
				if time.Now().After(deadline) {
					t.Fatal("the spoofed SYN made no SYN_RECV socket")
				}
				time.Sleep(10 * time.Millisecond)
			}
			assertFlows(t, "half-open from a spoofed source", mustFlows(t, Config{})) // DefaultPorts: 6702 is forces
		})

		// A dual-stack listener's IPv4 connection is reported with IPv4 addresses.
		step(t, "IPv4-mapped", func() {
			ln := l.listen(netip.MustParseAddrPort("[::]:6700"))
			var c conn
			l.inPeer(func() { c = l.dial(ln, netip.AddrPortFrom(routerV4, 6700)) })
			if a := c.server.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); !a.Is4In6() {
				t.Fatalf("the server socket's address is %v, not IPv4-mapped: the test tests nothing", a)
			}
			assertFlows(t, "dual-stack socket", mustFlows(t, cfg),
				Flow{Kind: "forces", Local: netip.AddrPortFrom(routerV4, 6700), Remote: addrPort(c.client.LocalAddr())})
			c.close()
		})
	})
}

// With both ends of a connection in the router's namespace, each end is a
// socket of the router's own, so one connection is two flows, one per
// direction. Loopback connections are left out unless IncludeLoopback.
func TestFlowsBothEndsLocal(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		l := newLab(t, h, true)
		defer l.close()
		cfg := Config{} // DefaultPorts

		// From 10.0.0.2 (the other veth end) to 10.0.0.1:179.
		ln := l.listen(netip.AddrPortFrom(routerV4, 179))
		c := l.dialFrom(ln, netip.AddrPortFrom(peerV4, 0), netip.AddrPortFrom(routerV4, 179))
		from := addrPort(c.client.LocalAddr())
		if from.Addr() != peerV4 {
			t.Fatalf("client at %v, not %v", from, peerV4)
		}
		assertFlows(t, "10.0.0.2 to 10.0.0.1:179", mustFlows(t, cfg),
			Flow{Kind: "bgp", Local: netip.AddrPortFrom(routerV4, 179), Remote: from},
			Flow{Kind: "bgp", Local: from, Remote: netip.AddrPortFrom(routerV4, 179)})
		c.close()

		lo := l.listen(netip.MustParseAddrPort("127.0.0.1:179"))
		lc := l.dial(lo, netip.MustParseAddrPort("127.0.0.1:179"))
		assertFlows(t, "loopback, left out", mustFlows(t, cfg))
		lserver, lclient := addrPort(lc.server.LocalAddr()), addrPort(lc.client.LocalAddr())
		assertFlows(t, "loopback, IncludeLoopback", mustFlows(t, Config{IncludeLoopback: true}),
			Flow{Kind: "bgp", Local: lserver, Remote: lclient},
			Flow{Kind: "bgp", Local: lclient, Remote: lserver})
		lc.close()
	})
}

// Watch reports a session when it comes up and reports it removed within a
// few intervals of its closing, IPv4 and IPv6.
func TestWatchAddsAndRemoves(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		l := newLab(t, h, false)
		defer l.close()
		const interval = 20 * time.Millisecond
		type change struct {
			added, removed []Flow
			at             time.Time
		}
		changes := make(chan change, 16)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			// Watch opens its socket in the namespace of the thread it is
			// called on; that thread, locked and never unlocked, dies with
			// the goroutine.
			runtime.LockOSThread()
			if err := netns.Set(l.router); err != nil {
				done <- err
				return
			}
			done <- Watch(ctx, Config{Interval: interval}, func(added, removed []Flow) {
				changes <- change{added, removed, time.Now()}
			})
		}()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch: %v", err)
			}
		}()
		next := func(what string) change {
			t.Helper()
			select {
			case c := <-changes:
				return c
			case err := <-done:
				t.Fatalf("%s: Watch ended: %v", what, err)
			case <-time.After(2 * time.Second):
				t.Fatalf("%s: no change reported in 2s (%d intervals)", what, 2*time.Second/interval)
			}
			panic("unreachable")
		}
		if c := next("first call"); len(c.added) != 0 || len(c.removed) != 0 {
			t.Errorf("first call: added %v removed %v, want nothing", c.added, c.removed)
		}
		for _, fam := range []struct {
			name         string
			router, peer netip.Addr
		}{{"IPv4", routerV4, peerV4}, {"IPv6", routerV6, peerV6}} {
			step(t, fam.name, func() {
				ln := l.listen(netip.AddrPortFrom(fam.router, 179))
				var c conn
				l.inPeer(func() { c = l.dial(ln, netip.AddrPortFrom(fam.router, 179)) })
				want := Flow{Kind: "bgp", Local: netip.AddrPortFrom(fam.router, 179), Remote: addrPort(c.client.LocalAddr())}
				got := next("connected")
				if !slices.Equal(got.added, []Flow{want}) || len(got.removed) != 0 {
					t.Fatalf("connected: added %v removed %v, want added [%v]", got.added, got.removed, want)
				}
				closed := time.Now()
				c.close()
				got = next("closed")
				if !slices.Equal(got.removed, []Flow{want}) || len(got.added) != 0 {
					t.Fatalf("closed: added %v removed %v, want removed [%v]", got.added, got.removed, want)
				}
				// next's deadline bounds the delay; log it against the interval.
				t.Logf("removal reported %v after the close (interval %v)", got.at.Sub(closed).Round(time.Millisecond), interval)
			})
		}
	})
}

func TestConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Interval: -time.Second},
		{Ports: map[uint16]string{0: "bgp"}},
		{Ports: map[uint16]string{179: ""}},
	} {
		if _, err := Flows(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Flows(%+v): %v, want ErrBadConfig", cfg, err)
		}
		if err := Watch(context.Background(), cfg, func(_, _ []Flow) {}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Watch(%+v): %v, want ErrBadConfig", cfg, err)
		}
	}
}

// Reading the sockets needs no privilege: Flows works in whatever namespace
// the test runs in.
func TestFlowsUnprivileged(t *testing.T) {
	f, err := Flows(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control flows here: %v", f)
}

// A Watch whose context has ended returns at once without reporting.
func TestWatchEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Watch(ctx, Config{}, func(_, _ []Flow) { t.Error("onChange called") }); err != nil {
		t.Fatal(err)
	}
}

func TestDiff(t *testing.T) {
	f := func(local, remote string) Flow {
		return Flow{Kind: "bgp", Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort(remote)}
	}
	a, b, c := f("10.0.0.1:179", "10.0.0.2:40000"), f("10.0.0.1:179", "10.0.0.3:40000"), f("[fd00::1]:179", "[fd00::2]:40000")
	added, removed := diff([]Flow{a, b}, []Flow{b, c})
	if !slices.Equal(added, []Flow{c}) || !slices.Equal(removed, []Flow{a}) {
		t.Errorf("diff: added %v removed %v", added, removed)
	}
	if added, removed := diff([]Flow{a}, []Flow{a}); added != nil || removed != nil {
		t.Errorf("no change: added %v removed %v", added, removed)
	}
}

func TestParseDiagMsg(t *testing.T) {
	msg := make([]byte, sizeofDiagMsg)
	msg[0], msg[1] = unix.AF_INET6, tcpEstablished
	binary.BigEndian.PutUint16(msg[4:], 179)
	binary.BigEndian.PutUint16(msg[6:], 40000)
	src, dst := netip.MustParseAddr("::ffff:10.0.0.1").As16(), netip.MustParseAddr("fd00::2").As16()
	copy(msg[8:], src[:])
	copy(msg[24:], dst[:])
	s, err := parseDiagMsg(msg)
	if err != nil {
		t.Fatal(err)
	}
	if s.local != netip.MustParseAddrPort("10.0.0.1:179") || s.remote != netip.MustParseAddrPort("[fd00::2]:40000") || s.state != tcpEstablished {
		t.Errorf("parsed %+v", s)
	}
	if _, err := parseDiagMsg(msg[:sizeofDiagMsg-1]); err == nil {
		t.Error("short message accepted")
	}
	msg[0] = unix.AF_UNIX
	if _, err := parseDiagMsg(msg); err == nil {
		t.Error("message of family AF_UNIX accepted")
	}
}

// runFilter is the kernel's inet_diag_bc_audit and inet_diag_bc_run
// (net/ipv4/inet_diag.c) for the ops portFilter uses: it returns an error
// where the kernel would refuse the program, and whether a socket matches.
func runFilter(bc []byte, sport, dport uint16) (bool, error) {
	op := func(at int) (code, yes uint8, no uint16) {
		return bc[at], bc[at+1], binary.NativeEndian.Uint16(bc[at+2:])
	}
	// Audit: follow "yes" from the start; every jump must be 4-aligned, at
	// least the op's length, and land on an op or at most 4 bytes past the end.
	for at := 0; at < len(bc); {
		code, yes, no := op(at)
		left, minLen := len(bc)-at, 4
		switch code {
		case bcSEq, bcDEq:
			minLen = 8
		case bcJmp:
		default:
			return false, errors.New("unknown op")
		}
		if left < minLen {
			return false, errors.New("op runs past the end")
		}
		if int(no) < minLen || int(no) > left+4 || no&3 != 0 {
			return false, errors.New("bad no")
		}
		if int(yes) < minLen || int(yes) > left+4 || yes&3 != 0 {
			return false, errors.New("bad yes")
		}
		at += int(yes)
		if at > len(bc) {
			return false, errors.New("audit ends past the end")
		}
	}
	left := len(bc)
	for at := 0; left > 0; {
		code, yes, no := op(at)
		match := false
		switch code {
		case bcSEq:
			_, _, p := op(at + 4)
			match = sport == p
		case bcDEq:
			_, _, p := op(at + 4)
			match = dport == p
		}
		step := int(no)
		if match {
			step = int(yes)
		}
		at += step
		left -= step
	}
	return left == 0, nil
}

// The port filter passes the kernel's audit and matches exactly the sockets
// with a listed port at either end.
func TestPortFilter(t *testing.T) {
	if portFilter(nil) != nil {
		t.Error("a filter for no ports")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 4, 11, 50} {
		ports := make([]uint16, 0, n)
		for len(ports) < n {
			if p := uint16(r.IntN(65535) + 1); !slices.Contains(ports, p) {
				ports = append(ports, p)
			}
		}
		bc := portFilter(ports)
		if len(bc) != 24*n {
			t.Fatalf("%d ports: %d bytes of bytecode, want %d", n, len(bc), 24*n)
		}
		check := func(sport, dport uint16) {
			got, err := runFilter(bc, sport, dport)
			if err != nil {
				t.Fatalf("%d ports: the kernel would refuse the filter: %v", n, err)
			}
			if want := slices.Contains(ports, sport) || slices.Contains(ports, dport); got != want {
				t.Errorf("%d ports %v: sport %d dport %d matched %v, want %v", n, ports, sport, dport, got, want)
			}
		}
		for _, p := range ports {
			check(p, 40000)
			check(40000, p)
			check(p, p)
		}
		for range 200 {
			check(uint16(r.IntN(65536)), uint16(r.IntN(65536)))
		}
	}
	if bc := portFilter(make([]uint16, 3000)); bc != nil {
		t.Errorf("3000 ports: %d bytes of filter, want none (too long for 16-bit jumps)", len(bc))
	}
}

// BenchmarkFlows is the cost of one Watch round (both families) in the
// namespace the benchmark runs in.
func BenchmarkFlows(b *testing.B) {
	d, err := newDumper(Config{})
	if err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.open(); err != nil {
		b.Fatal(err)
	}
	defer d.close()
	for b.Loop() {
		if _, err := d.flows(); err != nil {
			b.Fatal(err)
		}
	}
}

// sendSYN sends one TCP SYN from src to dst through a raw socket of the
// calling thread's namespace (src need not be an address of it).
func sendSYN(t *testing.T, src, dst netip.AddrPort) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	pkt := make([]byte, 40)
	ip, tcp := pkt[:20], pkt[20:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:], 40)
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(tcp[0:], src.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	binary.BigEndian.PutUint32(tcp[4:], 1)
	tcp[12], tcp[13] = 5<<4, 0x02 // no options, SYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	var sum uint32
	for _, w := range [][]byte{ip[12:20], {0, unix.IPPROTO_TCP, 0, 20}, tcp} {
		for i := 0; i < len(w); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(w[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(tcp[16:], ^uint16(sum))
	// The kernel fills in the IPv4 checksum of a raw packet.
	if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: d}); err != nil {
		t.Fatalf("send SYN %s -> %s: %v", src, dst, err)
	}
}

// synRecv reports whether the calling thread's namespace has a socket in
// SYN_RECV with remote end from (/proc/thread-self/net/tcp, state 03).
func synRecv(t *testing.T, from netip.AddrPort) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	a := from.Addr().As4()
	// /proc shows the address as the hex of its native-endian uint32.
	want := fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), from.Port())
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && f[3] == "03" {
			return true
		}
	}
	return false
}

// DefaultPorts hands out a new map each time: a caller's change stays its own.
func TestDefaultPortsFresh(t *testing.T) {
	a := DefaultPorts()
	delete(a, 179)
	a[80] = "http"
	if b := DefaultPorts(); b[179] != "bgp" || b[80] != "" || len(b) != 4 {
		t.Fatalf("after a caller changed its copy: %v", b)
	}
}
