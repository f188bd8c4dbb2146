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
	rows     map[uint32]netip.Prefix // prefix-table row -> prefix
	routes   map[netip.Prefix]route  // prefix -> its row and nexthop row
	nexthops map[uint32]netip.Addr   // nexthop-table row (HopSelector) -> gateway
}

type route struct {
	row, nexthop uint32
}

func newTable() *table {
	return &table{rows: map[uint32]netip.Prefix{}, routes: map[netip.Prefix]route{}, nexthops: map[uint32]netip.Addr{}}
}

func (t *table) clone() *table {
	return &table{rows: maps.Clone(t.rows), routes: maps.Clone(t.routes), nexthops: maps.Clone(t.nexthops)}
}

// gateway returns the gateway prefix p is forwarded to, if it has a route
// whose nexthop row exists.
func (t *table) gateway(p netip.Prefix) (netip.Addr, bool) {
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
	prefixes map[netip.Prefix]struct{}
	nexthops map[uint32]struct{}
}

func newDirty() *dirty {
	return &dirty{prefixes: map[netip.Prefix]struct{}{}, nexthops: map[uint32]struct{}{}}
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
		t.rows, t.routes = map[uint32]netip.Prefix{}, map[netip.Prefix]route{}
		*undo = append(*undo, func() { t.rows, t.routes = rows, routes })
		d.all = true
		return nil
	case it.Op == forces.OpDel && wholeTable && it.ClassID == forces.ClassIPv4NextHop:
		nexthops := t.nexthops
		t.nexthops = map[uint32]netip.Addr{}
		*undo = append(*undo, func() { t.nexthops = nexthops })
		d.all = true
		return nil
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

func (t *table) setRoute(row uint32, p netip.Prefix, nh uint32, d *dirty, undo *[]func()) error {
	if !p.Addr().Is4() {
		return reject(forces.ResultInvalidParameters, "row %d: prefix %s is not IPv4", row, p)
	}
	if _, ok := t.nexthops[nh]; !ok {
		return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such nexthop", row, p, nh)
	}
	p = p.Masked()
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
	d.prefixes[p] = struct{}{}
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
	d.prefixes[p] = struct{}{}
	*undo = append(*undo, func() { t.rows[row] = p; t.routes[p] = r })
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
	d.nexthops[id] = struct{}{}
	*undo = append(*undo, func() {
		if had {
			t.nexthops[id] = old
		} else {
			delete(t.nexthops, id)
		}
	})
	return nil
}

func (t *table) deleteNexthop(id uint32, d *dirty, undo *[]func()) error {
	old, ok := t.nexthops[id]
	if !ok {
		return reject(forces.ResultNotFound, "nexthop row %d does not exist", id)
	}
	delete(t.nexthops, id)
	d.nexthops[id] = struct{}{}
	*undo = append(*undo, func() { t.nexthops[id] = old })
	return nil
}

// diff marks in d every prefix whose forwarding differs between a and b.
func diff(a, b *table, d *dirty) {
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
