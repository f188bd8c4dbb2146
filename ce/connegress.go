package ce

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
)

// Connected subnets across FEs (issue 23, one port space): besides the
// nexthop egress rows, the CE tells every FE that lists the connected
// egress LFBs where each port subnet is: one row per prefix of a port that
// is up on an associated FE, {prefix, FE, port} (forces.TableIPv4Connected,
// TableIPv6Connected). An FE forwards to a host on another FE's port
// through these rows as it forwards to a gateway behind one (fe/connremote.go).
//
// A subnet that several FEs have (the --fes labs give every FE copies of
// the same ports) is the lowest FE ID's, on that FE's lowest port ID: the
// order egressCandidates picks in. The FEs that have it themselves forward
// to it through their own port anyway; the others go to that FE.
//
// A row keeps its index while its prefix stays, so the FEs' keys for it
// (forces.MaxConnectedRows rows, both families numbered together) do not
// move; a new prefix takes the lowest free index. A prefix that finds none
// has no row, and the loop logs it.

// connRow is a connected egress row: its index and where the subnet is.
type connRow struct {
	row uint32
	forces.NexthopEgressInfo
}

// connEgress is the loop's connected egress state.
type connEgress struct {
	rows map[netip.Prefix]connRow
	used [forces.MaxConnectedRows]bool
}

// connectedPrefixes returns every subnet of a port that is up, with the
// port it is taken from (lowest FE, then lowest port).
func (e *egress) connectedPrefixes() map[netip.Prefix]forces.NexthopEgressInfo {
	want := map[netip.Prefix]forces.NexthopEgressInfo{}
	for _, fe := range e.order {
		for _, p := range e.ports[fe] {
			if !p.Up {
				continue
			}
			for _, a := range p.Addrs {
				pfx := a.Masked()
				if !pfx.IsValid() || pfx.Addr().IsLinkLocalUnicast() {
					continue
				}
				if _, ok := want[pfx]; !ok {
					want[pfx] = forces.NexthopEgressInfo{FE: forces.FESubID(fe), Port: p.ID}
				}
			}
		}
	}
	return want
}

// recomputeConnected appends to out the changes that bring the connected
// rows to what the FEs' ports now say: deletions first, then new and
// changed rows. It returns the prefixes left without a row (no free
// index).
func (e *egress) recomputeConnected(out []Change) ([]Change, []netip.Prefix) {
	c := &e.conn
	if c.rows == nil {
		c.rows = map[netip.Prefix]connRow{}
	}
	want := e.connectedPrefixes()
	for _, pfx := range slices.SortedFunc(maps.Keys(c.rows), netip.Prefix.Compare) {
		if _, ok := want[pfx]; !ok {
			r := c.rows[pfx]
			delete(c.rows, pfx)
			c.used[r.row] = false
			out = append(out, Change{Kind: ConnectedDel, ID: r.row, Prefix: pfx})
		}
	}
	var refused []netip.Prefix
	next := uint32(0) // no free index below
	for _, pfx := range slices.SortedFunc(maps.Keys(want), netip.Prefix.Compare) {
		w := want[pfx]
		r, had := c.rows[pfx]
		if had && r.NexthopEgressInfo == w {
			continue
		}
		if !had {
			for next < forces.MaxConnectedRows && c.used[next] {
				next++
			}
			if next == forces.MaxConnectedRows {
				refused = append(refused, pfx)
				continue
			}
			r.row = next
			c.used[next] = true
		}
		r.NexthopEgressInfo = w
		c.rows[pfx] = r
		out = append(out, Change{Kind: ConnectedSet, ID: r.row, Prefix: pfx, Egress: w})
	}
	return out, refused
}

// connSnapshot is every connected row as ConnectedSet changes, by row:
// the full sync's.
func (e *egress) connSnapshot() []Change {
	out := make([]Change, 0, len(e.conn.rows))
	for pfx, r := range e.conn.rows {
		out = append(out, Change{Kind: ConnectedSet, ID: r.row, Prefix: pfx, Egress: r.NexthopEgressInfo})
	}
	slices.SortFunc(out, func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// connCounts returns how many connected rows each FE (by sub-ID) is the
// egress of.
func (e *egress) connCounts() map[uint32]int {
	n := map[uint32]int{}
	for _, r := range e.conn.rows {
		n[r.FE]++
	}
	return n
}

// connectedRows appends to out the connected row changes after FE fe's
// ports changed or it left, logging them and the prefixes left without a
// row.
func (c *CE) connectedRows(eg *egress, fe forces.ID, out []Change) []Change {
	n := len(out)
	out, refused := eg.recomputeConnected(out)
	if len(out) > n {
		c.log.Info("forces: connected egress rows changed", "fe", fe, "rows", len(out)-n)
	}
	if len(refused) > 0 {
		c.log.Error("forces: connected egress table full: these subnets are reached only from their own FE",
			"max_rows", forces.MaxConnectedRows, "prefixes", len(refused), "first", refused[0])
	}
	return out
}
