package fe

import (
	"maps"
	"net/netip"

	"github.com/splitplane/splitplane/forces"
)

// table is the FE's copy of the rows the CE programmed, in RFC 6956 terms:
// per address family, the UcastLPM prefix table and the NextHop table. It
// knows nothing of the datapath; program turns differences between tables
// into map updates.
type table struct {
	v4 *famTable[prefix4]
	v6 *famTable[netip.Prefix]
}

// famTable is one address family's tables. K is the key the family's
// prefixes are stored under (a pointer-free integer for IPv4).
type famTable[K comparable] struct {
	rows     rowTable[K]           // prefix-table row -> prefix and nexthop row
	routes   map[K]uint32          // prefix -> its row
	nexthops map[uint32]netip.Addr // nexthop-table row (HopSelector) -> gateway

	// A staged copy shares the live table's maps until it first changes
	// them (copy on write): a full sync, which starts by deleting both
	// tables, never copies them at all.
	sharedPrefixes, sharedNexthops bool

	fam family[K]
}

// family describes an address family to the generic table code.
type family[K comparable] struct {
	name              string
	lpmClass, nhClass uint32
	key               func(netip.Prefix) K
	is                func(netip.Addr) bool
	parseRoute        func([]byte) (netip.Prefix, uint32, error)
	parseNexthop      func([]byte) (netip.Addr, error)
}

var ipv4 = family[prefix4]{
	name: "IPv4", lpmClass: forces.ClassIPv4UcastLPM, nhClass: forces.ClassIPv4NextHop,
	key: toPrefix4, is: netip.Addr.Is4,
	parseRoute: func(b []byte) (netip.Prefix, uint32, error) {
		i, err := forces.ParseIPv4PrefixInfo(b)
		return i.Prefix, i.HopSelector, err
	},
	parseNexthop: func(b []byte) (netip.Addr, error) {
		i, err := forces.ParseIPv4NextHopInfo(b)
		return i.NextHop, err
	},
}

var ipv6 = family[netip.Prefix]{
	name: "IPv6", lpmClass: forces.ClassIPv6UcastLPM, nhClass: forces.ClassIPv6NextHop,
	key: netip.Prefix.Masked, is: func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() },
	parseRoute: func(b []byte) (netip.Prefix, uint32, error) {
		i, err := forces.ParseIPv6PrefixInfo(b)
		return i.Prefix, i.HopSelector, err
	},
	parseNexthop: func(b []byte) (netip.Addr, error) {
		i, err := forces.ParseIPv6NextHopInfo(b)
		return i.NextHop, err
	},
}

func newFamTable[K comparable](f family[K]) *famTable[K] {
	return &famTable[K]{rows: newRowTable[K](), routes: map[K]uint32{}, nexthops: map[uint32]netip.Addr{}, fam: f}
}

// len is the number of routes.
func (t *famTable[K]) len() int { return len(t.routes) }

func newTable() *table {
	return &table{v4: newFamTable(ipv4), v6: newFamTable(ipv6)}
}

// stage returns a copy of t to stage a transaction on.
func (t *table) stage() *table {
	return &table{v4: t.v4.stage(), v6: t.v6.stage()}
}

func (t *famTable[K]) stage() *famTable[K] {
	return &famTable[K]{rows: t.rows, routes: t.routes, nexthops: t.nexthops, sharedPrefixes: true, sharedNexthops: true, fam: t.fam}
}

func (t *famTable[K]) ownPrefixes() {
	if t.sharedPrefixes {
		t.rows, t.routes, t.sharedPrefixes = t.rows.clone(), maps.Clone(t.routes), false
	}
}

func (t *famTable[K]) ownNexthops() {
	if t.sharedNexthops {
		t.nexthops, t.sharedNexthops = maps.Clone(t.nexthops), false
	}
}

// gateway returns the gateway prefix p is forwarded to, if it has a route
// whose nexthop row exists.
func (t *famTable[K]) gateway(p K) (netip.Addr, bool) {
	row, ok := t.routes[p]
	if !ok {
		return netip.Addr{}, false
	}
	r, _ := t.rows.get(row)
	gw, ok := t.nexthops[r.nexthop]
	return gw, ok
}

// dirty collects what a batch of row operations touched, so that only those
// entries are reprogrammed.
type dirty struct {
	v4 *famDirty[prefix4]
	v6 *famDirty[netip.Prefix]
}

type famDirty[K comparable] struct {
	all      bool
	prefixes map[K]struct{}
	nexthops map[uint32]struct{}
}

func newDirty() *dirty {
	return &dirty{
		v4: &famDirty[prefix4]{prefixes: map[prefix4]struct{}{}, nexthops: map[uint32]struct{}{}},
		v6: &famDirty[netip.Prefix]{prefixes: map[netip.Prefix]struct{}{}, nexthops: map[uint32]struct{}{}},
	}
}

// The recorders accept nil: staging a transaction needs none.
func (d *famDirty[K]) prefix(p K) {
	if d != nil {
		d.prefixes[p] = struct{}{}
	}
}

func (d *famDirty[K]) nexthop(id uint32) {
	if d != nil {
		d.nexthops[id] = struct{}{}
	}
}

func (d *famDirty[K]) everything() {
	if d != nil {
		d.all = true
	}
}

// apply performs one row operation on t. It records what it touched in d
// (nil: nothing) and how to reverse it in undo (nil: no undo), so a batch can
// be made all-or-none.
func (t *table) apply(it forces.Item, d *dirty, undo *[]func()) error {
	var d4 *famDirty[prefix4]
	var d6 *famDirty[netip.Prefix]
	if d != nil {
		d4, d6 = d.v4, d.v6
	}
	switch it.ClassID {
	case forces.ClassIPv4UcastLPM, forces.ClassIPv4NextHop:
		return t.v4.apply(it, d4, undo)
	case forces.ClassIPv6UcastLPM, forces.ClassIPv6NextHop:
		return t.v6.apply(it, d6, undo)
	}
	return reject(forces.ResultNotSupported, "%s on %s is not supported", it.Op, forces.ClassName(it.ClassID))
}

func (t *famTable[K]) apply(it forces.Item, d *famDirty[K], undo *[]func()) error {
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
	lpm := it.ClassID == t.fam.lpmClass
	switch {
	case it.Op == forces.OpDel && wholeTable && lpm:
		rows, routes := t.rows, t.routes
		t.rows, t.routes = newRowTable[K](), make(map[K]uint32, len(routes))
		t.sharedPrefixes = false
		if undo != nil {
			*undo = append(*undo, func() { t.rows, t.routes = rows, routes })
		}
		d.everything()
		return nil
	case it.Op == forces.OpDel && wholeTable:
		nexthops := t.nexthops
		t.nexthops, t.sharedNexthops = map[uint32]netip.Addr{}, false
		if undo != nil {
			*undo = append(*undo, func() { t.nexthops = nexthops })
		}
		d.everything()
		return nil
	}
	if lpm {
		t.ownPrefixes()
	} else {
		t.ownNexthops()
	}
	row := it.Path[1]
	switch {
	case lpm && it.Op == forces.OpSet:
		p, nh, err := t.fam.parseRoute(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", row, err)
		}
		return t.setRoute(row, p, nh, d, undo)
	case lpm && it.Op == forces.OpDel:
		return t.deleteRow(row, d, undo)
	case it.Op == forces.OpSet:
		gw, err := t.fam.parseNexthop(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", row, err)
		}
		return t.setNexthop(row, gw, d, undo)
	case it.Op == forces.OpDel:
		return t.deleteNexthop(row, d, undo)
	}
	return reject(forces.ResultNotSupported, "%s on %s is not supported", it.Op, forces.ClassName(it.ClassID))
}

func (t *famTable[K]) setRoute(row uint32, pfx netip.Prefix, nh uint32, d *famDirty[K], undo *[]func()) error {
	if !t.fam.is(pfx.Addr()) {
		return reject(forces.ResultInvalidParameters, "row %d: prefix %s is not %s", row, pfx, t.fam.name)
	}
	if _, ok := t.nexthops[nh]; !ok {
		return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such nexthop", row, pfx, nh)
	}
	p := t.fam.key(pfx)
	// The row may have held another prefix, and the prefix may have sat in
	// another row: both are replaced. (One map lookup and one insertion in
	// the common case of a new row: this runs a million times in a full
	// sync.)
	old, hadRow := t.rows.get(row)
	if hadRow && old.prefix != p {
		if err := t.deleteRow(row, d, undo); err != nil {
			return err
		}
		hadRow = false
	}
	oldRow, hadRoute := t.routes[p]
	if hadRoute && oldRow != row {
		if err := t.deleteRow(oldRow, d, undo); err != nil {
			return err
		}
		hadRoute = false
	}
	if !t.rows.set(row, p, nh) {
		return reject(forces.ResultMemoryError, "row %d: prefix %s: no room for more prefix-table rows (%d pages of %d rows in use)", row, pfx, maxRowPages, rowPageSize)
	}
	if !hadRoute {
		t.routes[p] = row
	}
	d.prefix(p)
	if undo != nil {
		*undo = append(*undo, func() {
			if hadRow {
				t.rows.set(row, old.prefix, old.nexthop)
			} else {
				t.rows.del(row)
			}
			if !hadRoute {
				delete(t.routes, p)
			}
		})
	}
	return nil
}

func (t *famTable[K]) deleteRow(row uint32, d *famDirty[K], undo *[]func()) error {
	r, ok := t.rows.get(row)
	if !ok {
		return reject(forces.ResultNotFound, "prefix table row %d does not exist", row)
	}
	t.rows.del(row)
	delete(t.routes, r.prefix)
	d.prefix(r.prefix)
	if undo != nil {
		*undo = append(*undo, func() { t.rows.set(row, r.prefix, r.nexthop); t.routes[r.prefix] = row })
	}
	return nil
}

func (t *famTable[K]) setNexthop(id uint32, gw netip.Addr, d *famDirty[K], undo *[]func()) error {
	if id == 0 || id > MaxCENexthopID {
		return reject(forces.ResultValueOutOfRange, "nexthop row %d: outside 1..%d", id, MaxCENexthopID)
	}
	if !t.fam.is(gw) || gw.IsUnspecified() {
		return reject(forces.ResultInvalidParameters, "nexthop row %d: NextHopIPAddr %s is not a usable %s address", id, gw, t.fam.name)
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

func (t *famTable[K]) deleteNexthop(id uint32, d *famDirty[K], undo *[]func()) error {
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
	diffFam(a.v4, b.v4, d.v4)
	diffFam(a.v6, b.v6, d.v6)
}

func diffFam[K comparable](a, b *famTable[K], d *famDirty[K]) {
	if len(a.routes) == 0 || len(b.routes) == 0 {
		d.everything() // cheaper than listing every prefix
		return
	}
	for p := range a.routes {
		ga, oka := a.gateway(p)
		gb, okb := b.gateway(p)
		if oka != okb || ga != gb {
			d.prefix(p)
		}
	}
	for p := range b.routes {
		if _, ok := a.routes[p]; !ok {
			d.prefix(p)
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
