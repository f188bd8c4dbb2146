package fe

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/netnstest"
	"github.com/splitplane/splitplane/internal/prefix"
)

// ecmpNetnsEnv marks the copy of the test binary that runs inside the test's
// network namespace.
const ecmpNetnsEnv = "SPLITPLANE_ECMP_NETNS_CHILD"

// Real packets through the real XDP datapath: flows to a route with two
// equal-cost next hops spread over both gateways, each flow sticking to one;
// with one next hop left they all take it; withdrawn, none is forwarded.
//
// The agent's goroutines (neighbour watch, resolver, kernel routes) use the
// namespace of whatever thread they run on, and only netnstest.Run's locked
// thread is in the test's namespace. So the test binary starts itself again
// from that thread: the copy, router and hosts alike, lives wholly in the
// namespace, which goes away with it.
func TestECMPSpreadsRealTraffic(t *testing.T) {
	if os.Getenv(ecmpNetnsEnv) != "" {
		ecmpSpread(t)
		return
	}
	netnstest.Run(t, func(*netlink.Handle) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestECMPSpreadsRealTraffic$", "-test.v", "-test.count=1", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), ecmpNetnsEnv+"=1")
		out, err := cmd.CombinedOutput() // forked from this thread: in the namespace
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestECMPSpreadsRealTraffic")) {
			t.Fatalf("the test inside the namespace: %v\n%s", err, out)
		}
		t.Logf("inside the namespace:\n%s", out)
	})
}

// ecmpLab is the topology: a source host s0 wired to the router's port r0,
// and gateways g1, g2 wired to its ports r1, r2.
type ecmpLab struct {
	src        *net.Interface
	r0, r1, r2 *net.Interface
	g1, g2     *net.Interface
	gw1, gw2   netip.Addr
	pfx        netip.Prefix
	agent      *Agent
	rec        *ecmpRecorder
	tx         int // AF_PACKET socket on s0
}

// ecmpSpread is the test proper; the process is in a namespace of its own.
func ecmpSpread(t *testing.T) {
	lab := newECMPLab(t)
	ctx := context.Background()
	c := runCE(t, ce.Config{HeartbeatInterval: 50 * time.Millisecond, StaticRoutes: []ce.StaticRoute{}}) // next hops resolve through the real ports
	a, err := New(Config{
		Ports:     []string{lab.r0.Name, lab.r1.Name, lab.r2.Name},
		CEAddress: c.Addr().String(), CEAddressLow: c.LowAddr().String(),
		KernelRoutes: KernelRoutesConnected, HeartbeatInterval: 50 * time.Millisecond,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	lab.agent = a
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	waitUntil(t, "FE associated with its 3 ports in native XDP", func() bool {
		st := a.Status()
		if !st.Associated || len(st.Ports) != 3 {
			return false
		}
		for _, p := range st.Ports {
			if p.Mode != "native" {
				return false
			}
		}
		return true
	})

	// ECMP over both gateways.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: lab.pfx, NextHop: lab.gw1, NextHops: []netip.Addr{lab.gw1, lab.gw2}}}); err != nil {
		t.Fatal(err)
	}
	lab.waitProgrammed(t, lab.gw1, lab.gw2)
	const flows, perFlow = 256, 4
	before := lab.counters(t)
	lab.send(t, 1, flows, perFlow, true)
	lab.checkCounters(t, before, flows*perFlow, true)
	byGW := lab.rec.flows(t, 1, flows, perFlow)
	t.Logf("two next hops: %d flows to gw1, %d to gw2", len(byGW[1]), len(byGW[2]))
	for i := 1; i <= 2; i++ {
		if len(byGW[i]) < flows/4 {
			t.Errorf("gateway %d received %d of %d flows, want at least %d: ECMP does not spread", i, len(byGW[i]), flows, flows/4)
		}
	}

	// Down to one next hop: every new flow takes it.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: lab.pfx, NextHop: lab.gw2}}); err != nil {
		t.Fatal(err)
	}
	lab.waitProgrammed(t, lab.gw2)
	before = lab.counters(t)
	lab.send(t, 2, flows, 2, true)
	lab.checkCounters(t, before, flows*2, true)
	byGW = lab.rec.flows(t, 2, flows, 2)
	if len(byGW[1]) != 0 || len(byGW[2]) != flows {
		t.Errorf("one next hop (gw2): %d flows to gw1, %d to gw2; want all %d to gw2", len(byGW[1]), len(byGW[2]), flows)
	}

	// Withdrawn: nothing is forwarded, everything goes to the kernel.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: lab.pfx, Withdraw: true}}); err != nil {
		t.Fatal(err)
	}
	lab.waitProgrammed(t)
	before = lab.counters(t)
	lab.send(t, 3, flows, 1, false)
	lab.checkCounters(t, before, flows, false)
	if n := lab.rec.count(3); n != 0 {
		t.Errorf("withdrawn route: the gateways received %d frames", n)
	}
	if bad := lab.rec.badFrames(); len(bad) != 0 {
		t.Errorf("%d forwarded frames were not rewritten right, the first: %s", len(bad), bad[0])
	}
}

// newECMPLab builds the links in the current (the process's) namespace:
// r0 10.0.0.1/24 facing s0; r1 10.1.0.1/24 facing g1, the gateway 10.1.0.2;
// r2 10.2.0.1/24 facing g2, the gateway 10.2.0.2. The gateways' addresses
// live only in static neighbour entries on r1 and r2: were they configured on
// g1 and g2, the kernel would route them locally rather than through the ports.
func newECMPLab(t *testing.T) *ecmpLab {
	t.Helper()
	// No IPv6: the kernel's own NDP and MLD would add to the counters.
	for _, conf := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0o644); err != nil {
			t.Fatalf("disable IPv6: %v", err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(lo); err != nil { // the CE listens on 127.0.0.1
		t.Fatal(err)
	}
	for _, p := range [][2]string{{"s0", "r0"}, {"g1", "r1"}, {"g2", "r2"}} {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p[0]}, PeerName: p[1]}); err != nil {
			t.Fatalf("add veth %s-%s: %v", p[0], p[1], err)
		}
	}
	addr := func(name, cidr string) {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			t.Fatalf("%s: add %s: %v", name, cidr, err)
		}
	}
	addr("r0", "10.0.0.1/24")
	addr("r1", "10.1.0.1/24")
	addr("r2", "10.2.0.1/24")
	names := []string{"s0", "r0", "r1", "r2", "g1", "g2"}
	for _, name := range names {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatalf("%s: set up: %v", name, err)
		}
	}
	ifs := map[string]*net.Interface{}
	for _, name := range names {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ifs[name] = ifi
	}
	lab := &ecmpLab{
		src: ifs["s0"], r0: ifs["r0"], r1: ifs["r1"], r2: ifs["r2"], g1: ifs["g1"], g2: ifs["g2"],
		gw1: netip.MustParseAddr("10.1.0.2"), gw2: netip.MustParseAddr("10.2.0.2"),
		pfx: netip.MustParsePrefix("203.0.113.0/24"),
	}
	for _, n := range []struct {
		port, host *net.Interface
		gw         netip.Addr
	}{{lab.r1, lab.g1, lab.gw1}, {lab.r2, lab.g2, lab.gw2}} {
		if err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: n.port.Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			IP: n.gw.AsSlice(), HardwareAddr: n.host.HardwareAddr}); err != nil {
			t.Fatalf("neighbour %s on %s: %v", n.gw, n.port.Name, err)
		}
	}
	// A frame XDP redirects into a veth reaches the peer only if the peer
	// runs XDP in native mode: g1 and g2 get a program that passes all.
	pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load an XDP_PASS program: %v", err)
	}
	t.Cleanup(func() { pass.Close() })
	for _, g := range []*net.Interface{lab.g1, lab.g2} {
		l, err := link.AttachXDP(link.XDPOptions{Program: pass, Interface: g.Index, Flags: link.XDPDriverMode})
		if err != nil {
			t.Fatalf("%s: attach XDP_PASS: %v", g.Name, err)
		}
		t.Cleanup(func() { l.Close() })
	}
	// Until linkwatch has seen the carrier, a veth's qdisc is noop and drops
	// what is sent.
	waitUntil(t, "links up", func() bool {
		for _, name := range names {
			l, err := netlink.LinkByName(name)
			if err != nil || l.Attrs().OperState != netlink.OperUp {
				return false
			}
		}
		return true
	})

	lab.rec = &ecmpRecorder{seen: map[ecmpKey]int{}, macs: map[int][2]net.HardwareAddr{
		1: {lab.r1.HardwareAddr, lab.g1.HardwareAddr}, 2: {lab.r2.HardwareAddr, lab.g2.HardwareAddr},
	}}
	lab.rec.listen(t, 1, lab.g1.Index)
	lab.rec.listen(t, 2, lab.g2.Index)
	lab.tx = redirRawSocket(t, lab.src.Index, 0)
	return lab
}

// waitProgrammed waits until the FE has the route to lab.pfx via exactly
// gws (none: no route), with every gateway's port and MAC known.
func (lab *ecmpLab) waitProgrammed(t *testing.T, gws ...netip.Addr) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("route %s via %v in the FE", lab.pfx, gws), func() bool {
		a := lab.agent
		var got []netip.Addr
		done := false
		a.do(func() {
			id, ok := a.prog.routes.get(prefix.FromV4(lab.pfx))
			if !ok {
				done = len(gws) == 0
				return
			}
			members := []*slot{a.prog.slotByID[id]}
			if id >= datapath.GroupIDBase {
				g := a.prog.groupByID[id]
				if g == nil {
					return
				}
				members = g.members
			}
			for _, s := range members {
				if s == nil || s.ifindex == 0 || !a.neighbors.has(s.ifindex, s.gw) {
					return
				}
				got = append(got, s.gw)
			}
			done = true
		})
		if !done || got == nil {
			return done
		}
		slices.SortFunc(got, netip.Addr.Compare)
		return slices.Equal(got, gws)
	})
}

// send sends perFlow frames of each of flows UDP flows from s0 into r0, in
// chunks small enough for the veths' rings (256 frames), each once the
// previous one went through the XDP program of r0 and, if forward, reached
// the gateways: nothing is dropped for want of room, and no sleep guesses
// how long that takes.
func (lab *ecmpLab) send(t *testing.T, phase byte, flows, perFlow int, forward bool) {
	t.Helper()
	const chunk = 64
	start := lab.counters(t)
	n := 0
	for seq := range perFlow {
		for flow := range flows {
			redirSendRaw(t, lab.tx, lab.src.Index, ecmpFrame(lab.r0.HardwareAddr, lab.src.HardwareAddr, phase, uint16(flow), byte(seq)))
			n++
			if n%chunk != 0 && n != flows*perFlow {
				continue
			}
			want := n
			waitUntil(t, fmt.Sprintf("phase %d: %d frames through r0", phase, want), func() bool {
				return lab.counters(t).ports[lab.r0.Index].RxPackets-start.ports[lab.r0.Index].RxPackets >= uint64(want)
			})
			if forward {
				lab.rec.waitCount(t, phase, want)
			}
		}
	}
}

type ecmpCounters struct {
	all   forces.FECounters
	ports map[int]forces.FEPortCounters
}

func (lab *ecmpLab) counters(t *testing.T) ecmpCounters {
	t.Helper()
	st := lab.agent.Status()
	c := ecmpCounters{all: st.Counters, ports: map[int]forces.FEPortCounters{}}
	if c.all == nil {
		t.Fatal("the FE reports no datapath counters")
	}
	for _, p := range st.Ports {
		c.ports[p.Ifindex] = p.Counters
	}
	return c
}

// checkCounters checks the FE's counters since before: n frames came in on
// r0 and were all forwarded out of r1 and r2, or all passed to the kernel.
func (lab *ecmpLab) checkCounters(t *testing.T, before ecmpCounters, n int, forward bool) {
	t.Helper()
	now := lab.counters(t)
	d := func(name string) uint64 { return now.all[name] - before.all[name] }
	port := func(ifi *net.Interface) datapath.PortCounters {
		a, b := now.ports[ifi.Index], before.ports[ifi.Index]
		return datapath.PortCounters{RxPackets: a.RxPackets - b.RxPackets, TxPackets: a.TxPackets - b.TxPackets, Passed: a.Passed - b.Passed}
	}
	r0, r1, r2 := port(lab.r0), port(lab.r1), port(lab.r2)
	want, wantPassed := uint64(n), uint64(0)
	if !forward {
		want, wantPassed = 0, uint64(n)
	}
	if d("rx") != uint64(n) || d("forwarded") != want || r0.RxPackets != uint64(n) || r0.Passed != wantPassed ||
		r1.TxPackets+r2.TxPackets != want || r1.RxPackets+r2.RxPackets != 0 {
		t.Errorf("%d frames sent: FE counters rx %d, forwarded %d, pass_no_route %d; r0 %+v, r1 %+v, r2 %+v; want all %s",
			n, d("rx"), d("forwarded"), d("pass_no_route"), r0, r1, r2, map[bool]string{true: "forwarded", false: "passed"}[forward])
	}
	if !forward && d("pass_no_route") != uint64(n) {
		t.Errorf("withdrawn route: pass_no_route counted %d of %d frames", d("pass_no_route"), n)
	}
}

// ecmpFrame is UDP flow number flow of a phase, from 10.0.0.2 port
// 10000+flow to 203.0.113.(1+flow%254) port 5000; its payload says which.
func ecmpFrame(dst, src net.HardwareAddr, phase byte, flow uint16, seq byte) []byte {
	f := make([]byte, 0, 64)
	f = append(f, dst...)
	f = append(f, src...)
	f = append(f, 0x08, 0x00)
	payload := []byte{'E', 'C', 'M', 'P', phase, byte(flow >> 8), byte(flow), seq}
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, unix.IPPROTO_UDP, 0, 0, 10, 0, 0, 2, 203, 0, 113, byte(1 + flow%254)}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := make([]byte, 8)
	binary.BigEndian.PutUint16(udp[0:], 10000+flow)
	binary.BigEndian.PutUint16(udp[2:], 5000)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	f = append(append(append(f, ip...), udp...), payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

type ecmpKey struct {
	phase byte
	flow  uint16
	seq   byte
	gw    int
}

// ecmpRecorder reads what arrives at the gateways.
type ecmpRecorder struct {
	macs map[int][2]net.HardwareAddr // gateway -> router port MAC, gateway MAC

	mu   sync.Mutex
	seen map[ecmpKey]int
	bad  []string
}

// listen records the test's frames arriving at the gateway gw (1 or 2) on
// ifindex until the test ends.
func (r *ecmpRecorder) listen(t *testing.T, gw, ifindex int) {
	t.Helper()
	fd := redirRawSocket(t, ifindex, unix.ETH_P_IP)
	tv := unix.NsecToTimeval((20 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { close(stop); wg.Wait() }) // before redirRawSocket's close
	go func() {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the receive timeout, to look at stop
			}
			if sll, ok := from.(*unix.SockaddrLinklayer); ok && sll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			r.frame(gw, buf[:n])
		}
	}()
}

func (r *ecmpRecorder) frame(gw int, f []byte) {
	if len(f) < 50 || f[23] != unix.IPPROTO_UDP || !bytes.Equal(f[42:46], []byte("ECMP")) {
		return // not the test's
	}
	k := ecmpKey{phase: f[46], flow: uint16(f[47])<<8 | uint16(f[48]), seq: f[49], gw: gw}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[k]++
	macs := r.macs[gw]
	if !bytes.Equal(f[6:12], macs[0]) || !bytes.Equal(f[0:6], macs[1]) || f[22] != 63 || ipChecksum(f[14:34]) != 0 {
		r.bad = append(r.bad, fmt.Sprintf("gateway %d: % x", gw, f[:34]))
	}
}

func (r *ecmpRecorder) count(phase byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, c := range r.seen {
		if k.phase == phase {
			n += c
		}
	}
	return n
}

func (r *ecmpRecorder) waitCount(t *testing.T, phase byte, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := r.count(phase)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("phase %d: the gateways received %d of %d frames within 5s", phase, got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *ecmpRecorder) badFrames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bad)
}

// flows checks that every frame of the phase arrived exactly once and all
// frames of a flow at the same gateway, and returns the flows by gateway.
func (r *ecmpRecorder) flows(t *testing.T, phase byte, flows, perFlow int) map[int][]uint16 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	gwOf := map[uint16]int{}
	byGW := map[int][]uint16{}
	for flow := range uint16(flows) {
		for seq := range byte(perFlow) {
			var at []int
			for gw := 1; gw <= 2; gw++ {
				for range r.seen[ecmpKey{phase, flow, seq, gw}] {
					at = append(at, gw)
				}
			}
			if len(at) != 1 {
				t.Errorf("phase %d flow %d frame %d arrived at gateways %v, want exactly one", phase, flow, seq, at)
				continue
			}
			if g, ok := gwOf[flow]; !ok {
				gwOf[flow] = at[0]
				byGW[at[0]] = append(byGW[at[0]], flow)
			} else if g != at[0] {
				t.Errorf("phase %d flow %d: frames at gateway %d and %d, want one gateway per flow", phase, flow, g, at[0])
			}
		}
	}
	return byGW
}
