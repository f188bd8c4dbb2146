//go:build linux

package datapath

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// --- benchmarks of the FE's program ----------------------------------------

// benchRun runs frame through the program 1M times per iteration and reports
// the kernel-measured time per packet as ns/op (replacing the time per
// iteration, which includes a fixed cost per BPF_PROG_TEST_RUN call). The
// program must not change the frame: benchForward is for forwarded ones.
func benchRun(b *testing.B, d *Datapath, frame []byte, want uint32) {
	benchRepeat(b, d, frame, 1_000_000, want)
}

// benchForward is benchRun for a frame the program forwards, which must
// carry TTL (hop limit) 255: see forwardRuns.
func benchForward(b *testing.B, d *Datapath, frame []byte) {
	benchRepeat(b, d, frame, forwardRuns, xdpRedirect)
}

func benchRepeat(b *testing.B, d *Datapath, frame []byte, repeat int, want uint32) {
	var total float64
	n := 0
	for b.Loop() {
		ret, perRun, err := d.Program().Benchmark(slices.Clone(frame), repeat, nil)
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

// forwardRuns is the repeat of a forwarding benchmark: every repetition
// sees the frame as the previous one left it, so a frame sent with TTL 255
// forwards this many times before the FE's program (which has no TTL
// switch) hands it to the kernel. The benchmarks of integration/bench/
// fibbench use a copy of the program that skips the check instead. A short
// call's time per run carries more of what each call costs once (the first
// runs start cold) than one of 1M runs: on the test VM BenchmarkXDPForward
// reads ~140 ns here where the same program read ~105 ns over 1M runs, so
// compare such figures only with each other.
const forwardRuns = 250

// benchFixture adds random /24 routes to the test fixture until it holds
// 1,000 routes.
func benchFixture(b *testing.B) *fixture {
	f := newFixture(b, loadOptions{})
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
	checksOn(b, f, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	return f
}

// checksOn gives the fixture's port (ingress and egress of every run) a MAC
// and an MTU, so that the benchmarks pay for the other-host and MTU checks
// as a real port does. A forwarding benchmark reruns the frame as the
// program left it, addressed to the neighbour, so the neighbours gws get
// the port's MAC.
func checksOn(b *testing.B, f *fixture, gws ...netip.Addr) {
	for _, gw := range gws {
		if err := f.d.SetNeighbor(f.lo, gw, macRouter); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.d.SetPortLink(f.lo, macRouter, 1500); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkXDPPass(b *testing.B) {
	f := benchFixture(b)
	arp := make([]byte, 28)
	benchRun(b, f.d, ethFrame(macBcast, macPeer, 0x0806, arp), xdpPass)
}

func BenchmarkXDPForward(b *testing.B) {
	f := benchFixture(b)
	before := counters(b, f.d)
	benchForward(b, f.d, udpFrame("203.0.113.9", 255))
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
