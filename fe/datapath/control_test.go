//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

const xdpDrop = 1 // enum xdp_action

var (
	ap        = netip.MustParseAddrPort
	bgpPeer   = netip.MustParseAddr("192.0.2.7") // a BGP peer of the router
	otherPeer = netip.MustParseAddr("192.0.2.8") // another host
	bgpPeer6  = netip.MustParseAddr("2001:db8:aaaa::7")
	local4    = netip.MustParseAddr("198.51.100.1") // the fixture's local addresses
	local6    = netip.MustParseAddr("2001:db8::1")
	// flow4 and flow6 are BGP sessions the router opened: the peer answers
	// from port 179.
	flow4 = ControlFlow{Src: netip.AddrPortFrom(bgpPeer, 179), Dst: netip.AddrPortFrom(local4, 40001)}
	flow6 = ControlFlow{Src: netip.AddrPortFrom(bgpPeer6, 179), Dst: netip.AddrPortFrom(local6, 40001)}
)

// tcpSegment is a TCP header (ACK) without payload and without checksum
// (withTCPChecksum fills it in).
func tcpSegment(sport, dport uint16) []byte {
	p := make([]byte, 20)
	binary.BigEndian.PutUint16(p[0:], sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	p[12] = 5 << 4
	p[13] = 0x10
	return p
}

// withTCPChecksum fills in the checksum of the TCP segment seg from src to
// dst (IPv4 or IPv6 pseudo-header) and returns seg.
func withTCPChecksum(src, dst netip.Addr, seg []byte) []byte {
	if src.Is6() {
		return withL4Checksum6(src, dst, 6, seg, 16)
	}
	s, d := src.As4(), dst.As4()
	ph := append(append(append([]byte{}, s[:]...), d[:]...), 0, 6)
	ph = binary.BigEndian.AppendUint16(ph, uint16(len(seg)))
	binary.BigEndian.PutUint16(seg[16:], 0)
	binary.BigEndian.PutUint16(seg[16:], ^onesSum(append(ph, seg...)))
	return seg
}

// tcpFrame is a TCP packet from src to dst with TTL (hop limit) ttl and a
// valid checksum.
func tcpFrame(src, dst netip.AddrPort, ttl uint8) []byte {
	seg := withTCPChecksum(src.Addr(), dst.Addr(), tcpSegment(src.Port(), dst.Port()))
	if src.Addr().Is4() {
		return ipFrame(ipv4Header{ttl: ttl, proto: 6, src: src.Addr(), dst: dst.Addr()}, seg)
	}
	return ip6Frame(ipv6Header{nextHeader: 6, hopLimit: ttl, payloadLen: -1, src: src.Addr(), dst: dst.Addr()}, seg)
}

// runWant runs frame, fails unless the program returned want, and returns
// what the counters moved by.
func runWant(t *testing.T, d *Datapath, frame []byte, want uint32) Counters {
	t.Helper()
	before := counters(t, d)
	ret, _ := run(t, d, frame)
	after := counters(t, d)
	if ret != want {
		t.Errorf("returned %d, want %d; moved %s", ret, want, fmtDelta(before, after))
	}
	moved := Counters{}
	for name, v := range after {
		if v != before[name] {
			moved[name] = v - before[name]
		}
	}
	return moved
}

// checkOne runs frame and checks the action and that it counted as rx and
// under reason, and nothing else.
func checkOne(t *testing.T, d *Datapath, frame []byte, want uint32, reason string) {
	t.Helper()
	before := counters(t, d)
	ret, _ := run(t, d, frame)
	if ret != want {
		t.Errorf("returned %d, want %d", ret, want)
	}
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, reason: 1})
}

// pinCPU locks the goroutine to its thread and the thread to cpu, so that
// every prog.Run uses the same per-CPU policer bucket; the returned
// function undoes both.
func pinCPU(t *testing.T, cpu int) func() {
	t.Helper()
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		t.Skipf("cannot run on CPU %d: %v", cpu, err)
	}
	return func() {
		if err := unix.SchedSetaffinity(0, &old); err != nil {
			t.Errorf("restore CPU affinity: %v", err)
		}
		runtime.UnlockOSThread()
	}
}

func TestControlFlows(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, fl := range []ControlFlow{flow4, flow6} {
		if err := d.AddControlFlow(fl); err != nil {
			t.Fatal(err)
		}
	}
	ctl4, ctl6 := tcpFrame(flow4.Src, flow4.Dst, 64), tcpFrame(flow6.Src, flow6.Dst, 64)

	t.Run("no control CPU: pass here", func(t *testing.T) {
		checkPassed(t, d, ctl4, "pass_control")
		checkPassed(t, d, ctl6, "pass_control")
	})

	cpu := ncpu - 1
	if err := d.SetControlCPU(cpu); err != nil {
		t.Fatal(err)
	}
	t.Run("control CPU: redirect", func(t *testing.T) {
		// BPF_PROG_TEST_RUN returns the program's verdict without
		// carrying out the redirect: XDP_REDIRECT, because the
		// CPUMAP entry exists (without one the helper returns XDP_PASS).
		for _, frame := range [][]byte{ctl4, ctl6} {
			in := bytes.Clone(frame)
			before := counters(t, d)
			ret, out := run(t, d, frame)
			if ret != xdpRedirect {
				t.Errorf("returned %d, want XDP_REDIRECT", ret)
			}
			if !bytes.Equal(in, out) {
				t.Errorf("frame modified")
			}
			checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "to_control_cpu": 1})
		}
		var v cpumapVal
		if err := d.objs.CPUMap.Lookup(uint32(cpu), &v); err != nil || v.Qsize != ControlQueueSize || v.ProgFD <= 0 {
			t.Errorf("cpu_map[%d] = %+v, %v; want queue size %d and xdp_control", cpu, v, err, ControlQueueSize)
		}
	})

	t.Run("not the control flow: pass_local", func(t *testing.T) {
		for name, frame := range map[string][]byte{
			"other source port":      tcpFrame(ap("192.0.2.7:180"), flow4.Dst, 64),
			"other destination port": tcpFrame(flow4.Src, ap("198.51.100.1:40002"), 64),
			"other peer":             tcpFrame(netip.AddrPortFrom(otherPeer, 179), flow4.Dst, 64),
			"ports swapped":          tcpFrame(ap("192.0.2.7:40001"), ap("198.51.100.1:179"), 64),
			"UDP with the same ports": ipFrame(ipv4Header{ttl: 64, proto: 17, src: bgpPeer, dst: local4},
				tcpSegment(179, 40001)[:8]),
			"later fragment":           ipFrame(ipv4Header{ttl: 64, proto: 6, fragOff: 1, src: bgpPeer, dst: local4}, tcpSegment(179, 40001)),
			"IPv6 other port":          tcpFrame(flow6.Src, ap("[2001:db8::1]:40002"), 64),
			"IPv6 other local address": tcpFrame(flow6.Src, ap("[2001:db8:3::1]:40001"), 64),
		} {
			t.Run(name, func(t *testing.T) { checkPassed(t, d, frame, "pass_local") })
		}
	})

	t.Run("IP options and Hop-by-Hop still match", func(t *testing.T) {
		opts := ipFrame(ipv4Header{ihl: 6, ttl: 64, proto: 6, src: bgpPeer, dst: local4},
			withTCPChecksum(bgpPeer, local4, tcpSegment(179, 40001)))
		checkOne(t, d, opts, xdpRedirect, "to_control_cpu")
		hbh := ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 64, payloadLen: -1, src: bgpPeer6, dst: local6},
			append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, withTCPChecksum(bgpPeer6, local6, tcpSegment(179, 40001))...))
		checkOne(t, d, hbh, xdpRedirect, "to_control_cpu")
	})

	t.Run("per-flow counts and port counters", func(t *testing.T) {
		flows, counts, err := d.ControlFlows()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(flows, []ControlFlow{flow4, flow6}) {
			t.Errorf("flows %v, want %v", flows, []ControlFlow{flow4, flow6})
		}
		// Each: once passed, once redirected, once with options / HBH.
		if counts[flow4] != (FlowCounts{Packets: 3}) || counts[flow6] != (FlowCounts{Packets: 3}) {
			t.Errorf("counts %v, want 3 each", counts)
		}
		// Without a context, BPF_PROG_TEST_RUN runs on lo, the fixture's
		// port: redirected control packets count as passed.
		pc := portCounters(t, d)[f.lo]
		c := counters(t, d)
		if pc.RxPackets != c["rx"] || pc.Passed != c["rx"] || pc.Dropped != 0 {
			t.Errorf("port counters %+v, want rx = passed = %d", pc, c["rx"])
		}
	})

	t.Run("idempotent add, delete, ErrNotFound", func(t *testing.T) {
		if err := d.AddControlFlow(flow4); err != nil {
			t.Fatal(err)
		}
		if _, counts, _ := d.ControlFlows(); counts[flow4].Packets != 3 {
			t.Errorf("count after adding again: %+v, want 3", counts[flow4])
		}
		if err := d.DeleteControlFlow(flow4); err != nil {
			t.Fatal(err)
		}
		if err := d.DeleteControlFlow(flow4); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting a missing flow: %v, want ErrNotFound", err)
		}
		checkPassed(t, d, ctl4, "pass_local")
		checkOne(t, d, ctl6, xdpRedirect, "to_control_cpu")
	})

	t.Run("move and remove the control CPU", func(t *testing.T) {
		if err := d.SetControlCPU(0); err != nil {
			t.Fatal(err)
		}
		checkOne(t, d, ctl6, xdpRedirect, "to_control_cpu")
		if cpu != 0 {
			if err := d.objs.CPUMap.Lookup(uint32(cpu), new(cpumapVal)); err == nil {
				t.Errorf("cpu_map[%d] still set after moving to CPU 0", cpu)
			}
		}
		if err := d.SetControlCPU(-1); err != nil {
			t.Fatal(err)
		}
		if err := d.objs.CPUMap.Lookup(uint32(0), new(cpumapVal)); err == nil {
			t.Errorf("cpu_map[0] still set after SetControlCPU(-1)")
		}
		checkPassed(t, d, ctl6, "pass_control")
	})
}

func TestPolicer(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	if err := d.AddControlFlow(flow4); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	udp := ipFrame(ipv4Header{ttl: 64, proto: 17, src: otherPeer, dst: local4}, udpPayload(8))
	ping := ipFrame(ipv4Header{ttl: 64, proto: 1, src: otherPeer, dst: local4}, icmpEcho(8))
	udp6 := udp6Frame("2001:db8::1", 64)
	arp := ethFrame(macBcast, macPeer, 0x0806, append([]byte{0, 1, 8, 0, 6, 4, 0, 1}, make([]byte, 20)...))
	// A neighbour solicitation from a global address to the router's
	// address (NUD), and a router solicitation.
	nd := func(typ uint8) []byte {
		l4 := make([]byte, 24)
		l4[0] = typ
		t6 := local6.As16()
		copy(l4[8:], t6[:])
		withL4Checksum6(testSrcAddr6, local6, nhICMPv6, l4, 2)
		return ip6Frame(ipv6Header{nextHeader: nhICMPv6, hopLimit: 255, payloadLen: -1, dst: local6}, l4)
	}
	forward := udpFrame("198.51.100.77", 64)

	t.Run("rate 0 polices nothing", func(t *testing.T) {
		for range 100 {
			checkPassed(t, d, udp, "pass_local")
		}
	})

	const burst = 4
	if err := d.SetPolicer(1, burst); err != nil {
		t.Fatal(err)
	}
	// At one packet per second, the bucket gains a token per second: the
	// packets below take microseconds, so the counts are exact.
	defer pinCPU(t, 0)()
	start := time.Now()
	frames := [][]byte{udp, ping, udp6, udp}
	for i := range burst {
		checkPassed(t, d, frames[i], "pass_local")
	}
	// With the bucket empty, ARP and NDP still pass (a bucket of their
	// own), control flows pass unpoliced, and forwarding is untouched.
	// (No subtests while pinned: they run on other goroutines, which are
	// not.)
	checkPassed(t, d, arp, "pass_not_ipv4")
	checkPassed(t, d, nd(135), "pass_local")
	checkPassed(t, d, nd(136), "pass_local")
	checkPassed(t, d, nd(133), "pass_local")
	for range 10 {
		checkOne(t, d, tcpFrame(flow4.Src, flow4.Dst, 64), xdpRedirect, "to_control_cpu")
		in := bytes.Clone(forward)
		ret, out := run(t, d, forward)
		if ret != xdpRedirect {
			t.Fatalf("forwarding: returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded(t, in, out, macNeigh1, macSrc1)
	}
	for _, frame := range [][]byte{udp, ping, udp6, tcpFrame(ap("192.0.2.7:180"), flow4.Dst, 64)} {
		checkOne(t, d, frame, xdpDrop, "drop_policed")
	}
	if el := time.Since(start); el >= time.Second {
		t.Fatalf("the sequence took %v, more than a token's interval: counts are not exact", el)
	}
	perCPU, err := d.CPUCounters()
	if err != nil {
		t.Fatal(err)
	}
	if perCPU[0]["drop_policed"] != 4 {
		t.Errorf("CPU 0 dropped %d, want 4 (the bucket is per CPU)", perCPU[0]["drop_policed"])
	}
	// ARP and NDP have used their burst up now, and are policed.
	if moved := runWant(t, d, arp, xdpDrop); !maps.Equal(moved, Counters{"rx": 1, "pass_not_ipv4": 1, "drop_policed_arp_nd": 1}) {
		t.Errorf("ARP over the burst moved %v", moved)
	}
	if moved := runWant(t, d, nd(135), xdpDrop); !maps.Equal(moved, Counters{"rx": 1, "pass_local": 1, "drop_policed_arp_nd": 1}) {
		t.Errorf("NDP over the burst moved %v", moved)
	}
	if pc := portCounters(t, d)[f.lo]; pc.Dropped != 6 {
		t.Errorf("port counters %+v, want 6 dropped", pc)
	}

	// After a second at least one token has come back, and never more
	// than the burst.
	time.Sleep(1100 * time.Millisecond)
	passed := 0
	for {
		if ret, _ := run(t, d, udp); ret == xdpDrop {
			break
		}
		passed++
		if passed > burst {
			t.Fatalf("after the refill, more than the burst (%d) passed", burst)
		}
	}
	if passed < 1 {
		t.Errorf("no packet passed after a second at one per second")
	}

	t.Run("another CPU has its own bucket", func(t *testing.T) {
		ncpu, err := ebpf.PossibleCPU()
		if err != nil || ncpu < 2 {
			t.Skip("one CPU")
		}
		defer pinCPU(t, 1)()
		for range burst {
			checkPassed(t, d, udp, "pass_local")
		}
		checkOne(t, d, udp, xdpDrop, "drop_policed")
	})

	t.Run("SetPolicer refills and rate 0 turns it off", func(t *testing.T) {
		defer pinCPU(t, 0)()
		if err := d.SetPolicer(1, 1); err != nil {
			t.Fatal(err)
		}
		checkPassed(t, d, udp, "pass_local")
		checkOne(t, d, udp, xdpDrop, "drop_policed")
		if err := d.SetPolicer(0, 0); err != nil {
			t.Fatal(err)
		}
		checkPassed(t, d, udp, "pass_local")
	})
}

func TestGTSM(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	for _, p := range []netip.Addr{bgpPeer, bgpPeer6} {
		if err := d.SetGTSM(p, true); err != nil {
			t.Fatal(err)
		}
	}
	// GTSM comes before the control flows.
	if err := d.AddControlFlow(flow4); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	passive := netip.AddrPortFrom(local4, 179) // the peer connected to us
	passive6 := netip.AddrPortFrom(local6, 179)
	from := func(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }
	destOpts := func(next uint8) []byte { return []byte{next, 0, 1, 4, 0, 0, 0, 0} }
	ip6 := func(first uint8, hop uint8, payload ...[]byte) []byte {
		return ip6Frame(ipv6Header{nextHeader: first, hopLimit: hop, payloadLen: -1, src: bgpPeer6, dst: local6}, bytes.Join(payload, nil))
	}

	for _, tc := range []struct {
		name   string
		frame  []byte
		ret    uint32
		reason string
	}{
		{"to port 179, TTL 254", tcpFrame(from(bgpPeer, 40000), passive, 254), xdpDrop, "drop_gtsm"},
		{"to port 179, TTL 1", tcpFrame(from(bgpPeer, 40000), passive, 1), xdpDrop, "drop_gtsm"},
		{"to port 179, TTL 255", tcpFrame(from(bgpPeer, 40000), passive, 255), xdpPass, "pass_local"},
		{"control flow from port 179, TTL 254", tcpFrame(flow4.Src, flow4.Dst, 254), xdpDrop, "drop_gtsm"},
		{"control flow from port 179, TTL 255", tcpFrame(flow4.Src, flow4.Dst, 255), xdpRedirect, "to_control_cpu"},
		{"other peer, TTL 254", tcpFrame(from(otherPeer, 40000), passive, 254), xdpPass, "pass_local"},
		{"other port, TTL 64", tcpFrame(from(bgpPeer, 40000), ap("198.51.100.1:22"), 64), xdpPass, "pass_local"},
		{"UDP to port 179, TTL 64", ipFrame(ipv4Header{ttl: 64, proto: 17, src: bgpPeer, dst: local4}, tcpSegment(40000, 179)[:8]), xdpPass, "pass_local"},
		{"ping, TTL 64", ipFrame(ipv4Header{ttl: 64, proto: 1, src: bgpPeer, dst: local4}, icmpEcho(8)), xdpPass, "pass_local"},
		{"IP options, TTL 254", ipFrame(ipv4Header{ihl: 6, ttl: 254, proto: 6, src: bgpPeer, dst: local4}, tcpSegment(40000, 179)), xdpDrop, "drop_gtsm"},
		{"first fragment too short for ports, TTL 254", ipFrame(ipv4Header{ttl: 254, proto: 6, fragOff: 0x2000, src: bgpPeer, dst: local4}, []byte{0x9c, 0x40}), xdpDrop, "drop_gtsm"},
		{"later fragment, TTL 254", ipFrame(ipv4Header{ttl: 254, proto: 6, fragOff: 3, src: bgpPeer, dst: local4}, make([]byte, 16)), xdpPass, "pass_local"},
		{"forwarded, not for us, TTL 64", tcpFrame(from(bgpPeer, 40000), ap("198.51.100.77:179"), 64), xdpRedirect, "forwarded"},

		{"IPv6 to port 179, hop limit 254", tcpFrame(from(bgpPeer6, 40000), passive6, 254), xdpDrop, "drop_gtsm"},
		{"IPv6 to port 179, hop limit 255", tcpFrame(from(bgpPeer6, 40000), passive6, 255), xdpPass, "pass_local"},
		{"IPv6 other peer, hop limit 254", tcpFrame(ap("[2001:db8:aaaa::8]:40000"), passive6, 254), xdpPass, "pass_local"},
		{"IPv6 behind destination options, hop limit 254", ip6(60, 254, destOpts(6), tcpSegment(40000, 179)), xdpDrop, "drop_gtsm"},
		{"IPv6 behind Hop-by-Hop, hop limit 254", ip6(nhHopByHop, 254, destOpts(6), tcpSegment(40000, 179)), xdpDrop, "drop_gtsm"},
		{"IPv6 first fragment, hop limit 254", ip6(nhFragment, 254, []byte{6, 0, 0, 1, 0, 0, 0, 7}, tcpSegment(40000, 179)), xdpDrop, "drop_gtsm"},
		{"IPv6 later fragment, hop limit 254", ip6(nhFragment, 254, []byte{6, 0, 0x05, 0x00, 0, 0, 0, 7}, make([]byte, 16)), xdpPass, "pass_local"},
		{"IPv6 five extension headers, hop limit 254", ip6(60, 254, destOpts(60), destOpts(60), destOpts(60), destOpts(60), destOpts(6), tcpSegment(40000, 80)), xdpDrop, "drop_gtsm"},
		{"IPv6 five extension headers, other port, hop limit 255", ip6(60, 255, destOpts(60), destOpts(60), destOpts(60), destOpts(60), destOpts(6), tcpSegment(40000, 80)), xdpPass, "pass_local"},
		{"IPv6 behind destination options, other port", ip6(60, 254, destOpts(6), tcpSegment(40000, 80)), xdpPass, "pass_local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moved := runWant(t, d, tc.frame, tc.ret)
			if moved["rx"] != 1 || moved[tc.reason] != 1 {
				t.Errorf("moved %v, want rx and %s", moved, tc.reason)
			}
		})
	}

	t.Run("off", func(t *testing.T) {
		for range 2 { // twice: idempotent
			if err := d.SetGTSM(bgpPeer, false); err != nil {
				t.Fatal(err)
			}
		}
		checkPassed(t, d, tcpFrame(from(bgpPeer, 40000), passive, 254), "pass_local")
		checkOne(t, d, tcpFrame(from(bgpPeer6, 40000), passive6, 254), xdpDrop, "drop_gtsm")
	})
}

// TestForwardUnaffected sets every protection up and checks that
// forwarded packets of both families, including ones that match a
// control flow's ports and come from a GTSM peer with a low TTL, are
// forwarded exactly as before.
func TestForwardUnaffected(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.SetControlCPU(0))
	must(d.SetPolicer(1, 1))
	must(d.SetGTSM(bgpPeer, true))
	must(d.SetGTSM(bgpPeer6, true))
	// Flows whose router end is not a local address: not for us.
	must(d.AddControlFlow(ControlFlow{Src: flow4.Src, Dst: ap("198.51.100.77:40001")}))
	must(d.AddControlFlow(ControlFlow{Src: flow6.Src, Dst: ap("[2001:db8:1::9]:40001")}))
	for range 3 {
		in := tcpFrame(flow4.Src, ap("198.51.100.77:40001"), 64)
		before := counters(t, d)
		ret, out := run(t, d, bytes.Clone(in))
		if ret != xdpRedirect {
			t.Fatalf("returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded(t, in, out, macNeigh1, macSrc1)
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in))})

		in = tcpFrame(flow6.Src, ap("[2001:db8:1::9]:40001"), 64)
		before = counters(t, d)
		ret, out = run(t, d, bytes.Clone(in))
		if ret != xdpRedirect {
			t.Fatalf("IPv6: returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded6(t, in, out, macNeigh2, macSrc2)
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_ipv6": 1, "forwarded_bytes": uint64(len(in))})
	}
	if _, counts, err := d.ControlFlows(); err != nil || counts[ControlFlow{Src: flow4.Src, Dst: ap("198.51.100.77:40001")}] != (FlowCounts{}) {
		t.Errorf("a forwarded packet counted for a control flow: %v %v", counts, err)
	}
}

// TestControlValidation needs no kernel: bad input is rejected before any
// map is touched.
func TestControlValidation(t *testing.T) {
	var d Datapath
	v4 := ap("192.0.2.1:179")
	v6 := ap("[2001:db8::1]:179")
	for _, tc := range []struct {
		name    string
		err     error
		mention string
	}{
		{"SetControlCPU -2", d.SetControlCPU(-2), "CPU -2"},
		{"SetControlCPU too large", d.SetControlCPU(1 << 20), "CPU 1048576"},
		{"SetPolicer burst 0", d.SetPolicer(100, 0), "burst 0"},
		{"SetPolicer burst too large", d.SetPolicer(100, MaxPoliceBurst+1), "burst 1073741825"},
		{"SetPolicer rate too large", d.SetPolicer(MaxPoliceRate+1, 1), "rate 1000000001"},
		{"AddControlFlow mixed families", d.AddControlFlow(ControlFlow{Src: v4, Dst: v6}), "mixes IPv4 and IPv6"},
		{"AddControlFlow zero", d.AddControlFlow(ControlFlow{}), "source invalid IP"},
		{"AddControlFlow 4in6", d.AddControlFlow(ControlFlow{Src: ap("[::ffff:192.0.2.1]:179"), Dst: v6}), "source ::ffff:192.0.2.1"},
		{"AddControlFlow zone", d.AddControlFlow(ControlFlow{Src: v6, Dst: ap("[fe80::1%eth0]:179")}), "destination fe80::1%eth0"},
		{"AddControlFlow port 0", d.AddControlFlow(ControlFlow{Src: v4, Dst: ap("192.0.2.2:0")}), "port 0"},
		{"DeleteControlFlow invalid", d.DeleteControlFlow(ControlFlow{Src: v4}), "destination invalid IP"},
		{"SetGTSM invalid", d.SetGTSM(netip.Addr{}, true), "GTSM peer invalid IP"},
		{"SetGTSM 4in6", d.SetGTSM(netip.MustParseAddr("::ffff:192.0.2.1"), false), "GTSM peer ::ffff:192.0.2.1"},
	} {
		if !errors.Is(tc.err, ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", tc.name, tc.err)
			continue
		}
		if !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s: error %q does not mention %q", tc.name, tc.err, tc.mention)
		}
	}
}

// TestControlCounterNames checks that the protection counters came after
// the older ones, whose indices keep their meaning.
func TestControlCounterNames(t *testing.T) {
	names := CounterNames()
	if names[16] != "pass_not_routable" {
		t.Errorf("counter 16 is %q, want pass_not_routable", names[16])
	}
	want := []string{"to_control_cpu", "pass_control", "drop_policed", "drop_gtsm", "control_cpu_rx", "to_fe_cpu"}
	if got := names[17 : 17+len(want)]; !slices.Equal(got, want) {
		t.Errorf("counters after pass_not_routable: %v, want %v", got, want)
	}
}

// BenchmarkXDPForUs reports the cost of packets for the router (kernel-timed,
// as BenchmarkXDPForward): a plain one with and without the policer, and a
// control flow redirected to the control CPU (BPF_PROG_TEST_RUN returns the
// verdict without carrying the redirect out).
func BenchmarkXDPForUs(b *testing.B) {
	f := benchFixture(b)
	if err := f.d.AddControlFlow(flow4); err != nil {
		b.Fatal(err)
	}
	udp := ipFrame(ipv4Header{ttl: 64, proto: 17, src: otherPeer, dst: local4}, udpPayload(18))
	b.Run("local", func(b *testing.B) { benchRun(b, f.d, udp, xdpPass) })
	b.Run("local-policed", func(b *testing.B) {
		if err := f.d.SetPolicer(MaxPoliceRate, MaxPoliceBurst); err != nil {
			b.Fatal(err)
		}
		defer f.d.SetPolicer(0, 0)
		benchRun(b, f.d, udp, xdpPass)
	})
	b.Run("control-flow", func(b *testing.B) {
		if err := f.d.SetControlCPU(0); err != nil {
			b.Fatal(err)
		}
		benchRun(b, f.d, tcpFrame(flow4.Src, flow4.Dst, 64), xdpRedirect)
	})
	// A full-size segment: what the checksum check before steering costs
	// grows with the payload it sums.
	b.Run("control-flow-1460", func(b *testing.B) {
		if err := f.d.SetControlCPU(0); err != nil {
			b.Fatal(err)
		}
		seg := append(tcpSegment(flow4.Src.Port(), flow4.Dst.Port()), make([]byte, 1460)...)
		frame := ipFrame(ipv4Header{ttl: 64, proto: 6, src: flow4.Src.Addr(), dst: flow4.Dst.Addr()},
			withTCPChecksum(flow4.Src.Addr(), flow4.Dst.Addr(), seg))
		benchRun(b, f.d, frame, xdpRedirect)
	})
}

// A control flow's packet is steered to the control CPU only when its TCP
// checksum is right: a packet redirected through the CPUMAP is rebuilt
// there as an skb whose checksum the kernel checks in full, so one that a
// veth sender left partial (CHECKSUM_PARTIAL: the field holds only the
// pseudo-header's sum) would be lost. Such a packet passes where it
// arrived, unmodified, and counts as pass_steer_bad_csum.
func TestSteerChecksum(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	for _, fl := range []ControlFlow{flow4, flow6} {
		if err := d.AddControlFlow(fl); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	// segment is a TCP segment of fl with n bytes of payload and a valid
	// checksum.
	segment := func(fl ControlFlow, n int) []byte {
		seg := tcpSegment(fl.Src.Port(), fl.Dst.Port())
		for i := range n {
			seg = append(seg, byte(i*7+n))
		}
		return withTCPChecksum(fl.Src.Addr(), fl.Dst.Addr(), seg)
	}
	frame := func(fl ControlFlow, seg []byte) []byte {
		if fl.Src.Addr().Is4() {
			return ipFrame(ipv4Header{ttl: 64, proto: 6, src: fl.Src.Addr(), dst: fl.Dst.Addr()}, seg)
		}
		return ip6Frame(ipv6Header{nextHeader: 6, hopLimit: 64, payloadLen: -1, src: fl.Src.Addr(), dst: fl.Dst.Addr()}, seg)
	}
	for _, fl := range []ControlFlow{flow4, flow6} {
		family := "IPv4"
		if fl.Src.Addr().Is6() {
			family = "IPv6"
		}
		t.Run(family+" valid: steered", func(t *testing.T) {
			// Every tail the program sums piecewise (256-byte chunks,
			// then 128 down to 1), and a full-size segment.
			for _, n := range []int{0, 1, 2, 3, 4, 5, 19, 63, 127, 255, 256, 257, 511, 512, 1023, 1400, 1460} {
				checkOne(t, d, frame(fl, segment(fl, n)), xdpRedirect, "to_control_cpu")
			}
		})
		t.Run(family+" partial checksum: passed here", func(t *testing.T) {
			for _, n := range []int{0, 1, 37, 1460} {
				seg := segment(fl, n)
				// What a sender that offloads the checksum leaves in
				// the field: the pseudo-header's sum only.
				var ph []byte
				if fl.Src.Addr().Is4() {
					s, dd := fl.Src.Addr().As4(), fl.Dst.Addr().As4()
					ph = append(append(append(ph, s[:]...), dd[:]...), 0, 6)
					ph = binary.BigEndian.AppendUint16(ph, uint16(len(seg)))
				} else {
					s, dd := fl.Src.Addr().As16(), fl.Dst.Addr().As16()
					ph = append(append(ph, s[:]...), dd[:]...)
					ph = binary.BigEndian.AppendUint32(ph, uint32(len(seg)))
					ph = append(ph, 0, 0, 0, 6)
				}
				binary.BigEndian.PutUint16(seg[16:], onesSum(ph))
				checkPassed(t, d, frame(fl, seg), "pass_steer_bad_csum")
			}
		})
		t.Run(family+" corrupted payload: passed here", func(t *testing.T) {
			seg := segment(fl, 100)
			seg[60] ^= 0x40
			checkPassed(t, d, frame(fl, seg), "pass_steer_bad_csum")
		})
	}
	t.Run("Ethernet padding after the packet is not summed", func(t *testing.T) {
		fr := frame(flow4, segment(flow4, 0)) // 54 bytes
		fr = append(fr, 0xde, 0xad, 0xbe, 0xef, 0xaa, 0x55)
		checkOne(t, d, fr, xdpRedirect, "to_control_cpu")
	})
	t.Run("behind IPv6 extension headers", func(t *testing.T) {
		seg := segment(flow6, 33)
		fr := ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 64, payloadLen: -1, src: bgpPeer6, dst: local6},
			append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, seg...))
		checkOne(t, d, fr, xdpRedirect, "to_control_cpu")
		seg[25] ^= 1
		fr = ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 64, payloadLen: -1, src: bgpPeer6, dst: local6},
			append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, seg...))
		checkPassed(t, d, fr, "pass_steer_bad_csum")
	})
	t.Run("per-flow counts include the unsteered packets", func(t *testing.T) {
		_, counts, err := d.ControlFlows()
		if err != nil {
			t.Fatal(err)
		}
		// 17 valid + 4 partial + 1 corrupted each, plus padding (IPv4)
		// and extension headers (IPv6, 2); of them, the partial and
		// corrupted ones (and one behind extension headers) were passed
		// for their checksum, on their own flow.
		if want := (FlowCounts{Packets: 23, BadChecksum: 5}); counts[flow4] != want {
			t.Errorf("%s: %+v, want %+v", flow4, counts[flow4], want)
		}
		if want := (FlowCounts{Packets: 24, BadChecksum: 6}); counts[flow6] != want {
			t.Errorf("%s: %+v, want %+v", flow6, counts[flow6], want)
		}
	})
	t.Run("no control CPU: no check, passed as before", func(t *testing.T) {
		if err := d.SetControlCPU(-1); err != nil {
			t.Fatal(err)
		}
		seg := segment(flow4, 10)
		seg[25] ^= 1
		checkPassed(t, d, frame(flow4, seg), "pass_control")
	})
}

// TestPolicerClasses: everything the program hands to the kernel is
// policed, each class in a bucket of its own, so that a flood of expiring
// TTLs, of IP options or of unroutable packets reaches the kernel at the
// configured rate and starves neither the others nor the router's own
// traffic; a learned control flow is never policed.
func TestPolicerClasses(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	if err := d.AddControlFlow(flow4); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	const burst = 3
	if err := d.SetPolicer(1, burst); err != nil {
		t.Fatal(err)
	}
	defer pinCPU(t, 0)()
	start := time.Now()
	ttl4 := udpFrame("198.51.100.77", 1)
	ttl6 := udp6Frame("2001:db8:1::77", 1)
	options := ipFrame(ipv4Header{ihl: 6, ttl: 64, proto: 17, dst: netip.MustParseAddr("198.51.100.77")}, udpPayload(8))
	noRoute := udp6Frame("2400:cb00::1", 64)
	udp := ipFrame(ipv4Header{ttl: 64, proto: 17, src: otherPeer, dst: local4}, udpPayload(8))
	for _, tc := range []struct {
		name, class string
		frames      [][]byte // burst of them pass, then each is dropped
		reasons     []string
	}{
		{"TTL expiry and options", "drop_policed_ttl_options", [][]byte{ttl4, ttl6, options}, []string{"pass_ttl", "pass_ttl", "pass_options"}},
		{"no route", "drop_policed_other", [][]byte{noRoute, noRoute, noRoute}, []string{"pass_no_route", "pass_no_route", "pass_no_route"}},
		{"for the router", "drop_policed", [][]byte{udp, udp, udp}, []string{"pass_local", "pass_local", "pass_local"}},
	} {
		for i, fr := range tc.frames {
			checkPassed(t, d, fr, tc.reasons[i])
		}
		for i, fr := range tc.frames {
			want := Counters{"rx": 1, tc.class: 1}
			if tc.class != "drop_policed" {
				want[tc.reasons[i]] = 1 // counted as passed, then dropped
			}
			if moved := runWant(t, d, fr, xdpDrop); !maps.Equal(moved, want) {
				t.Errorf("%s, packet %d over the burst: moved %v, want %v", tc.name, i, moved, want)
			}
		}
		// The control flow is not policed whatever the other classes do.
		checkOne(t, d, tcpFrame(flow4.Src, flow4.Dst, 64), xdpRedirect, "to_control_cpu")
	}
	if el := time.Since(start); el >= time.Second {
		t.Fatalf("the sequence took %v, more than a token's interval: counts are not exact", el)
	}
	if err := d.SetPolicer(0, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 * burst {
		checkPassed(t, d, ttl4, "pass_ttl")
		checkPassed(t, d, noRoute, "pass_no_route")
	}
}
