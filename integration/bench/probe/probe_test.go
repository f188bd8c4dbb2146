//go:build linux

package probe

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

const (
	xdpPass     = 2
	xdpDrop     = 1
	xdpRedirect = 4
)

func loadForTest(t *testing.T) *Probe {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads BPF programs and runs them with BPF_PROG_TEST_RUN")
	}
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// udpFrame is an Ethernet/IPv4/UDP frame of 42+payload bytes (at least 60)
// from 10.9.0.100 to dst, port 9.
func udpFrame(dst netip.Addr, payload int) []byte {
	f := make([]byte, max(60, 42+payload))
	copy(f[0:6], []byte{2, 0, 0, 0, 9, 1})
	copy(f[6:12], []byte{2, 0, 0, 0, 9, 100})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(28+payload))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 9, 0, 100})
	d := dst.As4()
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	binary.BigEndian.PutUint16(f[34:], 40000)
	binary.BigEndian.PutUint16(f[36:], 9)
	binary.BigEndian.PutUint16(f[38:], uint16(8+payload))
	return f
}

// A stamped probe is recorded with the time since its stamp; frames to
// another port, or not UDP, are dropped unrecorded.
func TestLatencySink(t *testing.T) {
	p := loadForTest(t)
	if err := p.objs.LatPort.Set(uint32(9)); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetLatency(); err != nil {
		t.Fatal(err)
	}
	for _, payload := range []int{0, 1400} {
		f := udpFrame(netip.MustParseAddr("198.51.100.1"), payload)
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		sent := ts.Nano() - 5000 // 5 µs ago
		if err := Stamp(f, sent); err != nil {
			t.Fatal(err)
		}
		if checksum(f[14:34]) != 0 {
			t.Errorf("payload %d: IPv4 checksum does not verify after Stamp", payload)
		}
		start := time.Now()
		ret, err := p.objs.XdpSinkLatency.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpDrop {
			t.Errorf("payload %d: returned %d, want XDP_DROP", payload, ret)
		}
		lat, n, err := p.Latencies()
		if err != nil {
			t.Fatal(err)
		}
		if int(n) != len(lat) || len(lat) == 0 {
			t.Fatalf("payload %d: %d samples, %d arrived", payload, len(lat), n)
		}
		if got, most := lat[len(lat)-1], 5*time.Microsecond+time.Since(start)+time.Millisecond; got < 5*time.Microsecond || got > most {
			t.Errorf("payload %d: latency %s, want 5µs to %s", payload, got, most)
		}
	}
	other := udpFrame(netip.MustParseAddr("198.51.100.1"), 0)
	binary.BigEndian.PutUint16(other[36:], 53)
	tcp := udpFrame(netip.MustParseAddr("198.51.100.1"), 0)
	tcp[23] = 6
	for _, f := range [][]byte{other, tcp, {1, 2, 3}} {
		if _, err := p.objs.XdpSinkLatency.Run(&ebpf.RunOptions{Data: append(f, make([]byte, max(0, 14-len(f)))...)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, n, _ := p.Latencies(); n != 2 {
		t.Errorf("%d samples after frames that are not probes, want 2", n)
	}
	if err := Stamp(tcp, 1); err == nil {
		t.Error("Stamp accepted a TCP frame")
	}
}

// The kernel-FIB forwarder finds the route in the table it is given,
// rewrites MACs and TTL, and redirects to the route's port; a destination
// with no route goes to the kernel, counted by its return code.
func TestKernelFIB(t *testing.T) {
	p := loadForTest(t)
	netnstest.Run(t, func(h *netlink.Handle) {
		out, in := "kfib0", "kfib1"
		outMAC := net.HardwareAddr{2, 0, 0, 0, 8, 1}
		gwMAC := net.HardwareAddr{2, 0, 0, 0, 8, 2}
		la := netlink.NewLinkAttrs()
		la.Name, la.HardwareAddr = out, outMAC
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: in}); err != nil {
			t.Fatal(err)
		}
		lout, err := h.LinkByName(out)
		if err != nil {
			t.Fatal(err)
		}
		lin, err := h.LinkByName(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []netlink.Link{lout, lin} {
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
		addr, _ := netlink.ParseAddr("10.9.0.1/24")
		if err := h.AddrAdd(lout, addr); err != nil {
			t.Fatal(err)
		}
		gw := net.IPv4(10, 9, 0, 2)
		if err := h.NeighSet(&netlink.Neigh{LinkIndex: lout.Attrs().Index, IP: gw, HardwareAddr: gwMAC, State: netlink.NUD_PERMANENT}); err != nil {
			t.Fatal(err)
		}
		_, dst, _ := net.ParseCIDR("198.51.100.0/24")
		if err := h.RouteAdd(&netlink.Route{Dst: dst, Gw: gw, LinkIndex: lout.Attrs().Index, Table: 1001}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+in+"/forwarding", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		ctx := xdpMd{DataEnd: 60, IngressIfindex: uint32(lin.Attrs().Index)}

		if err := p.SetKernelFIB(1001, []netip.Addr{netip.MustParseAddr("198.51.100.7")}); err != nil {
			t.Fatal(err)
		}
		// The rotation does not update the checksum (nor does the
		// router's bench rotation): start from the same destination.
		f := udpFrame(netip.MustParseAddr("198.51.100.7"), 0)
		got := make([]byte, len(f))
		ret, err := p.KernelFIB().Run(&ebpf.RunOptions{Data: f, DataOut: got, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpRedirect {
			rcs, _ := p.KernelFIBResults()
			t.Fatalf("returned %d, want XDP_REDIRECT (lookup results %v)", ret, rcs)
		}
		if !bytes.Equal(got[0:6], gwMAC) || !bytes.Equal(got[6:12], outMAC) {
			t.Errorf("MACs % x -> % x, want the gateway's from the port's", got[6:12], got[0:6])
		}
		if got[22] != 63 || checksum(got[14:34]) != 0 {
			t.Errorf("TTL %d, checksum verifies: %v", got[22], checksum(got[14:34]) == 0)
		}
		if d := netip.AddrFrom4([4]byte(got[30:34])); d.String() != "198.51.100.7" {
			t.Errorf("destination %s, want the rotation's 198.51.100.7", d)
		}

		// Repeats run on the frame the last run left: the TTL runs out
		// and must not matter.
		ret, err = p.KernelFIB().Run(&ebpf.RunOptions{Data: f, Context: ctx, Repeat: 1000})
		if err != nil || ret != xdpRedirect {
			t.Fatalf("1000 repeats: returned %d, %v", ret, err)
		}
		rcs, err := p.KernelFIBResults()
		if err != nil {
			t.Fatal(err)
		}
		if rcs[0] != 1001 {
			t.Errorf("%d successful lookups, want 1001 (results %v)", rcs[0], rcs)
		}

		// Not in table 1001 (the main table has no route either).
		if err := p.SetKernelFIB(1001, []netip.Addr{netip.MustParseAddr("203.0.113.9")}); err != nil {
			t.Fatal(err)
		}
		ret, err = p.KernelFIB().Run(&ebpf.RunOptions{Data: f, Context: ctx})
		if err != nil || ret != xdpPass {
			t.Fatalf("no route: returned %d, %v, want XDP_PASS", ret, err)
		}
		if rcs, _ := p.KernelFIBResults(); rcs[0] != 0 || rcs[1]+rcs[2]+rcs[3]+rcs[4]+rcs[5]+rcs[6]+rcs[7]+rcs[8]+rcs[9]+rcs[15] != 1 {
			t.Errorf("no route: results %v, want one failure", rcs)
		}
	})
}

// xdpMd is struct xdp_md, the context of an XDP test run.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}
