package fe

import (
	"maps"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/status"
)

// The egress FE of each nexthop (one port space over several FEs): the CE
// sends every FE the same rows, keyed by its nexthop rows, saying which FE
// (and which port of it) each gateway is behind. The FE keeps them here,
// beside its route tables and staged with them in a transaction. An FE with
// inter-FE links programs them (ife.go): a gateway whose row names another
// FE becomes a remote nexthop of the datapath, one whose row names this FE
// gets the row's nexthop key.

// egressTables are the two families' nexthop egress tables: nexthop row ->
// egress. A row may name a nexthop row the FE does not hold (yet): it is
// kept, and means nothing until the nexthop comes.
type egressTables struct {
	v4, v6 map[uint32]forces.NexthopEgressInfo
	// shared: a staged copy shares the live table's maps until it first
	// changes them.
	shared bool
	// version changes (to a value no other table version has) with every
	// row applied: the programmer maps the rows again when it differs from
	// the version it mapped last.
	version uint64
}

// egressVersions numbers the versions of every egressTables.
var egressVersions atomic.Uint64

func newEgressTables() egressTables {
	return egressTables{v4: map[uint32]forces.NexthopEgressInfo{}, v6: map[uint32]forces.NexthopEgressInfo{}}
}

func (e egressTables) stage() egressTables {
	return egressTables{v4: e.v4, v6: e.v6, shared: true, version: e.version}
}

func (e *egressTables) own() {
	if e.shared {
		e.v4, e.v6, e.shared = maps.Clone(e.v4), maps.Clone(e.v6), false
	}
}

func (e *egressTables) of(t forces.Table) *map[uint32]forces.NexthopEgressInfo {
	if t.IPv6() {
		return &e.v6
	}
	return &e.v4
}

// apply sets or deletes a row, or deletes a whole table (checkRow has
// vetted the operation), recording how to reverse it in undo (nil: no undo).
func (e *egressTables) apply(r *forces.Row, undo *[]func()) error {
	e.own()
	e.version = egressVersions.Add(1)
	m := e.of(r.Table)
	if r.Whole {
		old := *m
		*m = map[uint32]forces.NexthopEgressInfo{}
		if undo != nil {
			*undo = append(*undo, func() { *m = old })
		}
		return nil
	}
	if r.Index == 0 || r.Index > forces.MaxNexthopID {
		return reject(forces.ResultValueOutOfRange, "nexthop egress row %d: outside 1..%d", r.Index, forces.MaxNexthopID)
	}
	return putRow(*m, r, r.Egress, "nexthop egress", undo)
}

// putRow sets row r.Index of m to v, or deletes it (r.Op), recording how
// to reverse it in undo (nil: no undo); deleting a row that does not exist
// is refused, naming the table as what.
func putRow[V any](m map[uint32]V, r *forces.Row, v V, what string, undo *[]func()) error {
	old, had := m[r.Index]
	if r.Op == forces.OpSet {
		m[r.Index] = v
	} else {
		if !had {
			return reject(forces.ResultNotFound, "%s row %d does not exist", what, r.Index)
		}
		delete(m, r.Index)
	}
	if undo != nil {
		idx := r.Index
		*undo = append(*undo, func() {
			if had {
				m[idx] = old
			} else {
				delete(m, idx)
			}
		})
	}
	return nil
}

// EgressRow is one nexthop egress row as the FE holds it, for its debug
// view.
type EgressRow struct {
	IPv6    bool   `json:"ipv6"`
	Nexthop uint32 `json:"nexthop"` // the nexthop row
	FE      uint32 `json:"egress_fe"`
	Port    uint32 `json:"egress_port"`
	// Remote: the egress FE is another FE than this one.
	Remote bool `json:"remote"`
}

// egressRows lists the rows, IPv4 then IPv6, each by nexthop row; self is
// this FE's sub-ID.
func (e *egressTables) rows(self uint32) []EgressRow {
	var out []EgressRow
	for _, fam := range []struct {
		v6 bool
		m  map[uint32]forces.NexthopEgressInfo
	}{{false, e.v4}, {true, e.v6}} {
		for _, id := range slices.Sorted(maps.Keys(fam.m)) {
			r := fam.m[id]
			out = append(out, EgressRow{IPv6: fam.v6, Nexthop: id, FE: r.FE, Port: r.Port, Remote: r.FE != self})
		}
	}
	return out
}

// counts returns how many rows there are and how many name another FE
// (self is this FE's sub-ID).
func (e *egressTables) counts(self uint32) (rows, remote int) {
	for _, m := range []map[uint32]forces.NexthopEgressInfo{e.v4, e.v6} {
		for _, r := range m {
			rows++
			if r.FE != self {
				remote++
			}
		}
	}
	return rows, remote
}

// EgressRows returns the nexthop egress rows the CE programmed, by family
// and nexthop row (the FE's debug view of them).
func (a *Agent) EgressRows() []EgressRow {
	var out []EgressRow
	a.do(func() { out = a.table.egress.rows(forces.FESubID(a.id)) })
	return out
}

// statusHandlers are the status socket's paths beside its GET /: GET
// /egress, the nexthop egress rows (EgressRows) as JSON, and GET
// /connected, the connected egress rows (ConnectedRows).
func (a *Agent) statusHandlers() status.Handlers {
	return status.Handlers{"GET /egress": func(w http.ResponseWriter, _ *http.Request) {
		rows := a.EgressRows()
		if rows == nil {
			rows = []EgressRow{}
		}
		status.WriteJSON(w, http.StatusOK, rows)
	}, "GET /connected": func(w http.ResponseWriter, _ *http.Request) {
		rows := a.ConnectedRows()
		if rows == nil {
			rows = []ConnectedRow{}
		}
		status.WriteJSON(w, http.StatusOK, rows)
	}}
}

// withLinks adds the inter-FE link table to a port event m, if the FE has
// links: a second REPORT, on [InterFELinksComponent], beside the port's
// row. The port row says whether the link is up; the table, which port is
// a link to which FE (a CE that does not know the component skips it).
func (a *Agent) withLinks(m *forces.Message) {
	links := a.interFELinks()
	if len(links) == 0 || len(m.LFBs) != 1 || len(m.LFBs[0].Ops) != 1 {
		return
	}
	b, err := forces.MarshalInterFELinks(links)
	if err != nil {
		return
	}
	op := &m.LFBs[0].Ops[0]
	op.Paths = append(op.Paths, forces.PathData{IDs: []uint32{forces.InterFELinksComponent}, FullData: b, HasFullData: true})
}

// interFELinks are the configured inter-FE links with their ports'
// PHYPortIDs (ifindexes), for the CE: a link whose port is not attached is
// left out.
func (a *Agent) interFELinks() []forces.InterFELink {
	var out []forces.InterFELink
	a.do(func() {
		for _, l := range a.cfg.InterFELinks {
			for _, p := range a.ports {
				if p.Name == l.Port {
					out = append(out, forces.InterFELink{Port: uint32(p.Ifindex), PeerFE: l.PeerFE})
				}
			}
		}
	})
	return out
}
