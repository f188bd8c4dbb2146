//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// TestIFERealTraffic runs two FEs' programs, each its own Datapath, in
// native XDP mode on the two ends of a veth that is their inter-FE link:
// frames that arrive at FE 1 for a route behind FE 2 cross the link
// encapsulated and leave FE 2 by its port, routed once.
//
//	s0 --veth-- r0 [FE 1]  l12 [FE 1] --veth-- l21 [FE 2]  r2 [FE 2] --veth-- g2 (XDP_PASS)
func TestIFERealTraffic(t *testing.T) {
	d1 := loadForTest(t, loadOptions{})
	d2 := loadForTest(t, loadOptions{})
	netnstest.Run(t, func(h *netlink.Handle) {
		for _, conf := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				t.Fatalf("disable IPv6: %v", err)
			}
		}
		for _, p := range [][2]string{{"s0", "r0"}, {"l12", "l21"}, {"g2", "r2"}} {
			must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p[0]}, PeerName: p[1]}))
		}
		ifs := map[string]*net.Interface{}
		names := []string{"s0", "r0", "l12", "l21", "r2", "g2"}
		for _, name := range names {
			l, err := h.LinkByName(name)
			must(t, err)
			must(t, h.LinkSetUp(l))
			ifs[name], err = net.InterfaceByName(name)
			must(t, err)
		}
		must(t, d1.Attach(ifs["r0"].Index, ModeNative))
		must(t, d1.Attach(ifs["l12"].Index, ModeNative))
		must(t, d2.Attach(ifs["l21"].Index, ModeNative))
		must(t, d2.Attach(ifs["r2"].Index, ModeNative))
		pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
		})
		must(t, err)
		defer pass.Close()
		l, err := link.AttachXDP(link.XDPOptions{Program: pass, Interface: ifs["g2"].Index, Flags: link.XDPDriverMode})
		must(t, err)
		defer l.Close()

		// FE 1: the route is behind FE 2, NE nexthop key 5.
		must(t, d1.SetLocalFE(1))
		must(t, d1.SetInterFELink(ifs["l12"].Index, 2, ifs["l21"].HardwareAddr))
		must(t, d1.SetRemoteNexthop(1, RemoteNexthop{FE: 2, Key: 5, Port: uint32(ifs["r2"].Index)}))
		must(t, d1.SetRoutes([]Route{{netip.MustParsePrefix("203.0.113.0/24"), 1}, {netip.MustParsePrefix("2001:db8:2::/48"), 1}}))
		// FE 2: key 5 is its nexthop 7, out of r2 to g2.
		gw := netip.MustParseAddr("10.2.0.2")
		must(t, d2.SetLocalFE(2))
		must(t, d2.SetInterFELink(ifs["l21"].Index, 1, ifs["l12"].HardwareAddr))
		must(t, d2.SetNexthop(7, Nexthop{Ifindex: ifs["r2"].Index, Gateway: gw, SrcMAC: ifs["r2"].HardwareAddr}))
		must(t, d2.SetNeighbor(ifs["r2"].Index, gw, ifs["g2"].HardwareAddr))
		must(t, d2.SetNexthopKey(5, 7))

		waitFor(t, "links up", func() bool {
			for _, name := range names {
				l, err := h.LinkByName(name)
				if err != nil || l.Attrs().OperState != netlink.OperUp {
					return false
				}
			}
			return true
		})

		// What arrives at g2.
		rx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(be16(unix.ETH_P_ALL)))
		must(t, err)
		defer unix.Close(rx)
		must(t, unix.Bind(rx, &unix.SockaddrLinklayer{Ifindex: ifs["g2"].Index, Protocol: be16(unix.ETH_P_ALL)}))
		must(t, unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}))

		tx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		must(t, err)
		defer unix.Close(tx)
		const n = 50
		var sent [][]byte
		for i := range n {
			payload := udpPayload(18)
			binary.BigEndian.PutUint16(payload, uint16(40000+i))
			var frame []byte
			if i%2 == 0 {
				frame = ethFrame(ifs["r0"].HardwareAddr, ifs["s0"].HardwareAddr, 0x0800,
					ipv4Packet(ipv4Header{ttl: 64, proto: 17, src: netip.MustParseAddr("10.0.0.2"),
						dst: netip.MustParseAddr("203.0.113.9")}, payload))
			} else {
				frame = ethFrame(ifs["r0"].HardwareAddr, ifs["s0"].HardwareAddr, 0x86dd,
					ipv6Packet(ipv6Header{nextHeader: nhUDP, hopLimit: 64, payloadLen: -1,
						dst: netip.MustParseAddr("2001:db8:2::9")}, payload))
			}
			sent = append(sent, frame)
			if err := unix.Sendto(tx, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifs["s0"].Index}); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		got := 0
		buf := make([]byte, 2048)
		for got < n {
			m, _, err := unix.Recvfrom(rx, buf, 0)
			if err != nil {
				t.Fatalf("received %d of %d frames at g2: %v; FE 1 %s; FE 2 %s", got, n, err, fmtDelta(Counters{}, counters(t, d1)), fmtDelta(Counters{}, counters(t, d2)))
			}
			out := buf[:m]
			if len(out) < 14 || binary.BigEndian.Uint16(out[12:]) == 0xED3E {
				t.Fatalf("g2 got % x", out)
			}
			in := sent[got]
			if !bytes.Equal(out[14:], routedL3(in)) {
				t.Errorf("frame %d at g2:\n got % x\nwant % x", got, out[14:], routedL3(in))
			}
			if !bytes.Equal(out[0:6], ifs["g2"].HardwareAddr) || !bytes.Equal(out[6:12], ifs["r2"].HardwareAddr) {
				t.Errorf("frame %d at g2 from %s to %s, want %s to %s", got, net.HardwareAddr(out[6:12]), net.HardwareAddr(out[0:6]), ifs["r2"].HardwareAddr, ifs["g2"].HardwareAddr)
			}
			got++
		}
		c1, c2 := counters(t, d1), counters(t, d2)
		if c1["ife_encap"] != n || c1["forwarded"] != n {
			t.Errorf("FE 1: %s, want %d encapsulated", fmtDelta(Counters{}, c1), n)
		}
		if c2["ife_decap"] != n || c2["forwarded"] != n || c2["forwarded_ipv6"] != n/2 {
			t.Errorf("FE 2: %s, want %d delivered, %d IPv6", fmtDelta(Counters{}, c2), n, n/2)
		}
		pcs, err := d1.PortCounters()
		must(t, err)
		if pc := pcs[ifs["l12"].Index]; pc.TxPackets != n {
			t.Errorf("FE 1's link counters %+v, want %d tx", pc, n)
		}
	})
}

// routedL3 is the IP packet of frame as a router forwards it: TTL or hop
// limit one less, the IPv4 checksum updated.
func routedL3(frame []byte) []byte {
	p := bytes.Clone(frame[14:])
	if p[0]>>4 == 6 {
		p[7]--
		return p
	}
	p[8]--
	binary.BigEndian.PutUint16(p[10:], 0)
	binary.BigEndian.PutUint16(p[10:], ^onesSum(p[:20]))
	return p
}
