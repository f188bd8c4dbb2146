package fe

import (
	"cmp"
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

// Connected subnets across FEs (docs/cluster.md, "Connected subnets across
// FEs"). The CE sends every FE the connected egress rows: each subnet of a
// port that is up on an associated FE, with that FE and port. An FE of a
// cluster (ife.go: inter_fe_links, a datapath that forwards between FEs)
// programs them:
//
//   - a row of another FE, for a subnet that is not one of this FE's own:
//     a remote nexthop (an ID of the slots' range, of no slot) with the key
//     datapath.ConnectedKeyBase + row, and a datapath route for the subnet
//     to it. A CE route for the same prefix loses to it, as it loses to a
//     port's own subnet (connected routes have distance 0); longer CE routes
//     inside it still win by longest match. When the row goes, the route
//     goes (or the CE route for the prefix comes back).
//   - a row of this FE: the key maps to the port's connected nexthop, so a
//     frame another FE sends for the subnet leaves that port to the host the
//     packet is for (its MAC from the neighbour table; an unknown host's
//     packet goes to this FE's kernel, which resolves it).
//
// An FE that is no cluster member keeps the rows and programs nothing.

// connTables are the two families' connected egress tables: row ->
// subnet and where it is. Both families share the row numbering.
type connTables struct {
	v4, v6 map[uint32]forces.ConnectedEgressInfo
	// shared: a staged copy shares the live table's maps until it first
	// changes them.
	shared bool
	// version changes (to a value no other version has) with every row
	// applied: the programmer maps the rows again when it differs.
	version uint64
}

func newConnTables() connTables {
	return connTables{v4: map[uint32]forces.ConnectedEgressInfo{}, v6: map[uint32]forces.ConnectedEgressInfo{}}
}

func (c connTables) stage() connTables {
	return connTables{v4: c.v4, v6: c.v6, shared: true, version: c.version}
}

// apply sets or deletes a row, or deletes a whole table (checkRow has
// vetted the operation), recording how to reverse it in undo (nil: no
// undo). A row index in use in the other family's table is refused: the
// index is the row's key on every FE.
func (c *connTables) apply(r *forces.Row, undo *[]func()) error {
	if c.shared {
		c.v4, c.v6, c.shared = maps.Clone(c.v4), maps.Clone(c.v6), false
	}
	c.version = egressVersions.Add(1)
	m, other := &c.v4, c.v6
	if r.Table.IPv6() {
		m, other = &c.v6, c.v4
	}
	if r.Whole {
		old := *m
		*m = map[uint32]forces.ConnectedEgressInfo{}
		if undo != nil {
			*undo = append(*undo, func() { *m = old })
		}
		return nil
	}
	if r.Index >= forces.MaxConnectedRows {
		return reject(forces.ResultValueOutOfRange, "connected egress row %d: outside 0..%d", r.Index, forces.MaxConnectedRows-1)
	}
	if o, ok := other[r.Index]; ok && r.Op == forces.OpSet {
		return reject(forces.ResultInvalidParameters, "connected egress row %d (%v): the row holds %v in the other family's table", r.Index, r.Prefix, o.Prefix)
	}
	return putRow(*m, r, forces.ConnectedEgressInfo{Prefix: r.Prefix, FE: r.Egress.FE, Port: r.Egress.Port}, "connected egress", undo)
}

// counts returns how many rows there are and how many name another FE
// (self is this FE's sub-ID).
func (c *connTables) counts(self uint32) (rows, remote int) {
	for _, m := range []map[uint32]forces.ConnectedEgressInfo{c.v4, c.v6} {
		for _, r := range m {
			rows++
			if r.FE != self {
				remote++
			}
		}
	}
	return rows, remote
}

// connRoute is a subnet of another FE as programmed: its remote nexthop.
type connRoute struct {
	id uint32
	rn datapath.RemoteNexthop
}

// connectedKey returns the NE-wide nexthop key of connected row row.
func connectedKey(row uint32) uint32 { return datapath.ConnectedKeyBase + row }

// ownConnected returns the connected nexthop of one of this FE's port
// subnets.
func (pr *programmer) ownConnected(p netip.Prefix) (uint32, bool) {
	if p.Addr().Is4() {
		id, ok := pr.connected[prefix.FromV4(p)]
		return id, ok
	}
	id, ok := pr.connected6[p]
	return id, ok
}

// connWanted works out, for FE self, the remote subnets t's connected rows
// ask for and the keys of this FE's own rows (key -> connected nexthop).
func (pr *programmer) connWanted(t *table) (remote map[netip.Prefix]datapath.RemoteNexthop, local map[uint32]uint32) {
	remote, local = map[netip.Prefix]datapath.RemoteNexthop{}, map[uint32]uint32{}
	for _, m := range []map[uint32]forces.ConnectedEgressInfo{t.conn.v4, t.conn.v6} {
		for row, c := range m {
			id, own := pr.ownConnected(c.Prefix)
			switch {
			case c.FE == pr.self && own:
				local[connectedKey(row)] = id
			case c.FE != pr.self && !own:
				remote[c.Prefix] = datapath.RemoteNexthop{FE: c.FE, Key: connectedKey(row), Port: c.Port}
			}
		}
	}
	return remote, local
}

// programConnected brings the remote subnets' routes and the connected
// keys in line with t's connected rows; CE routes of the prefixes a
// remote subnet takes or gives back are programmed into b. It does nothing
// unless the FE is in a cluster, or when the rows did not change since it
// last ran.
func (pr *programmer) programConnected(t *table, b *batch) {
	if pr.ife == nil || t == pr.connTable && t.conn.version == pr.connVersion {
		return
	}
	pr.connTable, pr.connVersion = t, t.conn.version
	remote, local := pr.connWanted(t)
	for _, p := range slices.SortedFunc(maps.Keys(pr.connRemote), netip.Prefix.Compare) {
		if _, ok := remote[p]; !ok {
			pr.dropConnected(t, p, b)
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(remote), netip.Prefix.Compare) {
		rn := remote[p]
		r := pr.connRemote[p]
		if r != nil && r.rn == rn {
			continue
		}
		if r != nil {
			if err := pr.ife.SetRemoteNexthop(r.id, rn); err != nil {
				pr.datapathError(err)
				pr.dropConnected(t, p, b)
				continue
			}
			r.rn = rn
			continue
		}
		id, ok := pr.allocID()
		if !ok {
			pr.datapathError(errSlotsFull)
			continue
		}
		if err := pr.ife.SetRemoteNexthop(id, rn); err != nil {
			pr.datapathError(err)
			pr.free = append(pr.free, id)
			continue
		}
		pr.shadowConnected(p, &connRoute{id: id, rn: rn})
		pr.takeOver(p, b)
		if err := pr.dp.SetRoute(p, id); err != nil {
			pr.datapathError(err)
			pr.dropConnected(t, p, b)
		}
	}
	for key, id := range local {
		if have, ok := pr.connKeys[key]; ok && have == id {
			continue
		}
		if err := pr.ife.SetNexthopKey(key, id); err != nil {
			pr.datapathError(err)
			continue
		}
		pr.connKeys[key] = id
	}
	for key := range pr.connKeys {
		if _, ok := local[key]; !ok {
			if err := pr.ife.DeleteNexthopKey(key); err != nil && !errors.Is(err, datapath.ErrNotFound) {
				pr.datapathError(err)
			}
			delete(pr.connKeys, key)
		}
	}
}

// allocID takes a nexthop ID from the slots' range for a remote subnet.
func (pr *programmer) allocID() (uint32, bool) {
	switch {
	case len(pr.free) > 0:
		id := pr.free[len(pr.free)-1]
		pr.free = pr.free[:len(pr.free)-1]
		return id, true
	case pr.next <= forces.MaxNexthopID:
		pr.next++
		return pr.next - 1, true
	}
	return 0, false
}

// shadowConnected records p as a remote subnet (r), or forgets it (nil):
// while recorded, it shadows a CE route for the same prefix.
func (pr *programmer) shadowConnected(p netip.Prefix, r *connRoute) {
	if r == nil {
		delete(pr.connRemote, p)
		if p.Addr().Is4() {
			delete(pr.connRemote4, prefix.FromV4(p))
		}
		return
	}
	pr.connRemote[p] = r
	if p.Addr().Is4() {
		pr.connRemote4[prefix.FromV4(p)] = struct{}{}
	}
}

// takeOver forgets the CE route programmed for p, which a remote subnet
// now shadows (its datapath route is about to be overwritten), and takes
// its copy out of the kernel's table.
func (pr *programmer) takeOver(p netip.Prefix, b *batch) {
	var had bool
	if p.Addr().Is4() {
		k := prefix.FromV4(p)
		_, had = pr.routes.get(k)
		programTo(pr, pr.prog4(), k, target{}, b)
	} else {
		_, had = pr.routes6.get(p)
		programTo(pr, pr.prog6(), p, target{}, b)
	}
	if had && pr.kernel != nil {
		if p.Addr().Is4() {
			pr.kernel.sync(prefix.FromV4(p), 0)
		} else {
			pr.kernel.sync6(p, netip.Addr{})
		}
	}
}

// dropConnected removes remote subnet p: its route and nexthop go, and the
// CE's route for the prefix, if t has one, is programmed again.
func (pr *programmer) dropConnected(t *table, p netip.Prefix, b *batch) {
	r := pr.connRemote[p]
	if r == nil {
		return
	}
	pr.shadowConnected(p, nil)
	if err := pr.dp.DeleteRoute(p); err != nil && !errors.Is(err, datapath.ErrNotFound) {
		pr.datapathError(err)
	}
	if err := pr.dp.DeleteNexthop(r.id); err != nil && !errors.Is(err, datapath.ErrNotFound) {
		pr.datapathError(err)
	}
	pr.free = append(pr.free, r.id)
	if p.Addr().Is4() {
		k := prefix.FromV4(p)
		programTo(pr, pr.prog4(), k, t.v4.target(k), b)
	} else {
		programTo(pr, pr.prog6(), p, t.v6.target(p), b)
	}
}

// ConnectedRow is one connected egress row as the FE holds it, for its
// debug view.
type ConnectedRow struct {
	Row    uint32       `json:"row"`
	Prefix netip.Prefix `json:"prefix"`
	FE     uint32       `json:"egress_fe"`
	Port   uint32       `json:"egress_port"`
	// Programmed: the FE forwards to the subnet over the inter-FE links
	// (a datapath route to a remote nexthop).
	Programmed bool `json:"programmed"`
}

// ConnectedRows returns the connected egress rows the CE programmed, by
// row.
func (a *Agent) ConnectedRows() []ConnectedRow {
	var out []ConnectedRow
	a.do(func() {
		for _, m := range []map[uint32]forces.ConnectedEgressInfo{a.table.conn.v4, a.table.conn.v6} {
			for row, c := range m {
				_, prog := a.prog.connRemote[c.Prefix]
				out = append(out, ConnectedRow{Row: row, Prefix: c.Prefix, FE: c.FE, Port: c.Port, Programmed: prog})
			}
		}
	})
	slices.SortFunc(out, func(a, b ConnectedRow) int { return cmp.Compare(a.Row, b.Row) })
	return out
}
