package datapath

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// refLPM is the obviously correct reference: a map per prefix length,
// searched from /32 down.
type refLPM struct {
	m [33]map[uint32]uint32
}

func newRefLPM() *refLPM {
	r := &refLPM{}
	for i := range r.m {
		r.m[i] = map[uint32]uint32{}
	}
	return r
}

func (r *refLPM) lookup(addr uint32) (uint32, bool) {
	for bits := 32; bits >= 0; bits-- {
		if nh, ok := r.m[bits][addr&mask(uint8(bits))]; ok {
			return nh, true
		}
	}
	return 0, false
}

func (r *refLPM) prefixes() []pfx.V4 {
	var ps []pfx.V4
	for bits, m := range r.m {
		for a := range m {
			ps = append(ps, pfx.Make(a, uint8(bits)))
		}
	}
	return ps
}

func (r *refLPM) count() int {
	n := 0
	for _, m := range r.m {
		n += len(m)
	}
	return n
}

func addrOf(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// routeGen draws overlapping prefixes: most inside a few hot /16s so that
// they nest, many longer than /24, some short ones (down to /0) covering the
// hot regions.
type routeGen struct {
	rng *rand.Rand
	hot []uint32
}

func newRouteGen(seed uint64) *routeGen {
	g := &routeGen{rng: rand.New(rand.NewPCG(seed, 7))}
	for range 4 {
		g.hot = append(g.hot, uint32(1+g.rng.IntN(220))<<24|uint32(g.rng.IntN(256))<<16)
	}
	return g
}

func (g *routeGen) prefix() pfx.V4 {
	var bits int
	switch r := g.rng.IntN(100); {
	case r < 2:
		bits = g.rng.IntN(9) // /0 .. /8
	case r < 15:
		bits = 9 + g.rng.IntN(8)
	case r < 50:
		bits = 17 + g.rng.IntN(8)
	default:
		bits = 25 + g.rng.IntN(8) // lots of > /24
	}
	addr := g.rng.Uint32()
	if bits >= 16 || g.rng.IntN(2) == 0 {
		h := g.hot[g.rng.IntN(len(g.hot))]
		// Keep most long prefixes in a few /24s so that groups fill up.
		if bits > 24 && g.rng.IntN(4) != 0 {
			addr = h | uint32(g.rng.IntN(8))<<8 | addr&0xff
		} else {
			addr = h | addr&0xffff
		}
	}
	return pfx.Make(addr, uint8(bits))
}

func (g *routeGen) nexthop() uint32 { return uint32(g.rng.IntN(16)) } // 0 is a valid id

// addrsToCheck returns every prefix's first and last address and the ones
// just outside, plus n random addresses (half in the hot /16s).
func (g *routeGen) addrsToCheck(ps []pfx.V4, n int) []uint32 {
	out := make([]uint32, 0, 4*len(ps)+n)
	for _, p := range ps {
		last := p.Addr() | ^mask(p.Bits())
		out = append(out, p.Addr(), last, p.Addr()-1, last+1)
	}
	for i := range n {
		a := g.rng.Uint32()
		if i%2 == 0 {
			a = g.hot[g.rng.IntN(len(g.hot))] | a&0xffff
		}
		out = append(out, a)
	}
	return out
}

// fibDriver changes a FIB through the API under test and reads it back the
// way the XDP program does.
type fibDriver struct {
	set    func([]Route) error
	del    func([]netip.Prefix) error
	lookup func(addr uint32) (uint32, bool)
	fib    func() *fib
}

// checkFIB compares the FIB with ref at addrs.
func checkFIB(t *testing.T, what string, d fibDriver, ref *refLPM, addrs []uint32) {
	t.Helper()
	bad := 0
	for _, a := range addrs {
		gotNH, gotOK := d.lookup(a)
		wantNH, wantOK := ref.lookup(a)
		if gotOK != wantOK || gotNH != wantNH {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s -> nexthop %d (found %v), want %d (found %v)", what, addrOf(a), gotNH, gotOK, wantNH, wantOK)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d addresses wrong", what, bad, len(addrs))
	}
	checkInvariants(t, what, d.fib(), ref)
}

// checkInvariants checks the bookkeeping: every /24 holding prefixes longer
// than /24 has exactly one group, whose user count is their number, and no
// other group is in use except the quarantined ones.
func checkInvariants(t *testing.T, what string, f *fib, ref *refLPM) {
	t.Helper()
	long := map[uint32]int{}
	for bits := 25; bits <= 32; bits++ {
		for a := range ref.m[bits] {
			long[a>>8]++
		}
	}
	groups := 0
	seen := map[uint32]bool{}
	for i, e := range f.tbl24 {
		if e&fibGroup == 0 {
			if long[uint32(i)] > 0 {
				t.Fatalf("%s: /24 #%d holds %d long prefixes but has no group", what, i, long[uint32(i)])
			}
			continue
		}
		g := e & fibGroupMask
		if seen[g] {
			t.Fatalf("%s: group %d used twice", what, g)
		}
		seen[g] = true
		groups++
		if int(f.users[g]) != long[uint32(i)] {
			t.Fatalf("%s: group %d of /24 #%d has %d users, want %d", what, g, i, f.users[g], long[uint32(i)])
		}
	}
	if groups != len(long) {
		t.Fatalf("%s: %d groups for %d /24s with long prefixes", what, groups, len(long))
	}
	if inUse := f.groupsInUse() - len(f.quarantine); inUse != groups {
		t.Fatalf("%s: %d groups allocated and not quarantined, %d published", what, inUse, groups)
	}
	if f.count != ref.count() {
		t.Fatalf("%s: count %d, want %d", what, f.count, ref.count())
	}
}

// exerciseFIB runs rounds of random batches (adds, nexthop changes, deletes
// that uncover shorter prefixes, re-adds) against d and ref, checking after
// each round at nCheck random addresses and at every prefix boundary.
func exerciseFIB(t *testing.T, d fibDriver, seed uint64, rounds, nCheck int) {
	g := newRouteGen(seed)
	ref := newRefLPM()
	for round := range rounds {
		// Add (with duplicates and replacements inside the batch).
		var batch []Route
		for range 200 + g.rng.IntN(800) {
			p, nh := g.prefix(), g.nexthop()
			batch = append(batch, Route{Prefix: p.Prefix(), Nexthop: nh})
		}
		if g.rng.IntN(3) == 0 {
			batch = append(batch, Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Nexthop: g.nexthop()})
		}
		if err := d.set(batch); err != nil {
			t.Fatalf("round %d: set: %v", round, err)
		}
		for _, r := range batch {
			p, _ := toPrefix(r.Prefix)
			ref.m[p.Bits()][p.Addr()] = r.Nexthop
		}
		// Change some nexthops, one route at a time.
		ps := ref.prefixes()
		for range 50 {
			p := ps[g.rng.IntN(len(ps))]
			nh := g.nexthop()
			if err := d.set([]Route{{Prefix: p.Prefix(), Nexthop: nh}}); err != nil {
				t.Fatalf("round %d: change %s: %v", round, p, err)
			}
			ref.m[p.Bits()][p.Addr()] = nh
		}
		checkFIB(t, "after adds", d, ref, g.addrsToCheck(ref.prefixes(), nCheck))

		// Delete about a third, in one batch and one at a time; keep
		// some to re-add.
		ps = ref.prefixes()
		g.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		dels := ps[:len(ps)/3]
		var np []netip.Prefix
		for _, p := range dels[:len(dels)/2] {
			np = append(np, p.Prefix())
		}
		if err := d.del(np); err != nil {
			t.Fatalf("round %d: delete batch: %v", round, err)
		}
		for _, p := range dels[len(dels)/2:] {
			if err := d.del([]netip.Prefix{p.Prefix()}); err != nil {
				t.Fatalf("round %d: delete %s: %v", round, p, err)
			}
		}
		for _, p := range dels {
			delete(ref.m[p.Bits()], p.Addr())
		}
		check := g.addrsToCheck(dels, nCheck) // where the deleted ones were
		check = append(check, g.addrsToCheck(ref.prefixes(), 0)...)
		checkFIB(t, "after deletes", d, ref, check)

		// Deleting a missing route changes nothing.
		missing := dels[0].Prefix()
		if err := d.del([]netip.Prefix{ps[len(ps)-1].Prefix(), missing}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: deleting %s again: %v, want ErrNotFound", round, missing, err)
		}
		// Re-add some of the deleted ones.
		batch = batch[:0]
		for _, p := range dels[:len(dels)/4] {
			nh := g.nexthop()
			batch = append(batch, Route{Prefix: p.Prefix(), Nexthop: nh})
			ref.m[p.Bits()][p.Addr()] = nh
		}
		if err := d.set(batch); err != nil {
			t.Fatalf("round %d: re-add: %v", round, err)
		}
		checkFIB(t, "after re-adds", d, ref, g.addrsToCheck(ref.prefixes(), nCheck))
	}

	// Delete everything: the table must be empty again.
	var all []netip.Prefix
	for _, p := range ref.prefixes() {
		all = append(all, p.Prefix())
	}
	if err := d.del(all); err != nil {
		t.Fatalf("delete all: %v", err)
	}
	ref = newRefLPM()
	checkFIB(t, "after deleting all", d, ref, g.addrsToCheck(nil, nCheck))
	f := d.fib()
	if slices.ContainsFunc(f.tbl24, func(e uint32) bool { return e != 0 }) {
		t.Fatalf("tbl24 not empty after deleting every route")
	}
}

// memFIB is a FIB over plain slices, with a grace period that only counts.
func memFIB(groups int) (*fib, *int) {
	graces := new(int)
	f := newFIB(make([]uint32, fibTbl24Entries), make([]uint32, groups*fibGroupEntries), func() error {
		*graces++
		return nil
	})
	return f, graces
}

func memDriver(f *fib) fibDriver {
	return fibDriver{
		set: func(rs []Route) error {
			ps := make([]pfx.V4, len(rs))
			nhs := make([]uint32, len(rs))
			for i, r := range rs {
				ps[i], _ = toPrefix(r.Prefix)
				nhs[i] = r.Nexthop
			}
			return f.set(ps, nhs)
		},
		del: func(np []netip.Prefix) error {
			ps := make([]pfx.V4, len(np))
			for i, p := range np {
				ps[i], _ = toPrefix(p)
			}
			return f.delete(ps)
		},
		lookup: f.lookup,
		fib:    func() *fib { return f },
	}
}

// TestFIBReference needs no kernel: the FIB over plain slices must agree
// with the reference LPM.
func TestFIBReference(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	f, _ := memFIB(FIBGroups)
	exerciseFIB(t, memDriver(f), seed, 6, 300_000)
}

// TestFIBGroupReuse runs with few groups, so that released groups must be
// reused, which is only allowed after a grace period.
func TestFIBGroupReuse(t *testing.T) {
	f, graces := memFIB(64)
	d := memDriver(f)
	for round := range 20 {
		var rs []Route
		for i := range 64 {
			rs = append(rs, Route{Prefix: netip.PrefixFrom(addrOf(0x0a000000|uint32(round%2)<<16|uint32(i)<<8|0x80), 25), Nexthop: 1})
		}
		if err := d.set(rs); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round > 0 && *graces != round {
			t.Fatalf("round %d: %d grace periods, want %d", round, *graces, round)
		}
		var ps []netip.Prefix
		for _, r := range rs {
			ps = append(ps, r.Prefix)
		}
		if err := d.del(ps); err != nil {
			t.Fatal(err)
		}
		if len(f.quarantine) != 64 {
			t.Fatalf("round %d: %d groups quarantined, want 64", round, len(f.quarantine))
		}
	}
}

// TestFIBFull checks that running out of tbl8 groups is an error wrapping
// ErrFIBFull and leaves the tables exactly as they were.
func TestFIBFull(t *testing.T) {
	f, _ := memFIB(4)
	d := memDriver(f)
	base := []Route{
		{netip.MustParsePrefix("0.0.0.0/0"), 9},
		{netip.MustParsePrefix("10.0.0.0/8"), 1},
		{netip.MustParsePrefix("10.0.1.0/25"), 2},
		{netip.MustParsePrefix("10.0.2.0/26"), 3},
		{netip.MustParsePrefix("10.0.3.0/32"), 4},
	}
	if err := d.set(base); err != nil {
		t.Fatal(err)
	}
	tbl24, tbl8 := slices.Clone(f.tbl24), slices.Clone(f.tbl8)
	count := f.count
	err := d.set([]Route{
		{netip.MustParsePrefix("10.9.0.0/16"), 5},     // fits
		{netip.MustParsePrefix("10.0.1.128/25"), 5},   // existing group
		{netip.MustParsePrefix("10.0.4.1/32"), 5},     // 4th group
		{netip.MustParsePrefix("10.0.5.1/32"), 5},     // 5th: too many
		{netip.MustParsePrefix("10.0.5.0/24"), 5},     // fits
		{netip.MustParsePrefix("10.0.5.128/27"), 5},   // same group as the 5th
		{netip.MustParsePrefix("192.0.2.0/24"), 5},    // fits
		{netip.MustParsePrefix("198.51.100.7/32"), 5}, // 6th
	})
	if !errors.Is(err, ErrFIBFull) {
		t.Fatalf("set: %v, want ErrFIBFull", err)
	}
	t.Logf("error: %v", err)
	if !slices.Equal(tbl24, f.tbl24) || !slices.Equal(tbl8, f.tbl8) || f.count != count {
		t.Fatal("a failed batch changed the tables")
	}
	if err := d.set([]Route{{netip.MustParsePrefix("10.0.4.1/32"), 5}}); err != nil {
		t.Fatalf("the 4th group: %v", err)
	}
	if err := d.set([]Route{{netip.MustParsePrefix("10.0.5.1/32"), 5}}); !errors.Is(err, ErrFIBFull) {
		t.Fatalf("the 5th group: %v, want ErrFIBFull", err)
	}
	// Freeing one makes room again.
	if err := d.del([]netip.Prefix{netip.MustParsePrefix("10.0.3.0/32")}); err != nil {
		t.Fatal(err)
	}
	if err := d.set([]Route{{netip.MustParsePrefix("10.0.5.1/32"), 5}}); err != nil {
		t.Fatalf("after freeing a group: %v", err)
	}
}
