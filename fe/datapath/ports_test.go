//go:build linux

package datapath

import (
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// xdpMd is struct xdp_md, the context BPF_PROG_TEST_RUN takes for XDP.
// data and data_end are offsets into the frame; the kernel requires
// data_end to be the frame's length.
type xdpMd struct {
	Data, DataEnd, DataMeta uint32
	IngressIfindex          uint32
	RxQueueIndex            uint32
	EgressIfindex           uint32
}

// runOn runs frame through the program as if it arrived on port ifindex,
// which must exist in the thread's network namespace.
func runOn(tb testing.TB, d *Datapath, ifindex int, frame []byte) uint32 {
	tb.Helper()
	opts := ebpf.RunOptions{
		Data:    frame,
		DataOut: make([]byte, len(frame)+256),
		Context: xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)},
	}
	ret, err := d.Program().Run(&opts)
	if err != nil {
		tb.Fatalf("prog.Run on ifindex %d: %v", ifindex, err)
	}
	return ret
}

func portCounters(tb testing.TB, d *Datapath) map[int]PortCounters {
	tb.Helper()
	pcs, err := d.PortCounters()
	if err != nil {
		tb.Fatalf("port counters: %v", err)
	}
	return pcs
}

func TestPortCounters(t *testing.T) {
	d := loadForTest(t, loadOptions{})
	netnstest.Run(t, func(h *netlink.Handle) {
		// No IPv6 on these links: the kernel's own NDP and MLD packets on a
		// link coming up would show in the counters this test checks.
		for _, conf := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				t.Fatalf("disable IPv6 in the test namespace: %v", err)
			}
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sptest0"}, PeerName: "sptest1"}
		if err := h.LinkAdd(veth); err != nil {
			t.Fatalf("add veth: %v", err)
		}
		var in, out int
		for i, name := range []string{"sptest0", "sptest1"} {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				in = l.Attrs().Index
			} else {
				out = l.Attrs().Index
			}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(d.Attach(in, ModeGeneric))
		must(d.Attach(out, ModeGeneric))
		// The test frames are addressed to macRouter.
		must(d.SetPortLink(in, macRouter, 1500))
		must(d.SetPortLink(out, macRouter, 1500))
		gw := netip.MustParseAddr("10.0.0.1")
		must(d.SetNexthop(1, Nexthop{Ifindex: out, Gateway: gw, SrcMAC: macSrc1}))
		must(d.SetNeighbor(out, gw, macNeigh1))
		must(d.SetRoute(netip.MustParsePrefix("198.51.100.0/24"), 1))

		if got, want := portCounters(t, d), map[int]PortCounters{in: {}, out: {}}; !equalPorts(got, want) {
			t.Fatalf("fresh ports: %+v, want %+v", got, want)
		}

		fwd := udpFrame("198.51.100.7", 64)
		fwdLen := uint64(len(fwd))
		const nFwd = 3
		for range nFwd {
			if ret := runOn(t, d, in, udpFrame("198.51.100.7", 64)); ret != xdpRedirect {
				t.Fatalf("forward: returned %d, want XDP_REDIRECT", ret)
			}
		}
		passed := udpFrame("8.8.8.8", 64) // no route
		if ret := runOn(t, d, in, passed); ret != xdpPass {
			t.Fatalf("no route: returned %d, want XDP_PASS", ret)
		}
		// A frame from the egress port, passed: rx and passed there too.
		ttl1 := udpFrame("198.51.100.7", 1)
		if ret := runOn(t, d, out, ttl1); ret != xdpPass {
			t.Fatalf("TTL 1: returned %d, want XDP_PASS", ret)
		}
		// lo is no port of the datapath: its packets count nowhere.
		lo, err := h.LinkByName("lo")
		must(err)
		must(h.LinkSetUp(lo))
		if ret := runOn(t, d, lo.Attrs().Index, udpFrame("198.51.100.7", 64)); ret != xdpRedirect {
			t.Fatalf("forward from lo: returned %d, want XDP_REDIRECT", ret)
		}

		want := map[int]PortCounters{
			in: {
				RxPackets: nFwd + 1, RxBytes: nFwd*fwdLen + uint64(len(passed)),
				Passed: 1,
			},
			out: {
				RxPackets: 1, RxBytes: uint64(len(ttl1)), Passed: 1,
				TxPackets: nFwd + 1, TxBytes: (nFwd + 1) * fwdLen,
			},
		}
		if got := portCounters(t, d); !equalPorts(got, want) {
			t.Errorf("port counters\n got %+v\nwant %+v", got, want)
		}

		// An ifindex too large for port_slots takes the hash.
		big := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sptest2", Index: portSlotsDirect + 4}, PeerName: "sptest3"}
		must(h.LinkAdd(big))
		must(h.LinkSetUp(big))
		must(d.Attach(big.Index, ModeGeneric))
		if ret := runOn(t, d, big.Index, passed); ret != xdpPass {
			t.Fatalf("no route on ifindex %d: returned %d, want XDP_PASS", big.Index, ret)
		}
		want[big.Index] = PortCounters{RxPackets: 1, RxBytes: uint64(len(passed)), Passed: 1}
		if got := portCounters(t, d); !equalPorts(got, want) {
			t.Errorf("port counters with ifindex %d\n got %+v\nwant %+v", big.Index, got, want)
		}
		must(d.Detach(big.Index))
		delete(want, big.Index)

		// A detached port is no longer reported; attaching it again
		// starts from zero.
		must(d.Detach(in))
		if got := portCounters(t, d); len(got) != 1 || got[out] != want[out] {
			t.Errorf("after detaching %d: %+v, want only %d: %+v", in, got, out, want[out])
		}
		must(d.Attach(in, ModeGeneric))
		if got := portCounters(t, d)[in]; got != (PortCounters{}) {
			t.Errorf("reattached port: %+v, want zero", got)
		}
		must(d.Close())
		if _, err := d.PortCounters(); err == nil {
			t.Error("PortCounters after Close: no error")
		}
	})
}

func equalPorts(a, b map[int]PortCounters) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPortCountersDefaultIngress checks the fixture's port: without a
// context, BPF_PROG_TEST_RUN runs on the loopback device, which is also the
// fixture's egress port.
func TestPortCountersDefaultIngress(t *testing.T) {
	f := newFixture(t, loadOptions{})
	fwd := udpFrame("198.51.100.77", 64)
	if ret, _ := run(t, f.d, fwd); ret != xdpRedirect {
		t.Fatalf("returned %d, want XDP_REDIRECT", ret)
	}
	arp := ethFrame(macBcast, macPeer, 0x0806, make([]byte, 28))
	if ret, _ := run(t, f.d, arp); ret != xdpPass {
		t.Fatalf("returned %d, want XDP_PASS", ret)
	}
	n := uint64(len(fwd))
	want := map[int]PortCounters{f.lo: {
		RxPackets: 2, RxBytes: n + uint64(len(arp)), Passed: 1, TxPackets: 1, TxBytes: n,
	}}
	if got := portCounters(t, f.d); !equalPorts(got, want) {
		t.Errorf("port counters\n got %+v\nwant %+v", got, want)
	}
}

func TestCPUCounters(t *testing.T) {
	f := newFixture(t, loadOptions{})
	for _, frame := range [][]byte{udpFrame("198.51.100.77", 64), udpFrame("8.8.8.8", 64), udpFrame("198.51.100.77", 1)} {
		run(t, f.d, frame)
	}
	total := counters(t, f.d)
	perCPU, err := f.d.CPUCounters()
	if err != nil {
		t.Fatal(err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	if len(perCPU) != ncpu {
		t.Fatalf("%d CPUs of counters, want %d", len(perCPU), ncpu)
	}
	sum := Counters{}
	for _, c := range perCPU {
		if len(c) != len(counterNames) {
			t.Errorf("CPU counters have %d names, want %d", len(c), len(counterNames))
		}
		for name, v := range c {
			sum[name] += v
		}
	}
	checkDelta(t, total, sum, nil)
	if total["rx"] != 3 {
		t.Errorf("rx %d, want 3", total["rx"])
	}
}
