package routegen

import (
	"math"
	"net/netip"
	"slices"
	"testing"
)

func TestGenerateDeterministic(t *testing.T) {
	a := Generate(20000, 42)
	b := Generate(20000, 42)
	if !slices.Equal(a, b) {
		t.Fatal("two calls with the same seed returned different tables")
	}
	c := Generate(20000, 43)
	if slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 returned the same table")
	}
}

func TestGenerateSmallN(t *testing.T) {
	for _, n := range []int{-1, 0} {
		if got := Generate(n, 1); got != nil {
			t.Errorf("Generate(%d) = %d prefixes, want nil", n, len(got))
		}
	}
	for _, n := range []int{1, 2, 3, 5, 10, 100, 1000} {
		got := Generate(n, 7)
		if len(got) != n {
			t.Errorf("Generate(%d) returned %d prefixes", n, len(got))
		}
		checkValid(t, got)
	}
}

// checkValid checks that prefixes are IPv4, masked, distinct, sorted and
// outside every excluded range.
func checkValid(t *testing.T, ps []netip.Prefix) {
	t.Helper()
	seen := make(map[netip.Prefix]struct{}, len(ps))
	for i, p := range ps {
		if !p.IsValid() || !p.Addr().Is4() {
			t.Fatalf("prefix %d (%v) is not a valid IPv4 prefix", i, p)
		}
		if p.Masked() != p {
			t.Fatalf("prefix %v is not masked", p)
		}
		if p.Bits() < 8 || p.Bits() > 32 {
			t.Fatalf("prefix %v has length outside /8../32", p)
		}
		if _, dup := seen[p]; dup {
			t.Fatalf("prefix %v generated twice", p)
		}
		seen[p] = struct{}{}
		for _, x := range excluded {
			if x.Overlaps(p) {
				t.Fatalf("prefix %v overlaps excluded range %v", p, x)
			}
		}
		if i > 0 && comparePrefix(ps[i-1], p) >= 0 {
			t.Fatalf("prefixes %v and %v are out of order", ps[i-1], p)
		}
	}
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func TestGenerateValid(t *testing.T) {
	checkValid(t, Generate(100000, 1))
}

func TestGenerateLengthMix(t *testing.T) {
	const n = 100000
	ps := Generate(n, 99)
	if len(ps) != n {
		t.Fatalf("got %d prefixes, want %d", len(ps), n)
	}
	var hist [33]int
	for _, p := range ps {
		hist[p.Bits()]++
	}
	share := func(lo, hi int) float64 {
		c := 0
		for b := lo; b <= hi; b++ {
			c += hist[b]
		}
		return float64(c) / n
	}
	for _, tc := range []struct {
		name       string
		lo, hi     int
		want, tol  float64
		upperBound bool
	}{
		{"/24", 24, 24, 0.39, 0.02, false},
		{"/23", 23, 23, 0.18, 0.01, false},
		{"/22", 22, 22, 0.18, 0.01, false},
		{"/21", 21, 21, 0.08, 0.005, false},
		{"/20", 20, 20, 0.06, 0.005, false},
		{"/19", 19, 19, 0.04, 0.003, false},
		{"/18", 18, 18, 0.02, 0.002, false},
		{"/17", 17, 17, 0.01, 0.002, false},
		{"/16", 16, 16, 0.01, 0.002, false},
		{"</16", 8, 15, 0.01, 0, true},
		{">/24", 25, 32, 0.01, 0, true},
	} {
		got := share(tc.lo, tc.hi)
		if tc.upperBound {
			if got >= tc.want || got == 0 {
				t.Errorf("%s share = %.4f, want in (0, %.2f)", tc.name, got, tc.want)
			}
			continue
		}
		if math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%s share = %.4f, want %.3f ± %.3f", tc.name, got, tc.want, tc.tol)
		}
	}
	t.Logf("length histogram: %v", hist)
}

// nestedShare returns the fraction of prefixes that lie inside another
// prefix of the table (which is sorted by address, then length).
func nestedShare(ps []netip.Prefix) float64 {
	nested := 0
	var stack []netip.Prefix // enclosing prefixes of the current one
	for _, p := range ps {
		for len(stack) > 0 && !stack[len(stack)-1].Contains(p.Addr()) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			nested++
		}
		stack = append(stack, p)
	}
	return float64(nested) / float64(len(ps))
}

func TestGenerateNesting(t *testing.T) {
	for _, n := range []int{100000, 1000000} {
		if n > 100000 && testing.Short() {
			continue
		}
		got := nestedShare(Generate(n, 5))
		if got < 0.05 || got > 0.10 {
			t.Errorf("n=%d: %.2f%% of prefixes are nested in another, want 5-10%%", n, 100*got)
		}
		t.Logf("n=%d: %.2f%% nested", n, 100*got)
	}
}

func TestGenerateLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("1M table in -short mode")
	}
	// 1.5M overfills public space with disjoint prefixes; the rest nest.
	for _, n := range []int{1000000, 1500000} {
		ps := Generate(n, 3)
		if len(ps) != n {
			t.Fatalf("got %d prefixes, want %d", len(ps), n)
		}
		checkValid(t, ps)
	}
}

func TestExcludedIsCopy(t *testing.T) {
	x := Excluded()
	x[0] = netip.MustParsePrefix("1.0.0.0/8")
	if Excluded()[0] == x[0] {
		t.Fatal("Excluded returned the package's own slice")
	}
}

func BenchmarkGenerate1M(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Generate(1000000, int64(b.N))
	}
}
