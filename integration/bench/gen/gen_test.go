//go:build linux

package gen

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpTX       = 3
	xdpRedirect = 4
)

func loadForTest(t *testing.T) *Gen {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads BPF programs and runs them with BPF_PROG_TEST_RUN")
	}
	g, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// Every run must rewrite the whole header from the template, whatever the
// previous run's receiver left in the frame, and move to the next
// destination with a valid IPv4 checksum.
func TestGenRewritesHeader(t *testing.T) {
	g := loadForTest(t)
	h := Header{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.1"), SrcPort: 1234, DstPort: 9, TTL: 64,
	}
	dsts := []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.255"), netip.MustParseAddr("1.2.3.4")}
	if err := g.SetTraffic(h, dsts); err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte{0xee}, FrameLen) // what a router's edits could leave
	out := make([]byte, FrameLen)
	for i := range 2 * len(dsts) {
		ret, err := g.objs.XdpGen.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpTX {
			t.Fatalf("run %d: returned %d, want XDP_TX", i, ret)
		}
		if !bytes.Equal(out[0:6], h.DstMAC) || !bytes.Equal(out[6:12], h.SrcMAC) || binary.BigEndian.Uint16(out[12:]) != 0x0800 {
			t.Errorf("run %d: Ethernet header % x", i, out[:14])
		}
		ip := out[14:34]
		if ip[0] != 0x45 || ip[8] != 64 || ip[9] != 17 || binary.BigEndian.Uint16(ip[2:]) != FrameLen-14 {
			t.Errorf("run %d: IPv4 header % x", i, ip)
		}
		if got, want := netip.AddrFrom4([4]byte(ip[16:20])), dsts[i%len(dsts)]; got != want {
			t.Errorf("run %d: destination %s, want %s", i, got, want)
		}
		if Checksum(ip) != 0 {
			t.Errorf("run %d: IPv4 checksum %#04x does not verify", i, binary.BigEndian.Uint16(ip[10:]))
		}
		if sp, dp := binary.BigEndian.Uint16(out[34:]), binary.BigEndian.Uint16(out[36:]); sp != 1234 || dp != 9 {
			t.Errorf("run %d: UDP ports %d > %d", i, sp, dp)
		}
	}
}

// A flood from spoofed sources: every run takes the next source and the
// next port, keeps the destination, and carries valid IPv4 and TCP
// checksums (the kernel drops a SYN whose checksum fails before any of the
// work a SYN flood is meant to cause).
func TestGenFloodTCPSYN(t *testing.T) {
	g := loadForTest(t)
	h := Header{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcPort: 1024, DstPort: 179, TTL: 64, TCP: true,
	}
	dst := netip.MustParseAddr("10.10.3.1")
	srcs := []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("203.0.113.200"), netip.MustParseAddr("100.64.255.254")}
	if err := g.SetFlood(h, dst, srcs, Ports{Count: 4}); err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte{0xee}, FrameLen)
	out := make([]byte, FrameLen)
	for i := range 8 {
		ret, err := g.objs.XdpGen.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpTX {
			t.Fatalf("run %d: returned %d, want XDP_TX", i, ret)
		}
		ip := out[14:34]
		if ip[9] != 6 || binary.BigEndian.Uint16(ip[2:]) != 40 || ip[8] != 64 {
			t.Errorf("run %d: IPv4 header % x", i, ip)
		}
		if got, want := netip.AddrFrom4([4]byte(ip[12:16])), srcs[i%len(srcs)]; got != want {
			t.Errorf("run %d: source %s, want %s", i, got, want)
		}
		if got := netip.AddrFrom4([4]byte(ip[16:20])); got != dst {
			t.Errorf("run %d: destination %s, want %s", i, got, dst)
		}
		if Checksum(ip) != 0 {
			t.Errorf("run %d: IPv4 checksum does not verify", i)
		}
		tcp := out[34:54]
		if sp, dp := binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:]); sp != uint16(1024+i%4) || dp != 179 {
			t.Errorf("run %d: TCP ports %d > %d, want %d > 179", i, sp, dp, 1024+i%4)
		}
		if tcp[13] != 0x02 || tcp[12]>>4 != 5 {
			t.Errorf("run %d: flags %#02x, data offset %d: want a bare SYN", i, tcp[13], tcp[12]>>4)
		}
		// The checksum over the pseudo-header and the segment, checksum
		// field included, is 0 when it verifies.
		pseudo := append(append([]byte{}, ip[12:20]...), 0, 6, 0, 20)
		if Checksum(append(pseudo, tcp...)) != 0 {
			t.Errorf("run %d: TCP checksum %#04x does not verify", i, binary.BigEndian.Uint16(tcp[16:]))
		}
	}
}

// A UDP flood rotating its destination port: closed ports, one after another.
func TestGenFloodUDPPorts(t *testing.T) {
	g := loadForTest(t)
	h := Header{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcPort: 53, DstPort: 40000, TTL: 64,
	}
	dst := netip.MustParseAddr("10.10.3.1")
	srcs := []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}
	if err := g.SetFlood(h, dst, srcs, Ports{Dst: true, Count: 1024}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, FrameLen)
	for i := range 4 {
		if _, err := g.objs.XdpGen.Run(&ebpf.RunOptions{Data: make([]byte, FrameLen), DataOut: out}); err != nil {
			t.Fatal(err)
		}
		ip := out[14:34]
		if ip[9] != 17 || Checksum(ip) != 0 || netip.AddrFrom4([4]byte(ip[12:16])) != srcs[i%2] {
			t.Errorf("run %d: IPv4 header % x", i, ip)
		}
		if sp, dp := binary.BigEndian.Uint16(out[34:]), binary.BigEndian.Uint16(out[36:]); sp != 53 || dp != uint16(40000+i) {
			t.Errorf("run %d: UDP ports %d > %d, want 53 > %d", i, sp, dp, 40000+i)
		}
		if c := binary.BigEndian.Uint16(out[40:]); c != 0 {
			t.Errorf("run %d: UDP checksum %#04x, want 0 (none)", i, c)
		}
	}
}

// xdp_sink_udp drops and counts only UDP to its port; ARP and other UDP pass.
func TestSinkUDP(t *testing.T) {
	g := loadForTest(t)
	if err := g.objs.SinkUdpPort.Set(uint32(9)); err != nil {
		t.Fatal(err)
	}
	h := Header{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), Src: netip.MustParseAddr("10.0.0.1"), DstPort: 9, TTL: 64}
	udp9 := header(h, h.Src, false, Ports{})
	h.DstPort = 10
	udp10 := header(h, h.Src, false, Ports{})
	arp := make([]byte, FrameLen)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	for _, c := range []struct {
		name  string
		frame []byte
		want  uint32
	}{
		{"UDP to port 9", append(udp9[:], make([]byte, FrameLen-hdrLen)...), xdpDrop},
		{"UDP to port 10", append(udp10[:], make([]byte, FrameLen-hdrLen)...), xdpPass},
		{"ARP", arp, xdpPass},
		{"runt", udp9[:20], xdpPass},
	} {
		ret, err := g.objs.XdpSinkUdp.Run(&ebpf.RunOptions{Data: c.frame})
		if err != nil {
			t.Fatal(err)
		}
		if ret != c.want {
			t.Errorf("%s: returned %d, want %d", c.name, ret, c.want)
		}
	}
	if n, err := g.SinkPackets(); err != nil || n != 1 {
		t.Errorf("counted %d (%v), want 1", n, err)
	}
}

func TestSinkCountsAndDrops(t *testing.T) {
	g := loadForTest(t)
	ret, err := g.objs.XdpSink.Run(&ebpf.RunOptions{Data: make([]byte, FrameLen), Repeat: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if ret != xdpDrop {
		t.Errorf("returned %d, want XDP_DROP", ret)
	}
	n, err := g.SinkPackets()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Errorf("counted %d, want 1000", n)
	}
}

func TestRedirectBare(t *testing.T) {
	g := loadForTest(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.objs.BarePort.Put(uint32(0), uint32(lo.Index)); err != nil {
		t.Fatal(err)
	}
	ret, err := g.objs.XdpRedirectBare.Run(&ebpf.RunOptions{Data: make([]byte, FrameLen)})
	if err != nil {
		t.Fatal(err)
	}
	if ret != xdpRedirect {
		t.Errorf("returned %d, want XDP_REDIRECT", ret)
	}
}

func TestSetTrafficRejects(t *testing.T) {
	g := loadForTest(t)
	ok := Header{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), Src: netip.MustParseAddr("10.0.0.1")}
	dst := []netip.Addr{netip.MustParseAddr("1.2.3.4")}
	bad := []struct {
		name string
		h    Header
		dsts []netip.Addr
	}{
		{"short MAC", Header{SrcMAC: make(net.HardwareAddr, 5), DstMAC: ok.DstMAC, Src: ok.Src}, dst},
		{"IPv6 source", Header{SrcMAC: ok.SrcMAC, DstMAC: ok.DstMAC, Src: netip.MustParseAddr("::1")}, dst},
		{"no destinations", ok, nil},
		{"IPv6 destination", ok, []netip.Addr{netip.MustParseAddr("::2")}},
	}
	for _, c := range bad {
		if err := g.SetTraffic(c.h, c.dsts); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	v4 := netip.MustParseAddr("10.0.0.2")
	floods := []struct {
		name  string
		dst   netip.Addr
		srcs  []netip.Addr
		ports Ports
	}{
		{"IPv6 target", netip.MustParseAddr("::1"), dst, Ports{}},
		{"no sources", v4, nil, Ports{}},
		{"IPv6 source", v4, []netip.Addr{netip.MustParseAddr("::2")}, Ports{}},
		{"3 ports", v4, dst, Ports{Count: 3}},
		{"ports past 65535", v4, dst, Ports{Dst: true, Count: 65536}},
	}
	for _, c := range floods {
		h := ok
		h.DstPort = 1
		if err := g.SetFlood(h, c.dst, c.srcs, c.ports); err == nil {
			t.Errorf("flood with %s: accepted", c.name)
		}
	}
	if err := g.Send(1, 1); err == nil {
		t.Error("Send before a successful SetTraffic: accepted")
	}
}
