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
	routes   map[uint32]Change // by prefix-table row
	nexthops map[uint32]Change // by nexthop row
	// What the FE holds, so a row set and deleted again before it was ever
	// sent is dropped instead of becoming a DEL of a row the FE never had.
	// Rows are dense from 1, so a bitmap costs 128 KiB per million.
	feRows     bitmap
	feNexthops bitmap
}

func newPending() *pending {
	return &pending{routes: map[uint32]Change{}, nexthops: map[uint32]Change{}}
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

func (p *pending) len() int { return len(p.routes) + len(p.nexthops) }

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
			p.routes[c.Row] = c
		case NexthopSet, NexthopDel:
			p.nexthops[c.ID] = c
		}
	}
}

// take returns the coalesced changes in an order the FE can apply: nexthops
// set, routes deleted, routes set, nexthops deleted.
func (p *pending) take() []Change {
	out := make([]Change, 0, p.len())
	kind := func(k ChangeKind, m map[uint32]Change, have bitmap, key func(Change) uint32) {
		start := len(out)
		for _, c := range m {
			if c.Kind != k {
				continue
			}
			if (k == RouteDel || k == NexthopDel) && !have.has(key(c)) {
				continue // never reached the FE
			}
			out = append(out, c)
		}
		added := out[start:]
		slices.SortFunc(added, func(a, b Change) int { return cmp.Compare(key(a), key(b)) })
	}
	row := func(c Change) uint32 { return c.Row }
	id := func(c Change) uint32 { return c.ID }
	kind(NexthopSet, p.nexthops, p.feNexthops, id)
	kind(RouteDel, p.routes, p.feRows, row)
	kind(RouteSet, p.routes, p.feRows, row)
	kind(NexthopDel, p.nexthops, p.feNexthops, id)
	for _, c := range out {
		p.sent(c)
	}
	clear(p.routes)
	clear(p.nexthops)
	return out
}

func (p *pending) sent(c Change) {
	switch c.Kind {
	case RouteSet:
		p.feRows.set(c.Row)
	case RouteDel:
		p.feRows.unset(c.Row)
	case NexthopSet:
		p.feNexthops.set(c.ID)
	case NexthopDel:
		p.feNexthops.unset(c.ID)
	}
}
