//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// IPv6 next header values used by the tests.
const (
	nhHopByHop = 0
	nhUDP      = 17
	nhRouting  = 43
	nhFragment = 44
	nhICMPv6   = 58
	nhNone     = 59
)

var testSrcAddr6 = netip.MustParseAddr("2001:db8:aaaa::100")

// ipv6Header describes the IPv6 header of a test frame. Zero values give a
// well-formed header: version 6, payload length = payload, source
// testSrcAddr6.
type ipv6Header struct {
	version    uint8 // 0 = 6
	nextHeader uint8
	hopLimit   uint8
	payloadLen int // -1 = the payload's length
	src, dst   netip.Addr
}

func ipv6Packet(h ipv6Header, payload []byte) []byte {
	version := h.version
	if version == 0 {
		version = 6
	}
	src := h.src
	if !src.IsValid() {
		src = testSrcAddr6
	}
	plen := h.payloadLen
	if plen < 0 {
		plen = len(payload)
	}
	p := make([]byte, 40, 40+len(payload))
	p[0] = version<<4 | 0x0b // traffic class 0xb0 so that the byte is not all zero
	p[1] = 0x0c              // flow label
	p[2], p[3] = 0xde, 0xf1
	binary.BigEndian.PutUint16(p[4:], uint16(plen))
	p[6] = h.nextHeader
	p[7] = h.hopLimit
	s, d := src.As16(), h.dst.As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	return append(p, payload...)
}

// l4Sum6 is the folded ones' complement sum of the upper-layer packet l4
// with the IPv6 pseudo-header (RFC 8200 section 8.1); a packet with a valid
// checksum sums to 0xffff.
func l4Sum6(src, dst netip.Addr, proto uint8, l4 []byte) uint16 {
	s, d := src.As16(), dst.As16()
	ph := make([]byte, 0, 40+len(l4))
	ph = append(ph, s[:]...)
	ph = append(ph, d[:]...)
	ph = binary.BigEndian.AppendUint32(ph, uint32(len(l4)))
	ph = append(ph, 0, 0, 0, proto)
	return onesSum(append(ph, l4...))
}

// withL4Checksum6 fills in the checksum at offset off of l4.
func withL4Checksum6(src, dst netip.Addr, proto uint8, l4 []byte, off int) []byte {
	binary.BigEndian.PutUint16(l4[off:], 0)
	binary.BigEndian.PutUint16(l4[off:], ^l4Sum6(src, dst, proto, l4))
	return l4
}

func ip6Frame(h ipv6Header, payload []byte) []byte {
	return ethFrame(macRouter, macPeer, 0x86dd, ipv6Packet(h, payload))
}

// udp6Frame is a UDP packet with a valid checksum to dst.
func udp6Frame(dst string, hopLimit uint8) []byte {
	d := netip.MustParseAddr(dst)
	l4 := withL4Checksum6(testSrcAddr6, d, nhUDP, udpPayload(18), 6)
	return ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: hopLimit, payloadLen: -1, dst: d}, l4)
}

// echo6Frame is an ICMPv6 echo request with a valid checksum to dst.
func echo6Frame(dst string, hopLimit uint8) []byte {
	d := netip.MustParseAddr(dst)
	l4 := icmpEcho(56)
	l4[0] = 128 // echo request
	withL4Checksum6(testSrcAddr6, d, nhICMPv6, l4, 2)
	return ip6Frame(ipv6Header{nextHeader: nhICMPv6, hopLimit: hopLimit, payloadLen: -1, dst: d}, l4)
}

// solicitation is an NDP neighbour solicitation for target, sent to its
// solicited-node address ff02::1:ffXX:XXXX (or to dst when given).
func solicitation(target netip.Addr, dst netip.Addr, l2dst net.HardwareAddr) []byte {
	t := target.As16()
	if !dst.IsValid() {
		dst = netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]})
	}
	if l2dst == nil {
		d := dst.As16()
		l2dst = net.HardwareAddr{0x33, 0x33, d[12], d[13], d[14], d[15]}
	}
	l4 := make([]byte, 24, 32)
	l4[0] = 135
	copy(l4[8:], t[:])
	l4 = append(l4, 1, 1) // source link-layer address option
	l4 = append(l4, macPeer...)
	src := netip.MustParseAddr("fe80::99")
	withL4Checksum6(src, dst, nhICMPv6, l4, 2)
	return ethFrame(l2dst, macPeer, 0x86dd, ipv6Packet(ipv6Header{nextHeader: nhICMPv6, hopLimit: 255, payloadLen: -1, src: src, dst: dst}, l4))
}

// fixture6 adds IPv6 routes, nexthops, neighbours and a local address to
// newFixture; the IPv4 ones stay.
func newFixture6(tb testing.TB, opts loadOptions) *fixture {
	tb.Helper()
	f := newFixture(tb, opts)
	d := f.d
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a := netip.MustParseAddr
	must(d.SetNexthop(11, Nexthop{Ifindex: f.lo, Gateway: a("fe80::1"), SrcMAC: macSrc1}))
	must(d.SetNexthop(12, Nexthop{Ifindex: f.lo, Gateway: a("2001:db8:ffff::2"), SrcMAC: macSrc2}))
	must(d.SetNexthop(13, Nexthop{Ifindex: f.lo, Gateway: a("::"), SrcMAC: macSrc3})) // connected
	// 14 stays empty.
	must(d.SetNexthop(15, Nexthop{Ifindex: f.lo, Gateway: a("2001:db8:ffff::5"), SrcMAC: macSrc1})) // no neighbour
	must(d.SetNexthop(16, Nexthop{Ifindex: missingPort, Gateway: a("2001:db8:ffff::6"), SrcMAC: macSrc1}))
	must(d.SetNeighbor(f.lo, a("fe80::1"), macNeigh1))
	must(d.SetNeighbor(f.lo, a("2001:db8:ffff::2"), macNeigh2))
	must(d.SetNeighbor(f.lo, a("2001:db8:3::7"), macNeigh3)) // on the connected route
	must(d.SetNeighbor(missingPort, a("2001:db8:ffff::6"), macNeigh6))
	// A neighbour with the same address as an IPv4 one, in the other
	// family: the tables must not mix them up.
	must(d.SetNeighbor(f.lo, a("::a00:5"), macNeigh6))
	must(d.SetRoutes([]Route{
		{netip.MustParsePrefix("2001:db8::/32"), 11},
		{netip.MustParsePrefix("2001:db8:1::/48"), 12}, // more specific than the /32
		{netip.MustParsePrefix("2001:db8:3::/64"), 13},
		{netip.MustParsePrefix("2001:db8:4::/48"), 14},
		{netip.MustParsePrefix("2001:db8:5::/48"), 15},
		{netip.MustParsePrefix("2001:db8:6::/48"), 16},
		{netip.MustParsePrefix("2001:db8:7::/48"), 1},    // IPv6 route, IPv4 gateway
		{netip.MustParsePrefix("100.64.8.0/24"), 11},     // IPv4 route, IPv6 gateway (RFC 8950)
		{netip.MustParsePrefix("2001:db8:8::1/128"), 12}, // host route
	}))
	must(d.SetLocalAddr(a("2001:db8::1")))
	must(d.SetLocalAddr(a("2001:db8:3::1")))
	return f
}

// checkForwarded6 checks that out is in rewritten for dmac/smac with the hop
// limit decremented and every other byte unchanged.
func checkForwarded6(tb testing.TB, in, out []byte, dmac, smac net.HardwareAddr) {
	tb.Helper()
	checkEthernet(tb, in, out, dmac, smac)
	ipIn, ipOut := in[14:54], out[14:54]
	if ipOut[7] != ipIn[7]-1 {
		tb.Errorf("hop limit %d, want %d", ipOut[7], ipIn[7]-1)
	}
	for i := range ipIn {
		if i != 7 && ipIn[i] != ipOut[i] {
			tb.Errorf("IPv6 header byte %d changed: %#02x -> %#02x", i, ipIn[i], ipOut[i])
		}
	}
	if !bytes.Equal(out[54:], in[54:]) {
		tb.Errorf("payload changed:\n in % x\nout % x", in[54:], out[54:])
	}
	// The hop limit is not in the pseudo-header: the checksum still holds.
	if nh := ipOut[6]; nh == nhUDP || nh == nhICMPv6 {
		src, dst := netip.AddrFrom16([16]byte(ipOut[8:24])), netip.AddrFrom16([16]byte(ipOut[24:40]))
		plen := int(binary.BigEndian.Uint16(ipOut[4:]))
		if sum := l4Sum6(src, dst, nh, out[54:54+plen]); sum != 0xffff {
			tb.Errorf("upper-layer checksum invalid after forwarding (sum %#04x)", sum)
		}
	}
}

func TestForward6(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	a := netip.MustParseAddr
	short := ip6Frame(ipv6Header{nextHeader: nhNone, hopLimit: 64, payloadLen: -1, dst: a("2001:db8:1::9")}, nil)
	short = append(short, make([]byte, 60-len(short))...) // Ethernet minimum, payload length 0 < frame
	routing := append([]byte{nhUDP, 0, 4 /* segments left 0, type 4 */, 0, 0, 0, 0, 0}, udpPayload(8)...)
	fragment := append([]byte{nhUDP, 0, 0, 1, 0, 0, 0, 42}, udpPayload(30)...)
	for _, tc := range []struct {
		name       string
		frame      []byte
		dmac, smac net.HardwareAddr
	}{
		{"udp via link-local gateway", udp6Frame("2001:db8:99::5", 64), macNeigh1, macSrc1},
		{"icmpv6 echo via global gateway", echo6Frame("2001:db8:1::9", 64), macNeigh2, macSrc2},
		{"hop limit 2", udp6Frame("2001:db8:99::5", 2), macNeigh1, macSrc1},
		{"hop limit 255", echo6Frame("2001:db8:99::5", 255), macNeigh1, macSrc1},
		{"longest prefix /48 wins over /32", udp6Frame("2001:db8:1:ffff::1", 64), macNeigh2, macSrc2},
		{"/32 outside the /48", udp6Frame("2001:db8:2::1", 64), macNeigh1, macSrc1},
		{"host route /128", udp6Frame("2001:db8:8::1", 64), macNeigh2, macSrc2},
		{"next to the host route", udp6Frame("2001:db8:8::2", 64), macNeigh1, macSrc1},
		{"connected route uses the destination's neighbour", udp6Frame("2001:db8:3::7", 30), macNeigh3, macSrc3},
		{"IPv6 route via IPv4 gateway", udp6Frame("2001:db8:7::1", 64), macNeigh1, macSrc1},
		{"ethernet padding after the payload", short, macNeigh2, macSrc2},
		{"routing header is not parsed", ip6Frame(ipv6Header{nextHeader: nhRouting, hopLimit: 9, payloadLen: -1, dst: a("2001:db8:1::1")}, routing), macNeigh2, macSrc2},
		{"fragment", ip6Frame(ipv6Header{nextHeader: nhFragment, hopLimit: 9, payloadLen: -1, dst: a("2001:db8:1::1")}, fragment), macNeigh2, macSrc2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.frame)
			before := counters(t, f.d)
			ret, out := run(t, f.d, tc.frame)
			if ret != xdpRedirect {
				t.Fatalf("returned %d, want XDP_REDIRECT (%d); moved: %s", ret, xdpRedirect, fmtDelta(before, counters(t, f.d)))
			}
			checkForwarded6(t, in, out, tc.dmac, tc.smac)
			checkDelta(t, before, counters(t, f.d), map[string]uint64{
				"rx": 1, "forwarded": 1, "forwarded_ipv6": 1, "forwarded_bytes": uint64(len(in)),
			})
		})
	}

	// The other direction of RFC 8950: an IPv4 route via an IPv6 gateway.
	t.Run("IPv4 route via IPv6 gateway", func(t *testing.T) {
		frame := udpFrame("100.64.8.1", 64)
		in := bytes.Clone(frame)
		before := counters(t, f.d)
		ret, out := run(t, f.d, frame)
		if ret != xdpRedirect {
			t.Fatalf("returned %d, want XDP_REDIRECT; moved: %s", ret, fmtDelta(before, counters(t, f.d)))
		}
		checkForwarded(t, in, out, macNeigh1, macSrc1)
		checkDelta(t, before, counters(t, f.d), map[string]uint64{
			"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in)),
		})
	})
}

func TestPass6(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	a := netip.MustParseAddr
	full := udp6Frame("2001:db8:1::9", 64)
	withPayloadLen := func(n int) []byte {
		fr := bytes.Clone(full)
		binary.BigEndian.PutUint16(fr[14+4:], uint16(n))
		return fr
	}
	fromSrc := func(src string) []byte {
		return ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 9, payloadLen: -1, src: a(src), dst: a("2001:db8:1::1")}, udpPayload(8))
	}
	hbh := append([]byte{nhUDP, 0, 5, 2, 0, 0 /* router alert */, 1, 0 /* PadN */}, udpPayload(8)...)
	vlan := append([]byte{0x00, 0x0a, 0x86, 0xdd}, full[14:]...)

	for _, tc := range []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"hop limit 1", udp6Frame("2001:db8:1::9", 1), "pass_ttl"},
		{"hop limit 0", udp6Frame("2001:db8:1::9", 0), "pass_ttl"},
		{"NDP solicitation to solicited-node multicast", solicitation(a("2001:db8:1::9"), netip.Addr{}, nil), "pass_not_unicast"},
		{"NDP solicitation, multicast IP in a unicast frame", solicitation(a("2001:db8:1::9"), netip.Addr{}, macRouter), "pass_not_unicast"},
		{"NDP unicast solicitation to link-local (NUD)", solicitation(a("fe80::2"), a("fe80::2"), macRouter), "pass_not_routable"},
		{"global multicast in a unicast frame", udp6Frame("ff0e::101", 64), "pass_not_unicast"},
		{"L2 multicast to a routed address", ethFrame(mac("33:33:00:00:00:01"), macPeer, 0x86dd, full[14:]), "pass_not_unicast"},
		{"link-local destination", udp6Frame("fe80::1", 64), "pass_not_routable"},
		{"link-local destination, upper end of fe80::/10", udp6Frame("febf:ffff::1", 64), "pass_not_routable"},
		{"link-local source", fromSrc("fe80::5"), "pass_not_routable"},
		{"destination is local", udp6Frame("2001:db8::1", 64), "pass_local"},
		{"local on a connected prefix", echo6Frame("2001:db8:3::1", 64), "pass_local"},
		{"local wins over hop limit 1", udp6Frame("2001:db8::1", 1), "pass_local"},
		{"Hop-by-Hop options", ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 64, payloadLen: -1, dst: a("2001:db8:1::9")}, hbh), "pass_options"},
		{"version 4 in the IPv6 ethertype", ip6Frame(ipv6Header{version: 4, nextHeader: nhUDP, hopLimit: 64, payloadLen: -1, dst: a("2001:db8:1::9")}, udpPayload(8)), "pass_bad_header"},
		{"truncated: 14 bytes", full[:14], "pass_truncated"},
		{"truncated: header cut at 39 bytes", full[:14+39], "pass_truncated"},
		{"truncated: payload length larger than frame", withPayloadLen(len(full) - 54 + 1), "pass_truncated"},
		{"truncated: payload length 65535", withPayloadLen(65535), "pass_truncated"},
		{"VLAN 802.1Q IPv6", ethFrame(macRouter, macPeer, 0x8100, vlan), "pass_vlan"},
		{"unknown destination", udp6Frame("2400:cb00::1", 64), "pass_no_route"},
		{"IPv4 gateway 10.0.0.5 does not find the IPv6 neighbour ::a00:5", udpFrame("100.64.5.9", 64), "pass_no_neigh"},
		{"nexthop slot empty", udp6Frame("2001:db8:4::9", 64), "pass_no_nexthop"},
		{"neighbour missing", udp6Frame("2001:db8:5::9", 64), "pass_no_neigh"},
		{"connected route, neighbour missing", udp6Frame("2001:db8:3::8", 64), "pass_no_neigh"},
		{"egress port not in tx_ports", udp6Frame("2001:db8:6::9", 64), "pass_no_tx_port"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPassed(t, f.d, tc.frame, tc.reason) })
	}
}

// fwdVia runs a UDP frame to dst and returns the source MAC it was
// forwarded with, or nil when it went to the kernel.
func fwdVia(t *testing.T, d *Datapath, dst string) net.HardwareAddr {
	t.Helper()
	var frame []byte
	if netip.MustParseAddr(dst).Is4() {
		frame = udpFrame(dst, 64)
	} else {
		frame = udp6Frame(dst, 64)
	}
	ret, out := run(t, d, frame)
	switch ret {
	case xdpRedirect:
		return net.HardwareAddr(out[6:12])
	case xdpPass:
		return nil
	}
	t.Fatalf("%s: returned %d", dst, ret)
	return nil
}

func TestTables6(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	p := netip.MustParsePrefix
	base, err := d.RouteCount()
	if err != nil {
		t.Fatal(err)
	}
	if base != 7+9 {
		t.Errorf("fixture has %d routes, want 16 (7 IPv4, 9 IPv6)", base)
	}
	count := func(want int) {
		t.Helper()
		if n, err := d.RouteCount(); err != nil || n != want {
			t.Errorf("RouteCount = %d, %v; want %d", n, err, want)
		}
	}
	via := func(dst string, want net.HardwareAddr) {
		t.Helper()
		if got := fwdVia(t, d, dst); !bytes.Equal(got, want) {
			t.Errorf("%s forwarded via %v, want %v", dst, got, want)
		}
	}

	// The default route catches what nothing else does; longer prefixes
	// still win.
	if err := d.SetRoute(p("::/0"), 2); err != nil {
		t.Fatal(err)
	}
	count(base + 1)
	via("2400:cb00::1", macSrc2)
	via("2001:db8:1::9", macSrc2)
	via("2001:db8:2::9", macSrc1)
	// Removing the /48 falls back to the /32, removing the /32 to ::/0.
	if err := d.DeleteRoute(p("2001:db8:1::/48")); err != nil {
		t.Fatal(err)
	}
	via("2001:db8:1::9", macSrc1)
	if err := d.DeleteRoute(p("2001:db8::/32")); err != nil {
		t.Fatal(err)
	}
	via("2001:db8:1::9", macSrc2)
	if err := d.DeleteRoutes([]netip.Prefix{p("::/0"), p("::/0")}); err != nil {
		t.Fatal(err)
	}
	via("2001:db8:1::9", nil)
	count(base - 2)

	// Host bits are masked off, and setting twice is one route.
	for range 2 {
		if err := d.SetRoute(p("2001:db8:abcd:12::1/48"), 1); err != nil {
			t.Fatal(err)
		}
	}
	count(base - 1)
	via("2001:db8:abcd:ffff::1", macSrc1)
	if err := d.DeleteRoute(p("2001:db8:abcd::/48")); err != nil {
		t.Errorf("delete the masked route: %v", err)
	}
	if err := d.DeleteRoute(p("2001:db8:abcd:12::1/48")); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing route: %v, want ErrNotFound", err)
	}
	count(base - 2)

	// Mixed batches are all or nothing: a missing route of one family
	// keeps the other family's routes.
	if err := d.DeleteRoutes([]netip.Prefix{p("2001:db8:3::/64"), p("10.99.0.0/16")}); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete with a missing IPv4 route: %v, want ErrNotFound", err)
	}
	if err := d.DeleteRoutes([]netip.Prefix{p("198.18.3.0/24"), p("2001:db8:99::/48")}); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete with a missing IPv6 route: %v, want ErrNotFound", err)
	}
	count(base - 2)
	via("2001:db8:3::7", macSrc3)
	via("198.18.3.7", macSrc3)
	// A prefix given twice ends with the last nexthop.
	if err := d.SetRoutes([]Route{{p("2001:db8:50::/48"), 1}, {p("10.50.0.0/16"), 2}, {p("2001:db8:50::/48"), 2}}); err != nil {
		t.Fatal(err)
	}
	via("2001:db8:50::1", macSrc2)
	via("10.50.0.1", macSrc2)
	if err := d.DeleteRoutes([]netip.Prefix{p("2001:db8:50::/48"), p("10.50.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	count(base - 2)

	// Nexthops, neighbours and local addresses.
	gw := netip.MustParseAddr("fe80::1")
	if err := d.DeleteNeighbor(f.lo, gw); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteNeighbor(f.lo, gw); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing neighbour: %v, want ErrNotFound", err)
	}
	// The IPv4 neighbour 10.0.0.1 is still there.
	via("198.51.100.77", macSrc1)
	if err := d.SetRoute(p("2001:db8:60::/48"), 11); err != nil {
		t.Fatal(err)
	}
	before := counters(t, d)
	run(t, d, udp6Frame("2001:db8:60::1", 64))
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "pass_no_neigh": 1})
	// Nexthop 11 moves to an IPv4 gateway: the same IPv6 route now
	// resolves among the IPv4 neighbours.
	if err := d.SetNexthop(11, Nexthop{Ifindex: f.lo, Gateway: netip.MustParseAddr("10.0.0.2"), SrcMAC: macSrc3}); err != nil {
		t.Fatal(err)
	}
	via("2001:db8:60::1", macSrc3)

	local := netip.MustParseAddr("2001:db8::1")
	if err := d.DeleteLocalAddr(local); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteLocalAddr(local); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing local address: %v, want ErrNotFound", err)
	}
	// The same bits as IPv4 are another address.
	if err := d.DeleteLocalAddr(netip.MustParseAddr("::c633:6401")); !errors.Is(err, ErrNotFound) {
		t.Errorf("IPv6 twin of the IPv4 local address: %v, want ErrNotFound", err)
	}
}

// TestSetRoutesAtomic6 makes each family's half of a mixed batch fail and
// checks that the other half is undone.
func TestSetRoutesAtomic6(t *testing.T) {
	p := netip.MustParsePrefix
	t.Run("IPv4 half refused", func(t *testing.T) {
		d := fibFixture(t, loadOptions{tbl8Groups: 1}, 4)
		if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 1}, {p("2001:db8:1::/48"), 1}}); err != nil {
			t.Fatal(err)
		}
		// Two /25s in different /24s need two tbl8 groups; there is one.
		err := d.SetRoutes([]Route{
			{p("2001:db8:1::/48"), 2}, {p("2001:db8:2::/48"), 2},
			{p("10.0.1.0/25"), 1}, {p("10.0.2.0/25"), 1},
		})
		if !errors.Is(err, ErrFIBFull) {
			t.Fatalf("SetRoutes: %v, want ErrFIBFull", err)
		}
		checkRoutes6(t, d, map[string]uint32{"2001:db8:1::1": 1, "2001:db8:2::1": 1, "2400::1": noRoute})
		if n, _ := d.RouteCount(); n != 2 {
			t.Errorf("RouteCount = %d, want 2", n)
		}
	})
	t.Run("IPv6 half refused", func(t *testing.T) {
		// 2001:db8::/32 takes two groups, 2001:db8:1::/48 two more;
		// another /48 in another /40 needs a fifth.
		d := fibFixture(t, loadOptions{fib6Groups: 4}, 4)
		if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 1}, {p("2001:db8:1::/48"), 1}}); err != nil {
			t.Fatal(err)
		}
		err := d.SetRoutes([]Route{
			{p("2001:db8:1::/48"), 3}, {p("2001:db8:2::/48"), 3}, {p("2001:db8:300::/48"), 3}, {p("10.0.1.0/24"), 3},
		})
		if !errors.Is(err, ErrFIBFull) {
			t.Fatalf("SetRoutes: %v, want ErrFIBFull", err)
		}
		checkRoutes6(t, d, map[string]uint32{"2001:db8:1::1": 1, "2001:db8:2::1": 1, "2001:db8:300::1": 1, "10.0.1.1": noRoute})
		if n, _ := d.RouteCount(); n != 2 {
			t.Errorf("RouteCount = %d, want 2", n)
		}
		// A batch that fits still works.
		if err := d.SetRoutes([]Route{{p("2001:db8:2::/48"), 2}}); err != nil {
			t.Fatal(err)
		}
		checkRoutes6(t, d, map[string]uint32{"2001:db8:2::1": 2})
	})
	t.Run("fib6 limit", func(t *testing.T) {
		d := fibFixture(t, loadOptions{}, 4)
		d.fib6.max = 2
		if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 1}, {p("2001:db8:1::/48"), 1}}); err != nil {
			t.Fatal(err)
		}
		err := d.SetRoutes([]Route{{p("2001:db8::/32"), 2}, {p("2001:db8:2::/48"), 2}})
		if !errors.Is(err, ErrFIBFull) {
			t.Fatalf("SetRoutes: %v, want ErrFIBFull", err)
		}
		checkRoutes6(t, d, map[string]uint32{"2001:db8:2::1": 1})
		// Replacing does not need room.
		if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 2}}); err != nil {
			t.Fatal(err)
		}
		checkRoutes6(t, d, map[string]uint32{"2001:db8:2::1": 2})
	})
}

const noRoute = ^uint32(0)

// checkRoutes6 checks which nexthop of a fibFixture each address uses
// (noRoute: none).
func checkRoutes6(t *testing.T, d *Datapath, want map[string]uint32) {
	t.Helper()
	for dst, nh := range want {
		got, ok := runLookupAddr(t, d, netip.MustParseAddr(dst))
		if !ok {
			got = noRoute
		}
		if got != nh {
			t.Errorf("%s: nexthop %d, want %d (%d = none)", dst, got, nh, noRoute)
		}
	}
}

// runLookupAddr is runLookup for either family.
func runLookupAddr(tb testing.TB, d *Datapath, addr netip.Addr) (uint32, bool) {
	var frame []byte
	if addr.Is4() {
		frame = udpFrame(addr.String(), 64)
	} else {
		frame = udp6Frame(addr.String(), 64)
	}
	ret, out := run(tb, d, frame)
	switch ret {
	case xdpRedirect:
		if !bytes.Equal(out[6:8], []byte{0x02, 0x99}) {
			tb.Fatalf("%s: forwarded with source MAC %s, not a nexthop's", addr, net.HardwareAddr(out[6:12]))
		}
		return uint32(out[10])<<8 | uint32(out[11]), true
	case xdpPass:
		return 0, false
	}
	tb.Fatalf("%s: returned %d", addr, ret)
	return 0, false
}

// BenchmarkXDPForward6 is BenchmarkXDPForward for one IPv6 destination
// (cache-hot, so it shows the fixed cost of the IPv6 path).
func BenchmarkXDPForward6(b *testing.B) {
	f := newFixture6(b, loadOptions{})
	checksOn(b, f, netip.MustParseAddr("2001:db8:ffff::2"))
	before := counters(b, f.d)
	benchForward(b, f.d, udp6Frame("2001:db8:1::9", 255))
	after := counters(b, f.d)
	if after["forwarded_ipv6"]-before["forwarded_ipv6"] != after["rx"]-before["rx"] {
		b.Errorf("not every packet was forwarded: %s", fmtDelta(before, after))
	}
}
