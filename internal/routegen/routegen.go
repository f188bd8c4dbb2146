// Package routegen generates seeded, Internet-like IPv4 routing tables for
// tests and benchmarks of the router.
//
// A generated table has the prefix-length mix of today's Internet table, is
// drawn from public unicast space only (never the special-purpose ranges the
// lab uses, see Excluded), and contains some more-specifics nested inside
// other generated prefixes, as real tables do.
package routegen

import (
	"math/rand/v2"
	"net/netip"
	"slices"
)

// lengthShare is the share of each prefix length in a generated table. The
// /24 share is whatever the other lengths leave (about 40%). Lengths shorter
// than /16 are given as absolute counts per million prefixes so that a large
// table does not need more address space than the public Internet has.
var lengthShare = [33]float64{
	8: 1e-6, 9: 2e-6, 10: 5e-6, 11: 15e-6, 12: 50e-6, 13: 150e-6, 14: 500e-6, 15: 1500e-6,
	16: 0.010, 17: 0.010, 18: 0.020, 19: 0.040, 20: 0.060, 21: 0.083, 22: 0.185, 23: 0.185,
	25: 2000e-6, 26: 1200e-6, 27: 700e-6, 28: 500e-6, 29: 300e-6, 30: 200e-6, 31: 50e-6, 32: 50e-6,
}

// nestShare is the share of the prefixes of each length (longer than the
// shortest generated one) that are placed inside another generated prefix.
const nestShare = 0.07

// excluded are the special-purpose ranges no generated prefix may overlap.
var excluded = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// Excluded returns the special-purpose IPv4 ranges that generated prefixes
// never overlap (private, shared, loopback, link-local, documentation,
// benchmarking, multicast and reserved space). The lab uses these ranges for
// its own addressing.
func Excluded() []netip.Prefix {
	return slices.Clone(excluded[:])
}

// Generate returns n distinct IPv4 prefixes, deterministic for a seed, with
// the length mix of today's Internet table: about 40% /24, 18% /23, 18% /22,
// 8% /21, 6% /20, 4% /19, 2% /18, 1% /17, 1% /16, under 1% shorter than /16
// and under 1% longer than /24. About 7% of the prefixes lie inside another
// generated prefix. Prefixes are masked, sorted by address then length, and
// never overlap Excluded. Generate returns nil when n <= 0.
//
// Up to about 1.3M prefixes the disjoint ones fit in public space; beyond
// that, more prefixes are nested and the nested share grows above 7%.
func Generate(n int, seed int64) []netip.Prefix {
	if n <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x73706c6974706c61)) // "splitpla"
	counts := apportion(n)

	g := &generator{rng: rng, free: publicSpans(), keys: make([]uint64, 0, n)}
	carry := 0
	for bits := 8; bits <= 32; bits++ {
		want := counts[bits] + carry
		if want == 0 {
			continue
		}
		nested := 0
		if len(g.keys) > 0 {
			nested = min(want, int(float64(want)*nestShare+rng.Float64()))
		}
		got := g.nest(bits, nested)
		got += g.allocate(bits, want-got)
		if got < want { // public space is full: nest the rest
			got += g.nest(bits, want-got)
		}
		carry = want - got
	}

	slices.Sort(g.keys)
	out := make([]netip.Prefix, len(g.keys))
	for i, k := range g.keys {
		out[i] = keyPrefix(k)
	}
	return out
}

// apportion splits n into per-length counts, rounding each length's share to
// the nearest integer and giving /24 whatever the other lengths leave.
func apportion(n int) [33]int {
	var counts [33]int
	total := 0
	for bits, share := range lengthShare {
		counts[bits] = int(share*float64(n) + 0.5)
		total += counts[bits]
	}
	// Rounding up can only overshoot for tiny n; trim from the shortest.
	for bits := 8; total > n && bits <= 32; bits++ {
		d := min(counts[bits], total-n)
		counts[bits] -= d
		total -= d
	}
	counts[24] += n - total
	return counts
}

// A key packs a prefix as address<<8 | bits; sorting keys sorts prefixes by
// address, then by length.
func prefixKey(addr uint64, bits int) uint64 { return addr<<8 | uint64(bits) }

func keyPrefix(k uint64) netip.Prefix {
	a := uint32(k >> 8)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), int(k&0xff))
}

// span is a free address range [lo, hi).
type span struct{ lo, hi uint64 }

// publicSpans returns public unicast space as sorted, disjoint spans.
func publicSpans() []span {
	ex := make([]span, 0, len(excluded))
	for _, p := range excluded {
		lo := uint64(addrUint(p.Addr()))
		ex = append(ex, span{lo, lo + 1<<(32-p.Bits())})
	}
	slices.SortFunc(ex, func(a, b span) int { return int(int64(a.lo) - int64(b.lo)) })
	var out []span
	next := uint64(0)
	for _, e := range ex {
		if e.lo > next {
			out = append(out, span{next, e.lo})
		}
		next = max(next, e.hi)
	}
	if next < 1<<32 {
		out = append(out, span{next, 1 << 32})
	}
	return out
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// generator places prefixes from the shortest length to the longest. Space
// taken by a prefix placed on its own ("disjoint") is removed from free, so
// later disjoint prefixes never overlap earlier ones; nested prefixes are
// placed inside an already generated prefix on purpose.
type generator struct {
	rng    *rand.Rand
	free   []span
	spare  []span
	keys   []uint64
	nested map[uint64]struct{}
	idx    []uint64
}

// nest places up to k prefixes of length bits inside randomly chosen shorter
// prefixes generated before, and returns how many it placed.
func (g *generator) nest(bits, k int) int {
	if k == 0 {
		return 0
	}
	if g.nested == nil {
		g.nested = make(map[uint64]struct{})
	}
	parents := len(g.keys)
	placed := 0
	for tries := 0; placed < k && tries < 4*k+16; tries++ {
		parent := g.keys[g.rng.IntN(parents)]
		pbits := int(parent & 0xff)
		if pbits >= bits { // placed at this length already, not a parent
			continue
		}
		sub := g.rng.Uint64N(1 << (bits - pbits))
		key := prefixKey(parent>>8+sub<<(32-bits), bits)
		if _, dup := g.nested[key]; dup {
			continue
		}
		g.nested[key] = struct{}{}
		g.keys = append(g.keys, key)
		placed++
	}
	return placed
}

// allocate places up to k prefixes of length bits in free space, uniformly
// among the free aligned blocks of that size, and returns how many it placed.
func (g *generator) allocate(bits, k int) int {
	if k == 0 {
		return 0
	}
	size := uint64(1) << (32 - bits)
	var total uint64
	for _, s := range g.free {
		total += blocks(s, size)
	}
	if uint64(k) > total {
		k = int(total)
	}
	if k == 0 {
		return 0
	}
	picks := g.sample(total, k)

	// Walk the spans and the sorted block indices together, cutting each
	// chosen block out of its span.
	out := g.spare[:0]
	base := uint64(0)
	p := 0
	for _, s := range g.free {
		nb := blocks(s, size)
		first := (s.lo + size - 1) &^ (size - 1)
		lo := s.lo
		for p < len(picks) && picks[p] < base+nb {
			addr := first + (picks[p]-base)*size
			g.keys = append(g.keys, prefixKey(addr, bits))
			if addr > lo {
				out = append(out, span{lo, addr})
			}
			lo = addr + size
			p++
		}
		if lo < s.hi {
			out = append(out, span{lo, s.hi})
		}
		base += nb
	}
	g.spare, g.free = g.free, out
	return k
}

// blocks returns how many aligned blocks of the given size fit in s.
func blocks(s span, size uint64) uint64 {
	first := (s.lo + size - 1) &^ (size - 1)
	last := s.hi &^ (size - 1)
	if last <= first {
		return 0
	}
	return (last - first) / size
}

// sample returns k distinct integers from [0, total), sorted.
func (g *generator) sample(total uint64, k int) []uint64 {
	idx := g.idx[:0]
	if uint64(k)*4 >= total {
		// Dense: selection sampling (Knuth's algorithm S) yields sorted output.
		need := uint64(k)
		for i := uint64(0); i < total && need > 0; i++ {
			if g.rng.Uint64N(total-i) < need {
				idx = append(idx, i)
				need--
			}
		}
		g.idx = idx
		return idx
	}
	// Sparse: draw, sort, drop duplicates, top up until k remain.
	for len(idx) < k {
		for range k - len(idx) {
			idx = append(idx, g.rng.Uint64N(total))
		}
		slices.Sort(idx)
		idx = slices.Compact(idx)
	}
	g.idx = idx
	return idx
}
