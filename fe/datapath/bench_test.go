//go:build linux

package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// --- benchmarks of the program and the FIB, and tests of the benchmark code --

// benchRun runs frame through the program 1M times per iteration and reports
// the kernel-measured time per packet as ns/op (replacing the time per
// iteration, which includes a fixed ~24 ms per BPF_PROG_TEST_RUN call).
func benchRun(b *testing.B, d *Datapath, frame []byte, want uint32) {
	const repeat = 1_000_000
	var total float64
	n := 0
	for b.Loop() {
		ret, perRun, err := d.Program().Benchmark(frame, repeat, nil)
		if err != nil {
			b.Fatal(err)
		}
		if ret != want {
			b.Fatalf("returned %d, want %d", ret, want)
		}
		total += float64(perRun.Nanoseconds())
		n++
	}
	ns := total / float64(n)
	b.ReportMetric(ns, "ns/op")
	b.ReportMetric(1e3/ns, "Mpps")
}

// benchFixture adds random /24 routes to the test fixture until it holds
// 1,000 routes. It loads the
// program with the TTL check off, because every repetition sees the frame
// as the previous one left it.
func benchFixture(b *testing.B) *fixture {
	f := newFixture(b, loadOptions{benchIgnoreTTL: true})
	base, err := f.d.RouteCount()
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	added := map[netip.Prefix]bool{}
	for len(added) < 1000-base {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(1 + rng.IntN(223)), byte(rng.Uint32()), byte(rng.Uint32()), 0}), 24)
		if err := f.d.SetRoute(p, 1+uint32(rng.IntN(2))); err != nil {
			b.Fatal(err)
		}
		added[p] = true
	}
	if n, err := f.d.RouteCount(); err != nil || n < 1000 {
		b.Fatalf("%d routes (%v), want at least 1000", n, err)
	}
	return f
}

func BenchmarkXDPPass(b *testing.B) {
	f := benchFixture(b)
	arp := make([]byte, 28)
	benchRun(b, f.d, ethFrame(macBcast, macPeer, 0x0806, arp), xdpPass)
}

func BenchmarkXDPForward(b *testing.B) {
	f := benchFixture(b)
	before := counters(b, f.d)
	benchRun(b, f.d, udpFrame("203.0.113.9", 64), xdpRedirect)
	after := counters(b, f.d)
	if after["forwarded"]-before["forwarded"] != after["rx"]-before["rx"] {
		b.Errorf("not every packet was forwarded: %s", fmtDelta(before, after))
	}
}

func fmtDelta(before, after Counters) string {
	var s []string
	for _, name := range CounterNames() {
		if d := after[name] - before[name]; d != 0 {
			s = append(s, fmt.Sprintf("%s=%d", name, d))
		}
	}
	return strings.Join(s, " ")
}

// xdp_redirect_lookup, the forwarding benchmark's lookup-only baseline,
// redirects a frame only when its destination has a route, and leaves the
// frame as it was.
func TestRedirectLookup(t *testing.T) {
	needRoot(t)
	d, err := LoadWithBaselines()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.trie.BenchRedirectPort.Set(uint32(lo.Index)); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.TxPorts.Put(uint32(lo.Index), uint32(lo.Index)); err != nil {
		t.Fatal(err)
	}
	if err := d.SetRoutes([]Route{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Nexthop: 1}}); err != nil {
		t.Fatal(err)
	}
	run := func(dst netip.Addr, frame []byte) (uint32, []byte) {
		t.Helper()
		f := slices.Clone(frame)
		if len(f) >= 34 {
			copy(f[30:34], dst.AsSlice())
		}
		out := make([]byte, len(f))
		ret, err := d.trie.XdpRedirectLookup.Run(&ebpf.RunOptions{Data: f, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		return ret, out
	}
	frame := udpFrame("192.0.2.1", 64)
	if ret, out := run(netip.MustParseAddr("198.51.100.7"), frame); ret != 4 { // XDP_REDIRECT
		t.Errorf("routed destination: returned %d, want XDP_REDIRECT", ret)
	} else if !bytes.Equal(out[:30], frame[:30]) {
		t.Errorf("frame changed: % x, was % x", out[:30], frame[:30])
	}
	if ret, _ := run(netip.MustParseAddr("203.0.113.7"), frame); ret != 2 { // XDP_PASS
		t.Errorf("destination without a route: returned %d, want XDP_PASS", ret)
	}
	if ret, _ := run(netip.Addr{}, frame[:30]); ret != 2 {
		t.Errorf("truncated frame: returned %d, want XDP_PASS", ret)
	}
	if _, err := (&Datapath{}).AttachRedirectLookup(lo.Index, lo.Index); !errors.Is(err, ErrInvalid) {
		t.Errorf("AttachRedirectLookup without baselines: %v, want ErrInvalid", err)
	}
}
