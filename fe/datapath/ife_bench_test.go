//go:build linux

package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces/ife"
)

// --- benchmarks of inter-FE forwarding --------------------------------------

// ifeBenchFixture is benchFixture with inter-FE forwarding on lo: this FE
// is FE 1, lo is its link to FEs 2 and 3 (as through a switch), nexthop 20
// is behind FE 3 and 100.64.20.0/24 routes to it, and NE nexthop key 77 is
// the local nexthop 1 (lo, neighbour 10.0.0.1).
func ifeBenchFixture(b *testing.B) *fixture {
	f := benchFixture(b)
	d := f.d
	for _, err := range []error{
		d.SetLocalFE(1),
		d.SetInterFELink(f.lo, 2, macPeerF[2]),
		d.SetInterFELink(f.lo, 3, macPeerF[3]),
		d.SetRemoteNexthop(20, RemoteNexthop{FE: 3, Key: 77, Port: 9}),
		d.SetNexthopKey(77, 1),
		d.SetRoute(netip.MustParsePrefix("100.64.20.0/24"), 20),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// benchOnce runs frame through the program once per call, as a frame that
// changes its kind when forwarded must be (encapsulated, it would be in
// transit on the next run), and reports the kernel-measured time of a run
// as ns/op. Each call's time includes the timer's cost of one run, so
// compare these figures only with each other (the "forward" case is the
// baseline), not with benchForward's.
func benchOnce(b *testing.B, f *fixture, frame []byte, want uint32) {
	benchRepeat(b, f.d, frame, 1, want)
}

// ifeBenchFrame is inner encapsulated for FE fe, as from FE 2 to lo.
func ifeBenchFrame(b *testing.B, fe uint32, inner []byte) []byte {
	var h ife.Header
	copy(h.Dst[:], macRouter)
	copy(h.Src[:], macPeerF[2])
	frame, err := ife.Encode(nil, h, []ife.Meta{ife.EgressPort(9), ife.EgressFE(fe), ife.NexthopKey(77), ife.FlowHash(1)}, inner)
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// BenchmarkXDPIFE measures, one run per call, local forwarding (the
// baseline), encapsulation to a remote nexthop at the ingress FE,
// delivery at the egress FE and transit at an intermediate FE.
func BenchmarkXDPIFE(b *testing.B) {
	f := ifeBenchFixture(b)
	for _, tc := range []struct {
		name    string
		frame   func() []byte
		counter string
	}{
		{"forward", func() []byte { return udpFrame("203.0.113.9", 255) }, "forwarded"},
		{"encap", func() []byte { return udpFrame("100.64.20.9", 255) }, "ife_encap"},
		{"decap", func() []byte { return ifeBenchFrame(b, 1, udpFrame("100.64.20.9", 255)) }, "ife_decap"},
		{"transit", func() []byte { return ifeBenchFrame(b, 3, udpFrame("100.64.20.9", 255)) }, "ife_transit"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			before := counters(b, f.d)
			benchOnce(b, f, tc.frame(), xdpRedirect)
			after := counters(b, f.d)
			if after[tc.counter]-before[tc.counter] != after["rx"]-before["rx"] {
				b.Errorf("not every packet counted %s: %s", tc.counter, fmtDelta(before, after))
			}
		})
	}
}

// BenchmarkXDPIFECycle runs the encapsulating and the decapsulating path
// alternately, forwardRuns times per call as BenchmarkXDPForward does,
// so that its ns/op (the mean of the two) compares with that benchmark's:
// the nexthop is "behind" this FE itself (which the API refuses, so the
// maps are written directly), and the link to it is lo, so each
// encapsulated frame comes back as an IFE frame for this FE, is delivered
// to the neighbour, whose MAC is the port's, and is routed again. A packet
// crossing two FEs costs one of each: twice this figure.
func BenchmarkXDPIFECycle(b *testing.B) {
	f := ifeBenchFixture(b)
	v := xdpNexthop{Ifindex: remoteIfindex, GwFamily: gwRemote}
	binary.NativeEndian.PutUint32(v.Gateway6[0:], 1)
	binary.NativeEndian.PutUint32(v.Gateway6[4:], 77)
	binary.NativeEndian.PutUint32(v.Gateway6[8:], 9)
	l := xdpFeLink{Ifindex: uint32(f.lo), Up: 1}
	copy(l.PeerMac[:], macRouter)
	for _, err := range []error{
		f.d.objs.Nexthops.Put(uint32(21), &v),
		f.d.objs.FeLinks.Put(uint32(1), &l),
		f.d.SetRoute(netip.MustParsePrefix("100.64.21.0/24"), 21),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	before := counters(b, f.d)
	benchForward(b, f.d, udpFrame("100.64.21.9", 255))
	after := counters(b, f.d)
	rx, enc, dec := after["rx"]-before["rx"], after["ife_encap"]-before["ife_encap"], after["ife_decap"]-before["ife_decap"]
	// Alternating, each call starting with an encapsulation; a call that
	// a signal interrupts (and the library repeats) may end after one.
	if enc+dec != rx || enc < dec || enc-dec > enc/10 {
		b.Errorf("want encapsulations and deliveries alternating: %s", fmtDelta(before, after))
	}
}
