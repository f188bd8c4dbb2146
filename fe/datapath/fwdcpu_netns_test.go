//go:build linux

package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// TestForwardCPUsRealTraffic sends frames from CPU 0 into a port in native
// XDP mode, with CPU 1 as the only forward CPU: CPU 0 receives them and
// sends them on through cpu_map, CPU 1 forwards them out of the other port,
// as the per-CPU counters show, and they arrive.
//
//	s0 --veth-- r0 [XDP]   r1 [XDP] --veth-- g1 (XDP_PASS)
func TestForwardCPUsRealTraffic(t *testing.T) {
	needCPUs(t, 2)
	d := loadForTest(t, loadOptions{})
	netnstest.Run(t, func(h *netlink.Handle) {
		// No IPv6: the kernel's own NDP and MLD would add to the counters.
		for _, conf := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				t.Fatalf("disable IPv6: %v", err)
			}
		}
		for _, p := range [][2]string{{"s0", "r0"}, {"g1", "r1"}} {
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p[0]}, PeerName: p[1]}); err != nil {
				t.Fatalf("add veth %s-%s: %v", p[0], p[1], err)
			}
		}
		ifs := map[string]*net.Interface{}
		for _, name := range []string{"s0", "r0", "r1", "g1"} {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			if ifs[name], err = net.InterfaceByName(name); err != nil {
				t.Fatal(err)
			}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(d.Attach(ifs["r0"].Index, ModeNative))
		must(d.Attach(ifs["r1"].Index, ModeNative))
		// A frame redirected into a veth reaches the peer only if the
		// peer runs XDP in native mode.
		pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
		})
		must(err)
		defer pass.Close()
		l, err := link.AttachXDP(link.XDPOptions{Program: pass, Interface: ifs["g1"].Index, Flags: link.XDPDriverMode})
		must(err)
		defer l.Close()

		gw := netip.MustParseAddr("10.1.0.2")
		must(d.SetNexthop(1, Nexthop{Ifindex: ifs["r1"].Index, Gateway: gw, SrcMAC: ifs["r1"].HardwareAddr}))
		must(d.SetNeighbor(ifs["r1"].Index, gw, ifs["g1"].HardwareAddr))
		must(d.SetRoute(netip.MustParsePrefix("203.0.113.0/24"), 1))
		must(d.SetForwardCPUs([]int{1}))

		waitFor(t, "links up", func() bool {
			for _, name := range []string{"s0", "r0", "r1", "g1"} {
				l, err := h.LinkByName(name)
				if err != nil || l.Attrs().OperState != netlink.OperUp {
					return false
				}
			}
			return true
		})
		g1Rx := func() uint64 {
			l, err := h.LinkByName("g1")
			must(err)
			return l.Attrs().Statistics.RxPackets
		}
		startG1 := g1Rx()
		start, err := d.CPUCounters()
		must(err)

		// netnstest.Run locked the thread; pin it too, so that the veth
		// delivers to r0 (and its XDP runs) on CPU 0.
		unpin := pinCPU(t, 0)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		must(err)
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifs["s0"].Index, Protocol: be16(unix.ETH_P_IP)}
		const n = 100
		for i := range n {
			payload := udpPayload(18)
			binary.BigEndian.PutUint16(payload, uint16(40000+i%10)) // 10 flows
			frame := ethFrame(ifs["r0"].HardwareAddr, ifs["s0"].HardwareAddr, 0x0800,
				ipv4Packet(ipv4Header{ttl: 64, proto: 17, src: netip.MustParseAddr("10.0.0.2"),
					dst: netip.MustParseAddr("203.0.113.9")}, payload))
			if err := unix.Sendto(fd, frame, 0, sa); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		unpin()

		var now []Counters
		waitFor(t, "forwarded on CPU 1", func() bool {
			now, err = d.CPUCounters()
			must(err)
			return now[1]["forwarded"]-start[1]["forwarded"] >= n
		})
		delta := func(cpu int, name string) uint64 { return now[cpu][name] - start[cpu][name] }
		for _, c := range []struct {
			cpu  int
			name string
			want uint64
		}{
			{0, "rx", n}, {0, "to_fe_cpu", n}, {0, "forwarded", 0},
			{1, "rx", 0}, {1, "to_fe_cpu", 0}, {1, "forwarded", n},
		} {
			if got := delta(c.cpu, c.name); got != c.want {
				t.Errorf("CPU %d: %s moved by %d, want %d", c.cpu, c.name, got, c.want)
			}
		}
		pcs, err := d.PortCounters()
		must(err)
		if pc := pcs[ifs["r0"].Index]; pc.RxPackets != n || pc.Passed != 0 {
			t.Errorf("r0 counters %+v, want %d rx, none passed", pc, n)
		}
		if pc := pcs[ifs["r1"].Index]; pc.TxPackets != n {
			t.Errorf("r1 counters %+v, want %d tx", pc, n)
		}
		waitFor(t, "frames at g1", func() bool { return g1Rx()-startG1 >= n })
	})
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
