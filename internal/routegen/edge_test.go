package routegen

import (
	"slices"
	"testing"
)

func TestEdgeUpstreams(t *testing.T) {
	ps := Generate(200_000, 3)
	ups, err := EdgeUpstreams(ps, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := EdgeUpstreams(ps, 4, 3)
	if !slices.Equal(ups, again) {
		t.Fatal("not deterministic for a seed")
	}
	var per [4]int
	same := 0
	for i, u := range ups {
		if u < 0 || u >= 4 {
			t.Fatalf("prefix %d: upstream %d of 4", i, u)
		}
		per[u]++
		if i > 0 && ups[i-1] == u {
			same++
		}
	}
	// One main provider, the rest shared evenly.
	if share := float64(per[0]) / float64(len(ups)); share < 0.4 || share > 0.6 {
		t.Errorf("first upstream has %.2f of the prefixes, want about half (%v)", share, per)
	}
	for u, n := range per[1:] {
		if n == 0 {
			t.Errorf("upstream %d never chosen", u+1)
		}
	}
	// Neighbours share their next hop far more often than independent
	// draws with these weights would (1/4 + 3 * 1/36 = 0.33).
	if share := float64(same) / float64(len(ups)-1); share < 0.7 {
		t.Errorf("%.2f of neighbouring prefixes share their upstream, want at least 0.7", share)
	}
	one, _ := EdgeUpstreams(ps, 1, 3)
	if slices.ContainsFunc(one, func(u int) bool { return u != 0 }) {
		t.Error("one upstream: some prefix is not on it")
	}
	for _, bad := range []int{0, -1, MaxUpstreams + 1} {
		if _, err := EdgeUpstreams(ps, bad, 1); err == nil {
			t.Errorf("upstreams %d: no error", bad)
		}
	}
}

func TestZipf(t *testing.T) {
	const size, n = 100_000, 200_000
	idx, err := Zipf(size, n, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Zipf(size, n, 1, 5)
	if !slices.Equal(idx, again) {
		t.Fatal("not deterministic for a seed")
	}
	count := make([]int, size)
	for _, i := range idx {
		if i < 0 || i >= size {
			t.Fatalf("index %d out of [0, %d)", i, size)
		}
		count[i]++
	}
	// With s = 1 the 1,000 most popular of 100,000 carry H(1000)/H(100000)
	// = 0.62 of the draws; uniform draws would give them about 0.03.
	slices.SortFunc(count, func(a, b int) int { return b - a })
	top := 0
	for _, c := range count[:1000] {
		top += c
	}
	if share := float64(top) / n; share < 0.55 || share > 0.7 {
		t.Errorf("the top 1000 prefixes have %.2f of the draws, want about 0.62", share)
	}
	// The popular ones are spread over the table, not its first entries.
	first := 0
	for _, i := range idx {
		if i < size/100 {
			first++
		}
	}
	if share := float64(first) / n; share > 0.1 {
		t.Errorf("the first 1%% of the table has %.2f of the draws: ranks not permuted", share)
	}
	for _, c := range []struct {
		size int
		s    float64
	}{{0, 1}, {10, 0}, {10, -1}} {
		if _, err := Zipf(c.size, 10, c.s, 1); err == nil {
			t.Errorf("size %d, s %g: no error", c.size, c.s)
		}
	}
}
