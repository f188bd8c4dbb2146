//go:build linux

package gen

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// Every run of xdp_gen6 rewrites the whole frame's headers from the IPv6
// template, takes the next destination, and carries a UDP checksum that
// verifies with the IPv6 pseudo-header (IPv6 requires one).
func TestGen6RewritesHeader(t *testing.T) {
	g := loadForTest(t)
	h := Header{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("2001:db8::1"), SrcPort: 1234, DstPort: 9, TTL: 64,
	}
	dsts := []netip.Addr{
		netip.MustParseAddr("2001:db8:1:2::7"), netip.MustParseAddr("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"),
		netip.MustParseAddr("2a00::1"), netip.MustParseAddr("2001:db8::1:fffe"),
	}
	if err := g.SetTraffic6(h, dsts); err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte{0xee}, FrameLen6)
	out := make([]byte, FrameLen6)
	for i := range 2 * len(dsts) {
		ret, err := g.objs.XdpGen6.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpTX {
			t.Fatalf("run %d: returned %d, want XDP_TX", i, ret)
		}
		if !bytes.Equal(out[0:6], h.DstMAC) || !bytes.Equal(out[6:12], h.SrcMAC) || binary.BigEndian.Uint16(out[12:]) != 0x86dd {
			t.Errorf("run %d: Ethernet header % x", i, out[:14])
		}
		ip := out[14:54]
		if ip[0]>>4 != 6 || ip[6] != 17 || ip[7] != 64 || binary.BigEndian.Uint16(ip[4:]) != FrameLen6-54 {
			t.Errorf("run %d: IPv6 header % x", i, ip)
		}
		if got := netip.AddrFrom16([16]byte(ip[8:24])); got != h.Src {
			t.Errorf("run %d: source %s, want %s", i, got, h.Src)
		}
		want := dsts[i%len(dsts)]
		if got := netip.AddrFrom16([16]byte(ip[24:40])); got != want {
			t.Errorf("run %d: destination %s, want %s", i, got, want)
		}
		udp := out[54:]
		if sp, dp, l := binary.BigEndian.Uint16(udp), binary.BigEndian.Uint16(udp[2:]), binary.BigEndian.Uint16(udp[4:]); sp != 1234 || dp != 9 || l != FrameLen6-54 {
			t.Errorf("run %d: UDP ports %d > %d, length %d", i, sp, dp, l)
		}
		// The checksum the generator wrote must be the one Frame6 computes
		// from scratch for this destination (and so verify).
		if got, want := binary.BigEndian.Uint16(udp[6:]), binary.BigEndian.Uint16(Frame6(h, want)[60:]); got != want || got == 0 {
			t.Errorf("run %d: UDP checksum %#04x, want %#04x", i, got, want)
		}
	}
}

// The IPv6 sum is checked independently of Frame6: one's complement sum of
// pseudo-header and datagram, including the checksum, is all ones.
func TestFrame6ChecksumVerifies(t *testing.T) {
	h := Header{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), Src: netip.MustParseAddr("2001:db8::1"), SrcPort: 7, DstPort: 9, TTL: 64}
	f := Frame6(h, netip.MustParseAddr("2001:db8:5::9"))
	ip, udp := f[14:54], f[54:]
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	add(ip[8:40])
	sum += uint32(len(udp)) + 17
	add(udp)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("sum %#04x over pseudo-header and datagram, want 0xffff", sum)
	}
}

func TestSetTraffic6Rejects(t *testing.T) {
	g := loadForTest(t)
	good := Header{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), Src: netip.MustParseAddr("2001:db8::1")}
	dst := []netip.Addr{netip.MustParseAddr("2001:db8::2")}
	for name, c := range map[string]struct {
		h    Header
		dsts []netip.Addr
	}{
		"IPv4 source":      {Header{SrcMAC: good.SrcMAC, DstMAC: good.DstMAC, Src: netip.MustParseAddr("10.0.0.1")}, dst},
		"IPv4 destination": {good, []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		"mapped source":    {Header{SrcMAC: good.SrcMAC, DstMAC: good.DstMAC, Src: netip.MustParseAddr("::ffff:10.0.0.1")}, dst},
		"no destinations":  {good, nil},
		"TCP":              {Header{SrcMAC: good.SrcMAC, DstMAC: good.DstMAC, Src: good.Src, TCP: true}, dst},
	} {
		if err := g.SetTraffic6(c.h, c.dsts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := g.SetTraffic6(good, dst); err != nil {
		t.Fatal(err)
	}
	if err := g.SetPayload(100); err == nil {
		t.Error("SetPayload on IPv6 traffic: accepted")
	}
}
