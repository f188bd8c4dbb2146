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
	return &pending{routes: newChangeSet(), nexthops: newChangeSet(), groups: newChangeSet()}
}

// changeSet is the latest change per key, in the order the keys first came:
// a full table arrives in row order (the FIB numbers new rows upwards), so
// take finds the list already sorted, and the map holds only positions.
type changeSet struct {
	at   map[uint64]int32
	list []Change
}

func newChangeSet() changeSet { return changeSet{at: map[uint64]int32{}} }

func (s *changeSet) put(k uint64, c Change) {
	if i, ok := s.at[k]; ok {
		s.list[i] = c
		return
	}
	s.at[k] = int32(len(s.list))
	s.list = append(s.list, c)
}

func (s *changeSet) reset() {
	clear(s.at)
	if cap(s.list) > 1<<16 {
		s.list = nil // a burst's list is not kept for the quiet after it
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

func (p *pending) len() int { return len(p.routes.list) + len(p.nexthops.list) + len(p.groups.list) }

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
			p.routes.put(pkey(c, c.Row), c)
		case NexthopSet, NexthopDel:
			p.nexthops.put(pkey(c, c.ID), c)
		case GroupSet, GroupDel:
			p.groups.put(pkey(c, c.ID), c)
		}
	}
}

// take returns the coalesced changes in an order the FE can apply: nexthops
// set, groups set, routes deleted, routes set, groups deleted, nexthops
// deleted.
func (p *pending) take() []Change {
	out := make([]Change, 0, p.len())
	// Each kind in row order (the FE fills its tables page by page); a
	// kind's changes usually come in that order already.
	kind := func(k ChangeKind, s *changeSet, have func(Change) *bitmap, key func(Change) uint32) {
		start, sorted := len(out), true
		var last uint64
		for _, c := range s.list {
			if c.Kind != k {
				continue
			}
			if (k == RouteDel || k == NexthopDel || k == GroupDel) && !have(c).has(key(c)) {
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
	row := func(c Change) uint32 { return c.Row }
	id := func(c Change) uint32 { return c.ID }
	kind(NexthopSet, &p.nexthops, p.nexthopsOf, id)
	kind(GroupSet, &p.groups, p.groupsOf, id)
	kind(RouteDel, &p.routes, p.rowsOf, row)
	kind(RouteSet, &p.routes, p.rowsOf, row)
	kind(GroupDel, &p.groups, p.groupsOf, id)
	kind(NexthopDel, &p.nexthops, p.nexthopsOf, id)
	for _, c := range out {
		p.sent(c)
	}
	p.routes.reset()
	p.nexthops.reset()
	p.groups.reset()
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
