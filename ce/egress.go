package ce

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
)

// One port space over several FEs (issue 23): the CE knows every FE's ports
// and tells every FE, for each nexthop row, which FE (and which port of it)
// the gateway is behind: the nexthop egress rows (forces.TableIPv4Egress,
// TableIPv6Egress). The loop keeps them beside the FIB and sends their
// changes with the FIB's, through the same pending queues, to the FEs that
// list the egress LFBs; every FE gets the same rows.
//
// The egress of a gateway is the port, among the ports that are up of the
// associated FEs, whose address prefix covers it most specifically; of
// equally specific ones, the lowest FE ID's, then that FE's lowest port
// ID's. A gateway behind no such port has no row (each FE resolves it
// through its own kernel, as before). An FE whose association ends is no
// egress from that moment, though the RIB keeps its prefixes for
// fe_hold_time (an FE with inter-FE links leaving others behind, for
// cluster_fe_hold_time, 0 by default: see holdTime): the others could not
// reach its ports through it anyway.
//
// When several FEs have the gateway's subnet, one is picked; egressCandidates
// lists them all, the base for spreading a nexthop's traffic across them
// later (per flow, as an ECMP group of (FE, port) members).

// egressRow is a nexthop's egress and its gateway (which says its family).
type egressRow struct {
	forces.NexthopEgressInfo
	gw netip.Addr
}

// egress is the loop's nexthop egress state.
type egress struct {
	ports map[forces.ID][]forces.PortInfo // the associated FEs' ports
	order []forces.ID                     // ports' keys, sorted
	rows  [2]map[uint32]egressRow         // by family (0: IPv4) and nexthop row
	conn  connEgress                      // the connected egress rows (connegress.go)
}

func newEgress() *egress {
	return &egress{ports: map[forces.ID][]forces.PortInfo{}, rows: [2]map[uint32]egressRow{{}, {}}}
}

func famOf(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// setPorts records an FE's ports; nil forgets the FE (it left).
func (e *egress) setPorts(fe forces.ID, ports []forces.PortInfo) {
	defer func() { e.order = slices.Sorted(maps.Keys(e.ports)) }()
	if ports == nil {
		delete(e.ports, fe)
		return
	}
	ports = slices.Clone(ports)
	slices.SortFunc(ports, func(a, b forces.PortInfo) int { return cmp.Compare(a.ID, b.ID) })
	e.ports[fe] = ports
}

// egressCandidates returns the ports, among the ports that are up of the
// associated FEs, whose prefix covers gw most specifically, by FE ID then
// port ID: the first is gw's egress.
func (e *egress) egressCandidates(gw netip.Addr) []forces.NexthopEgressInfo {
	var out []forces.NexthopEgressInfo
	best := -1
	for _, fe := range e.order {
		for _, p := range e.ports[fe] {
			if !p.Up {
				continue
			}
			for _, a := range p.Addrs {
				if a.Addr().Is4() != gw.Is4() || !a.Masked().Contains(gw) || a.Bits() < best {
					continue
				}
				if a.Bits() > best {
					best, out = a.Bits(), out[:0]
				}
				c := forces.NexthopEgressInfo{FE: forces.FESubID(fe), Port: p.ID}
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// set brings nexthop id's row to gw's egress, appending the change to out
// if it changes.
func (e *egress) set(id uint32, gw netip.Addr, out []Change) []Change {
	rows := e.rows[famOf(gw)]
	old, had := rows[id]
	c := e.egressCandidates(gw)
	if len(c) == 0 {
		return e.del(id, gw, out)
	}
	if had && old.NexthopEgressInfo == c[0] && old.gw == gw {
		return out
	}
	rows[id] = egressRow{NexthopEgressInfo: c[0], gw: gw}
	return append(out, Change{Kind: EgressSet, ID: id, NextHop: gw, Egress: c[0]})
}

func (e *egress) del(id uint32, gw netip.Addr, out []Change) []Change {
	rows := e.rows[famOf(gw)]
	if _, had := rows[id]; !had {
		return out
	}
	delete(rows, id)
	return append(out, Change{Kind: EgressDel, ID: id, NextHop: gw})
}

// follow appends to out the egress changes that the FIB changes in need:
// a new nexthop gets its row, a deleted one loses it. out may be in.
func (e *egress) follow(in, out []Change) []Change {
	for i := range in {
		switch c := &in[i]; c.Kind {
		case NexthopSet:
			out = e.set(c.ID, c.NextHop, out)
		case NexthopDel:
			out = e.del(c.ID, c.NextHop, out)
		}
	}
	return out
}

// recompute appends to out the changes that bring every nexthop's row to
// what the FEs' ports now say (after an FE's ports changed or it left).
func (e *egress) recompute(fib fibs, out []Change) []Change {
	for _, f := range []*FIB{fib.v4, fib.v6} {
		for gw, n := range f.nexthops {
			out = e.set(n.id, gw, out)
		}
	}
	for fam, rows := range e.rows {
		f := fib.v4
		if fam == 1 {
			f = fib.v6
		}
		for id, r := range rows {
			if n, ok := f.nexthops[r.gw]; !ok || n.id != id {
				out = e.del(id, r.gw, out) // cannot happen: follow deleted it
			}
		}
	}
	return out
}

// snapshot is every row as EgressSet changes, IPv4 then IPv6, by nexthop
// row: the full sync's.
func (e *egress) snapshot() []Change {
	var out []Change
	for _, rows := range e.rows {
		for _, id := range slices.Sorted(maps.Keys(rows)) {
			r := rows[id]
			out = append(out, Change{Kind: EgressSet, ID: id, NextHop: r.gw, Egress: r.NexthopEgressInfo})
		}
	}
	return out
}

// counts returns how many nexthops each FE (by sub-ID) is the egress of.
func (e *egress) counts() map[uint32]int {
	n := map[uint32]int{}
	for _, rows := range e.rows {
		for _, r := range rows {
			n[r.FE]++
		}
	}
	return n
}

// FELink is an inter-FE link an FE reported: its port and the FE at the
// other end, and whether the port is up.
type FELink struct {
	Port     uint32 `json:"port"` // the PHYPortID (ifindex)
	PortName string `json:"port_name"`
	PeerFE   uint32 `json:"peer_fe"`
	Up       bool   `json:"up"`
	// PeerAssociated: the peer FE is associated with this CE.
	PeerAssociated bool `json:"peer_associated"`
}

// State is the link's state in words: "up" or "down", with " (peer not
// associated)" when the FE at its other end is not.
func (l FELink) State() string {
	s := "down"
	if l.Up {
		s = "up"
	}
	if !l.PeerAssociated {
		s += " (peer not associated)"
	}
	return s
}

// linksEvent takes the inter-FE link table a port event carries (beside
// the port's row) for the FE's links; one that does not parse is logged
// and leaves them as they were.
func (s *session) linksEvent(b []byte) {
	links, err := forces.ParseInterFELinks(b)
	if err != nil {
		s.rejected.Warn(s.ce.log, "forces: bad inter-FE link table in a port event", "fe", s.fe, "err", err)
		return
	}
	s.mu.Lock()
	s.info.links = links
	s.mu.Unlock()
}

// interFELinks returns the FE's inter-FE links with their ports' names and state.
func (f feInfo) interFELinks() []FELink {
	var out []FELink
	for _, l := range f.links {
		fl := FELink{Port: l.Port, PeerFE: l.PeerFE}
		for _, p := range f.ports {
			if p.ID == l.Port {
				fl.PortName, fl.Up = p.Name, p.Up
			}
		}
		out = append(out, fl)
	}
	return out
}

// inCluster says whether the FE declared inter-FE links: it is one FE of
// a router made of several.
func (s *session) inCluster() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.info.links) > 0
}
