package ce

import (
	"cmp"
	"slices"
)

// pending holds the changes waiting for one FE, coalesced: only the latest
// change of each prefix-table row and of each nexthop row is kept, so a burst
// (a full table arriving, a peer with a million routes going down) costs at
// most one entry per row however slow the FE, and the FE gets the final
// state, not every intermediate one.
type pending struct {
	routes   changeSet // by family and prefix-table row
	nexthops changeSet // by family and nexthop row
	groups   changeSet // by family and ECMP group row
	egress   changeSet // by family and nexthop row
	conn     changeSet // by family and connected row
	// What the FE holds, so a row set and deleted again before it was ever
	// sent is dropped instead of becoming a DEL of a row the FE never had.
	// Rows are dense from 1, so a bitmap costs 128 KiB per million.
	feRows, feRows6         bitmap
	feNexthops, feNexthops6 bitmap
	feGroups, feGroups6     bitmap
	feEgress, feEgress6     bitmap
	feConn, feConn6         bitmap

	out []Change // take's result, reused
}

// pkey keys a row by address family and number: the two families' tables
// number their rows independently.
func pkey(c Change, n uint32) uint64 {
	if c.ipv6() {
		return 1<<32 | uint64(n)
	}
	return uint64(n)
}

func (p *pending) rowsOf(c Change) *bitmap {
	if c.ipv6() {
		return &p.feRows6
	}
	return &p.feRows
}

func (p *pending) nexthopsOf(c Change) *bitmap {
	if c.ipv6() {
		return &p.feNexthops6
	}
	return &p.feNexthops
}

func (p *pending) groupsOf(c Change) *bitmap {
	if c.ipv6() {
		return &p.feGroups6
	}
	return &p.feGroups
}

func (p *pending) egressOf(c Change) *bitmap {
	if c.ipv6() {
		return &p.feEgress6
	}
	return &p.feEgress
}

func (p *pending) connOf(c Change) *bitmap {
	if c.ipv6() {
		return &p.feConn6
	}
	return &p.feConn
}

func newPending() *pending {
	row := func(c Change) uint32 { return c.Row }
	id := func(c Change) uint32 { return c.ID }
	return &pending{routes: newChangeSet(row), nexthops: newChangeSet(id), groups: newChangeSet(id), egress: newChangeSet(id), conn: newChangeSet(id)}
}

// changeSet is the latest change per row (or nexthop or group ID), in the
// order the rows first came: a full table arrives in row order (the FIB
// numbers new rows upwards), so take finds the list already sorted. Rows
// and IDs are dense from 1, so a change's place in the list is found in an
// array indexed by them, not in a hash map.
type changeSet struct {
	at   [2][]int32 // per family (IPv4, IPv6) and row or ID: position in list + 1, 0 if none
	list []Change
	key  func(Change) uint32
}

func newChangeSet(key func(Change) uint32) changeSet { return changeSet{key: key} }

func family(c Change) int {
	if c.ipv6() {
		return 1
	}
	return 0
}

func (s *changeSet) put(c Change) {
	at, k := &s.at[family(c)], int(s.key(c))
	if k >= len(*at) {
		*at = append(*at, make([]int32, max(k+1, 2*len(*at), 1024)-len(*at))...)
	}
	if i := (*at)[k]; i != 0 {
		s.list[i-1] = c
		return
	}
	if len(s.list) == cap(s.list) {
		// Doubled: append grows a large slice by a quarter at a time,
		// which for a burst of a million changes (~100 MB) allocates five
		// times that and copies four.
		s.list = slices.Grow(s.list, max(len(s.list), 1024))
	}
	s.list = append(s.list, c)
	(*at)[k] = int32(len(s.list))
}

// maxKeptChanges is how many changes' room is always kept for the next ones
// once taken; more is kept only while the load lasts (keep).
const maxKeptChanges = 1 << 16

// keep reports whether a slice with room for c changes that held n of them
// is kept for the next: up to maxKeptChanges always, beyond that while it
// is at least a quarter used. A sustained load (a bulk load the FE lags
// behind) reuses its room from one take to the next; the quiet after it, or
// a small take after one burst of a million, lets it go.
func keep(c, n int) bool { return c <= maxKeptChanges || n >= c/4 }

func (s *changeSet) reset() {
	for _, c := range s.list {
		s.at[family(c)][s.key(c)] = 0
	}
	if !keep(cap(s.list), len(s.list)) {
		s.list = nil
	} else {
		clear(s.list)
		s.list = s.list[:0]
	}
}

type bitmap []uint64

func (b bitmap) has(i uint32) bool { return int(i/64) < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b *bitmap) set(i uint32) {
	for int(i/64) >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b bitmap) unset(i uint32) {
	if int(i/64) < len(b) {
		b[i/64] &^= 1 << (i % 64)
	}
}

func (p *pending) len() int {
	return len(p.routes.list) + len(p.nexthops.list) + len(p.groups.list) + len(p.egress.list) + len(p.conn.list)
}

// synced records that the FE holds exactly these changes (the full sync).
func (p *pending) synced(ch []Change) {
	for _, c := range ch {
		p.sent(c)
	}
}

// syncedSnapshot records that the FE holds exactly the snapshot (the full
// sync).
func (p *pending) syncedSnapshot(s *Snapshot) {
	p.synced(s.egress)
	for _, part := range s.parts {
		p.synced(part.head)
		for r := range part.all() {
			if r.is4 {
				p.feRows.set(r.row)
			} else {
				p.feRows6.set(r.row)
			}
		}
	}
}

func (p *pending) add(ch []Change) {
	for _, c := range ch {
		switch c.Kind {
		case RouteSet, RouteDel:
			p.routes.put(c)
		case NexthopSet, NexthopDel:
			p.nexthops.put(c)
		case GroupSet, GroupDel:
			p.groups.put(c)
		case EgressSet, EgressDel:
			p.egress.put(c)
		case ConnectedSet, ConnectedDel:
			p.conn.put(c)
		}
	}
}

// take returns the coalesced changes in an order the FE can apply: nexthops
// set, groups set, routes deleted, routes set, groups deleted, nexthops
// deleted. The slice is valid until the next take.
func (p *pending) take() []Change {
	out := p.out[:0]
	if cap(out) < p.len() {
		out = make([]Change, 0, p.len())
	}
	// Each kind in row order (the FE fills its tables page by page); a
	// kind's changes usually come in that order already.
	kind := func(k ChangeKind, s *changeSet, have func(Change) *bitmap) {
		key := s.key
		start, sorted := len(out), true
		var last uint64
		for _, c := range s.list {
			if c.Kind != k {
				continue
			}
			if (k == RouteDel || k == NexthopDel || k == GroupDel || k == EgressDel || k == ConnectedDel) && !have(c).has(key(c)) {
				continue // never reached the FE
			}
			pk := pkey(c, key(c))
			if len(out) > start && pk < last {
				sorted = false
			}
			last = pk
			out = append(out, c)
		}
		if !sorted {
			slices.SortFunc(out[start:], func(a, b Change) int { return cmp.Compare(pkey(a, key(a)), pkey(b, key(b))) })
		}
	}
	kind(NexthopSet, &p.nexthops, p.nexthopsOf)
	kind(GroupSet, &p.groups, p.groupsOf)
	kind(EgressSet, &p.egress, p.egressOf)
	// A connected row index moves between the families' tables only
	// through a deletion: deleted first, so no key is in both at once.
	kind(ConnectedDel, &p.conn, p.connOf)
	kind(ConnectedSet, &p.conn, p.connOf)
	kind(RouteDel, &p.routes, p.rowsOf)
	kind(RouteSet, &p.routes, p.rowsOf)
	kind(GroupDel, &p.groups, p.groupsOf)
	kind(EgressDel, &p.egress, p.egressOf)
	kind(NexthopDel, &p.nexthops, p.nexthopsOf)
	for _, c := range out {
		p.sent(c)
	}
	p.routes.reset()
	p.nexthops.reset()
	p.groups.reset()
	p.egress.reset()
	p.conn.reset()
	if keep(cap(out), len(out)) {
		p.out = out
	} else {
		p.out = nil
	}
	return out
}

func (p *pending) sent(c Change) {
	switch c.Kind {
	case RouteSet:
		p.rowsOf(c).set(c.Row)
	case RouteDel:
		p.rowsOf(c).unset(c.Row)
	case NexthopSet:
		p.nexthopsOf(c).set(c.ID)
	case NexthopDel:
		p.nexthopsOf(c).unset(c.ID)
	case GroupSet:
		p.groupsOf(c).set(c.ID)
	case GroupDel:
		p.groupsOf(c).unset(c.ID)
	case EgressSet:
		p.egressOf(c).set(c.ID)
	case EgressDel:
		p.egressOf(c).unset(c.ID)
	case ConnectedSet:
		p.connOf(c).set(c.ID)
	case ConnectedDel:
		p.connOf(c).unset(c.ID)
	}
}
