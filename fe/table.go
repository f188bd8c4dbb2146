package fe

import (
	"errors"
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefetch"
	"github.com/splitplane/splitplane/internal/prefix"
)

// table is the FE's copy of the rows the CE programmed, in RFC 6956 terms:
// per address family, the UcastLPM prefix table and the NextHop table. It
// knows nothing of the datapath; program turns differences between tables
// into map updates.
type table struct {
	v4 *famTable[prefix.V4]
	v6 *famTable[netip.Prefix]
	// egress is the nexthop egress tables (egress.go): which FE each
	// nexthop's gateway is behind, programmed by an FE of a cluster
	// (ife.go).
	egress egressTables
	// conn is the connected egress tables (connremote.go): which FE and
	// port each port subnet is on.
	conn connTables
}

// famTable is one address family's tables. K is the key the family's
// prefixes are stored under (a pointer-free integer for IPv4).
type famTable[K comparable] struct {
	rows     rowTable[K]           // prefix-table row -> prefix and nexthop (or group) row
	routes   prefixMap[K, uint32]  // prefix -> its row
	nexthops map[uint32]netip.Addr // nexthop-table row (HopSelector) -> gateway
	groups   map[uint32][]uint32   // ECMP group row -> its members' nexthop rows

	// A staged copy shares the live table's maps until it first changes
	// them (copy on write): a full sync, which starts by deleting the
	// tables, never copies them at all. Groups go with the nexthops.
	sharedPrefixes, sharedNexthops bool

	// unindexed lists, in the order they were set, rows of a full sync that
	// are not yet in routes (indexing: routes is incomplete until index
	// builds it). A full sync sets a million fresh rows; entering each
	// prefix in a growing million-entry map as it comes costs more than
	// building the map once, at its final size, when it is first needed.
	unindexed []uint32
	indexing  bool

	fam family[K]
}

// family describes an address family to the generic table code.
type family[K comparable] struct {
	name string
	key  func(netip.Prefix) K
	is   func(netip.Addr) bool
}

var ipv4 = family[prefix.V4]{
	name: "IPv4", key: prefix.FromV4, is: netip.Addr.Is4,
}

var ipv6 = family[netip.Prefix]{
	name: "IPv6", key: netip.Prefix.Masked, is: func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() },
}

func newFamTable[K comparable](f family[K]) *famTable[K] {
	return &famTable[K]{rows: newRowTable[K](), routes: newPrefixMap[K, uint32](0), nexthops: map[uint32]netip.Addr{}, groups: map[uint32][]uint32{}, fam: f}
}

// len is the number of routes.
func (t *famTable[K]) len() int { return t.index().len() }

// empty reports whether the table has no routes, without indexing it.
func (t *famTable[K]) empty() bool { return t.rows.n == 0 }

// index returns routes, complete: the rows of a full sync set since the
// table was emptied (routes stays empty meanwhile) are entered in the order
// they were set, a prefix set in two rows keeping the later row, as if each
// had been entered when set.
func (t *famTable[K]) index() prefixMap[K, uint32] {
	if !t.indexing {
		return t.routes
	}
	t.indexed(t.buildIndex())
	return t.routes
}

// buildIndex works out what index enters, without changing t (so that it
// can run beside other readers of the rows): the index, and the rows a
// prefix left for a later row.
func (t *famTable[K]) buildIndex() (m prefixMap[K, uint32], stale []uint32) {
	m = newPrefixMap[K, uint32](len(t.unindexed))
	for row, r := range aheadOf(t.unindexedRows(), rowPrefix, m.prefetch) {
		m.put(r.prefix, row) // a later row of the same prefix replaces an earlier
	}
	if m.len() != len(t.unindexed) {
		// A prefix came in more than one row: the rows it left go, as
		// setRoute would have deleted them.
		for row, r := range t.unindexedRows() {
			if in, _ := m.get(r.prefix); in != row {
				stale = append(stale, row)
			}
		}
	}
	return m, stale
}

// indexed completes index with buildIndex's results.
func (t *famTable[K]) indexed(m prefixMap[K, uint32], stale []uint32) {
	for _, row := range stale {
		t.rows.del(row)
	}
	t.routes, t.unindexed, t.indexing = m, nil, false
}

func newTable() *table {
	return &table{v4: newFamTable(ipv4), v6: newFamTable(ipv6), egress: newEgressTables(), conn: newConnTables()}
}

// stage returns a copy of t to stage a transaction on.
func (t *table) stage() *table {
	return &table{v4: t.v4.stage(), v6: t.v6.stage(), egress: t.egress.stage(), conn: t.conn.stage()}
}

func (t *famTable[K]) stage() *famTable[K] {
	t.index()
	return &famTable[K]{rows: t.rows, routes: t.routes, nexthops: t.nexthops, groups: t.groups, sharedPrefixes: true, sharedNexthops: true, fam: t.fam}
}

func (t *famTable[K]) ownPrefixes() {
	if t.sharedPrefixes {
		t.rows, t.routes, t.sharedPrefixes = t.rows.clone(), t.routes.clone(), false
	}
}

func (t *famTable[K]) ownNexthops() {
	if t.sharedNexthops {
		t.nexthops, t.groups, t.sharedNexthops = maps.Clone(t.nexthops), maps.Clone(t.groups), false
	}
}

// target is where the table forwards a prefix: nowhere (!ok), to one
// gateway, or to an ECMP set of them (group, sorted, two or more, named by
// key).
type target struct {
	ok    bool
	gw    netip.Addr
	group []netip.Addr
	key   string
}

func (a target) equal(b target) bool { return a.ok == b.ok && a.gw == b.gw && a.key == b.key }

// dirtyTarget returns where prefix p, recorded in a famDirty as at, is
// forwarded to.
func (t *famTable[K]) dirtyTarget(p K, at uint64) target {
	switch {
	case at == dirtyGone:
		return target{}
	case at >= dirtyRow:
		if r, ok := t.rows.get(uint32(at - dirtyRow)); ok && r.prefix == p {
			return t.targetOf(r)
		}
	}
	return t.target(p)
}

// target returns where prefix p is forwarded to.
func (t *famTable[K]) target(p K) target {
	row, ok := t.index().get(p)
	if !ok {
		return target{}
	}
	r, _ := t.rows.get(row)
	return t.targetOf(r)
}

// targetOf returns where row r forwards to: its nexthop row's gateway, or
// the gateways of its group's members that exist (one left makes it a plain
// gateway; none, nowhere).
func (t *famTable[K]) targetOf(r rowSlot[K]) target {
	if !r.ecmp {
		gw, ok := t.nexthops[r.nexthop]
		return target{ok: ok, gw: gw}
	}
	var gws []netip.Addr
	for _, m := range t.groups[r.nexthop] {
		if gw, ok := t.nexthops[m]; ok {
			gws = append(gws, gw)
		}
	}
	slices.SortFunc(gws, netip.Addr.Compare)
	gws = slices.Compact(gws)
	switch len(gws) {
	case 0:
		return target{}
	case 1:
		return target{ok: true, gw: gws[0]}
	}
	b := make([]byte, 0, 17*len(gws))
	for _, gw := range gws {
		b = append(gw.AppendTo(b), ',')
	}
	return target{ok: true, gw: gws[0], group: gws, key: string(b)}
}

// dirty collects what a batch of row operations touched, so that only those
// entries are reprogrammed.
type dirty struct {
	v4 *famDirty[prefix.V4]
	v6 *famDirty[netip.Prefix]
}

type famDirty[K comparable] struct {
	all bool
	// prefixes maps each touched prefix to where the table has it now, if
	// the operation knew: dirtyUnknown (look it up), dirtyGone, or its row
	// + dirtyRow. Programming then reads the row, not the million-entry
	// prefix map again.
	prefixes map[K]uint64
	nexthops map[uint32]struct{}
	groups   map[uint32]struct{}
}

func newDirty() *dirty { return newDirtySized(0) }

// newDirtySized is newDirty for a batch of about n IPv4 rows.
func newDirtySized(n int) *dirty {
	return &dirty{
		v4: &famDirty[prefix.V4]{prefixes: make(map[prefix.V4]uint64, n), nexthops: map[uint32]struct{}{}, groups: map[uint32]struct{}{}},
		v6: &famDirty[netip.Prefix]{prefixes: map[netip.Prefix]uint64{}, nexthops: map[uint32]struct{}{}, groups: map[uint32]struct{}{}},
	}
}

// Where a dirty prefix is: see famDirty.prefixes.
const (
	dirtyUnknown = iota
	dirtyGone
	dirtyRow
)

// The recorders accept nil: staging a transaction needs none.
func (d *famDirty[K]) prefix(p K) {
	if d != nil {
		d.prefixes[p] = dirtyUnknown
	}
}

// prefixAt records p as changed and now in row.
func (d *famDirty[K]) prefixAt(p K, row uint32) {
	if d != nil {
		d.prefixes[p] = dirtyRow + uint64(row)
	}
}

// prefixGone records p as changed and no longer in the table.
func (d *famDirty[K]) prefixGone(p K) {
	if d != nil {
		d.prefixes[p] = dirtyGone
	}
}

func (d *famDirty[K]) nexthop(id uint32) {
	if d != nil {
		d.nexthops[id] = struct{}{}
	}
}

func (d *famDirty[K]) group(id uint32) {
	if d != nil {
		d.groups[id] = struct{}{}
	}
}

func (d *famDirty[K]) everything() {
	if d != nil {
		d.all = true
	}
}

// cfgRow is a Config item read once, at the edge, as a route-table row: the
// prefetch and the apply of a row both work on it, and no FULLDATA is parsed
// twice.
type cfgRow struct {
	forces.Row
	err error // why the item is not a row of ours, answered when applied
}

// decoded yields items as rows, in order. Each is decoded once,
// prefetch.Ahead items before it is yielded, when the index slot it will
// look up is prefetched: the row is still in the cache when it is applied,
// and a message's rows are never all held at once. A yielded row is valid
// until the loop body returns.
func (t *table) decoded(items []forces.Item) iter.Seq2[int, *cfgRow] {
	return func(yield func(int, *cfgRow) bool) {
		var ring [prefetch.Ahead]cfgRow
		for j := range min(len(items), len(ring)) {
			t.decode(&ring[j], &items[j])
		}
		for i := range items {
			r := &ring[i%len(ring)]
			if !yield(i, r) {
				return
			}
			if j := i + len(ring); j < len(items) {
				t.decode(r, &items[j])
			}
		}
	}
}

// decode reads it into r and prefetches what applying it will look up.
func (t *table) decode(r *cfgRow, it *forces.Item) {
	r.err = r.Row.Decode(it)
	t.prefetch(r)
}

// rowResult is the RESULT an FE answers a row that does not decode with.
func rowResult(err error) forces.ResultCode {
	switch {
	case errors.Is(err, forces.ErrRowInstance):
		return forces.ResultLFBInstanceIDNotFound
	case errors.Is(err, forces.ErrRowPath):
		return forces.ResultInvalidPath
	case errors.Is(err, forces.ErrRowData):
		return forces.ResultInvalidParameters
	}
	return forces.ResultNotSupported // another class or operation
}

// apply performs one row operation on t. It records what it touched in d
// (nil: nothing) and how to reverse it in undo (nil: no undo), so a batch can
// be made all-or-none.
func (t *table) apply(r *cfgRow, d *dirty, undo *[]func()) error {
	if r.err != nil {
		return reject(rowResult(r.err), "%v", r.err)
	}
	if err := checkRow(&r.Row); err != nil {
		return err
	}
	if r.Table.IsEgress() {
		return t.egress.apply(&r.Row, undo)
	}
	if r.Table.IsConnected() {
		return t.conn.apply(&r.Row, undo)
	}
	var d4 *famDirty[prefix.V4]
	var d6 *famDirty[netip.Prefix]
	if d != nil {
		d4, d6 = d.v4, d.v6
	}
	if r.Table.IPv6() {
		return t.v6.apply(&r.Row, d6, undo)
	}
	return t.v4.apply(&r.Row, d4, undo)
}

// prefetch starts loading the index slot an IPv4 route row will look up.
func (t *table) prefetch(r *cfgRow) {
	if r.Table != forces.TableIPv4Prefix || r.Op != forces.OpSet || r.err != nil || t.v4.indexing {
		return
	}
	t.v4.routes.prefetch(prefix.FromV4(r.Prefix))
}

// checkRow refuses what famTable.apply does not do, whatever made the row:
// an operation other than SET and DEL, a SET of a whole table, a table that
// does not exist. (DecodeRow makes none of these; a row is checked again
// here because applying one would, say, take a GET of a whole table for a
// DEL of it.)
func checkRow(r *forces.Row) error {
	switch {
	case r.Op != forces.OpSet && r.Op != forces.OpDel:
		return reject(forces.ResultNotSupported, "%v of a route table: only SET and DEL are supported", r.Op)
	case r.Table < forces.TableIPv4Prefix || r.Table > forces.TableIPv6Connected:
		return reject(forces.ResultLFBNotFound, "route table %d does not exist", r.Table)
	case r.Whole && r.Op != forces.OpDel:
		return reject(forces.ResultInvalidPath, "%v of a whole route table: only DEL is supported", r.Op)
	}
	return nil
}

func (t *famTable[K]) apply(r *forces.Row, d *famDirty[K], undo *[]func()) error {
	lpm, grp := r.Table.IsPrefix(), r.Table.IsGroup()
	switch {
	case r.Whole && lpm: // only a DEL (checkRow)
		rows, routes := t.rows, t.index()
		t.rows, t.sharedPrefixes = newRowTable[K](), false
		if undo != nil {
			t.routes = newPrefixMap[K, uint32](routes.len())
			*undo = append(*undo, func() { t.rows, t.routes = rows, routes })
		} else {
			// Nothing to undo (a transaction being staged): the rows that
			// follow are indexed when the table is first used.
			t.routes, t.unindexed, t.indexing = newPrefixMap[K, uint32](0), nil, true
		}
		d.everything()
		return nil
	case r.Whole && grp:
		t.ownNexthops()
		groups := t.groups
		t.groups = map[uint32][]uint32{}
		if undo != nil {
			*undo = append(*undo, func() { t.groups = groups })
		}
		d.everything()
		return nil
	case r.Whole:
		t.ownNexthops()
		nexthops := t.nexthops
		t.nexthops = map[uint32]netip.Addr{}
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
	set := r.Op == forces.OpSet
	switch {
	case lpm && set:
		return t.setRoute(r.Index, r.Prefix, r.HopSelector, r.ECMP, d, undo)
	case lpm:
		return t.deleteRow(r.Index, d, undo)
	case grp && set:
		return t.setGroup(r.Index, r.Members, d, undo)
	case grp:
		return t.deleteGroup(r.Index, d, undo)
	case set:
		return t.setNexthop(r.Index, r.NextHop, d, undo)
	}
	return t.deleteNexthop(r.Index, d, undo)
}

func (t *famTable[K]) setRoute(row uint32, pfx netip.Prefix, nh uint32, ecmp bool, d *famDirty[K], undo *[]func()) error {
	if !t.fam.is(pfx.Addr()) {
		return reject(forces.ResultInvalidParameters, "row %d: prefix %s is not %s", row, pfx, t.fam.name)
	}
	if ecmp {
		if _, ok := t.groups[nh]; !ok {
			return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such ECMP group", row, pfx, nh)
		}
	} else if _, ok := t.nexthops[nh]; !ok {
		return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such nexthop", row, pfx, nh)
	}
	p := t.fam.key(pfx)
	if t.indexing {
		if _, hadRow := t.rows.get(row); !hadRow && undo == nil {
			if !t.rows.set(row, p, nh, ecmp) {
				return reject(forces.ResultMemoryError, "row %d: prefix %s: no room for more prefix-table rows (%d pages of %d rows in use)", row, pfx, maxRowPages, rowPageSize)
			}
			t.unindexed = append(t.unindexed, row)
			d.prefixAt(p, row)
			return nil
		}
		t.index() // a row set again: index what came before, then replace it
	}
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
	oldRow, hadRoute := t.routes.get(p)
	if hadRoute && oldRow != row {
		if err := t.deleteRow(oldRow, d, undo); err != nil {
			return err
		}
		hadRoute = false
	}
	if !t.rows.set(row, p, nh, ecmp) {
		return reject(forces.ResultMemoryError, "row %d: prefix %s: no room for more prefix-table rows (%d pages of %d rows in use)", row, pfx, maxRowPages, rowPageSize)
	}
	if !hadRoute {
		t.routes.put(p, row)
	}
	d.prefixAt(p, row)
	if undo != nil {
		*undo = append(*undo, func() {
			if hadRow {
				t.rows.set(row, old.prefix, old.nexthop, old.ecmp)
			} else {
				t.rows.del(row)
			}
			if !hadRoute {
				t.routes.del(p)
			}
		})
	}
	return nil
}

func (t *famTable[K]) deleteRow(row uint32, d *famDirty[K], undo *[]func()) error {
	t.index()
	r, ok := t.rows.get(row)
	if !ok {
		return reject(forces.ResultNotFound, "prefix table row %d does not exist", row)
	}
	t.rows.del(row)
	t.routes.del(r.prefix)
	d.prefixGone(r.prefix)
	if undo != nil {
		*undo = append(*undo, func() { t.rows.set(row, r.prefix, r.nexthop, r.ecmp); t.routes.put(r.prefix, row) })
	}
	return nil
}

func (t *famTable[K]) setNexthop(id uint32, gw netip.Addr, d *famDirty[K], undo *[]func()) error {
	if id == 0 || id > forces.MaxNexthopID {
		return reject(forces.ResultValueOutOfRange, "nexthop row %d: outside 1..%d", id, forces.MaxNexthopID)
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

func (t *famTable[K]) setGroup(id uint32, members []uint32, d *famDirty[K], undo *[]func()) error {
	if id == 0 || id > forces.MaxGroupID {
		return reject(forces.ResultValueOutOfRange, "ECMP group row %d: outside 1..%d", id, forces.MaxGroupID)
	}
	for _, m := range members {
		if _, ok := t.nexthops[m]; !ok {
			return reject(forces.ResultNotFound, "ECMP group row %d: member HopSelector %d: no such nexthop", id, m)
		}
	}
	old, had := t.groups[id]
	t.groups[id] = members
	if had && !slices.Equal(old, members) {
		d.group(id) // as for nexthops: only routes already using it change
	}
	if undo != nil {
		*undo = append(*undo, func() {
			if had {
				t.groups[id] = old
			} else {
				delete(t.groups, id)
			}
		})
	}
	return nil
}

func (t *famTable[K]) deleteGroup(id uint32, d *famDirty[K], undo *[]func()) error {
	old, ok := t.groups[id]
	if !ok {
		return reject(forces.ResultNotFound, "ECMP group row %d does not exist", id)
	}
	delete(t.groups, id)
	d.group(id)
	if undo != nil {
		*undo = append(*undo, func() { t.groups[id] = old })
	}
	return nil
}

// diff marks in d every prefix whose forwarding differs between a and b.
func diff(a, b *table, d *dirty) {
	diffFam(a.v4, b.v4, d.v4)
	diffFam(a.v6, b.v6, d.v6)
}

func diffFam[K comparable](a, b *famTable[K], d *famDirty[K]) {
	if a.empty() || b.empty() {
		d.everything() // cheaper than listing every prefix
		return
	}
	for p := range a.routes.all() {
		if !a.target(p).equal(b.target(p)) {
			d.prefix(p)
		}
	}
	for p := range b.routes.all() {
		if _, ok := a.routes.get(p); !ok {
			d.prefix(p)
		}
	}
}

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

// unindexedRows yields the rows of a full sync not yet indexed, in the
// order they were set, through a reader of their own (see rowReader).
// aheadOf yields what seq yields, in the same order, calling fetch on each
// pair's key prefetch.Ahead pairs before yielding it: a loop that looks
// every key up in a million-entry map then finds each slot in the cache,
// its misses overlapped.
func aheadOf[A, B, K any](seq iter.Seq2[A, B], key func(A, B) K, fetch func(K)) iter.Seq2[A, B] {
	return func(yield func(A, B) bool) {
		type pair struct {
			a A
			b B
		}
		var ring [prefetch.Ahead]pair
		n := 0
		for a, b := range seq {
			fetch(key(a, b))
			if n >= len(ring) {
				if e := ring[n%len(ring)]; !yield(e.a, e.b) {
					return
				}
			}
			ring[n%len(ring)] = pair{a, b}
			n++
		}
		for i := max(0, n-len(ring)); i < n; i++ {
			if e := ring[i%len(ring)]; !yield(e.a, e.b) {
				return
			}
		}
	}
}

// rowPrefix and dirtyPrefix are the keys aheadOf prefetches for rows and
// for a batch's dirty prefixes.
func rowPrefix[K comparable](_ uint32, r rowSlot[K]) K { return r.prefix }
func dirtyPrefix[K comparable](p K, _ uint64) K        { return p }

func (t *famTable[K]) unindexedRows() iter.Seq2[uint32, rowSlot[K]] {
	return func(yield func(uint32, rowSlot[K]) bool) {
		rows := t.rows.reader()
		for _, row := range t.unindexed {
			if r, ok := rows.get(row); ok && !yield(row, r) {
				return
			}
		}
	}
}
