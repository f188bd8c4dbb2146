package ce

import (
	"cmp"
	"net/netip"
	"slices"
)

// ChangeKind says what a FIB change does to an FE table.
type ChangeKind uint8

// The FIB changes, in the order an FE must apply them within one batch.
const (
	NexthopSet ChangeKind = iota + 1 // IPv4NextHop row ID = NextHop
	RouteSet                         // IPv4UcastLPM row Row = Prefix via nexthop ID
	RouteDel                         // IPv4UcastLPM row Row deleted
	NexthopDel                       // IPv4NextHop row ID deleted
)

// Change is one row operation on an FE's tables. Rows are the CE's own
// numbering of the IPv4UcastLPM prefix table; IDs number the IPv4NextHop table
// and are the routes' HopSelector.
type Change struct {
	Kind    ChangeKind
	Row     uint32
	Prefix  netip.Prefix
	ID      uint32
	NextHop netip.Addr
}

// MaxNexthopID is the highest nexthop ID the CE hands out; FEs keep IDs above it
// for their own connected routes.
const MaxNexthopID = 0xFBFF

type nexthop struct {
	id   uint32
	refs int
}

type route struct {
	row     uint32
	id      uint32 // the nexthop's ID, kept here so Snapshot need not look it up
	nexthop netip.Addr
}

// FIB is the CE's forwarding table: one next hop per IPv4 prefix, with the row
// and nexthop numbering the FEs see. It is owned by one goroutine.
type FIB struct {
	routes   map[netip.Prefix]route
	nexthops map[netip.Addr]*nexthop
	freeRows []uint32
	nextRow  uint32
	freeIDs  []uint32
	nextID   uint32
}

// NewFIB returns an empty FIB.
func NewFIB() *FIB {
	return &FIB{routes: map[netip.Prefix]route{}, nexthops: map[netip.Addr]*nexthop{}, nextRow: 1, nextID: 1}
}

// Len is the number of routes.
func (f *FIB) Len() int { return len(f.routes) }

// Set points prefix p at next hop nh and appends the FE changes it causes.
// Setting the same route twice changes nothing. When the nexthop table is full
// the route is not installed and ok is false.
func (f *FIB) Set(p netip.Prefix, nh netip.Addr, out []Change) (_ []Change, ok bool) {
	p = p.Masked()
	old, exists := f.routes[p]
	if exists && old.nexthop == nh {
		return out, true
	}
	n, out := f.ref(nh, out)
	if n == nil {
		return out, false
	}
	r := route{row: old.row, id: n.id, nexthop: nh}
	if !exists {
		r.row = f.allocRow()
	}
	f.routes[p] = r
	out = append(out, Change{Kind: RouteSet, Row: r.row, Prefix: p, ID: n.id, NextHop: nh})
	if exists {
		out = f.unref(old.nexthop, out)
	}
	return out, true
}

// Delete removes prefix p, if present, and appends the FE changes it causes.
func (f *FIB) Delete(p netip.Prefix, out []Change) []Change {
	p = p.Masked()
	old, exists := f.routes[p]
	if !exists {
		return out
	}
	delete(f.routes, p)
	f.freeRows = append(f.freeRows, old.row)
	out = append(out, Change{Kind: RouteDel, Row: old.row, Prefix: p})
	return f.unref(old.nexthop, out)
}

// Snapshot returns the changes that build the whole FIB on an empty FE:
// every nexthop (by ID), then every route in row order, so the FE fills its
// row table page by page. Rows are numbered densely, so the order costs a
// placement by row, not a sort.
func (f *FIB) Snapshot() []Change {
	nh := len(f.nexthops)
	out := make([]Change, nh+int(f.nextRow))
	i := 0
	for a, n := range f.nexthops {
		out[i] = Change{Kind: NexthopSet, ID: n.id, NextHop: a}
		i++
	}
	slices.SortFunc(out[:nh], func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
	for p, r := range f.routes {
		out[nh+int(r.row)] = Change{Kind: RouteSet, Row: r.row, Prefix: p, ID: r.id, NextHop: r.nexthop}
	}
	// Close the gaps of freed rows (and of row 0, never used).
	return slices.DeleteFunc(out, func(c Change) bool { return c.Kind == 0 })
}

// Lookup returns the next hop of an exact prefix.
func (f *FIB) Lookup(p netip.Prefix) (netip.Addr, bool) {
	r, ok := f.routes[p.Masked()]
	return r.nexthop, ok
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
	case f.nextID <= MaxNexthopID:
		id = f.nextID
		f.nextID++
	default:
		return nil, out
	}
	n := &nexthop{id: id, refs: 1}
	f.nexthops[nh] = n
	return n, append(out, Change{Kind: NexthopSet, ID: id, NextHop: nh})
}

func (f *FIB) unref(nh netip.Addr, out []Change) []Change {
	n := f.nexthops[nh]
	if n.refs--; n.refs > 0 {
		return out
	}
	delete(f.nexthops, nh)
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
func (f fibs) Snapshot() []Change { return append(f.v4.Snapshot(), f.v6.Snapshot()...) }

// ipv6 reports whether a change belongs to the IPv6 tables.
func (c Change) ipv6() bool {
	if c.Kind == NexthopSet || c.Kind == NexthopDel {
		return c.NextHop.Is6()
	}
	return c.Prefix.Addr().Is6()
}
