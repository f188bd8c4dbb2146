package datapath

import (
	"fmt"
	"net/netip"
	"sync/atomic"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// The IPv6 stride table of xdp.c (fib6_tbl16, fib6_tbl8); the values repeat
// the defines there. Entries are encoded as in the IPv4 table (fibGroup,
// fibValid, fibNexthopMask, fibGroupMask).
const (
	fib6Tbl16Entries = 1 << 16
	// fib6Levels is the number of group levels below tbl16: level k (1..14)
	// is indexed by address byte k+1 and holds prefixes of /(16+8k-7) to
	// /(16+8k).
	fib6Levels = 14

	// FIB6Groups is the number of groups of 256 entries (1 KiB each) in the
	// IPv6 table's pool. A prefix longer than /16 needs one group per 8 bits
	// beyond /16 that no other prefix already opened: a /48 alone in its
	// /16 takes 4, a /48 next to other /48s of its /40 none. Today's IPv6
	// Internet table, clustered inside the RIRs' blocks, needs well under
	// this; uniformly random prefixes need about 2.5 per route.
	FIB6Groups = 1 << 17

	// MaxRoutes6 is the number of IPv6 routes the FIB holds.
	MaxRoutes6 = 1_000_000
)

// prefix6 is a masked IPv6 prefix.
type prefix6 struct {
	addr [16]byte
	bits uint8
}

func (p prefix6) String() string {
	return netip.PrefixFrom(netip.AddrFrom16(p.addr), int(p.bits)).String()
}

// mask6 returns a with every bit after the first bits cleared.
func mask6(a [16]byte, bits int) [16]byte {
	for i := range a {
		switch {
		case bits >= 8:
			bits -= 8
		case bits > 0:
			a[i] &= ^byte(0xff >> bits)
			bits = 0
		default:
			a[i] = 0
		}
	}
	return a
}

// routePrefix checks p and returns it masked, as an IPv4 prefix (is6 false)
// or an IPv6 one (is6 true). IPv4-mapped IPv6 prefixes are rejected: they
// would be a second spelling of an IPv4 route that the IPv4 path never
// looks up.
func routePrefix(p netip.Prefix) (v4 pfx.V4, v6 prefix6, is6 bool, err error) {
	switch a := p.Addr(); {
	case !p.IsValid():
		return 0, prefix6{}, false, fmt.Errorf("prefix %s is not a valid IPv4 or IPv6 prefix: %w", p, ErrInvalid)
	case a.Is4():
		v4, err = toPrefix(p)
		return v4, prefix6{}, false, err
	case a.Is4In6():
		return 0, prefix6{}, false, fmt.Errorf("prefix %s is IPv4-mapped IPv6, give the IPv4 prefix: %w", p, ErrInvalid)
	}
	m := p.Masked()
	return 0, prefix6{addr: m.Addr().As16(), bits: uint8(m.Bits())}, true, nil
}

// level6 is the level of the table that holds a prefix of length bits:
// 0 for tbl16 (/0 to /16), k for the groups of bits /(16+8k-7) to /(16+8k).
func level6(bits uint8) int {
	if bits <= 16 {
		return 0
	}
	return (int(bits) - 16 + 7) / 8
}

// index6 is the entry of addr in its table at level k.
func index6(addr *[16]byte, k int) int {
	if k == 0 {
		return int(addr[0])<<8 | int(addr[1])
	}
	return int(addr[k+1])
}

// span6 is the number of entries a prefix of length bits covers in its
// table.
func span6(bits uint8) int {
	return 1 << (16 + 8*level6(bits) - int(bits))
}

// fib6 is the control structure of the IPv6 stride table, the multibit trie
// of DPDK's rte_lpm6 with a 16-bit first level: tbl16 is indexed by the
// first two address bytes, and each further byte indexes a group of 256
// entries from the pool tbl8, so a lookup reads at most 15 entries (a /48
// five, a /32 three) whatever the size of the table. Like fib, it owns the
// arrays (in the datapath the mmapped BPF arrays, in tests plain slices)
// and keeps what they cannot tell, so that a change rewrites exactly the
// entries whose longest match changes.
//
// The write ordering is fib's, applied at every level: a group (and any new
// group below it) is filled completely before the entry that points at it is
// published with an atomic store; a group is unpublished (its entry set
// back to the value every one of its entries holds) before it is released,
// and a released group is reused only after grace has returned; SetRoutes
// applies longer prefixes first and DeleteRoutes shorter ones first.
// Readers therefore see every address go from its old longest match
// straight to its new one.
//
// fib6 is not safe for concurrent use; Datapath serialises the calls.
type fib6 struct {
	tbl16, tbl8 []uint32
	// depth16[i] is 1 + the length of the longest prefix of length <= 16
	// covering tbl16 entry i, 0 if none. depth8 is the same for the
	// entries of the groups, over the lengths up to the group's level:
	// the entries of a group not covered by a longer prefix have the
	// depth and value of the entry above that points at the group.
	depth16, depth8 []uint8
	// users counts the prefixes below each group in use (at its level or
	// deeper, in its part of the address space).
	users []uint32
	// free groups can be used at once; quarantine groups were released
	// since the last grace period.
	free, quarantine []uint32
	// routes holds the prefixes by length: masked address to nexthop id.
	routes [129]map[[16]byte]uint32
	count  int
	// max is the route limit (MaxRoutes6; tests lower it).
	max int
	// grace returns when no reader can still use an entry that was
	// overwritten before it was called.
	grace func() error
	// dxr, if set, is the range table derived from the groups after every
	// change (dxr6.go).
	dxr *dxr6
}

func newFIB6(tbl16, tbl8 []uint32, grace func() error) *fib6 {
	groups := len(tbl8) / fibGroupEntries
	f := &fib6{
		tbl16:   tbl16,
		tbl8:    tbl8,
		depth16: make([]uint8, len(tbl16)),
		depth8:  make([]uint8, len(tbl8)),
		users:   make([]uint32, groups),
		free:    make([]uint32, 0, groups),
		max:     MaxRoutes6,
		grace:   grace,
	}
	for g := groups - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	return f
}

// group returns the entries and depths of group g.
func (f *fib6) group(g uint32) ([]uint32, []uint8) {
	base := int(g) * fibGroupEntries
	return f.tbl8[base : base+fibGroupEntries], f.depth8[base : base+fibGroupEntries]
}

// lookup returns the nexthop id for addr as the XDP program finds it.
func (f *fib6) lookup(addr [16]byte) (uint32, bool) {
	e := f.tbl16[int(addr[0])<<8|int(addr[1])]
	for k := 2; e&fibGroup != 0 && k < 16; k++ {
		e = f.tbl8[int(e&fibGroupMask)<<8|int(addr[k])]
	}
	return e & fibNexthopMask, e&(fibValid|fibGroup) == fibValid
}

// set applies routes, longest prefixes first. It either applies all of them
// or returns an error and changes nothing. A prefix given twice ends with
// the last nexthop.
func (f *fib6) set(routes []prefix6, nexthops []uint32) error {
	if err := f.prepare(routes); err != nil {
		return err
	}
	f.apply(routes, nexthops)
	return nil
}

// prepare checks that routes fit: the route limit and the groups they need,
// which it makes free (waiting for a grace period if it has to). After it,
// apply cannot fail.
func (f *fib6) prepare(routes []prefix6) error {
	if len(routes) == 0 {
		return nil
	}
	added := 0
	for _, p := range routes {
		if _, ok := f.routes[p.bits][p.addr]; !ok {
			added++ // duplicates in the batch overcount: safe side
		}
	}
	if f.count+added > f.max {
		return fmt.Errorf("%d IPv6 routes more than the %d present exceed %d: %w", added, f.count, f.max, ErrFIBFull)
	}
	n := f.groupsNeeded(routes)
	if n <= len(f.free) {
		return nil
	}
	if n > len(f.free)+len(f.quarantine) {
		return fmt.Errorf("IPv6 routes need %d more groups of 256 entries, %d left of %d: %w",
			n, len(f.free)+len(f.quarantine), len(f.users), ErrFIBFull)
	}
	if err := f.grace(); err != nil {
		return fmt.Errorf("wait for readers of released IPv6 groups: %w", err)
	}
	f.free = append(f.free, f.quarantine...)
	f.quarantine = f.quarantine[:0]
	return nil
}

// groupsNeeded returns how many groups inserting routes would allocate: one
// for every level on a prefix's path, below the last existing group, that no
// other prefix of the batch opens first. A group at level k is identified
// by the first 16+8(k-1) bits of the addresses it serves.
func (f *fib6) groupsNeeded(routes []prefix6) int {
	type groupKey struct {
		addr  [16]byte
		level int
	}
	var seen map[groupKey]struct{}
	for i := range routes {
		p := &routes[i]
		lev := level6(p.bits)
		t := f.tbl16
		for k := 0; k < lev; k++ {
			e := t[index6(&p.addr, k)]
			if e&fibGroup != 0 {
				t, _ = f.group(e & fibGroupMask)
				continue
			}
			if seen == nil {
				seen = make(map[groupKey]struct{})
			}
			for kk := k + 1; kk <= lev; kk++ {
				seen[groupKey{mask6(p.addr, 16+8*(kk-1)), kk}] = struct{}{}
			}
			break
		}
	}
	return len(seen)
}

// apply inserts routes, longest prefixes first; prepare must have accepted
// them.
func (f *fib6) apply(routes []prefix6, nexthops []uint32) {
	// Counting sort by length, longest first; within a length the batch
	// order stays, so of a prefix given twice the later one wins.
	var perLen [129]int
	for _, p := range routes {
		perLen[p.bits]++
	}
	var next [129]int
	pos := 0
	for bits := 128; bits >= 0; bits-- {
		next[bits] = pos
		pos += perLen[bits]
	}
	order := make([]int32, len(routes))
	for i, p := range routes {
		order[next[p.bits]] = int32(i)
		next[p.bits]++
	}
	for bits, n := range perLen {
		if n > 0 && f.routes[bits] == nil {
			f.routes[bits] = make(map[[16]byte]uint32, n)
		}
	}
	for _, i := range order {
		f.insert(routes[i], nexthops[i])
	}
	f.derive(routes)
}

// derive brings the range table up to date with a change of routes.
func (f *fib6) derive(routes []prefix6) {
	if f.dxr != nil {
		f.dxr.mark(routes)
		f.dxr.update()
	}
}

// insert adds or replaces one route; the groups it needs must be free.
func (f *fib6) insert(p prefix6, nh uint32) {
	m := f.routes[p.bits]
	old, existed := m[p.addr]
	if existed && old == nh {
		return
	}
	m[p.addr] = nh
	if !existed {
		f.count++
	}

	// Walk down to the prefix's level, opening the groups it lacks. The
	// first new group is published last, once everything below it is
	// written; further new groups hang off unpublished ones, so plain
	// stores link them.
	t, dep := f.tbl16, f.depth16
	var publish *uint32
	var publishValue uint32
	lev := level6(p.bits)
	for k := 0; k < lev; k++ {
		i := index6(&p.addr, k)
		if e := t[i]; e&fibGroup != 0 {
			g := e & fibGroupMask
			if !existed {
				f.users[g]++
			}
			t, dep = f.group(g)
			continue
		}
		// A new route (an existing one has all its groups): the group
		// starts as a copy of the entry it replaces.
		g := f.free[len(f.free)-1]
		f.free = f.free[:len(f.free)-1]
		gt, gd := f.group(g)
		for j := range gt {
			gt[j] = t[i]
			gd[j] = dep[i]
		}
		f.users[g] = 1
		if publish == nil {
			publish, publishValue = &t[i], fibGroup|g
		} else {
			t[i] = fibGroup | g
		}
		t, dep = gt, gd
	}
	first := index6(&p.addr, lev)
	n := span6(p.bits)
	f.fill(t[first:first+n], dep[first:first+n], fibValid|nh, p.bits+1)
	if publish != nil {
		atomic.StoreUint32(publish, publishValue)
	}
}

// fill gives value v of a prefix of depth d to the entries of t (with
// depths dep) that no longer prefix covers, through any groups below them.
func (f *fib6) fill(t []uint32, dep []uint8, v uint32, d uint8) {
	for j, e := range t {
		if dep[j] > d {
			continue // a longer prefix wins here, and below
		}
		dep[j] = d
		if e&fibGroup != 0 {
			gt, gd := f.group(e & fibGroupMask)
			f.fill(gt, gd, v, d)
			continue
		}
		t[j] = v
	}
}

// check returns an error wrapping ErrNotFound unless every prefix has a
// route.
func (f *fib6) check(routes []prefix6) error {
	for _, p := range routes {
		if _, ok := f.routes[p.bits][p.addr]; !ok {
			return fmt.Errorf("route %s: %w", p, ErrNotFound)
		}
	}
	return nil
}

// delete removes routes, shortest prefixes first. Every route must exist
// (duplicates are removed once); otherwise it returns an error wrapping
// ErrNotFound and changes nothing.
func (f *fib6) delete(routes []prefix6) error {
	if err := f.check(routes); err != nil {
		return err
	}
	f.deleteChecked(routes)
	return nil
}

// deleteChecked is delete after check.
func (f *fib6) deleteChecked(routes []prefix6) {
	var perLen [129][]prefix6
	for _, p := range routes {
		perLen[p.bits] = append(perLen[p.bits], p)
	}
	for _, ps := range perLen {
		for _, p := range ps {
			f.remove(p)
		}
	}
	f.derive(routes)
}

// remove deletes one route if present: its entries get the next shorter
// covering pfx.V4, and the groups on its path left without prefixes are
// folded back into the entries above them, deepest first.
func (f *fib6) remove(p prefix6) {
	m := f.routes[p.bits]
	if _, ok := m[p.addr]; !ok {
		return
	}
	delete(m, p.addr)
	f.count--
	rv, rd := f.cover(p)

	// above[k] is the entry at level k that points at the group of level
	// k+1 on the path.
	var above [fib6Levels]*uint32
	var groups [fib6Levels]uint32
	t, dep := f.tbl16, f.depth16
	lev := level6(p.bits)
	for k := 0; k < lev; k++ {
		i := index6(&p.addr, k)
		above[k] = &t[i]
		groups[k] = t[i] & fibGroupMask
		t, dep = f.group(groups[k])
	}
	first := index6(&p.addr, lev)
	n := span6(p.bits)
	f.uncover(t[first:first+n], dep[first:first+n], p.bits+1, rv, rd)

	// Users only shrink towards the leaves, so the groups that empty are
	// the deepest ones of the path.
	for k := lev - 1; k >= 0; k-- {
		g := groups[k]
		if f.users[g]--; f.users[g] > 0 {
			continue
		}
		// Every entry of the group now holds the value of the entry
		// above (groups below it were folded already).
		atomic.StoreUint32(above[k], f.tbl8[int(g)*fibGroupEntries])
		f.quarantine = append(f.quarantine, g)
	}
}

// uncover gives the entries of t that prefix depth d covered the value rv
// and depth rd of the next shorter pfx.V4, through any groups below them.
func (f *fib6) uncover(t []uint32, dep []uint8, d uint8, rv uint32, rd uint8) {
	for j, e := range t {
		if dep[j] != d {
			continue
		}
		dep[j] = rd
		if e&fibGroup != 0 {
			gt, gd := f.group(e & fibGroupMask)
			f.uncover(gt, gd, d, rv, rd)
			continue
		}
		t[j] = rv
	}
}

// cover returns the entry value and depth of the longest prefix shorter than
// p that covers it, or zeros.
func (f *fib6) cover(p prefix6) (uint32, uint8) {
	for bits := int(p.bits) - 1; bits >= 0; bits-- {
		m := f.routes[bits]
		if len(m) == 0 {
			continue
		}
		if nh, ok := m[mask6(p.addr, bits)]; ok {
			return fibValid | nh, uint8(bits + 1)
		}
	}
	return 0, 0
}

// groupsInUse returns the number of groups published or quarantined.
func (f *fib6) groupsInUse() int {
	return len(f.users) - len(f.free)
}
