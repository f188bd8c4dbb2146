package fe

import (
	"maps"
	"net/netip"

	"github.com/splitplane/splitplane/forces"
)

// table is the FE's copy of the rows the CE programmed, in RFC 6956 terms:
// the IPv4UcastLPM prefix table and the IPv4NextHop table. It knows nothing of
// the datapath; program turns differences between tables into map updates.
type table struct {
	rows     map[uint32]prefix4    // prefix-table row -> prefix
	routes   map[prefix4]route     // prefix -> its row and nexthop row
	nexthops map[uint32]netip.Addr // nexthop-table row (HopSelector) -> gateway

	// A staged copy shares the live table's maps until it first changes
	// them (copy on write): a full sync, which starts by deleting both
	// tables, never copies them at all.
	sharedPrefixes, sharedNexthops bool
}

type route struct {
	row, nexthop uint32
}

func newTable() *table {
	return &table{rows: map[uint32]prefix4{}, routes: map[prefix4]route{}, nexthops: map[uint32]netip.Addr{}}
}

// stage returns a copy of t to stage a transaction on.
func (t *table) stage() *table {
	return &table{rows: t.rows, routes: t.routes, nexthops: t.nexthops, sharedPrefixes: true, sharedNexthops: true}
}

func (t *table) ownPrefixes() {
	if t.sharedPrefixes {
		t.rows, t.routes, t.sharedPrefixes = maps.Clone(t.rows), maps.Clone(t.routes), false
	}
}

func (t *table) ownNexthops() {
	if t.sharedNexthops {
		t.nexthops, t.sharedNexthops = maps.Clone(t.nexthops), false
	}
}

// gateway returns the gateway prefix p is forwarded to, if it has a route
// whose nexthop row exists.
func (t *table) gateway(p prefix4) (netip.Addr, bool) {
	r, ok := t.routes[p]
	if !ok {
		return netip.Addr{}, false
	}
	gw, ok := t.nexthops[r.nexthop]
	return gw, ok
}

// dirty collects what a batch of row operations touched, so that only those
// entries are reprogrammed.
type dirty struct {
	all      bool
	prefixes map[prefix4]struct{}
	nexthops map[uint32]struct{}
}

func newDirty() *dirty {
	return &dirty{prefixes: map[prefix4]struct{}{}, nexthops: map[uint32]struct{}{}}
}

// The recorders accept nil: staging a transaction needs neither.
func (d *dirty) prefix(p prefix4) {
	if d != nil {
		d.prefixes[p] = struct{}{}
	}
}

func (d *dirty) nexthop(id uint32) {
	if d != nil {
		d.nexthops[id] = struct{}{}
	}
}

func (d *dirty) everything() {
	if d != nil {
		d.all = true
	}
}

// apply performs one row operation on t. It records what it touched in d and
// how to reverse it in undo, so a batch can be made all-or-none.
func (t *table) apply(it forces.Item, d *dirty, undo *[]func()) error {
	if it.InstanceID != 1 {
		return reject(forces.ResultLFBInstanceIDNotFound, "%s instance %d does not exist", forces.ClassName(it.ClassID), it.InstanceID)
	}
	wholeTable := len(it.Path) == 1 && it.Path[0] == 1
	if !wholeTable && (len(it.Path) != 2 || it.Path[0] != 1) {
		return reject(forces.ResultInvalidPath, "path %v: want [1] (the table) or [1 row]", it.Path)
	}
	if it.Op == forces.OpSet && (wholeTable || !it.HasFullData) {
		return reject(forces.ResultInvalidParameters, "SET of path %v needs a row and FULLDATA", it.Path)
	}
	switch {
	case it.Op == forces.OpDel && wholeTable && it.ClassID == forces.ClassIPv4UcastLPM:
		rows, routes := t.rows, t.routes
		t.rows, t.routes = make(map[uint32]prefix4, len(rows)), make(map[prefix4]route, len(routes))
		t.sharedPrefixes = false
		if undo != nil {
			*undo = append(*undo, func() { t.rows, t.routes = rows, routes })
		}
		d.everything()
		return nil
	case it.Op == forces.OpDel && wholeTable && it.ClassID == forces.ClassIPv4NextHop:
		nexthops := t.nexthops
		t.nexthops, t.sharedNexthops = map[uint32]netip.Addr{}, false
		if undo != nil {
			*undo = append(*undo, func() { t.nexthops = nexthops })
		}
		d.everything()
		return nil
	}
	if it.ClassID == forces.ClassIPv4UcastLPM {
		t.ownPrefixes()
	} else {
		t.ownNexthops()
	}
	switch {
	case it.ClassID == forces.ClassIPv4UcastLPM && it.Op == forces.OpSet:
		info, err := forces.ParseIPv4PrefixInfo(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", it.Path[1], err)
		}
		return t.setRoute(it.Path[1], info.Prefix, info.HopSelector, d, undo)
	case it.ClassID == forces.ClassIPv4UcastLPM && it.Op == forces.OpDel:
		return t.deleteRow(it.Path[1], d, undo)
	case it.ClassID == forces.ClassIPv4NextHop && it.Op == forces.OpSet:
		info, err := forces.ParseIPv4NextHopInfo(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", it.Path[1], err)
		}
		return t.setNexthop(it.Path[1], info.NextHop, d, undo)
	case it.ClassID == forces.ClassIPv4NextHop && it.Op == forces.OpDel:
		return t.deleteNexthop(it.Path[1], d, undo)
	}
	return reject(forces.ResultNotSupported, "%s on %s is not supported", it.Op, forces.ClassName(it.ClassID))
}

func (t *table) setRoute(row uint32, pfx netip.Prefix, nh uint32, d *dirty, undo *[]func()) error {
	if !pfx.Addr().Is4() {
		return reject(forces.ResultInvalidParameters, "row %d: prefix %s is not IPv4", row, pfx)
	}
	if _, ok := t.nexthops[nh]; !ok {
		return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such nexthop", row, pfx, nh)
	}
	p := toPrefix4(pfx)
	// The row may have held another prefix, and the prefix may have sat in
	// another row: both are replaced.
	if old, ok := t.rows[row]; ok && old != p {
		if err := t.deleteRow(row, d, undo); err != nil {
			return err
		}
	}
	if r, ok := t.routes[p]; ok && r.row != row {
		if err := t.deleteRow(r.row, d, undo); err != nil {
			return err
		}
	}
	oldRoute, hadRoute := t.routes[p]
	_, hadRow := t.rows[row]
	t.rows[row] = p
	t.routes[p] = route{row: row, nexthop: nh}
	d.prefix(p)
	if undo != nil {
		*undo = append(*undo, func() {
			if hadRoute {
				t.routes[p] = oldRoute
			} else {
				delete(t.routes, p)
			}
			if !hadRow {
				delete(t.rows, row)
			}
		})
	}
	return nil
}

func (t *table) deleteRow(row uint32, d *dirty, undo *[]func()) error {
	p, ok := t.rows[row]
	if !ok {
		return reject(forces.ResultNotFound, "prefix table row %d does not exist", row)
	}
	r := t.routes[p]
	delete(t.rows, row)
	delete(t.routes, p)
	d.prefix(p)
	if undo != nil {
		*undo = append(*undo, func() { t.rows[row] = p; t.routes[p] = r })
	}
	return nil
}

func (t *table) setNexthop(id uint32, gw netip.Addr, d *dirty, undo *[]func()) error {
	if id == 0 || id > MaxCENexthopID {
		return reject(forces.ResultValueOutOfRange, "nexthop row %d: outside 1..%d", id, MaxCENexthopID)
	}
	if !gw.Is4() || gw.IsUnspecified() {
		return reject(forces.ResultInvalidParameters, "nexthop row %d: NextHopIPAddr %s is not a usable IPv4 address", id, gw)
	}
	old, had := t.nexthops[id]
	t.nexthops[id] = gw
	if had && old != gw {
		// Only routes already using this row change; a new row has no users
		// yet but the routes of this batch, which are marked themselves.
		d.nexthop(id)
	}
	if undo != nil {
		*undo = append(*undo, func() {
			if had {
				t.nexthops[id] = old
			} else {
				delete(t.nexthops, id)
			}
		})
	}
	return nil
}

func (t *table) deleteNexthop(id uint32, d *dirty, undo *[]func()) error {
	old, ok := t.nexthops[id]
	if !ok {
		return reject(forces.ResultNotFound, "nexthop row %d does not exist", id)
	}
	delete(t.nexthops, id)
	d.nexthop(id)
	if undo != nil {
		*undo = append(*undo, func() { t.nexthops[id] = old })
	}
	return nil
}

// diff marks in d every prefix whose forwarding differs between a and b.
func diff(a, b *table, d *dirty) {
	if len(a.routes) == 0 || len(b.routes) == 0 {
		d.everything() // cheaper than listing every prefix
		return
	}
	for p := range a.routes {
		ga, oka := a.gateway(p)
		gb, okb := b.gateway(p)
		if oka != okb || ga != gb {
			d.prefixes[p] = struct{}{}
		}
	}
	for p := range b.routes {
		if _, ok := a.routes[p]; !ok {
			d.prefixes[p] = struct{}{}
		}
	}
}

// prefix4 is an IPv4 prefix packed into an integer, address<<8 | length. As a
// map key it hashes fast and holds no pointer for the garbage collector to
// follow through a million-entry table.
type prefix4 uint64

func toPrefix4(p netip.Prefix) prefix4 {
	a := p.Masked().Addr().As4()
	return prefix4(uint64(a[0])<<32 | uint64(a[1])<<24 | uint64(a[2])<<16 | uint64(a[3])<<8 | uint64(p.Bits()))
}

// Prefix returns k as a netip.Prefix.
func (k prefix4) Prefix() netip.Prefix {
	a := uint32(k >> 8)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), int(k&0xff))
}

func (k prefix4) String() string { return k.Prefix().String() }

// ip4 packs an IPv4 address; 0 (0.0.0.0, never a usable gateway) means none.
func ip4(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
