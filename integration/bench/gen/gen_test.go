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
		if ipChecksum(ip) != 0 {
			t.Errorf("run %d: IPv4 checksum %#04x does not verify", i, binary.BigEndian.Uint16(ip[10:]))
		}
		if sp, dp := binary.BigEndian.Uint16(out[34:]), binary.BigEndian.Uint16(out[36:]); sp != 1234 || dp != 9 {
			t.Errorf("run %d: UDP ports %d > %d", i, sp, dp)
		}
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
	if err := g.Send(1, 1); err == nil {
		t.Error("Send before a successful SetTraffic: accepted")
	}
}
