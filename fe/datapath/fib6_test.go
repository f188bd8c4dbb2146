//go:build linux

package datapath

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// add128 is x + d, carrying between the halves.
func add128(x pfx.U128, d int64) pfx.U128 {
	lo := x.Lo + uint64(d)
	hi := x.Hi
	switch {
	case d > 0 && lo < x.Lo:
		hi++
	case d < 0 && lo > x.Lo:
		hi--
	}
	return pfx.U128{Hi: hi, Lo: lo}
}

// refLPM6 is the obviously correct IPv6 reference: a map per prefix length,
// searched from /128 down.
type refLPM6 struct {
	m [129]map[[16]byte]uint32
}

func newRefLPM6() *refLPM6 {
	r := &refLPM6{}
	for i := range r.m {
		r.m[i] = map[[16]byte]uint32{}
	}
	return r
}

func (r *refLPM6) lookup(a [16]byte) (uint32, bool) {
	x := pfx.U128Of(a)
	for bits := 128; bits >= 0; bits-- {
		if nh, ok := r.m[bits][x.And(pfx.Mask128(bits)).Bytes()]; ok {
			return nh, true
		}
	}
	return 0, false
}

func (r *refLPM6) prefixes() []prefix6 {
	var ps []prefix6
	for bits, m := range r.m {
		for a := range m {
			ps = append(ps, prefix6{addr: a, bits: uint8(bits)})
		}
	}
	return ps
}

// routeGen6 draws nested IPv6 prefixes: mostly /29 to /48 inside a few
// hot /24s, with some longer ones (/49 to /128) and a few short ones down to
// ::/0 covering them.
type routeGen6 struct {
	rng *rand.Rand
	hot []pfx.U128
}

func newRouteGen6(seed uint64) *routeGen6 {
	g := &routeGen6{rng: rand.New(rand.NewPCG(seed, 6))}
	for range 4 {
		g.hot = append(g.hot, pfx.U128{Hi: 0x2000_0000_0000_0000 | g.rng.Uint64()&0x1fff_ff00_0000_0000})
	}
	return g
}

func (g *routeGen6) addr() pfx.U128 {
	a := pfx.U128{Hi: g.rng.Uint64(), Lo: g.rng.Uint64()}
	if g.rng.IntN(8) != 0 {
		h := g.hot[g.rng.IntN(len(g.hot))]
		a = h.Or(a.And(pfx.Mask128(24).Not()))
		// Keep many long prefixes in a few /48s so that they nest.
		if g.rng.IntN(2) == 0 {
			a.Hi = a.Hi&^0xffff_ffff_0000 | uint64(g.rng.IntN(4))<<16
		}
	}
	return a
}

func (g *routeGen6) prefix() prefix6 {
	var bits int
	switch r := g.rng.IntN(100); {
	case r < 3:
		bits = g.rng.IntN(25) // /0 .. /24
	case r < 15:
		bits = 25 + g.rng.IntN(8)
	case r < 70:
		bits = 33 + g.rng.IntN(16) // /33 .. /48
	case r < 90:
		bits = 49 + g.rng.IntN(16)
	default:
		bits = 65 + g.rng.IntN(64) // up to /128
	}
	return prefix6{addr: g.addr().And(pfx.Mask128(bits)).Bytes(), bits: uint8(bits)}
}

// addrsToCheck returns every prefix's first and last address and the ones
// just outside, plus n random addresses.
func (g *routeGen6) addrsToCheck(ps []prefix6, n int) [][16]byte {
	out := make([][16]byte, 0, 4*len(ps)+n)
	for _, p := range ps {
		first := pfx.U128Of(p.addr)
		last := first.Or(pfx.Mask128(int(p.bits)).Not())
		out = append(out, first.Bytes(), last.Bytes(), add128(first, -1).Bytes(), add128(last, 1).Bytes())
	}
	for range n {
		out = append(out, g.addr().Bytes())
	}
	return out
}

// fib6Driver changes an IPv6 FIB through the API under test and reads it
// back the way the XDP program does.
type fib6Driver struct {
	set    func([]Route) error
	del    func([]netip.Prefix) error
	lookup func(addr [16]byte) (uint32, bool)
	fib    func() *fib6
}

func (p prefix6) netip() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom16(p.addr), int(p.bits)) }

func toPrefix6(p netip.Prefix) prefix6 {
	_, p6, _, _ := routePrefix(p)
	return p6
}

// memFIB6 is an IPv6 FIB over plain slices, with a grace period that only
// counts.
func memFIB6(groups int) (*fib6, *int) {
	graces := new(int)
	f := newFIB6(make([]uint32, fib6Tbl16Entries), make([]uint32, groups*fibGroupEntries), func() error {
		*graces++
		return nil
	})
	return f, graces
}

func memDriver6(f *fib6) fib6Driver {
	return fib6Driver{
		set: func(rs []Route) error {
			ps := make([]prefix6, len(rs))
			nhs := make([]uint32, len(rs))
			for i, r := range rs {
				ps[i] = toPrefix6(r.Prefix)
				nhs[i] = r.Nexthop
			}
			return f.set(ps, nhs)
		},
		del: func(np []netip.Prefix) error {
			ps := make([]prefix6, len(np))
			for i, p := range np {
				ps[i] = toPrefix6(p)
			}
			return f.delete(ps)
		},
		lookup: f.lookup,
		fib:    func() *fib6 { return f },
	}
}

// checkFIB6 compares the FIB with ref at addrs, then its bookkeeping.
func checkFIB6(t *testing.T, what string, d fib6Driver, ref *refLPM6, addrs [][16]byte) {
	t.Helper()
	bad := 0
	for _, a := range addrs {
		gotNH, gotOK := d.lookup(a)
		wantNH, wantOK := ref.lookup(a)
		if gotOK != wantOK || gotNH != wantNH {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s -> nexthop %d (found %v), want %d (found %v)", what, netip.AddrFrom16(a), gotNH, gotOK, wantNH, wantOK)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d addresses wrong", what, bad, len(addrs))
	}
	checkInvariants6(t, what, d.fib(), ref)
}

// checkInvariants6 checks the bookkeeping: the groups reachable from tbl16
// are exactly those on the paths of the prefixes longer than /16, each used
// once, with a user count equal to the prefixes below it; no other group is
// in use except the quarantined ones.
func checkInvariants6(t *testing.T, what string, f *fib6, ref *refLPM6) {
	t.Helper()
	type groupKey struct {
		addr  [16]byte
		level int
	}
	want := map[groupKey]uint32{} // users of each group that must exist
	n := 0
	for _, p := range ref.prefixes() {
		n++
		for k := 1; k <= level6(p.bits); k++ {
			want[groupKey{mask6(p.addr, 16+8*(k-1)), k}]++
		}
	}
	if f.count != n {
		t.Fatalf("%s: count %d, want %d", what, f.count, n)
	}
	seen := map[uint32]bool{}
	found := 0
	// walk visits the group g at level k, reached by the address bits a.
	var walk func(g uint32, k int, a [16]byte)
	walk = func(g uint32, k int, a [16]byte) {
		if seen[g] {
			t.Fatalf("%s: group %d used twice", what, g)
		}
		seen[g] = true
		found++
		key := groupKey{a, k}
		if f.users[g] != want[key] || want[key] == 0 {
			t.Fatalf("%s: group %d at %s level %d has %d users, want %d", what, g, netip.AddrFrom16(a), k, f.users[g], want[key])
		}
		gt, _ := f.group(g)
		for j, e := range gt {
			if e&fibGroup != 0 {
				if k == fib6Levels {
					t.Fatalf("%s: group %d at the last level points at a group", what, g)
				}
				b := a
				b[k+1] = byte(j)
				walk(e&fibGroupMask, k+1, b)
			}
		}
	}
	for i, e := range f.tbl16 {
		if e&fibGroup != 0 {
			var a [16]byte
			a[0], a[1] = byte(i>>8), byte(i)
			walk(e&fibGroupMask, 1, a)
		}
	}
	if found != len(want) {
		t.Fatalf("%s: %d groups reachable, %d needed", what, found, len(want))
	}
	if inUse := f.groupsInUse() - len(f.quarantine); inUse != found {
		t.Fatalf("%s: %d groups allocated and not quarantined, %d published", what, inUse, found)
	}
}

// exerciseFIB6 runs rounds of random batches (adds with duplicates,
// nexthop changes, deletes that uncover shorter prefixes, re-adds) against
// d and ref, checking after each step at every prefix boundary and nCheck
// random addresses, then deletes everything.
func exerciseFIB6(t *testing.T, d fib6Driver, seed uint64, rounds, nCheck int) {
	g := newRouteGen6(seed)
	ref := newRefLPM6()
	nh := func() uint32 { return uint32(g.rng.IntN(16)) } // 0 is a valid id
	for round := range rounds {
		var batch []Route
		for range 200 + g.rng.IntN(800) {
			p := g.prefix()
			batch = append(batch, Route{Prefix: p.netip(), Nexthop: nh()})
		}
		if g.rng.IntN(3) == 0 {
			batch = append(batch, Route{Prefix: netip.MustParsePrefix("::/0"), Nexthop: nh()})
		}
		if err := d.set(batch); err != nil {
			t.Fatalf("round %d: set: %v", round, err)
		}
		for _, r := range batch {
			p := toPrefix6(r.Prefix)
			ref.m[p.bits][p.addr] = r.Nexthop
		}
		ps := ref.prefixes()
		for range 50 {
			p := ps[g.rng.IntN(len(ps))]
			n := nh()
			if err := d.set([]Route{{Prefix: p.netip(), Nexthop: n}}); err != nil {
				t.Fatalf("round %d: change %s: %v", round, p, err)
			}
			ref.m[p.bits][p.addr] = n
		}
		checkFIB6(t, fmt.Sprintf("round %d after adds", round), d, ref, g.addrsToCheck(ref.prefixes(), nCheck))

		// Delete about a third, half in one batch, half one at a time.
		ps = ref.prefixes()
		g.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		dels := ps[:len(ps)/3]
		var np []netip.Prefix
		for _, p := range dels[:len(dels)/2] {
			np = append(np, p.netip())
		}
		if err := d.del(np); err != nil {
			t.Fatalf("round %d: delete batch: %v", round, err)
		}
		for _, p := range dels[len(dels)/2:] {
			if err := d.del([]netip.Prefix{p.netip()}); err != nil {
				t.Fatalf("round %d: delete %s: %v", round, p, err)
			}
		}
		for _, p := range dels {
			delete(ref.m[p.bits], p.addr)
		}
		check := g.addrsToCheck(dels, nCheck) // where the deleted ones were
		check = append(check, g.addrsToCheck(ref.prefixes(), 0)...)
		checkFIB6(t, fmt.Sprintf("round %d after deletes", round), d, ref, check)

		// Deleting a missing route changes nothing.
		if err := d.del([]netip.Prefix{ps[len(ps)-1].netip(), dels[0].netip()}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: deleting %s again: %v, want ErrNotFound", round, dels[0], err)
		}
		batch = batch[:0]
		for _, p := range dels[:len(dels)/4] {
			n := nh()
			batch = append(batch, Route{Prefix: p.netip(), Nexthop: n})
			ref.m[p.bits][p.addr] = n
		}
		if err := d.set(batch); err != nil {
			t.Fatalf("round %d: re-add: %v", round, err)
		}
		checkFIB6(t, fmt.Sprintf("round %d after re-adds", round), d, ref, g.addrsToCheck(ref.prefixes(), nCheck))
	}

	var all []netip.Prefix
	for _, p := range ref.prefixes() {
		all = append(all, p.netip())
	}
	if err := d.del(all); err != nil {
		t.Fatalf("delete all: %v", err)
	}
	ref = newRefLPM6()
	checkFIB6(t, "after deleting all", d, ref, g.addrsToCheck(nil, nCheck))
	if slices.ContainsFunc(d.fib().tbl16, func(e uint32) bool { return e != 0 }) {
		t.Fatalf("tbl16 not empty after deleting every route")
	}
}

// TestFIB6Reference needs no kernel: the stride table over plain slices
// must agree with the reference LPM.
func TestFIB6Reference(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	f, _ := memFIB6(FIB6Groups)
	exerciseFIB6(t, memDriver6(f), seed, 5, 200_000)
}

// TestFIB6Datapath runs the random exercise through the Datapath API. It
// checks every address by reading the mmapped tables back the way the
// program does (the range table, and the stride table where it says so),
// and one in 200 also by running the program on a frame.
func TestFIB6Datapath(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 16)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	ran := 0
	drv := fib6Driver{
		set: d.SetRoutes,
		del: d.DeleteRoutes,
		lookup: func(a [16]byte) (uint32, bool) {
			nh, ok := d.fib6.dxr.lookup(a)
			addr := netip.AddrFrom16(a)
			never := addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsUnspecified() || addr.IsLoopback()
			if !never && a[15]%200 == 0 {
				ran++
				pnh, pok := runLookupAddr(t, d, addr)
				if pok != ok || pnh != nh {
					t.Fatalf("%s: program gives nexthop %d (%v), the tables %d (%v)", addr, pnh, pok, nh, ok)
				}
			}
			return nh, ok
		},
		fib: func() *fib6 { return d.fib6 },
	}
	exerciseFIB6(t, drv, seed, 3, 200_000)
	t.Logf("%d addresses also checked through the program", ran)
	if ran < 1000 {
		t.Errorf("only %d addresses went through the program", ran)
	}

	// The mmapped tables are what the kernel sees through the map API.
	p := netip.MustParsePrefix
	if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 3}, {p("2001:db8:1:2::/64"), 4}}); err != nil {
		t.Fatal(err)
	}
	var row [256]uint32
	if err := d.objs.Fib6Tbl16.Lookup(uint32(0x20), &row); err != nil {
		t.Fatal(err)
	}
	e := row[0x01]
	for _, b := range []byte{0x0d, 0xb8, 0x00, 0x01, 0x00, 0x02} {
		if e&fibGroup == 0 {
			t.Fatalf("entry %#x on the way to 2001:db8:1:2::/64 is not a group", e)
		}
		if err := d.objs.Fib6Tbl8.Lookup(e&fibGroupMask, &row); err != nil {
			t.Fatal(err)
		}
		e = row[b]
		if b == 0xb8 && (row[0xb7] != 0 || row[0xb9] != 0) {
			t.Fatalf("2001:db7::/32 and 2001:db9::/32 have entries %#x %#x", row[0xb7], row[0xb9])
		}
	}
	if e != fibValid|4 || row[1] != fibValid|3 || row[3] != fibValid|3 {
		t.Fatalf("last group via the map API: %#x, neighbours %#x %#x", e, row[1], row[3])
	}
}

// TestFIB6Full checks that running out of groups is an error wrapping
// ErrFIBFull that leaves the tables exactly as they were, and that released
// groups are reused only after a grace period.
func TestFIB6Full(t *testing.T) {
	f, graces := memFIB6(8)
	d := memDriver6(f)
	p := netip.MustParsePrefix
	base := []Route{
		{p("::/0"), 9},               // tbl16
		{p("2001:db8::/32"), 1},      // groups 2001::/16, 2001:d00::/24
		{p("2001:db8:1::/48"), 2},    // 2001:db8::/32, 2001:db8::/40
		{p("2001:db8:1:ff::/64"), 3}, // 2001:db8:1::/48, 2001:db8:1::/56
	}
	if err := d.set(base); err != nil {
		t.Fatal(err)
	}
	if n := f.groupsInUse(); n != 6 {
		t.Fatalf("%d groups in use, want 6", n)
	}
	tbl16, tbl8, count := slices.Clone(f.tbl16), slices.Clone(f.tbl8), f.count
	err := d.set([]Route{
		{p("2001:db8:2::/48"), 5},           // existing groups
		{p("2400::/12"), 5},                 // tbl16 only
		{p("2001:db8:100::/48"), 5},         // 7th: 2001:db8:100::/40
		{p("2001:db8:1:ff:1::/80"), 5},      // 8th and 9th: too many
		{p("2001:db8:1:ff:1:8000::/81"), 5}, // the same two and a 10th
	})
	if !errors.Is(err, ErrFIBFull) {
		t.Fatalf("set: %v, want ErrFIBFull", err)
	}
	t.Logf("error: %v", err)
	if !slices.Equal(tbl16, f.tbl16) || !slices.Equal(tbl8, f.tbl8) || f.count != count {
		t.Fatal("a failed batch changed the tables")
	}
	if err := d.set([]Route{{p("2001:db8:100::/48"), 5}, {p("2001:db8:2::/48"), 5}}); err != nil {
		t.Fatalf("the 7th group: %v", err)
	}
	if err := d.set([]Route{{p("2a00:1::/32"), 5}}); !errors.Is(err, ErrFIBFull) {
		t.Fatalf("two more groups with one left: %v, want ErrFIBFull", err)
	}
	// Deleting the /64 folds its two groups, which are reused only after
	// a grace period.
	if err := d.del([]netip.Prefix{p("2001:db8:1:ff::/64")}); err != nil {
		t.Fatal(err)
	}
	if len(f.quarantine) != 2 || *graces != 0 {
		t.Fatalf("%d groups quarantined, %d grace periods; want 2 and 0", len(f.quarantine), *graces)
	}
	if err := d.set([]Route{{p("2a00:1::/32"), 5}}); err != nil {
		t.Fatalf("after freeing groups: %v", err)
	}
	if *graces != 1 {
		t.Fatalf("%d grace periods, want 1", *graces)
	}
	for a, want := range map[string]uint32{
		"2a00:1::1": 5, "2001:db8:1:ff::1": 2, "2001:db8:100::1": 5, "2001:db8:2::1": 5, "2001:db9::": 9, "2400::1": 9,
	} {
		if nh, ok := f.lookup(netip.MustParseAddr(a).As16()); !ok || nh != want {
			t.Errorf("%s: nexthop %d (%v), want %d", a, nh, ok, want)
		}
	}
}

// TestFIB6DatapathFull checks group exhaustion through the API: an error
// wrapping ErrFIBFull and nothing the program sees changes.
func TestFIB6DatapathFull(t *testing.T) {
	d := fibFixture(t, loadOptions{fib6Groups: 4}, 4)
	p := netip.MustParsePrefix
	if err := d.SetRoutes([]Route{{p("2001:db8::/32"), 1}, {p("2001:db8:1::/48"), 2}}); err != nil {
		t.Fatal(err)
	}
	err := d.SetRoutes([]Route{{p("2400::/16"), 3}, {p("2001:db8:100::/48"), 3}, {p("10.0.0.0/8"), 3}})
	if !errors.Is(err, ErrFIBFull) {
		t.Fatalf("SetRoutes: %v, want ErrFIBFull", err)
	}
	if n, _ := d.RouteCount(); n != 2 {
		t.Errorf("RouteCount %d after a failed batch, want 2", n)
	}
	checkRoutes6(t, d, map[string]uint32{"2001:db8:1::1": 2, "2001:db8:100::1": 1, "2400::1": noRoute, "10.0.0.1": noRoute})
}

// TestFIB6Concurrent is TestFIBConcurrent for IPv6: routes in 2001:db8::/32
// change all the time, with too few groups for all of them, while the
// program looks up addresses there. 2001:db8::/32 (nexthop 1) stays, and
// every candidate always maps to its own nexthop, so any other answer
// means a packet saw a half-built or reused group.
func TestFIB6Concurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	type cand struct {
		p  prefix6
		nh uint32
	}
	var cands []cand
	for s := range 8 {
		for _, pl := range []struct {
			suffix string
			bits   int
		}{{"::", 40}, {"::", 48}, {":8000::", 49}, {":1::", 64}, {":1:0:0:7::", 128}, {":ff00::", 56}} {
			a := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x%s", s<<8, pl.suffix))
			cands = append(cands, cand{toPrefix6(netip.PrefixFrom(a, pl.bits)), uint32(len(cands) + 2)})
		}
	}
	d := fibFixture(t, loadOptions{fib6Groups: 16}, uint32(len(cands)+2))
	if err := d.SetRoute(netip.MustParsePrefix("2001:db8::/32"), 1); err != nil {
		t.Fatal(err)
	}
	allowed := func(a [16]byte) []uint32 {
		out := []uint32{1}
		for _, c := range cands {
			if mask6(a, int(c.p.bits)) == c.p.addr {
				out = append(out, c.nh)
			}
		}
		return out
	}

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		changes atomic.Int64
		full    atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		present := make([]bool, len(cands))
		for !stop.Load() {
			var add []Route
			var del []netip.Prefix
			var idx []int
			for range 1 + rng.IntN(4) {
				i := rng.IntN(len(cands))
				if slices.Contains(idx, i) {
					continue
				}
				idx = append(idx, i)
				if present[i] {
					del = append(del, cands[i].p.netip())
				} else {
					add = append(add, Route{cands[i].p.netip(), cands[i].nh})
				}
			}
			if err := d.SetRoutes(add); errors.Is(err, ErrFIBFull) {
				full.Add(1)
				add = nil
			} else if err != nil {
				t.Error(err)
				return
			}
			if err := d.DeleteRoutes(del); err != nil {
				t.Error(err)
				return
			}
			for _, r := range add {
				present[slices.IndexFunc(cands, func(c cand) bool { return c.p.netip() == r.Prefix })] = true
			}
			for _, q := range del {
				present[slices.IndexFunc(cands, func(c cand) bool { return c.p.netip() == q })] = false
			}
			changes.Add(1)
		}
	}()

	rng := rand.New(rand.NewPCG(3, 4))
	deadline := time.Now().Add(3 * time.Second)
	lookups := 0
	for time.Now().Before(deadline) && !t.Failed() {
		c := cands[rng.IntN(len(cands))].p
		a := c.addr
		// Somewhere in or next to the candidate: vary the bytes after
		// its first 5.
		for i := 5; i < 16; i++ {
			if rng.IntN(3) == 0 {
				a[i] = byte(rng.Uint32())
			}
		}
		nh, ok := runLookupAddr(t, d, netip.AddrFrom16(a))
		if !ok || !slices.Contains(allowed(a), nh) {
			t.Errorf("%s: nexthop %d (forwarded %v), never valid for it (valid: %v)", netip.AddrFrom16(a), nh, ok, allowed(a))
		}
		lookups++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d lookups during %d route changes (%d refused as FIB full), %d groups in use",
		lookups, changes.Load(), full.Load(), d.fib6.groupsInUse())
	if changes.Load() < 1000 || full.Load() == 0 {
		t.Errorf("too little churn to mean anything: %d changes, %d full", changes.Load(), full.Load())
	}
}
