//go:build linux

package datapath

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// The checks a router owes the packets it forwards (RFC 1812, RFC 8200):
// header checksum, martian addresses, frames for other hosts and the egress
// MTU.

// randomSource4 returns a random IPv4 source that a router may forward
// from: not in 0/8, 127/8, 169.254/16 or 224/3.
func randomSource4(rng *rand.Rand) netip.Addr {
	for {
		var a [4]byte
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		if a[0] != 0 && a[0] != 127 && a[0] < 224 && (a[0] != 169 || a[1] != 254) {
			return netip.AddrFrom4(a)
		}
	}
}

// checkDropped runs frame and checks that the program dropped it, counted
// once in rx and once under reason.
func checkDropped(t *testing.T, d *Datapath, frame []byte, reason string) {
	t.Helper()
	checkOne(t, d, frame, xdpDrop, reason)
}

// checkFwd runs frame and checks that it was forwarded.
func checkFwd(t *testing.T, d *Datapath, frame []byte) {
	t.Helper()
	before := counters(t, d)
	if ret, _ := run(t, d, frame); ret != xdpRedirect {
		t.Errorf("returned %d, want XDP_REDIRECT; moved: %s", ret, fmtDelta(before, counters(t, d)))
	}
}

func TestBadChecksum(t *testing.T) {
	f := newFixture(t, loadOptions{})
	good := udpFrame("198.51.100.7", 64)
	checkFwd(t, f.d, bytes.Clone(good))
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"forwardable", good},
		{"to the router", udpFrame("198.51.100.1", 64)},
		{"TTL 1", udpFrame("198.51.100.7", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, off := range []int{10, 11, 8, 12, 19} { // checksum, TTL, addresses
				bad := bytes.Clone(tc.frame)
				bad[14+off] ^= 0x40
				checkDropped(t, f.d, bad, "drop_bad_checksum")
			}
		})
	}
	// 0x0000 and 0xffff are the same checksum in ones' complement: a
	// header whose sum is 0xffff with either one in the field is fine.
	t.Run("checksum field all ones", func(t *testing.T) {
		fr := udpFrame("198.51.100.7", 64)
		ip := fr[14:34]
		if ip[10] != 0 || ip[11] != 0 {
			// Make the checksum field 0 by compensating in the id:
			// adding the checksum to the id keeps the sum.
			id := uint32(ip[4])<<8 | uint32(ip[5])
			c := uint32(ip[10])<<8 | uint32(ip[11])
			s := id + c
			s = s&0xffff + s>>16
			ip[4], ip[5] = byte(s>>8), byte(s)
			ip[10], ip[11] = 0, 0
		}
		if onesSum(ip) != 0xffff {
			t.Fatalf("test header sums to %#x", onesSum(ip))
		}
		checkFwd(t, f.d, bytes.Clone(fr))
		ip[10], ip[11] = 0xff, 0xff
		checkFwd(t, f.d, fr)
	})
}

func TestMartians4(t *testing.T) {
	f := newFixture(t, loadOptions{})
	a := netip.MustParseAddr
	from := func(src string) []byte {
		return ipFrame(ipv4Header{ttl: 64, proto: 17, src: a(src), dst: a("198.51.100.7")}, udpPayload(18))
	}
	for _, src := range []string{"0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.255", "169.254.0.1",
		"169.254.255.254", "224.0.0.5", "239.255.255.255", "240.0.0.1", "255.255.255.255"} {
		t.Run("source "+src, func(t *testing.T) { checkDropped(t, f.d, from(src), "drop_martian_src") })
	}
	for _, src := range []string{"1.0.0.1", "126.255.255.255", "128.0.0.1", "169.253.1.1", "169.255.1.1", "223.255.255.255"} {
		t.Run("source "+src, func(t *testing.T) { checkFwd(t, f.d, from(src)) })
	}
	for _, dst := range []string{"0.0.0.0", "0.1.2.3", "127.0.0.1", "240.0.0.1", "255.255.255.254"} {
		t.Run("destination "+dst, func(t *testing.T) { checkDropped(t, f.d, udpFrame(dst, 64), "drop_martian_dst") })
	}
	// Multicast and the limited broadcast are the local stack's.
	for _, dst := range []string{"224.0.0.5", "239.1.1.1", "255.255.255.255"} {
		t.Run("destination "+dst, func(t *testing.T) { checkPassed(t, f.d, udpFrame(dst, 64), "pass_not_unicast") })
	}
	// The router's own link-local peers (169.254/16 BGP sessions) reach
	// the kernel.
	t.Run("169.254/16 source to the router", func(t *testing.T) {
		fr := ipFrame(ipv4Header{ttl: 64, proto: 17, src: a("169.254.10.2"), dst: a("198.51.100.1")}, udpPayload(18))
		checkPassed(t, f.d, fr, "pass_local")
	})
}

func TestMartians6(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	a := netip.MustParseAddr
	fromSrc := func(src string) []byte {
		return ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 9, payloadLen: -1, src: a(src), dst: a("2001:db8:1::1")}, udpPayload(8))
	}
	for _, tc := range []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"unspecified destination", udp6Frame("::", 64), "drop_martian_dst"},
		{"loopback destination", udp6Frame("::1", 64), "drop_martian_dst"},
		{"multicast source", fromSrc("ff02::1"), "drop_martian_src"},
		{"global multicast source", fromSrc("ff0e::1"), "drop_martian_src"},
		{"unspecified source", fromSrc("::"), "drop_martian_src"},
		{"loopback source", fromSrc("::1"), "drop_martian_src"},
		{"loopback source to the router", ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 9, payloadLen: -1, src: a("::1"), dst: a("2001:db8::1")}, udpPayload(8)), "drop_martian_src"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDropped(t, f.d, tc.frame, tc.reason) })
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"link-local source", fromSrc("fe80::5")},
		{"link-local destination", udp6Frame("fe80::1", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPassed(t, f.d, tc.frame, "pass_not_routable") })
	}
	for _, src := range []string{"::2", "::ffff:192.0.2.1", "2001:db8:aaaa::1", "fec0::1"} {
		t.Run("source "+src, func(t *testing.T) { checkFwd(t, f.d, fromSrc(src)) })
	}
}

// withDstMAC returns a copy of frame addressed to mac.
func withDstMAC(frame []byte, mac []byte) []byte {
	f := bytes.Clone(frame)
	copy(f, mac)
	return f
}

func TestOtherHost(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	// run's frames arrive on lo, the fixture's port.
	if err := f.d.SetPortLink(f.lo, macRouter, 0); err != nil {
		t.Fatal(err)
	}
	v4, v6 := udpFrame("198.51.100.7", 64), udp6Frame("2001:db8:1::9", 64)
	for _, fr := range [][]byte{v4, v6} {
		checkFwd(t, f.d, bytes.Clone(fr))
		for _, other := range []string{"02:00:00:00:aa:03", "02:00:00:00:ab:02", "12:00:00:00:aa:02", "00:00:00:00:00:00"} {
			checkPassed(t, f.d, withDstMAC(fr, mac(other)), "pass_other_host")
		}
		checkPassed(t, f.d, withDstMAC(fr, macBcast), "pass_not_unicast")
	}
	// Without a MAC the port takes every frame.
	if err := f.d.SetPortLink(f.lo, nil, 0); err != nil {
		t.Fatal(err)
	}
	checkFwd(t, f.d, withDstMAC(v4, macPeer))
	checkFwd(t, f.d, withDstMAC(v6, macPeer))
}

func TestMTU(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	const mtu = 1400
	// lo is the egress port of every route of the fixture.
	if err := f.d.SetPortLink(f.lo, nil, mtu); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	v4 := func(size int, df bool) []byte {
		var frag uint16
		if df {
			frag = 0x4000
		}
		return ipFrame(ipv4Header{ttl: 64, proto: 17, fragOff: frag, dst: a("198.51.100.7")}, udpPayload(size-28))
	}
	v6 := func(size int) []byte {
		return ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 64, payloadLen: -1, dst: a("2001:db8:1::9")}, udpPayload(size-48))
	}
	for _, df := range []bool{true, false} {
		checkFwd(t, f.d, v4(mtu, df))
		checkPassed(t, f.d, v4(mtu+1, df), "pass_mtu")
		checkPassed(t, f.d, v4(1500, df), "pass_mtu")
	}
	checkFwd(t, f.d, v6(mtu))
	checkPassed(t, f.d, v6(mtu+1), "pass_mtu")
	checkPassed(t, f.d, v6(1500), "pass_mtu")
	// An IPv4 route via an IPv6 gateway leaves through the same port.
	checkPassed(t, f.d, ipFrame(ipv4Header{ttl: 64, proto: 17, dst: a("100.64.8.9")}, udpPayload(mtu)), "pass_mtu")
	// MTU 0: not known, no check.
	if err := f.d.SetPortLink(f.lo, nil, 0); err != nil {
		t.Fatal(err)
	}
	checkFwd(t, f.d, v4(1500, true))
	checkFwd(t, f.d, v6(1500))
}

func TestSetPortLinkErrors(t *testing.T) {
	f := newFixture(t, loadOptions{})
	for _, tc := range []struct {
		name    string
		err     error
		mention string
	}{
		{"MTU too small", f.d.SetPortLink(f.lo, macRouter, 67), "mtu 67"},
		{"MTU too large", f.d.SetPortLink(f.lo, macRouter, 65536), "mtu 65536"},
		{"negative MTU", f.d.SetPortLink(f.lo, macRouter, -1), "mtu -1"},
		{"short MAC", f.d.SetPortLink(f.lo, macRouter[:4], 1500), "mac"},
		{"not a port", f.d.SetPortLink(missingPort, macRouter, 1500), "4242"},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(tc.err, ErrInvalid) && !errors.Is(tc.err, ErrNotAttached) {
			t.Errorf("%s: error %q is neither ErrInvalid nor ErrNotAttached", tc.name, tc.err)
		}
		if !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s: error %q does not mention %q", tc.name, tc.err, tc.mention)
		}
	}
}
