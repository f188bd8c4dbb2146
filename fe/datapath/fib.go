package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/splitplane/splitplane/internal/flatmap"
	"github.com/splitplane/splitplane/internal/host"
	"github.com/splitplane/splitplane/internal/prefetch"
	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// The DIR-24-8 FIB of xdp.c (fib_tbl24, fib_tbl8); the values repeat the
// defines there.
const (
	fibTbl24Entries = 1 << 24
	fibGroupEntries = 256
	fibGroup        = 1 << 31 // tbl24 entry points at a tbl8 group
	fibValid        = 1 << 30 // entry holds a nexthop id
	fibNexthopMask  = 0x1ffff // nexthop ids and group ids (GroupIDBase+i)
	fibGroupMask    = 0xffffff

	// FIBGroups is the number of tbl8 groups: at most this many /24s can
	// hold prefixes longer than /24 at the same time. The Internet table
	// needs a few thousand.
	FIBGroups = 8192
)

// ErrFIBFull is wrapped by the error of a route change that needs more tbl8
// groups (/24s holding prefixes longer than /24) than are free, or more
// routes than MaxRoutes. Nothing of the change is applied.
var ErrFIBFull = errors.New("FIB full")

// Route is one IPv4 or IPv6 route: packets to Prefix (masked to its length)
// use nexthop Nexthop, or, when Nexthop is a group id (GroupIDBase and up),
// one member of that ECMP group per flow.
type Route struct {
	Prefix  netip.Prefix
	Nexthop uint32
}

// fib is the control structure of the DIR-24-8 table: it owns tbl24 and
// tbl8 (in the datapath they are the mmapped BPF arrays, in tests plain
// slices) and keeps what the lookup arrays cannot tell, so that a change
// rewrites exactly the entries whose longest match changes.
//
// Concurrent readers (the XDP program) only ever see whole 32-bit entries,
// and see every entry go from its old longest match straight to its new one,
// except that a batch is applied prefix by prefix. The write ordering that
// keeps this true is:
//   - a tbl8 group is filled completely before the tbl24 entry that points
//     at it is published (atomic store, which orders the plain stores before
//     it);
//   - a group is unpublished (tbl24 flipped back to a nexthop) before it is
//     released, and a released group is reused only after grace has
//     returned, that is after every program run that might still have read
//     the old tbl24 entry has finished;
//   - SetRoutes applies longer prefixes first and DeleteRoutes shorter
//     prefixes first, so no address transiently uses a shorter prefix of
//     the batch that the final table does not give it.
//
// fib is not safe for concurrent use; Datapath serialises the calls.
type fib struct {
	tbl24, tbl8 []uint32
	// depth24[i] is 1 + the length of the longest prefix of length <= 24
	// covering tbl24 entry i, 0 if none (so /0 is distinguishable from no
	// route). depth8 is the same for tbl8 entries, over all lengths. In a
	// group, the entries not covered by a prefix longer than /24 have the
	// depth and value of their /24's tbl24 entry.
	depth24, depth8 []uint8
	// users counts the prefixes longer than /24 in each group in use.
	users []uint16
	// free groups can be used at once; quarantine groups were released
	// since the last grace period.
	free, quarantine []uint32
	// routes holds the prefixes by length: masked address (host order)
	// to nexthop id, in open-addressed integer maps (internal/flatmap: a
	// million /24s insert ~2.5x faster than into a Go map).
	routes [33]*flatmap.Map[uint32, uint32]
	count  int
	// grace returns when no reader can still use a tbl24 entry that was
	// overwritten before it was called.
	grace func() error
	// dxr, if set, is the range table derived from tbl24 and tbl8 after
	// every change (dxr.go).
	dxr *dxr
}

func newFIB(tbl24, tbl8 []uint32, grace func() error) *fib {
	groups := len(tbl8) / fibGroupEntries
	f := &fib{
		tbl24:   tbl24,
		tbl8:    tbl8,
		depth24: make([]uint8, len(tbl24)),
		depth8:  make([]uint8, len(tbl8)),
		users:   make([]uint16, groups),
		free:    make([]uint32, 0, groups),
		grace:   grace,
	}
	for g := groups - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	// The depth arrays are read before they are written.
	host.Prefault(f.depth24)
	host.Prefault(f.depth8)
	return f
}

func mask(bits uint8) uint32 {
	return ^uint32(0) << (32 - uint32(bits)) // a shift by 32 gives 0 for /0
}

func toPrefix(p netip.Prefix) (pfx.V4, error) {
	if !p.IsValid() || !p.Addr().Is4() {
		return 0, fmt.Errorf("prefix %s is not IPv4: %w", p, ErrInvalid)
	}
	return pfx.FromV4(p), nil
}

// lookup returns the nexthop id for addr as the XDP program finds it.
func (f *fib) lookup(addr uint32) (uint32, bool) {
	e := f.tbl24[addr>>8]
	if e&fibGroup != 0 {
		e = f.tbl8[(e&fibGroupMask)<<8|addr&0xff]
	}
	return e & fibNexthopMask, e&fibValid != 0
}

// set applies routes, longest prefixes first. It either applies all of them
// or returns an error and changes nothing.
func (f *fib) set(routes []pfx.V4, nexthops []uint32) error {
	if err := f.prepare(routes); err != nil {
		return err
	}
	f.apply(routes, nexthops)
	return nil
}

// prepare checks that routes fit: MaxRoutes and the tbl8 groups they need,
// which it makes free (waiting for a grace period if it has to). After it,
// apply cannot fail.
func (f *fib) prepare(routes []pfx.V4) error {
	if f.count+len(routes) > MaxRoutes {
		added := 0
		for _, p := range routes {
			if !f.routes[p.Bits()].Has(p.Addr()) {
				added++ // duplicates in the batch overcount: safe side
			}
		}
		if f.count+added > MaxRoutes {
			return fmt.Errorf("%d routes more than the %d present exceed %d: %w", added, f.count, MaxRoutes, ErrFIBFull)
		}
	}
	return f.reserve(f.groupsNeeded(routes))
}

// apply inserts routes, longest prefixes first; prepare must have accepted
// them.
func (f *fib) apply(routes []pfx.V4, nexthops []uint32) {
	// Counting sort by length, longest first.
	var perLen [33]int
	for _, p := range routes {
		perLen[p.Bits()]++
	}
	var next [33]int // next slot of each length in longest-first order
	pos := 0
	for bits := 32; bits >= 0; bits-- {
		next[bits] = pos
		pos += perLen[bits]
	}
	order := make([]int32, len(routes))
	for i, p := range routes {
		order[next[p.Bits()]] = int32(i)
		next[p.Bits()]++
	}
	for bits, n := range perLen {
		if n > 0 && f.routes[bits].Len() == 0 {
			f.routes[bits] = flatmap.New[uint32, uint32](n)
		}
	}
	for j, i := range order {
		if j+prefetch.Ahead < len(order) {
			f.prefetch(routes[order[j+prefetch.Ahead]])
		}
		f.insert(routes[i], nexthops[i])
	}
	f.derive(routes)
}

// derive brings the range table up to date with a change of routes.
func (f *fib) derive(routes []pfx.V4) {
	if f.dxr != nil {
		f.dxr.markV4(routes)
		f.dxr.update()
	}
}

// prefetch starts loading what inserting p reads first: its slot in the
// map of its length, and its /24's tbl24 entry and depth.
func (f *fib) prefetch(p pfx.V4) {
	f.routes[p.Bits()].Prefetch(p.Addr())
	i := int(p.Addr() >> 8)
	prefetch.Index(f.tbl24, i)
	prefetch.Index(f.depth24, i)
}

// groupsNeeded returns how many groups inserting routes would allocate.
func (f *fib) groupsNeeded(routes []pfx.V4) int {
	var seen map[uint32]struct{}
	for _, p := range routes {
		if p.Bits() <= 24 {
			continue
		}
		i := p.Addr() >> 8
		if f.tbl24[i]&fibGroup != 0 {
			continue
		}
		if seen == nil {
			seen = make(map[uint32]struct{})
		}
		seen[i] = struct{}{}
	}
	return len(seen)
}

// reserve makes sure n groups are free, waiting for a grace period to reuse
// quarantined groups if it has to.
func (f *fib) reserve(n int) error {
	if n <= len(f.free) {
		return nil
	}
	if n > len(f.free)+len(f.quarantine) {
		return fmt.Errorf("%d more /24s with prefixes longer than /24, %d tbl8 groups left of %d: %w",
			n, len(f.free)+len(f.quarantine), len(f.users), ErrFIBFull)
	}
	if err := f.grace(); err != nil {
		return fmt.Errorf("wait for readers of released tbl8 groups: %w", err)
	}
	f.free = append(f.free, f.quarantine...)
	f.quarantine = f.quarantine[:0]
	return nil
}

// insert adds or replaces one route; a group it needs must be reserved.
func (f *fib) insert(p pfx.V4, nh uint32) {
	m := f.routes[p.Bits()]
	if m == nil {
		m = flatmap.New[uint32, uint32](0)
		f.routes[p.Bits()] = m
	}
	old, existed := m.Get(p.Addr())
	if existed && old == nh {
		return
	}
	m.Put(p.Addr(), nh)
	if !existed {
		f.count++
	}
	v, d := fibValid|nh, p.Bits()+1
	if p.Bits() <= 24 {
		first := p.Addr() >> 8
		n := uint32(1) << (24 - p.Bits())
		t24, d24 := f.tbl24[first:first+n], f.depth24[first:first+n]
		for k, e := range t24 {
			if d24[k] > d {
				continue // a longer prefix of length <= 24 wins here
			}
			d24[k] = d
			if e&fibGroup != 0 {
				f.fill8(e&fibGroupMask, 0, fibGroupEntries, v, d)
				continue
			}
			t24[k] = v
		}
		return
	}

	i := p.Addr() >> 8
	lo, n := p.Addr()&0xff, uint32(1)<<(32-p.Bits())
	e := f.tbl24[i]
	if e&fibGroup != 0 {
		g := e & fibGroupMask
		f.fill8(g, lo, n, v, d)
		if !existed {
			f.users[g]++
		}
		return
	}
	// First prefix longer than /24 in this /24: build its group from the
	// tbl24 entry, add the pfx.V4, then publish.
	g := f.free[len(f.free)-1]
	f.free = f.free[:len(f.free)-1]
	base := g * fibGroupEntries
	grp, dg := f.tbl8[base:base+fibGroupEntries], f.depth8[base:base+fibGroupEntries]
	for j := range grp {
		grp[j] = e
		dg[j] = f.depth24[i]
	}
	f.fill8(g, lo, n, v, d)
	f.users[g] = 1
	atomic.StoreUint32(&f.tbl24[i], fibGroup|g)
}

// fill8 sets the n entries of group g from lo that no longer prefix covers.
func (f *fib) fill8(g, lo, n, v uint32, d uint8) {
	base := g*fibGroupEntries + lo
	t8, d8 := f.tbl8[base:base+n], f.depth8[base:base+n]
	for j := range t8 {
		if d8[j] <= d {
			t8[j] = v
			d8[j] = d
		}
	}
}

// check returns an error wrapping ErrNotFound unless every prefix has a
// route.
func (f *fib) check(routes []pfx.V4) error {
	for _, p := range routes {
		if !f.routes[p.Bits()].Has(p.Addr()) {
			return fmt.Errorf("route %s: %w", p, ErrNotFound)
		}
	}
	return nil
}

// delete removes routes, shortest prefixes first. Every route must exist
// (duplicates are removed once); otherwise it returns an error wrapping
// ErrNotFound and changes nothing.
func (f *fib) delete(routes []pfx.V4) error {
	if err := f.check(routes); err != nil {
		return err
	}
	f.deleteChecked(routes)
	return nil
}

// deleteChecked is delete after check.
func (f *fib) deleteChecked(routes []pfx.V4) {
	var perLen [33][]pfx.V4
	for _, p := range routes {
		perLen[p.Bits()] = append(perLen[p.Bits()], p)
	}
	for _, ps := range perLen {
		for _, p := range ps {
			f.remove(p)
		}
	}
	f.derive(routes)
}

// remove deletes one route if present: its entries get the next shorter
// covering pfx.V4, and a group left without longer prefixes is folded back
// into its tbl24 entry.
func (f *fib) remove(p pfx.V4) {
	if m := f.routes[p.Bits()]; m == nil || !m.Del(p.Addr()) {
		return
	}
	f.count--
	rv, rd := f.cover(p)
	d := p.Bits() + 1
	if p.Bits() <= 24 {
		first := p.Addr() >> 8
		n := uint32(1) << (24 - p.Bits())
		t24, d24 := f.tbl24[first:first+n], f.depth24[first:first+n]
		for k, e := range t24 {
			if d24[k] != d {
				continue
			}
			d24[k] = rd
			if e&fibGroup != 0 {
				f.uncover8(e&fibGroupMask, 0, fibGroupEntries, d, rv, rd)
				continue
			}
			t24[k] = rv
		}
		return
	}

	i := p.Addr() >> 8
	g := f.tbl24[i] & fibGroupMask
	f.uncover8(g, p.Addr()&0xff, uint32(1)<<(32-p.Bits()), d, rv, rd)
	if f.users[g]--; f.users[g] > 0 {
		return
	}
	// Every entry of the group now holds the /24's own value.
	atomic.StoreUint32(&f.tbl24[i], f.tbl8[g*fibGroupEntries])
	f.quarantine = append(f.quarantine, g)
}

func (f *fib) uncover8(g, lo, n uint32, d uint8, rv uint32, rd uint8) {
	base := g*fibGroupEntries + lo
	t8, d8 := f.tbl8[base:base+n], f.depth8[base:base+n]
	for j := range t8 {
		if d8[j] == d {
			t8[j] = rv
			d8[j] = rd
		}
	}
}

// cover returns the entry value and depth of the longest prefix shorter than
// p that covers it, or zeros.
func (f *fib) cover(p pfx.V4) (uint32, uint8) {
	for bits := int(p.Bits()) - 1; bits >= 0; bits-- {
		m := f.routes[bits]
		if m.Len() == 0 {
			continue
		}
		if nh, ok := m.Get(p.Addr() & mask(uint8(bits))); ok {
			return fibValid | nh, uint8(bits + 1)
		}
	}
	return 0, 0
}

// groupsInUse returns the number of tbl8 groups published or quarantined.
func (f *fib) groupsInUse() int {
	return len(f.users) - len(f.free)
}
