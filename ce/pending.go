package ce

import (
	"slices"
)

// pending holds the changes waiting for one FE, coalesced: only the latest
// change of each prefix-table row and of each nexthop row is kept, so a burst
// (a full table arriving, a peer with a million routes going down) costs at
// most one entry per row however slow the FE, and the FE gets the final
// state, not every intermediate one.
type pending struct {
	routes   map[uint64]Change // by family and prefix-table row
	nexthops map[uint64]Change // by family and nexthop row
	groups   map[uint64]Change // by family and ECMP group row
	// What the FE holds, so a row set and deleted again before it was ever
	// sent is dropped instead of becoming a DEL of a row the FE never had.
	// Rows are dense from 1, so a bitmap costs 128 KiB per million.
	feRows, feRows6         bitmap
	feNexthops, feNexthops6 bitmap
	feGroups, feGroups6     bitmap
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

func newPending() *pending {
	return &pending{routes: map[uint64]Change{}, nexthops: map[uint64]Change{}, groups: map[uint64]Change{}}
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

func (p *pending) len() int { return len(p.routes) + len(p.nexthops) + len(p.groups) }

// synced records that the FE holds exactly these changes (the full sync).
func (p *pending) synced(ch []Change) {
	for _, c := range ch {
		p.sent(c)
	}
}

func (p *pending) add(ch []Change) {
	for _, c := range ch {
		switch c.Kind {
		case RouteSet, RouteDel:
			p.routes[pkey(c, c.Row)] = c
		case NexthopSet, NexthopDel:
			p.nexthops[pkey(c, c.ID)] = c
		case GroupSet, GroupDel:
			p.groups[pkey(c, c.ID)] = c
		}
	}
}

// take returns the coalesced changes in an order the FE can apply: nexthops
// set, groups set, routes deleted, routes set, groups deleted, nexthops
// deleted.
func (p *pending) take() []Change {
	out := make([]Change, 0, p.len())
	// Each kind in row order (the FE fills its tables page by page): the
	// map keys are the order, so sort them, not the (large) changes.
	var keys []uint64
	kind := func(k ChangeKind, m map[uint64]Change, have func(Change) *bitmap, key func(Change) uint32) {
		keys = keys[:0]
		for pk, c := range m {
			if c.Kind != k {
				continue
			}
			if (k == RouteDel || k == NexthopDel || k == GroupDel) && !have(c).has(key(c)) {
				continue // never reached the FE
			}
			keys = append(keys, pk)
		}
		slices.Sort(keys)
		for _, pk := range keys {
			out = append(out, m[pk])
		}
	}
	row := func(c Change) uint32 { return c.Row }
	id := func(c Change) uint32 { return c.ID }
	kind(NexthopSet, p.nexthops, p.nexthopsOf, id)
	kind(GroupSet, p.groups, p.groupsOf, id)
	kind(RouteDel, p.routes, p.rowsOf, row)
	kind(RouteSet, p.routes, p.rowsOf, row)
	kind(GroupDel, p.groups, p.groupsOf, id)
	kind(NexthopDel, p.nexthops, p.nexthopsOf, id)
	for _, c := range out {
		p.sent(c)
	}
	clear(p.routes)
	clear(p.nexthops)
	clear(p.groups)
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
	}
}
