//go:build linux

package fibbench

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/internal/routegen"
)

func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (loads BPF)")
	}
}

var benchSizes = []int{1000, 100_000, 1_000_000}

// BenchmarkLookup reports ns per packet (kernel-timed, BPF_PROG_TEST_RUN)
// with every run sent to another of 65,536 random destinations inside the
// installed routegen routes, for the DIR-24-8 FIB and for the kernel LPM
// trie baseline loaded with the same routes.
func BenchmarkLookup(b *testing.B) {
	needRoot(b)
	setups := map[int]*lookupBench{}
	b.Cleanup(func() {
		for _, lb := range setups {
			lb.d.Close()
		}
	})
	setup := func(b *testing.B, n int) *lookupBench {
		if lb, ok := setups[n]; ok {
			return lb
		}
		lb, err := newLookupBench(n, 1)
		if err != nil {
			b.Fatal(err)
		}
		setups[n] = lb
		return lb
	}
	for _, variant := range []string{"dir24-8", "lpm-trie"} {
		b.Run(variant, func(b *testing.B) {
			for _, n := range benchSizes {
				b.Run(SizeLabel(n), func(b *testing.B) {
					lb := setup(b, n)
					prog := lb.d.Program()
					if variant == "lpm-trie" {
						prog = lb.d.TrieProgram()
					}
					var total float64
					runs := 0
					for b.Loop() {
						ns, err := lb.nsPerPacket(prog)
						if err != nil {
							b.Fatal(err)
						}
						total += ns
						runs++
					}
					b.ReportMetric(total/float64(runs), "ns/op")
					b.ReportMetric(1e3*float64(runs)/total, "Mpps")
				})
			}
		})
	}
}

// BenchmarkInstall reports the rate of one SetRoutes call that installs 1M
// routegen routes into an empty FIB.
func BenchmarkInstall(b *testing.B) {
	needRoot(b)
	b.Run("1m", func(b *testing.B) {
		routes := Routes(1_000_000, 1)
		var total time.Duration
		runs := 0
		for b.Loop() {
			b.StopTimer()
			d, err := datapath.Load()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			elapsed, err := timeInstall(d, routes)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			total += elapsed
			runs++
		}
		b.ReportMetric(float64(runs*len(routes))/total.Seconds(), "routes/s")
		b.ReportMetric(total.Seconds()/float64(runs), "s/install")
	})
}

// TestFIB runs the bench command's function at small sizes and checks
// the shape of its figures, and that its uniform destinations are what it
// says.
func TestFIB(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("loads 100k routes")
	}
	figs, err := FIB(t.Context(), []int{100_000, 1000}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fib_lookup_ns_1k", "fib_lookup_ns_100k", "lpm_trie_lookup_ns_1k", "lpm_trie_lookup_ns_100k",
		"fib_lookup_inside_ns_1k", "lpm_trie_lookup_inside_ns_1k", "fib_lookup_inside_ns_100k", "lpm_trie_lookup_inside_ns_100k",
		"fib_install_routes_per_s"}
	if len(figs) != len(want) {
		t.Fatalf("figures %+v, want %v", figs, want)
	}
	for i, f := range figs {
		t.Logf("%+v", f)
		if f.Metric != want[i] || !(f.Value > 0) {
			t.Errorf("figure %d: %+v, want %s > 0", i, f, want[i])
		}
		if (f.Baseline != "") != (f.Metric == "fib_lookup_ns_100k") {
			t.Errorf("figure %+v: baseline only on the largest FIB lookup", f)
		}
	}
}

// The lookup benchmark's common destinations are distinct enough to spread
// over the table, public, and the same for a seed.
func TestDestinations(t *testing.T) {
	dsts := Destinations(65536, 1)
	if !slices.Equal(dsts, Destinations(65536, 1)) || slices.Equal(dsts, Destinations(65536, 2)) {
		t.Fatal("destinations do not follow the seed")
	}
	slash24 := map[uint32]bool{}
	for _, a := range dsts {
		for _, p := range routegen.Excluded() {
			if p.Contains(a) {
				t.Fatalf("%s is in excluded %s", a, p)
			}
		}
		slash24[be32(a)&0xffffff] = true // network order: the first three bytes
	}
	if len(slash24) < 60000 {
		t.Fatalf("65,536 destinations in only %d /24s", len(slash24))
	}
}

// BenchmarkLookup6 reports ns per packet (kernel-timed, BPF_PROG_TEST_RUN)
// of IPv6 forwarding with every run sent to another of 65,536 random
// destinations inside the installed Routes6 routes, for the stride
// table and for the kernel LPM trie baseline loaded with the same routes.
// The 1m tables need about 4 GB of memory.
func BenchmarkLookup6(b *testing.B) {
	needRoot(b)
	for _, n := range benchSizes {
		b.Run(SizeLabel(n), func(b *testing.B) {
			lb, err := newLookupBench6(n, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer lb.d.Close()
			for _, variant := range []string{"stride", "lpm-trie"} {
				b.Run(variant, func(b *testing.B) {
					prog := lb.d.Program()
					if variant == "lpm-trie" {
						prog = lb.d.TrieProgram()
					}
					var total float64
					runs := 0
					for b.Loop() {
						ns, err := lb.nsPerPacket(prog)
						if err != nil {
							b.Fatal(err)
						}
						total += ns
						runs++
					}
					b.ReportMetric(total/float64(runs), "ns/op")
					b.ReportMetric(1e3*float64(runs)/total, "Mpps")
				})
			}
		})
	}
}

// TestFIB6 runs the bench command's IPv6 function at small sizes and
// checks the shape of its figures.
func TestFIB6(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("loads 10k routes twice")
	}
	figs, err := FIB6(t.Context(), []int{10_000, 1000}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fib6_lookup_ns_1k", "fib6_lookup_ns_10k", "lpm_trie6_lookup_ns_10k"}
	if len(figs) != len(want) {
		t.Fatalf("figures %+v, want %v", figs, want)
	}
	for i, f := range figs {
		t.Logf("%+v", f)
		if f.Metric != want[i] || !(f.Value > 0) {
			t.Errorf("figure %d: %+v, want %s > 0", i, f, want[i])
		}
		if (f.Baseline != "") != (f.Metric == "fib6_lookup_ns_10k") {
			t.Errorf("figure %+v: baseline only on the largest FIB lookup", f)
		}
	}
}
