//go:build linux

package datapath

import (
	"bytes"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// TestIFEForwardCPUs: with forward CPUs, a packet for a nexthop behind
// another FE that arrives on the control CPU is steered, unmodified, to a
// forward CPU, which encapsulates it, as any packet to forward; so are
// inter-FE frames to deliver or pass on: the control core does no
// inter-FE work. On a forward CPU each is handled where it arrives.
func TestIFEForwardCPUs(t *testing.T) {
	needCPUs(t, 2)
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		must(t, f.d.SetControlCPU(0))
		must(t, f.d.SetForwardCPUs([]int{1}))
		frames := map[string][]byte{"IPv4": udpFrame("198.51.100.7", 64), "IPv6": udp6Frame("2001:db8:9::7", 64)}

		unpin := pinCPU(t, 0)
		for name, frame := range frames {
			before := counters(t, f.d)
			ret, out := runIn(t, f.d, f.in, frame)
			if ret != xdpRedirect || !bytes.Equal(out[:len(frame)], frame) {
				t.Errorf("%s on CPU 0: returned %d, frame changed %v; want XDP_REDIRECT to CPU 1, unmodified", name, ret, !bytes.Equal(out[:len(frame)], frame))
			}
			checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "to_fe_cpu": 1})
		}
		// What the forward CPU runs (the CPUMAP program, run as XDP):
		// the encapsulation, without steering again.
		prog := cpumapProgAsXDP(t, f.d)
		for name, frame := range frames {
			before := counters(t, f.d)
			opts := ebpf.RunOptions{Data: bytes.Clone(frame), DataOut: make([]byte, len(frame)+256)}
			ret, err := prog.Run(&opts)
			if err != nil {
				t.Fatal(err)
			}
			if ret != xdpRedirect {
				t.Fatalf("%s in the CPUMAP program: returned %d, want XDP_REDIRECT; counters %s", name, ret, fmtDelta(before, counters(t, f.d)))
			}
			decodeIFE(t, opts.DataOut[:len(frame)+IFEOverhead], macPeerF[3], macLink[3], ifePort, ifeRemoteFE, ifeKey, flowHash(frame))
			d := delta(before, counters(t, f.d))
			if d["ife_encap"] != 1 || d["to_fe_cpu"] != 0 || d["rx"] != 0 {
				t.Errorf("%s in the CPUMAP program: counters moved %v; want ife_encap, no rx, no steering", name, d)
			}
		}
		unpin()

		// Frames from other FEs, to deliver or to pass on: steered too,
		// unmodified, by the flow hash they carry.
		ife := map[string][]byte{
			"delivery": ifeFrame(t, 2, forFE(ifeSelf, ifeKey), udpFrame("203.0.113.9", 64)),
			"transit":  ifeFrame(t, 2, forFE(3, ifeKey), udpFrame("203.0.113.9", 64)),
		}
		unpin = pinCPU(t, 0)
		for name, frame := range ife {
			before := counters(t, f.d)
			ret, out := runIn(t, f.d, f.link[2], frame)
			if ret != xdpRedirect || !bytes.Equal(out[:len(frame)], frame) {
				t.Errorf("%s on CPU 0: returned %d; want XDP_REDIRECT to CPU 1, unmodified", name, ret)
			}
			checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "to_fe_cpu": 1})
		}
		unpin()

		unpin = pinCPU(t, 1)
		defer unpin()
		for name, want := range map[string]string{"delivery": "ife_decap", "transit": "ife_transit"} {
			before := counters(t, f.d)
			if ret, _ := runIn(t, f.d, f.link[2], ife[name]); ret != xdpRedirect {
				t.Errorf("%s on CPU 1: returned %d, want XDP_REDIRECT", name, ret)
			}
			if d := delta(before, counters(t, f.d)); d[want] != 1 || d["to_fe_cpu"] != 0 {
				t.Errorf("%s on CPU 1: counters moved %v; want %s here", name, d, want)
			}
		}
		for name, frame := range frames {
			before := counters(t, f.d)
			ret, out := runIn(t, f.d, f.in, frame)
			if ret != xdpRedirect {
				t.Fatalf("%s on CPU 1: returned %d", name, ret)
			}
			decodeIFE(t, out[:len(frame)+IFEOverhead], macPeerF[3], macLink[3], ifePort, ifeRemoteFE, ifeKey, flowHash(frame))
			if d := delta(before, counters(t, f.d)); d["ife_encap"] != 1 || d["to_fe_cpu"] != 0 {
				t.Errorf("%s on CPU 1: counters moved %v; want ife_encap here", name, d)
			}
		}
	})
}

// delta is what moved between two readings of the counters.
func delta(before, after Counters) map[string]uint64 {
	d := map[string]uint64{}
	for name, v := range after {
		if v != before[name] {
			d[name] = v - before[name]
		}
	}
	return d
}
