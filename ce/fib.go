package ce

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/flatmap"
	"github.com/splitplane/splitplane/internal/prefix"
)

// ChangeKind says what a FIB change does to an FE table.
type ChangeKind uint8

// The FIB changes. An FE applies a batch as pending.take orders it: nexthops
// set, groups set, routes deleted, routes set, groups deleted, nexthops
// deleted.
const (
	NexthopSet   ChangeKind = iota + 1 // NextHop row ID = NextHop
	RouteSet                           // UcastLPM row Row = Prefix via nexthop ID (or group ID if ECMP)
	RouteDel                           // UcastLPM row Row deleted
	NexthopDel                         // NextHop row ID deleted
	GroupSet                           // ECMP group row ID = Members (nexthop IDs)
	GroupDel                           // ECMP group row ID deleted
	EgressSet                          // nexthop egress row ID (a nexthop row) = Egress; NextHop is its gateway
	EgressDel                          // nexthop egress row ID deleted; NextHop is its gateway
	ConnectedSet                       // connected egress row ID = Prefix on Egress (connegress.go)
	ConnectedDel                       // connected egress row ID deleted; Prefix is its subnet
)

// Change is one row operation on an FE's tables. Rows are the CE's own
// numbering of the UcastLPM prefix table; IDs number the NextHop table (and
// the ECMP group table) and are the routes' HopSelector.
type Change struct {
	Kind    ChangeKind
	ECMP    bool // RouteSet: ID is a group
	Row     uint32
	Prefix  netip.Prefix
	ID      uint32
	NextHop netip.Addr // NexthopSet/Del; GroupSet/Del and ECMP RouteSet: the first member, for the family
	// Members are a GroupSet's nexthop IDs; First is an ECMP RouteSet's first
	// member, for an FE that has no ECMP groups.
	Members []uint32
	First   uint32
	// Egress is an EgressSet's FE and port (egress.go).
	Egress forces.NexthopEgressInfo
}

type nexthop struct {
	id   uint32
	refs int
}

// group is an ECMP set of next hops, shared by every route with that set.
type group struct {
	id      uint32
	refs    int
	members []netip.Addr // sorted
	ids     []uint32     // the members' nexthop IDs, in the same order
}

// route is a prefix's entry: its row and its nexthop's ID, or with ecmp its
// group's. Without pointers, like fibKey: a million of them cost the garbage
// collector nothing to scan.
type route struct {
	row  uint32
	id   uint32
	ecmp bool
}

// fibKey is a prefix packed without pointers (netip.Prefix holds one): an
// IPv6 prefix's 16 bytes and length, or an IPv4 prefix's prefix.V4 in lo.
type fibKey struct {
	hi, lo uint64
	bits   uint8
}

func keyOf(p netip.Prefix) fibKey {
	a := p.Addr().As16()
	return fibKey{hi: beUint64(a[:8]), lo: beUint64(a[8:]), bits: uint8(p.Bits())}
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// prefix unpacks k; is4 says its family.
func (k fibKey) prefix(is4 bool) netip.Prefix {
	if is4 {
		return prefix.V4(k.lo).Prefix()
	}
	var a [16]byte
	for i := range 8 {
		a[i], a[8+i] = byte(k.hi>>(56-8*i)), byte(k.lo>>(56-8*i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), int(k.bits))
}

// routeMap is a FIB's routes by (masked) prefix: IPv4 prefixes under one
// integer in a flatmap (a full table looks a route up several times per
// change; see prefix.V4), IPv6 under a fibKey in a Go map.
type routeMap struct {
	v4 *flatmap.Map[prefix.V4, route]
	v6 map[fibKey]route
}

func (m routeMap) len() int { return m.v4.Len() + len(m.v6) }

func (m routeMap) get(p netip.Prefix) (route, bool) {
	if p.Addr().Is4() {
		return m.v4.Get(prefix.FromV4(p))
	}
	r, ok := m.v6[keyOf(p)]
	return r, ok
}

func (m routeMap) put(p netip.Prefix, r route) {
	if p.Addr().Is4() {
		m.v4.Put(prefix.FromV4(p), r)
	} else {
		m.v6[keyOf(p)] = r
	}
}

func (m routeMap) del(p netip.Prefix) {
	if p.Addr().Is4() {
		m.v4.Del(prefix.FromV4(p))
	} else {
		delete(m.v6, keyOf(p))
	}
}

// all yields every route with its prefix.
func (m routeMap) all() iter.Seq2[netip.Prefix, route] {
	return func(yield func(netip.Prefix, route) bool) {
		for k, r := range m.v4.All() {
			if !yield(k.Prefix(), r) {
				return
			}
		}
		for k, r := range m.v6 {
			if !yield(k.prefix(false), r) {
				return
			}
		}
	}
}

// FIB is the CE's forwarding table for one address family: a next hop, or an
// ECMP group of them, per prefix, with the row, nexthop and group numbering
// the FEs see. It is owned by one goroutine.
type FIB struct {
	routes    routeMap
	nexthops  map[netip.Addr]*nexthop
	addrOf    map[uint32]netip.Addr // nexthop ID -> address
	groups    map[string]*group     // by groupKey of the members
	groupByID map[uint32]*group
	freeRows  []uint32
	nextRow   uint32
	freeIDs   []uint32
	nextID    uint32
	freeGIDs  []uint32
	nextGID   uint32
	// byRow holds the routes again, by row, as a full sync sends them.
	// Row r is entry (r-1)%rowPage of page (r-1)/rowPage; a free row is
	// zero. A snapshot takes the pages as they are and marks them shared;
	// a shared page is copied before it is next written (copy on write),
	// so taking a snapshot copies no route.
	byRow  [][]snapRoute
	shared []bool // by page: held by a snapshot
	// maxID and maxGID are the highest nexthop and group IDs it allocates
	// (forces.MaxNexthopID, forces.MaxGroupID; lower in tests); full says
	// which table was full when a Set last failed.
	maxID, maxGID uint32
	full          string
}

const rowPage = 4096

// NewFIB returns an empty FIB.
func NewFIB() *FIB {
	return &FIB{routes: routeMap{v4: flatmap.New[prefix.V4, route](0), v6: map[fibKey]route{}}, nexthops: map[netip.Addr]*nexthop{}, addrOf: map[uint32]netip.Addr{},
		groups: map[string]*group{}, groupByID: map[uint32]*group{}, nextRow: 1, nextID: 1, nextGID: 1,
		maxID: forces.MaxNexthopID, maxGID: forces.MaxGroupID}
}

// Len is the number of routes.
func (f *FIB) Len() int { return f.routes.len() }

// Set points prefix p at next hop nh and appends the FE changes it causes.
// Setting the same route twice changes nothing. When the nexthop table is full
// the route is not installed and ok is false.
func (f *FIB) Set(p netip.Prefix, nh netip.Addr, out []Change) (_ []Change, ok bool) {
	p = p.Masked()
	old, exists := f.routes.get(p)
	if exists && !old.ecmp {
		if n := f.nexthops[nh]; n != nil && n.id == old.id {
			return out, true
		}
	}
	n, out := f.ref(nh, out)
	if n == nil {
		return out, false
	}
	r := route{row: old.row, id: n.id}
	if !exists {
		r.row = f.allocRow()
	}
	f.routes.put(p, r)
	f.setRow(p, r, 0)
	out = append(out, Change{Kind: RouteSet, Row: r.row, Prefix: p, ID: n.id, NextHop: nh})
	if exists {
		out = f.unrefRoute(old, out)
	}
	return out, true
}

// SetECMP points prefix p at the equal-cost next hops nhs (at most
// forces.MaxECMPMembers are used: the lowest addresses), through an ECMP
// group shared by every route with the same set. With one next hop it is Set.
func (f *FIB) SetECMP(p netip.Prefix, nhs []netip.Addr, out []Change) (_ []Change, ok bool) {
	members := slices.Clone(nhs)
	slices.SortFunc(members, netip.Addr.Compare)
	members = slices.Compact(members)
	if len(members) > forces.MaxECMPMembers {
		members = members[:forces.MaxECMPMembers]
	}
	if len(members) <= 1 {
		if len(members) == 0 {
			return f.Delete(p, out), true
		}
		return f.Set(p, members[0], out)
	}
	p = p.Masked()
	key := groupKey(members)
	old, exists := f.routes.get(p)
	if exists && old.ecmp && groupKey(f.groupByID[old.id].members) == key {
		return out, true
	}
	g, out := f.refGroup(key, members, out)
	if g == nil {
		return out, false
	}
	r := route{row: old.row, id: g.id, ecmp: true}
	if !exists {
		r.row = f.allocRow()
	}
	f.routes.put(p, r)
	f.setRow(p, r, g.ids[0])
	out = append(out, f.change(p, r))
	if exists {
		out = f.unrefRoute(old, out)
	}
	return out, true
}

// change is the RouteSet that programs r for p.
func (f *FIB) change(p netip.Prefix, r route) Change {
	if r.ecmp {
		g := f.groupByID[r.id]
		return Change{Kind: RouteSet, Row: r.row, Prefix: p, ID: r.id, NextHop: g.members[0], ECMP: true, First: g.ids[0]}
	}
	return Change{Kind: RouteSet, Row: r.row, Prefix: p, ID: r.id, NextHop: f.addrOf[r.id]}
}

// groupKey identifies a sorted set of next hops.
func groupKey(members []netip.Addr) string {
	b := make([]byte, 0, 16*len(members))
	for _, a := range members {
		b = a.AppendTo(b)
		b = append(b, ',')
	}
	return string(b)
}

// refGroup takes a reference on the group of members, creating it (and
// referencing its members' nexthops) if it is new. It returns nil when the
// nexthop or group table is full.
func (f *FIB) refGroup(key string, members []netip.Addr, out []Change) (*group, []Change) {
	if g, ok := f.groups[key]; ok {
		g.refs++
		return g, out
	}
	var id uint32
	switch {
	case len(f.freeGIDs) > 0:
		id = f.freeGIDs[len(f.freeGIDs)-1]
		f.freeGIDs = f.freeGIDs[:len(f.freeGIDs)-1]
	case f.nextGID <= f.maxGID:
		id = f.nextGID
		f.nextGID++
	default:
		f.full = fmt.Sprintf("the ECMP group table (%d groups) is full", f.maxGID)
		return nil, out
	}
	g := &group{id: id, refs: 1, members: members, ids: make([]uint32, len(members))}
	for i, a := range members {
		var n *nexthop
		if n, out = f.ref(a, out); n == nil {
			for _, b := range members[:i] {
				out = f.unref(b, out)
			}
			f.freeGIDs = append(f.freeGIDs, id)
			return nil, out
		}
		g.ids[i] = n.id
	}
	f.groups[key] = g
	f.groupByID[id] = g
	return g, append(out, Change{Kind: GroupSet, ID: id, NextHop: members[0], Members: g.ids})
}

// unrefRoute drops a route's reference on its nexthop or group.
func (f *FIB) unrefRoute(r route, out []Change) []Change {
	if !r.ecmp {
		return f.unref(f.addrOf[r.id], out)
	}
	g := f.groupByID[r.id]
	if g.refs--; g.refs > 0 {
		return out
	}
	delete(f.groups, groupKey(g.members))
	delete(f.groupByID, g.id)
	f.freeGIDs = append(f.freeGIDs, g.id)
	out = append(out, Change{Kind: GroupDel, ID: g.id, NextHop: g.members[0]})
	for _, a := range g.members {
		out = f.unref(a, out)
	}
	return out
}

// Delete removes prefix p, if present, and appends the FE changes it causes.
func (f *FIB) Delete(p netip.Prefix, out []Change) []Change {
	p = p.Masked()
	old, exists := f.routes.get(p)
	if !exists {
		return out
	}
	f.routes.del(p)
	f.writeRow(old.row, snapRoute{})
	f.freeRows = append(f.freeRows, old.row)
	out = append(out, Change{Kind: RouteDel, Row: old.row, Prefix: p})
	return f.unrefRoute(old, out)
}

// Snapshot returns the changes that build the whole FIB on an empty FE:
// every nexthop (by ID), every group (by ID), then every route in row
// order, so the FE fills its row table page by page.
func (f *FIB) Snapshot() []Change {
	var s Snapshot
	f.appendSnapshot(&s)
	out := make([]Change, 0, s.Len())
	for ch := range s.Chunks(syncChunk) {
		out = append(out, ch...)
	}
	return out
}

// Snapshot is the FIBs' content at one moment, for a full sync: per
// family its nexthops and groups as changes, then its routes compactly (no
// pointers, 32 bytes each: a million routes cost the garbage collector
// nothing to scan), turned into changes a chunk at a time as they are sent.
// Taking it copies no route (the FIBs' pages are copied on write instead),
// on the goroutine that owns the FIBs; it is then read on another.
type Snapshot struct {
	parts []snapPart // one per family
	// egress is the nexthop egress rows (egress.go), then the connected
	// egress rows (connegress.go), after the parts.
	egress []Change
}

type snapPart struct {
	head   []Change      // nexthops, then groups, by ID
	pages  [][]snapRoute // routes by row, as FIB.byRow (free rows are zero)
	routes int           // how many
}

type snapRoute struct {
	key       fibKey
	row, id   uint32
	first     uint32 // an ECMP route's first member, for FEs without groups
	ecmp, is4 bool
}

// Len is the number of changes the snapshot holds.
func (s *Snapshot) Len() int {
	n := 0
	for _, p := range s.parts {
		n += len(p.head) + p.routes
	}
	return n + len(s.egress)
}

// setRow records route r of p in byRow; first is an ECMP route's group's
// first member.
func (f *FIB) setRow(p netip.Prefix, r route, first uint32) {
	e := snapRoute{row: r.row, id: r.id, first: first, ecmp: r.ecmp, is4: p.Addr().Is4()}
	if e.is4 {
		e.key = fibKey{lo: uint64(prefix.FromV4(p))}
	} else {
		e.key = keyOf(p)
	}
	f.writeRow(r.row, e)
}

// writeRow stores e as row, first copying its page if a snapshot holds it.
func (f *FIB) writeRow(row uint32, e snapRoute) {
	pg, i := int(row-1)/rowPage, int(row-1)%rowPage
	for pg >= len(f.byRow) {
		f.byRow = append(f.byRow, make([]snapRoute, rowPage))
		f.shared = append(f.shared, false)
	}
	if f.shared[pg] {
		f.byRow[pg] = slices.Clone(f.byRow[pg])
		f.shared[pg] = false
	}
	f.byRow[pg][i] = e
}

// appendSnapshot adds f's content to s: nexthops and groups by ID, routes
// in row order (byRow's pages, from now on shared).
func (f *FIB) appendSnapshot(s *Snapshot) {
	var p snapPart
	for a, n := range f.nexthops {
		p.head = append(p.head, Change{Kind: NexthopSet, ID: n.id, NextHop: a})
	}
	slices.SortFunc(p.head, func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
	h := len(p.head)
	for _, g := range f.groups {
		p.head = append(p.head, Change{Kind: GroupSet, ID: g.id, NextHop: g.members[0], Members: g.ids})
	}
	slices.SortFunc(p.head[h:], func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
	p.pages, p.routes = slices.Clone(f.byRow), f.routes.len()
	for i := range f.shared {
		f.shared[i] = true
	}
	s.parts = append(s.parts, p)
}

// all yields the part's routes in row order (free rows hold none).
func (p snapPart) all() iter.Seq[snapRoute] {
	return func(yield func(snapRoute) bool) {
		for _, pg := range p.pages {
			for _, e := range pg {
				if e.row != 0 && !yield(e) {
					return
				}
			}
		}
	}
}

// Chunks yields the snapshot's changes in order, at most n at a time, in a
// buffer reused from one chunk to the next.
func (s *Snapshot) Chunks(n int) iter.Seq[[]Change] {
	return func(yield func([]Change) bool) {
		var buf []Change
		for _, p := range s.parts {
			for head := range slices.Chunk(p.head, n) {
				if !yield(head) {
					return
				}
			}
			buf = buf[:0]
			for e := range p.all() {
				buf = append(buf, Change{Kind: RouteSet, Row: e.row, Prefix: e.key.prefix(e.is4), ID: e.id, ECMP: e.ecmp, First: e.first})
				if len(buf) == n {
					if !yield(buf) {
						return
					}
					buf = buf[:0]
				}
			}
			if len(buf) > 0 && !yield(buf) {
				return
			}
		}
		for ch := range slices.Chunk(s.egress, n) {
			if !yield(ch) {
				return
			}
		}
	}
}

// Lookup returns the next hop of an exact prefix (the first of an ECMP
// group's).
func (f *FIB) Lookup(p netip.Prefix) (netip.Addr, bool) {
	r, ok := f.routes.get(p.Masked())
	switch {
	case !ok:
		return netip.Addr{}, false
	case r.ecmp:
		return f.groupByID[r.id].members[0], true
	}
	return f.addrOf[r.id], true
}

// LookupAll returns every next hop of an exact prefix.
func (f *FIB) LookupAll(p netip.Prefix) []netip.Addr {
	r, ok := f.routes.get(p.Masked())
	switch {
	case !ok:
		return nil
	case r.ecmp:
		return slices.Clone(f.groupByID[r.id].members)
	}
	return []netip.Addr{f.addrOf[r.id]}
}

// Prefixes calls fn with every prefix and its next hops.
func (f *FIB) Prefixes(fn func(netip.Prefix, []netip.Addr)) {
	for p, r := range f.routes.all() {
		hops := []netip.Addr{f.addrOf[r.id]}
		if r.ecmp {
			hops = slices.Clone(f.groupByID[r.id].members)
		}
		fn(p, hops)
	}
}

func (f *FIB) ref(nh netip.Addr, out []Change) (*nexthop, []Change) {
	if n, ok := f.nexthops[nh]; ok {
		n.refs++
		return n, out
	}
	var id uint32
	switch {
	case len(f.freeIDs) > 0:
		id = f.freeIDs[len(f.freeIDs)-1]
		f.freeIDs = f.freeIDs[:len(f.freeIDs)-1]
	case f.nextID <= f.maxID:
		id = f.nextID
		f.nextID++
	default:
		f.full = fmt.Sprintf("the next-hop table (%d next hops) is full", f.maxID)
		return nil, out
	}
	n := &nexthop{id: id, refs: 1}
	f.nexthops[nh] = n
	f.addrOf[id] = nh
	return n, append(out, Change{Kind: NexthopSet, ID: id, NextHop: nh})
}

func (f *FIB) unref(nh netip.Addr, out []Change) []Change {
	n := f.nexthops[nh]
	if n.refs--; n.refs > 0 {
		return out
	}
	delete(f.nexthops, nh)
	delete(f.addrOf, n.id)
	f.freeIDs = append(f.freeIDs, n.id)
	return append(out, Change{Kind: NexthopDel, ID: n.id, NextHop: nh})
}

func (f *FIB) allocRow() uint32 {
	if n := len(f.freeRows); n > 0 {
		r := f.freeRows[n-1]
		f.freeRows = f.freeRows[:n-1]
		return r
	}
	r := f.nextRow
	f.nextRow++
	return r
}

// fibs is the CE's FIB per address family. Each family has its own RFC 6956
// tables (IPv4UcastLPM/IPv4NextHop, IPv6UcastLPM/IPv6NextHop), so its own row
// and nexthop numbering.
type fibs struct{ v4, v6 *FIB }

func (f fibs) of(p netip.Prefix) *FIB {
	if p.Addr().Is4() {
		return f.v4
	}
	return f.v6
}

// Len is the number of routes of both families.
func (f fibs) Len() int { return f.v4.Len() + f.v6.Len() }

// Snapshot is both families' snapshots, IPv4 first.
func (f fibs) Snapshot() *Snapshot {
	var s Snapshot
	f.v4.appendSnapshot(&s)
	f.v6.appendSnapshot(&s)
	return &s
}

// ipv6 reports whether a change belongs to the IPv6 tables.
func (c Change) ipv6() bool {
	switch c.Kind {
	case NexthopSet, NexthopDel, GroupSet, GroupDel, EgressSet, EgressDel:
		return c.NextHop.Is6()
	}
	return c.Prefix.Addr().Is6()
}
