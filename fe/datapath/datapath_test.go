//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// XDP action codes (enum xdp_action).
const (
	xdpPass     = 2
	xdpRedirect = 4
)

func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: loads BPF programs and runs them with BPF_PROG_TEST_RUN")
	}
}

func loadForTest(tb testing.TB, opts loadOptions) *Datapath {
	tb.Helper()
	needRoot(tb)
	d, err := load(opts)
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return d
}

// --- fixture ----------------------------------------------------------

// fixture is a loaded datapath with routes that exercise every branch.
// Its egress port is lo, which is enough for bpf_redirect_map to return
// XDP_REDIRECT under BPF_PROG_TEST_RUN.
type fixture struct {
	d  *Datapath
	lo int
}

const missingPort = 4242 // an ifindex that is not in tx_ports

func newFixture(tb testing.TB, opts loadOptions) *fixture {
	tb.Helper()
	d := loadForTest(tb, opts)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		tb.Fatalf("lo: %v", err)
	}
	f := &fixture{d: d, lo: lo.Index}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(d.addTxPort(f.lo))
	gw := netip.MustParseAddr
	must(d.SetNexthop(1, Nexthop{Ifindex: f.lo, Gateway: gw("10.0.0.1"), SrcMAC: macSrc1}))
	must(d.SetNexthop(2, Nexthop{Ifindex: f.lo, Gateway: gw("10.0.0.2"), SrcMAC: macSrc2}))
	must(d.SetNexthop(3, Nexthop{Ifindex: f.lo, SrcMAC: macSrc3})) // connected
	// 4 stays empty.
	must(d.SetNexthop(5, Nexthop{Ifindex: f.lo, Gateway: gw("10.0.0.5"), SrcMAC: macSrc1})) // no neighbour
	must(d.SetNexthop(6, Nexthop{Ifindex: missingPort, Gateway: gw("10.0.0.6"), SrcMAC: macSrc1}))
	must(d.SetNeighbor(f.lo, gw("10.0.0.1"), macNeigh1))
	must(d.SetNeighbor(f.lo, gw("10.0.0.2"), macNeigh2))
	must(d.SetNeighbor(f.lo, gw("198.18.3.7"), macNeigh3)) // on the connected route
	must(d.SetNeighbor(missingPort, gw("10.0.0.6"), macNeigh6))
	for p, nh := range map[string]uint32{
		"203.0.0.0/16":    1,
		"203.0.113.0/24":  2, // more specific than the /16
		"198.51.100.0/24": 1,
		"198.18.3.0/24":   3,
		"100.64.4.0/24":   4,
		"100.64.5.0/24":   5,
		"100.64.6.0/24":   6,
	} {
		must(d.SetRoute(netip.MustParsePrefix(p), nh))
	}
	must(d.SetLocalAddr(gw("198.51.100.1")))
	return f
}

// --- tests: forwarding ------------------------------------------------

// checkPassed runs frame and checks that it went to the kernel unmodified,
// counted once in rx and once under reason.
func checkPassed(t *testing.T, d *Datapath, frame []byte, reason string) {
	t.Helper()
	in := bytes.Clone(frame)
	before := counters(t, d)
	ret, out := run(t, d, frame)
	if ret != xdpPass {
		t.Errorf("returned %d, want XDP_PASS (%d)", ret, xdpPass)
	}
	if !bytes.Equal(out, in) {
		t.Errorf("frame modified:\n in % x\nout % x", in, out)
	}
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, reason: 1})
}

// checkEthernet checks that out is in with its MACs rewritten to dmac/smac:
// same length and EtherType.
func checkEthernet(tb testing.TB, in, out []byte, dmac, smac net.HardwareAddr) {
	tb.Helper()
	if len(out) != len(in) {
		tb.Fatalf("output is %d bytes, input %d", len(out), len(in))
	}
	if !bytes.Equal(out[0:6], dmac) {
		tb.Errorf("dst MAC %s, want %s", net.HardwareAddr(out[0:6]), dmac)
	}
	if !bytes.Equal(out[6:12], smac) {
		tb.Errorf("src MAC %s, want %s", net.HardwareAddr(out[6:12]), smac)
	}
	if !bytes.Equal(out[12:14], in[12:14]) {
		tb.Errorf("ethertype changed: % x -> % x", in[12:14], out[12:14])
	}
}

// checkForwarded checks that out is in rewritten for dmac/smac with the TTL
// decremented and a valid checksum, and nothing else changed.
func checkForwarded(tb testing.TB, in, out []byte, dmac, smac net.HardwareAddr) {
	tb.Helper()
	checkEthernet(tb, in, out, dmac, smac)
	ipIn, ipOut := in[14:34], out[14:34]
	if ipOut[8] != ipIn[8]-1 {
		tb.Errorf("TTL %d, want %d", ipOut[8], ipIn[8]-1)
	}
	if sum := onesSum(ipOut); sum != 0xffff {
		tb.Errorf("IPv4 header checksum invalid: header % x sums to %#04x (input checksum %#04x)",
			ipOut, sum, binary.BigEndian.Uint16(ipIn[10:]))
	}
	for i := range ipIn {
		if i == 8 || i == 10 || i == 11 {
			continue // TTL and checksum
		}
		if ipIn[i] != ipOut[i] {
			tb.Errorf("IPv4 header byte %d changed: %#02x -> %#02x", i, ipIn[i], ipOut[i])
		}
	}
	if !bytes.Equal(out[34:], in[34:]) {
		tb.Errorf("payload changed:\n in % x\nout % x", in[34:], out[34:])
	}
}

func TestForward(t *testing.T) {
	f := newFixture(t, loadOptions{})
	padded := ipFrame(ipv4Header{ttl: 64, proto: 1, dst: netip.MustParseAddr("203.0.113.9")}, icmpEcho(0))
	padded = append(padded, make([]byte, 60-len(padded))...) // Ethernet minimum, tot_len < frame
	for _, tc := range []struct {
		name       string
		frame      []byte
		dmac, smac net.HardwareAddr
	}{
		{"udp via gateway", udpFrame("198.51.100.77", 64), macNeigh1, macSrc1},
		{"icmp via gateway", ipFrame(ipv4Header{ttl: 2, proto: 1, dst: netip.MustParseAddr("198.51.100.3")}, icmpEcho(56)), macNeigh1, macSrc1},
		{"udp ttl 255", udpFrame("198.51.100.77", 255), macNeigh1, macSrc1},
		{"connected route uses the destination's neighbour", udpFrame("198.18.3.7", 30), macNeigh3, macSrc3},
		{"longest prefix /24 wins over /16", udpFrame("203.0.113.200", 64), macNeigh2, macSrc2},
		{"/16 outside the /24", udpFrame("203.0.114.1", 64), macNeigh1, macSrc1},
		{"ethernet padding after tot_len", padded, macNeigh2, macSrc2},
		{"fragment", ipFrame(ipv4Header{ttl: 9, proto: 17, fragOff: 0x2000, dst: netip.MustParseAddr("203.0.113.1")}, udpPayload(100)), macNeigh2, macSrc2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.frame)
			before := counters(t, f.d)
			ret, out := run(t, f.d, tc.frame)
			if ret != xdpRedirect {
				t.Fatalf("returned %d, want XDP_REDIRECT (%d); counters %v", ret, xdpRedirect, counters(t, f.d))
			}
			checkForwarded(t, in, out, tc.dmac, tc.smac)
			checkDelta(t, before, counters(t, f.d), map[string]uint64{
				"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in)),
			})
		})
	}
}

// TestForwardChecksumRandom forwards many random headers and verifies the
// incrementally updated checksum by summing the whole header again. Every
// fourth header is forced to have 0xff in the checksum byte the TTL change
// carries into, to exercise the end-around carry.
func TestForwardChecksumRandom(t *testing.T) {
	f := newFixture(t, loadOptions{})
	seed := uint64(os.Getpid())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dsts := []struct {
		prefix     [3]byte
		dmac, smac net.HardwareAddr
	}{
		{[3]byte{198, 51, 100}, macNeigh1, macSrc1},
		{[3]byte{203, 0, 113}, macNeigh2, macSrc2},
		{[3]byte{203, 0, 7}, macNeigh1, macSrc1},
	}
	const n = 3000
	carries := 0
	before := counters(t, f.d)
	var bytesSent uint64
	for i := range n {
		dst := dsts[rng.IntN(len(dsts))]
		var frame []byte
		for {
			h := ipv4Header{
				tos:     uint8(rng.Uint32()),
				id:      uint16(rng.Uint32()),
				fragOff: uint16(rng.Uint32()) & 0x5fff, // DF and offset, no reserved bit
				ttl:     uint8(2 + rng.IntN(254)),
				proto:   uint8(rng.Uint32()),
				src:     randomSource4(rng),
				dst:     netip.AddrFrom4([4]byte{dst.prefix[0], dst.prefix[1], dst.prefix[2], byte(2 + rng.IntN(250))}),
			}
			payload := make([]byte, rng.IntN(64))
			for j := range payload {
				payload[j] = byte(rng.Uint32())
			}
			frame = ipFrame(h, payload)
			if i%4 != 0 || frame[14+10] == 0xff {
				break
			}
		}
		if frame[14+10] == 0xff {
			carries++
		}
		in := bytes.Clone(frame)
		ret, out := run(t, f.d, frame)
		if ret != xdpRedirect {
			t.Fatalf("frame %d (% x): returned %d, want XDP_REDIRECT", i, in, ret)
		}
		checkForwarded(t, in, out, dst.dmac, dst.smac)
		if t.Failed() {
			t.Fatalf("frame %d: % x", i, in)
		}
		bytesSent += uint64(len(in))
	}
	if carries < n/4 {
		t.Errorf("only %d frames exercised the checksum carry", carries)
	}
	checkDelta(t, before, counters(t, f.d), map[string]uint64{
		"rx": n, "forwarded": n, "forwarded_bytes": bytesSent,
	})
}

// --- tests: pass to the kernel ----------------------------------------

func TestPass(t *testing.T) {
	f := newFixture(t, loadOptions{})
	routed := netip.MustParseAddr("198.51.100.77")
	arp := make([]byte, 28)
	copy(arp, []byte{0, 1, 8, 0, 6, 4, 0, 1})
	vlan := append([]byte{0x00, 0x0a, 0x08, 0x00}, ipv4Packet(ipv4Header{ttl: 64, proto: 17, dst: routed}, udpPayload(8))...)
	full := udpFrame("198.51.100.77", 64)

	for _, tc := range []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"ARP", ethFrame(macBcast, macPeer, 0x0806, arp), "pass_not_ipv4"},
		{"LLDP", ethFrame(mac("01:80:c2:00:00:0e"), macPeer, 0x88cc, make([]byte, 46)), "pass_not_ipv4"},
		{"unknown ethertype to the router's MAC", ethFrame(macRouter, macPeer, 0x88b5, make([]byte, 46)), "pass_not_ipv4"},
		{"VLAN 802.1Q", ethFrame(macRouter, macPeer, 0x8100, vlan), "pass_vlan"},
		{"VLAN 802.1ad", ethFrame(macRouter, macPeer, 0x88a8, vlan), "pass_vlan"},
		{"TTL 1", udpFrame("198.51.100.77", 1), "pass_ttl"},
		{"TTL 0", udpFrame("198.51.100.77", 0), "pass_ttl"},
		{"IP options (ihl 6)", ipFrame(ipv4Header{ihl: 6, ttl: 64, proto: 17, dst: routed}, udpPayload(8)), "pass_options"},
		{"ihl 15", ipFrame(ipv4Header{ihl: 15, ttl: 64, proto: 17, dst: routed}, udpPayload(8)), "pass_options"},
		{"ihl 4", ipFrame(ipv4Header{ihl: 4, ttl: 64, proto: 17, dst: routed}, udpPayload(8)), "pass_bad_header"},
		{"version 6 in IPv4 ethertype", ipFrame(ipv4Header{version: 6, ttl: 64, proto: 17, dst: routed}, udpPayload(8)), "pass_bad_header"},
		{"unknown destination", udpFrame("8.8.8.8", 64), "pass_no_route"},
		{"nexthop slot empty", udpFrame("100.64.4.9", 64), "pass_no_nexthop"},
		{"neighbour missing", udpFrame("100.64.5.9", 64), "pass_no_neigh"},
		{"egress port not in tx_ports", udpFrame("100.64.6.9", 64), "pass_no_tx_port"},
		{"destination is local", udpFrame("198.51.100.1", 64), "pass_local"},
		{"local wins over TTL 1", udpFrame("198.51.100.1", 1), "pass_local"},
		{"IPv4 multicast", udpFrame("224.0.0.5", 64), "pass_not_unicast"},
		{"limited broadcast", udpFrame("255.255.255.255", 64), "pass_not_unicast"},
		{"L2 broadcast to a routed address", ethFrame(macBcast, macPeer, 0x0800, full[14:]), "pass_not_unicast"},
		{"truncated: 14 bytes", full[:14], "pass_truncated"},
		{"truncated: 20 bytes", full[:20], "pass_truncated"},
		{"truncated: 33 bytes", full[:33], "pass_truncated"},
		{"truncated: tot_len larger than frame", withTotLen(full, len(full)-14+1), "pass_truncated"},
		{"truncated: tot_len 19", withTotLen(full, 19), "pass_truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPassed(t, f.d, tc.frame, tc.reason) })
	}
}

// --- tests: control API -----------------------------------------------

func TestTables(t *testing.T) {
	f := newFixture(t, loadOptions{})
	d := f.d
	base, err := d.RouteCount()
	if err != nil {
		t.Fatal(err)
	}
	if base != 7 {
		t.Errorf("fixture has %d routes, want 7", base)
	}

	// Host bits are masked off, and setting twice is one route.
	unmasked := netip.MustParsePrefix("10.1.2.3/8")
	for range 2 {
		if err := d.SetRoute(unmasked, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := d.RouteCount(); n != base+1 {
		t.Errorf("RouteCount = %d after setting one route twice, want %d", n, base+1)
	}
	if ret, _ := run(t, d, udpFrame("10.200.0.1", 64)); ret != xdpRedirect {
		t.Errorf("10.200.0.1 via 10.0.0.0/8: returned %d, want XDP_REDIRECT", ret)
	}
	if err := d.DeleteRoute(netip.MustParsePrefix("10.0.0.0/8")); err != nil {
		t.Errorf("delete the masked route: %v", err)
	}
	if err := d.DeleteRoute(unmasked); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing route: %v, want ErrNotFound", err)
	}
	if ret, _ := run(t, d, udpFrame("10.200.0.1", 64)); ret != xdpPass {
		t.Errorf("after delete: returned %d, want XDP_PASS", ret)
	}

	// Deleting nexthop 1 sends its routes to the kernel.
	if err := d.DeleteNexthop(1); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNexthop(1); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting an empty nexthop: %v, want ErrNotFound", err)
	}
	before := counters(t, d)
	run(t, d, udpFrame("198.51.100.77", 64))
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "pass_no_nexthop": 1})

	// Neighbours and local addresses.
	gw2 := netip.MustParseAddr("10.0.0.2")
	if err := d.DeleteNeighbor(f.lo, gw2); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNeighbor(f.lo, gw2); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing neighbour: %v, want ErrNotFound", err)
	}
	before = counters(t, d)
	run(t, d, udpFrame("203.0.113.5", 64))
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "pass_no_neigh": 1})

	local := netip.MustParseAddr("198.51.100.1")
	if err := d.DeleteLocalAddr(local); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteLocalAddr(local); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing local address: %v, want ErrNotFound", err)
	}
}

// TestValidation needs no kernel: bad input is rejected before any map is
// touched, so a zero Datapath is enough.
func TestValidation(t *testing.T) {
	var d Datapath
	goodMAC := macSrc1
	v4 := netip.MustParseAddr("192.0.2.1")
	v6 := netip.MustParseAddr("2001:db8::1")
	for _, tc := range []struct {
		name    string
		err     error
		mention string // must appear in the message
	}{
		{"SetRoute invalid prefix", d.SetRoute(netip.Prefix{}, 1), "invalid Prefix"},
		{"SetRoute invalid length", d.SetRoute(netip.PrefixFrom(v6, 129), 1), "invalid Prefix"},
		{"SetRoute 4in6", d.SetRoute(netip.MustParsePrefix("::ffff:192.0.2.0/120"), 1), "::ffff:192.0.2.0/120"},
		{"SetRoute nexthop out of range", d.SetRoute(netip.MustParsePrefix("192.0.2.0/24"), GroupIDBase+MaxGroups), "nexthop id 69632"},
		{"DeleteRoute 4in6", d.DeleteRoute(netip.MustParsePrefix("::ffff:10.0.0.0/104")), "::ffff:10.0.0.0/104"},
		{"DeleteRoutes invalid", d.DeleteRoutes([]netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), {}}), "invalid Prefix"},
		{"SetRoutes IPv6 nexthop out of range", d.SetRoutes([]Route{{Prefix: netip.MustParsePrefix("2001:db8::1/32"), Nexthop: GroupIDBase + MaxGroups}}), "route 2001:db8::/32: nexthop id 69632"},
		{"SetNexthop id", d.SetNexthop(MaxNexthops, Nexthop{Ifindex: 1, SrcMAC: goodMAC}), "nexthop id 65536"},
		{"SetNexthop ifindex", d.SetNexthop(1, Nexthop{Ifindex: 0, SrcMAC: goodMAC}), "ifindex 0"},
		{"SetNexthop MAC", d.SetNexthop(1, Nexthop{Ifindex: 1, SrcMAC: net.HardwareAddr{1, 2, 3}}), "source MAC \"01:02:03\""},
		{"SetNexthop 4in6 gateway", d.SetNexthop(1, Nexthop{Ifindex: 1, Gateway: netip.MustParseAddr("::ffff:10.0.0.1"), SrcMAC: goodMAC}), "gateway ::ffff:10.0.0.1"},
		{"SetNexthop zoned gateway", d.SetNexthop(1, Nexthop{Ifindex: 1, Gateway: netip.MustParseAddr("fe80::1%eth0"), SrcMAC: goodMAC}), "gateway fe80::1%eth0"},
		{"DeleteNexthop id", d.DeleteNexthop(1 << 20), "nexthop id 1048576"},
		{"SetNexthop group id", d.SetNexthop(GroupIDBase, Nexthop{Ifindex: 1, SrcMAC: goodMAC}), "nexthop id 65536"},
		{"SetNexthopGroup nexthop id", d.SetNexthopGroup(5, []uint32{1}), "group id 5"},
		{"SetNexthopGroup id past the end", d.SetNexthopGroup(GroupIDBase+MaxGroups, []uint32{1}), "group id 69632"},
		{"SetNexthopGroup no members", d.SetNexthopGroup(GroupIDBase, nil), "0 members"},
		{"SetNexthopGroup 17 members", d.SetNexthopGroup(GroupIDBase, make([]uint32, 17)), "17 members"},
		{"SetNexthopGroup group as member", d.SetNexthopGroup(GroupIDBase, []uint32{1, GroupIDBase + 1}), "member 1: nexthop id 65537"},
		{"DeleteNexthopGroup nexthop id", d.DeleteNexthopGroup(7), "group id 7"},
		{"SetNeighbor 4in6", d.SetNeighbor(1, netip.MustParseAddr("::ffff:192.0.2.1"), goodMAC), "neighbor address ::ffff:192.0.2.1"},
		{"SetNeighbor invalid", d.SetNeighbor(1, netip.Addr{}, goodMAC), "neighbor address invalid IP"},
		{"SetNeighbor IPv6 MAC", d.SetNeighbor(1, v6, nil), "neighbor MAC"},
		{"SetNeighbor MAC", d.SetNeighbor(1, v4, nil), "neighbor MAC"},
		{"SetNeighbor ifindex", d.SetNeighbor(-3, v4, goodMAC), "ifindex -3"},
		{"DeleteNeighbor zoned", d.DeleteNeighbor(1, netip.MustParseAddr("fe80::2%1")), "fe80::2%1"},
		{"SetLocalAddr 4in6", d.SetLocalAddr(netip.MustParseAddr("::ffff:192.0.2.1")), "local address ::ffff:192.0.2.1"},
		{"DeleteLocalAddr invalid", d.DeleteLocalAddr(netip.Addr{}), "local address invalid IP"},
		{"Attach bad mode", d.Attach(1, Mode(7)), "Mode(7)"},
		{"Attach ifindex", d.Attach(0, ModeNative), "ifindex 0"},
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

func TestNames(t *testing.T) {
	names := CounterNames()
	if len(names) != int(xdpStatReasonSTAT_MAX) {
		t.Fatalf("%d counter names for %d reasons", len(names), xdpStatReasonSTAT_MAX)
	}
	seen := map[string]bool{}
	for i, n := range names {
		if n == "" || seen[n] {
			t.Errorf("counter %d has an empty or duplicate name %q", i, n)
		}
		seen[n] = true
	}
	if ModeNative.String() != "native" || ModeGeneric.String() != "generic" {
		t.Errorf("mode names %q %q", ModeNative, ModeGeneric)
	}
}

// --- test: real attach ------------------------------------------------

func TestAttachVeth(t *testing.T) {
	d := loadForTest(t, loadOptions{})
	info, err := d.Program().Info()
	if err != nil {
		t.Fatal(err)
	}
	progID, _ := info.ID()

	netnstest.Run(t, func(h *netlink.Handle) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sptest0"}, PeerName: "sptest1"}
		if err := h.LinkAdd(veth); err != nil {
			t.Fatalf("add veth: %v", err)
		}
		var idx [2]int
		for i, name := range []string{"sptest0", "sptest1"} {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			idx[i] = l.Attrs().Index
		}

		xdpOf := func(ifindex int) *netlink.LinkXdp {
			l, err := h.LinkByIndex(ifindex)
			if err != nil {
				t.Fatal(err)
			}
			return l.Attrs().Xdp
		}

		if err := d.Attach(idx[0], ModeNative); err != nil {
			t.Fatalf("attach native: %v", err)
		}
		if err := d.Attach(idx[1], ModeGeneric); err != nil {
			t.Fatalf("attach generic: %v", err)
		}
		for i, mode := range []uint32{1 /* XDP_ATTACHED_DRV */, 2 /* XDP_ATTACHED_SKB */} {
			x := xdpOf(idx[i])
			if x == nil || !x.Attached || x.ProgId != uint32(progID) || x.AttachMode != mode {
				t.Errorf("ifindex %d: xdp %+v, want attached prog %d in mode %d", idx[i], x, progID, mode)
			}
			var port uint32
			if err := d.objs.TxPorts.Lookup(uint32(idx[i]), &port); err != nil || port != uint32(idx[i]) {
				t.Errorf("tx_ports[%d] = %d, %v", idx[i], port, err)
			}
		}

		err := d.Attach(idx[0], ModeNative)
		if !errors.Is(err, ErrAlreadyAttached) || !strings.Contains(err.Error(), "sptest0") {
			t.Errorf("second attach: %v, want ErrAlreadyAttached naming sptest0", err)
		}

		if err := d.Detach(idx[0]); err != nil {
			t.Fatalf("detach: %v", err)
		}
		if x := xdpOf(idx[0]); x != nil && x.Attached {
			t.Errorf("still attached after Detach: %+v", x)
		}
		if err := d.objs.TxPorts.Lookup(uint32(idx[0]), new(uint32)); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Errorf("tx port still present after Detach: %v", err)
		}
		if err := d.Detach(idx[0]); !errors.Is(err, ErrNotAttached) {
			t.Errorf("second detach: %v, want ErrNotAttached", err)
		}

		// Close detaches what is left.
		if err := d.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if x := xdpOf(idx[1]); x != nil && x.Attached {
			t.Errorf("still attached after Close: %+v", x)
		}
	})
}
