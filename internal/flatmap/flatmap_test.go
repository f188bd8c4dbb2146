package flatmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/prefetch"
)

// TestAgainstGoMap runs random puts, gets and deletes against a Go map, with
// keys drawn from a small range (so that deletes hit and runs collide) and
// key 0 among them, and compares after every step.
func TestAgainstGoMap(t *testing.T) {
	for _, keys := range []uint64{16, 1000, 100_000} {
		rng := rand.New(rand.NewPCG(keys, 7))
		m := New[uint64, uint32](0)
		want := map[uint64]uint32{}
		for step := range 400_000 {
			k := rng.Uint64N(keys)
			switch op := rng.IntN(10); {
			case op < 5:
				v := rng.Uint32()
				m.Put(k, v)
				want[k] = v
			case op < 8:
				_, had := want[k]
				if got := m.Del(k); got != had {
					t.Fatalf("keys %d step %d: Del(%d) = %v, want %v", keys, step, k, got, had)
				}
				delete(want, k)
			default:
				v, ok := m.Get(k)
				wv, wok := want[k]
				if v != wv || ok != wok || m.Has(k) != wok {
					t.Fatalf("keys %d step %d: Get(%d) = %d, %v, want %d, %v", keys, step, k, v, ok, wv, wok)
				}
			}
			if m.Len() != len(want) {
				t.Fatalf("keys %d step %d: Len %d, want %d", keys, step, m.Len(), len(want))
			}
		}
		if got := maps.Collect(m.All()); !maps.Equal(got, want) {
			t.Fatalf("keys %d: All gives %d entries, differing from the %d expected", keys, len(got), len(want))
		}
		for k, v := range want {
			if got, ok := m.Get(k); !ok || got != v {
				t.Fatalf("keys %d: Get(%d) = %d, %v at the end, want %d", keys, k, got, ok, v)
			}
		}
	}
}

// TestClusteredKeys fills a map with keys that differ only in high bits and
// in steps of a power of two (as packed /24 prefixes do), deletes every
// other one, and checks the rest are found and the probe runs stay short.
func TestClusteredKeys(t *testing.T) {
	const n = 1 << 18
	m := New[uint64, uint64](0)
	for i := range uint64(n) {
		m.Put(i<<40|24, i)
	}
	for i := uint64(0); i < n; i += 2 {
		if !m.Del(i<<40 | 24) {
			t.Fatalf("Del(%d) found nothing", i)
		}
	}
	for i := range uint64(n) {
		v, ok := m.Get(i<<40 | 24)
		if ok != (i%2 == 1) || ok && v != i {
			t.Fatalf("Get(key %d) = %d, %v", i, v, ok)
		}
	}
	longest, run := 0, 0
	for _, s := range m.slots {
		if s.k == 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	if longest > 64 {
		t.Errorf("a run of %d occupied slots in a table of %d with %d entries: the hash clusters these keys", longest, len(m.slots), m.Len())
	}
}

func TestZeroKeyAndIterationStop(t *testing.T) {
	m := New[uint32, string](4)
	if _, ok := m.Get(0); ok || m.Del(0) {
		t.Fatal("key 0 present in an empty map")
	}
	m.Put(0, "zero")
	m.Put(1, "one")
	m.Put(2, "two")
	if v, ok := m.Get(0); !ok || v != "zero" || m.Len() != 3 {
		t.Fatalf("Get(0) = %q, %v; Len %d", v, ok, m.Len())
	}
	seen := 0
	for range m.All() {
		seen++
		break
	}
	if seen != 1 {
		t.Fatalf("iteration went on after the loop broke: %d", seen)
	}
	if !m.Del(0) || m.Has(0) || m.Len() != 2 {
		t.Fatalf("after Del(0): Has %v, Len %d", m.Has(0), m.Len())
	}
}

// TestFreshTableFaultsOncePerPage checks the point of the package: filling a
// table in fresh memory takes at most one page fault per page. A map that
// reads a slot first takes two (the zero page, then its copy) and a TLB
// flush on every CPU for the second.
func TestFreshTableFaultsOncePerPage(t *testing.T) {
	runtime.LockOSThread() // RUSAGE_THREAD counts this thread's faults only
	defer runtime.UnlockOSThread()
	const entries = 1 << 20 // 2M slots of 16 bytes: 32 MiB of fresh heap
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Skipf("getrusage: %v", err)
	}
	m := New[uint64, uint64](entries)
	for i := range uint64(entries) {
		m.Put(i*2654435761+1, i)
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	pages := len(m.slots) * 16 / 4096
	faults := after.Minflt - before.Minflt
	t.Logf("%d pages, %d minor faults", pages, faults)
	if faults > int64(pages)*5/4 {
		t.Errorf("%d page faults for a table of %d pages: its pages are read before they are written", faults, pages)
	}
}

func BenchmarkPutFresh(b *testing.B) {
	for b.Loop() {
		m := New[uint64, uint32](0)
		for i := range uint64(1 << 20) {
			m.Put(i<<8|24, uint32(i))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N<<20), "ns/put")
}

func TestNilMapReadsEmpty(t *testing.T) {
	var m *Map[uint32, uint32]
	if _, ok := m.Get(1); ok || m.Has(0) || m.Len() != 0 {
		t.Fatal("a nil map holds something")
	}
	for k := range m.All() {
		t.Fatalf("a nil map yields %d", k)
	}
	m.Prefetch(1)
}

// BenchmarkFill measures lookups and inserts, then deletes, of a million
// random keys in a table sized for them, without and with prefetching
// prefetch.Ahead keys ahead.
func BenchmarkFill(b *testing.B) {
	const n = 1 << 20
	keys := make([]uint64, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range keys {
		keys[i] = r.Uint64()>>24<<8 | 24
	}
	for _, ahead := range []int{0, prefetch.Ahead} {
		b.Run(fmt.Sprintf("ahead=%d", ahead), func(b *testing.B) {
			m := New[uint64, uint32](n)
			for b.Loop() {
				for i, k := range keys {
					if ahead > 0 && i+ahead < n {
						m.Prefetch(keys[i+ahead])
					}
					if _, ok := m.Get(k); !ok {
						m.Put(k, uint32(i))
					}
				}
				for i, k := range keys {
					if ahead > 0 && i+ahead < n {
						m.Prefetch(keys[i+ahead])
					}
					m.Del(k)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*n), "ns/op")
		})
	}
}
