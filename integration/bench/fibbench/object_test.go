//go:build linux

package fibbench

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/splitplane/splitplane/fe/datapath"
)

// loadTestObject loads the object with one route, 198.51.100.0/24 via
// nexthop 1 out of lo, in the FIB and in the LPM trie.
func loadTestObject(t *testing.T, opts Options) *Object {
	t.Helper()
	needRoot(t)
	gw := netip.MustParseAddr("10.0.0.1")
	o, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
	})
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.AddTxPort(lo.Index); err != nil {
		t.Fatal(err)
	}
	if err := o.SetNeighbor(lo.Index, gw, net.HardwareAddr{2, 0, 0, 0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := o.SetNexthop(1, datapath.Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	routes := []datapath.Route{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Nexthop: 1}}
	if err := o.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	if err := o.SetTrieRoutes(routes); err != nil {
		t.Fatal(err)
	}
	return o
}

// run runs prog once on a copy of frame with destination dst (if valid) and
// TTL ttl, and returns the verdict and the frame as the program left it.
func run(t *testing.T, prog *ebpf.Program, dst netip.Addr, ttl byte, frame []byte) (uint32, []byte) {
	t.Helper()
	f := slices.Clone(frame)
	if len(f) >= 34 {
		f[14+8] = ttl
		if dst.IsValid() {
			copy(f[30:34], dst.AsSlice())
		}
		SetIPv4Checksum(f[14:34])
	}
	out := make([]byte, len(f))
	ret, err := prog.Run(&ebpf.RunOptions{Data: f, DataOut: out})
	if err != nil {
		t.Fatal(err)
	}
	return ret, out
}

const (
	xdpPass     = 2
	xdpRedirect = 4
)

// Without Rotate the object's router does what the FE's does: it forwards
// to the frame's own destination and hands an expiring TTL to the kernel;
// so does the trie baseline.
func TestObjectRouter(t *testing.T) {
	o := loadTestObject(t, Options{})
	routed, unrouted := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.7")
	for _, prog := range []*ebpf.Program{o.Program(), o.TrieProgram()} {
		if ret, out := run(t, prog, routed, 64, benchFrame()); ret != xdpRedirect {
			t.Errorf("%v, routed destination: returned %d, want XDP_REDIRECT", prog, ret)
		} else if out[14+8] != 63 || !bytes.Equal(out[0:6], []byte{2, 0, 0, 0, 1, 2}) {
			t.Errorf("%v: forwarded frame with TTL %d, destination MAC % x", prog, out[14+8], out[0:6])
		}
		if ret, _ := run(t, prog, unrouted, 64, benchFrame()); ret != xdpPass {
			t.Errorf("%v, destination without a route: returned %d, want XDP_PASS", prog, ret)
		}
		if ret, _ := run(t, prog, routed, 1, benchFrame()); ret != xdpPass {
			t.Errorf("%v, TTL 1: returned %d, want XDP_PASS", prog, ret)
		}
	}
}

// With Rotate every run takes the next destination of SetDestinations,
// whatever the frame says, and ignores the TTL.
func TestObjectRotate(t *testing.T) {
	o := loadTestObject(t, Options{Rotate: true})
	routed, unrouted := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.7")
	dsts := make([]uint32, BenchDsts)
	for i := range dsts {
		dsts[i] = be32(routed)
		if i%2 == 1 {
			dsts[i] = be32(unrouted)
		}
	}
	if err := o.SetDestinations(dsts); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []*ebpf.Program{o.Program(), o.TrieProgram()} {
		want := []uint32{xdpRedirect, xdpPass}
		for i := range 4 {
			// bench_next is shared by both programs and counts on, by 4
			// per program.
			ret, out := run(t, prog, unrouted, 1, benchFrame())
			if w := want[i%2]; ret != w {
				t.Errorf("%v, run %d: returned %d, want %d", prog, i, ret, w)
			}
			if i%2 == 0 && !bytes.Equal(out[30:34], routed.AsSlice()) {
				t.Errorf("%v, run %d: destination %v, want %v", prog, i, out[30:34], routed)
			}
		}
	}
	if err := o.SetDestinations(make([]uint32, BenchDsts+1)); err == nil {
		t.Error("SetDestinations with too many destinations: no error")
	}
}

// xdp_redirect_lookup, the forwarding benchmark's lookup-only baseline,
// redirects a frame only when its destination has a route, and leaves the
// frame as it was.
func TestRedirectLookup(t *testing.T) {
	o := loadTestObject(t, Options{})
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.objs.BenchRedirectPort.Set(uint32(lo.Index)); err != nil {
		t.Fatal(err)
	}
	prog := o.objs.XdpRedirectLookup
	frame := benchFrame()
	frame[14+8] = 64
	if ret, out := run(t, prog, netip.MustParseAddr("198.51.100.7"), 64, frame); ret != xdpRedirect {
		t.Errorf("routed destination: returned %d, want XDP_REDIRECT", ret)
	} else if !bytes.Equal(out[:24], frame[:24]) || !bytes.Equal(out[26:30], frame[26:30]) { // run sets the checksum
		t.Errorf("frame changed: % x, was % x", out[:30], frame[:30])
	}
	if ret, _ := run(t, prog, netip.MustParseAddr("203.0.113.7"), 64, frame); ret != xdpPass {
		t.Errorf("destination without a route: returned %d, want XDP_PASS", ret)
	}
	if ret, _ := run(t, prog, netip.Addr{}, 64, frame[:30]); ret != xdpPass {
		t.Errorf("truncated frame: returned %d, want XDP_PASS", ret)
	}
}
