//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// vlanTag returns an 802.1Q-style tag (TPID, then PCP 3 and vid) followed by
// inner, which starts with the inner EtherType.
func vlanTag(tpid uint16, vid uint16, inner []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, tpid)
	b = binary.BigEndian.AppendUint16(b, 3<<13|vid)
	return append(b, inner...)
}

// tagged returns frame (an untagged Ethernet frame) with tags inserted after
// the MACs, outermost first: each tag is a TPID and a VLAN id.
func tagged(frame []byte, tags ...[2]uint16) []byte {
	inner := frame[12:]
	for i := len(tags) - 1; i >= 0; i-- {
		inner = vlanTag(tags[i][0], tags[i][1], inner)
	}
	return append(bytes.Clone(frame[:12]), inner...)
}

// TestVLAN checks that tagged frames go to the kernel unmodified, whatever
// they carry: a router port is untagged, and the kernel's VLAN devices
// (or nothing) own the tagged traffic. A frame whose inner packet would be
// forwarded must still not be, since the fast path does not know the
// VLAN's routes or neighbours.
func TestVLAN(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	v4 := udpFrame("198.51.100.77", 64)  // forwarded untagged
	v6 := udp6Frame("2001:db8:1::9", 64) // forwarded untagged
	arp := ethFrame(macBcast, macPeer, 0x0806, make([]byte, 28))
	for _, in := range [][]byte{v4, v6} {
		if ret, _ := run(t, f.d, bytes.Clone(in)); ret != xdpRedirect {
			t.Fatalf("untagged frame returned %d, want XDP_REDIRECT", ret)
		}
	}
	const (
		dot1Q  = 0x8100
		dot1AD = 0x88a8
		old    = 0x9100 // pre-standard QinQ
	)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"802.1Q IPv4", tagged(v4, [2]uint16{dot1Q, 10})},
		{"802.1Q IPv6", tagged(v6, [2]uint16{dot1Q, 10})},
		{"802.1Q priority tag (VLAN 0) IPv4", tagged(v4, [2]uint16{dot1Q, 0})},
		{"802.1Q priority tag (VLAN 0) IPv6", tagged(v6, [2]uint16{dot1Q, 0})},
		{"802.1Q ARP", tagged(arp, [2]uint16{dot1Q, 10})},
		{"802.1ad IPv4", tagged(v4, [2]uint16{dot1AD, 20})},
		{"QinQ 802.1ad + 802.1Q IPv4", tagged(v4, [2]uint16{dot1AD, 20}, [2]uint16{dot1Q, 10})},
		{"QinQ 802.1ad + 802.1Q IPv6", tagged(v6, [2]uint16{dot1AD, 20}, [2]uint16{dot1Q, 10})},
		{"802.1Q in 802.1Q IPv6", tagged(v6, [2]uint16{dot1Q, 20}, [2]uint16{dot1Q, 10})},
		{"802.1Q, frame cut inside the tag", tagged(v4, [2]uint16{dot1Q, 10})[:16]},
		{"802.1Q, frame cut after the tag", tagged(v6, [2]uint16{dot1Q, 10})[:18]},
		{"802.1Q to a broadcast MAC", tagged(ethFrame(macBcast, macPeer, 0x0800, v4[14:]), [2]uint16{dot1Q, 10})},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPassed(t, f.d, tc.frame, "pass_vlan") })
	}
	// Frames whose EtherType is an unknown TPID are not IP either.
	t.Run("pre-standard QinQ 0x9100", func(t *testing.T) {
		checkPassed(t, f.d, tagged(v4, [2]uint16{old, 20}, [2]uint16{dot1Q, 10}), "pass_not_ipv4")
	})
}

// TestExtHeaders6 checks IPv6 extension headers: Hop-by-Hop options (which
// every router must look at) go to the kernel; the others are end-to-end
// and are forwarded untouched (RFC 8200 section 4), including chains and
// headers the program does not know.
func TestExtHeaders6(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	dst := netip.MustParseAddr("2001:db8:1::9") // via nexthop 12
	const (
		nhDestOpts = 60
		nhESP      = 50
		nhAH       = 51
		nhMobility = 135
	)
	// ext returns an 8-byte extension header whose next header is next.
	ext := func(next uint8) []byte { return []byte{next, 0, 1, 4, 0, 0, 0, 0} } // PadN
	frame := func(first uint8, payload ...[]byte) []byte {
		return ip6Frame(ipv6Header{nextHeader: first, hopLimit: 64, payloadLen: -1, dst: dst}, bytes.Join(payload, nil))
	}
	udp := udpPayload(8)

	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"destination options", frame(nhDestOpts, ext(nhUDP), udp)},
		{"routing, then destination options", frame(nhRouting, []byte{nhDestOpts, 0, 4, 0, 0, 0, 0, 0}, ext(nhUDP), udp)},
		{"fragment, first fragment", frame(nhFragment, []byte{nhUDP, 0, 0, 1, 0, 0, 0, 7}, udp)},
		{"fragment, later fragment", frame(nhFragment, []byte{nhUDP, 0, 0x05, 0x00, 0, 0, 0, 7}, udpPayload(30))},
		{"AH", frame(nhAH, []byte{nhUDP, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, make([]byte, 12), udp)},
		{"ESP", frame(nhESP, make([]byte, 32))},
		{"mobility header", frame(nhMobility, []byte{nhNone, 0, 0, 0, 0, 0, 0, 0})},
		{"no next header", frame(nhNone)},
		// Hop-by-Hop is only special as the first header; elsewhere it
		// is the destination's problem (RFC 8200 section 4.1).
		{"Hop-by-Hop after destination options", frame(nhDestOpts, ext(nhHopByHop), ext(nhUDP), udp)},
		{"unknown next header 253 (experimental)", frame(253, make([]byte, 16))},
		{"extension header cut by payload length", frame(nhDestOpts, []byte{nhUDP, 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.frame)
			before := counters(t, f.d)
			ret, out := run(t, f.d, tc.frame)
			if ret != xdpRedirect {
				t.Fatalf("returned %d, want XDP_REDIRECT; moved: %s", ret, fmtDelta(before, counters(t, f.d)))
			}
			checkForwarded6(t, in, out, macNeigh2, macSrc2)
			checkDelta(t, before, counters(t, f.d), map[string]uint64{
				"rx": 1, "forwarded": 1, "forwarded_ipv6": 1, "forwarded_bytes": uint64(len(in)),
			})
		})
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"Hop-by-Hop", frame(nhHopByHop, ext(nhUDP), udp)},
		{"Hop-by-Hop with router alert (MLD, RSVP)", frame(nhHopByHop, []byte{nhICMPv6, 0, 5, 2, 0, 0, 1, 0}, make([]byte, 24))},
		{"Hop-by-Hop, jumbo payload length 0", ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 64, payloadLen: 0, dst: dst}, append([]byte{nhUDP, 0, 0xc2, 4, 0, 1, 0, 16}, udp...))},
		{"Hop-by-Hop, hop limit 1", ip6Frame(ipv6Header{nextHeader: nhHopByHop, hopLimit: 1, payloadLen: -1, dst: dst}, append(ext(nhUDP), udp...))},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPassed(t, f.d, tc.frame, "pass_options") })
	}
}

// TestTruncated cuts frames that would be forwarded, of both families and
// with and without an ECMP group, at every length from the Ethernet header
// up: every cut frame must go to the kernel unmodified, counted as
// truncated, since its length fields promise more than it holds. The
// Ethernet header alone is the shortest frame BPF_PROG_TEST_RUN takes.
func TestTruncated(t *testing.T) {
	f := newGroupFixture(t)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"IPv4 UDP", udpFrame("198.51.100.77", 64)},
		{"IPv4 ICMP", ipFrame(ipv4Header{ttl: 64, proto: 1, dst: netip.MustParseAddr("203.0.113.9")}, icmpEcho(8))},
		{"IPv4 UDP via ECMP group", udpFlowFrame("198.19.4.1", 1234)},
		{"IPv6 UDP", udp6Frame("2001:db8:1::9", 64)},
		{"IPv6 ICMPv6", echo6Frame("2001:db8:99::5", 64)},
		{"IPv6 UDP via ECMP group", udp6Frame("2001:db8:44::1", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ret, _ := run(t, f.d, bytes.Clone(tc.frame)); ret != xdpRedirect {
				t.Fatalf("whole frame returned %d, want XDP_REDIRECT", ret)
			}
			for n := 14; n < len(tc.frame); n++ {
				t.Run(fmt.Sprint(n), func(t *testing.T) { checkPassed(t, f.d, bytes.Clone(tc.frame[:n]), "pass_truncated") })
			}
		})
	}
	// A payload shorter than the L4 header, with lengths that agree, is
	// not truncated: the ECMP hash then does without ports.
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"IPv4, 2 bytes of UDP", ipFrame(ipv4Header{ttl: 64, proto: 17, dst: netip.MustParseAddr("198.19.4.1")}, []byte{0x9c, 0x40})},
		{"IPv6, 2 bytes of UDP", ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 64, payloadLen: -1, dst: netip.MustParseAddr("2001:db8:44::1")}, []byte{0x9c, 0x40})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counters(t, f.d)
			if ret, _ := run(t, f.d, tc.frame); ret != xdpRedirect {
				t.Fatalf("returned %d, want XDP_REDIRECT; moved: %s", ret, fmtDelta(before, counters(t, f.d)))
			}
		})
	}
}
