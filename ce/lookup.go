package ce

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
)

// Route lookups ("ip route get"): what the CE's FIB says a packet to an
// address does, and what each FE's datapath does with it (FIBLookup of
// forces). Verify (verify.go) compares the two over the whole table.

// What a lookup finds, on the CE's side.
const (
	LookupRoute     = "route"     // a FIB route
	LookupConnected = "connected" // a port subnet of an FE: the destination is the neighbour
	LookupLocal     = "local"     // an address of the router (an FE's port)
	LookupNone      = "no_route"
)

// RouteLookup is the CE's longest match for an address.
type RouteLookup struct {
	Address netip.Addr
	Kind    string       // LookupRoute, LookupConnected, LookupLocal or LookupNone
	Prefix  netip.Prefix // the matching FIB route or port subnet
	// NextHops are the FIB route's resolved (directly connected) next
	// hops; none for a connected subnet.
	NextHops []netip.Addr
	// Egress is, per next hop (for a connected subnet, the one entry with
	// no gateway), the port it leaves by, when an FE's port covers it.
	Egress []HopEgress
	// LocalOf are the FEs one of whose ports has the address.
	LocalOf []forces.ID
	// Routes are the RIB's routes for Prefix, every origin (RouteGet only).
	Routes []RouteInfo
}

// HopEgress is the port a next hop is behind.
type HopEgress struct {
	Gateway netip.Addr // invalid: the connected subnet's
	FE      forces.ID  // 0: behind no FE's port that is up (each FE asks its kernel)
	Port    uint32     // PHYPortID on FE
	Name    string     // the port's name on FE
}

// FEView is one FE's answer for an address.
type FEView struct {
	FE     forces.ID
	Name   string
	Lookup forces.FIBLookup
	Ports  map[uint32]string // the FE's port names by PHYPortID
	Err    error             // the FE could not answer (the rest is empty)
	// Differs says how the FE disagrees with the CE; empty if it agrees.
	Differs string
}

// RouteGet is one address looked up on the CE and on every associated FE.
type RouteGet struct {
	RouteLookup
	FEs []FEView
}

// apiLookup asks the loop for the CE's lookup of addrs and the FEs to ask.
type apiLookup struct {
	addrs  []netip.Addr
	routes bool // fill RouteLookup.Routes
	reply  chan lookupReply
}

type lookupReply struct {
	ce  []RouteLookup
	fes []*session // associated, by ID
}

// lookupOnLoop answers an apiLookup on the loop.
func lookupOnLoop(rib *RIB, eg *egress, fes map[forces.ID]*session, m apiLookup) {
	out := make([]RouteLookup, len(m.addrs))
	conn := eg.connectedPrefixes()
	for i, a := range m.addrs {
		out[i] = rib.lookup(eg, conn, a)
		if m.routes && out[i].Kind == LookupRoute {
			out[i].Routes = rib.list(RouteFilter{Prefix: out[i].Prefix})
		}
	}
	ss := make([]*session, 0, len(fes))
	for _, s := range fes {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b *session) int { return int(a.fe) - int(b.fe) })
	m.reply <- lookupReply{ce: out, fes: ss}
}

// lookup is the longest match of a over the FIB and the FEs' port subnets
// (which the FEs program themselves, shadowing a FIB route of the same
// prefix).
func (r *RIB) lookup(eg *egress, conn map[netip.Prefix]forces.NexthopEgressInfo, a netip.Addr) RouteLookup {
	l := RouteLookup{Address: a, Kind: LookupNone}
	for _, fe := range eg.order {
		for _, p := range eg.ports[fe] {
			for _, pa := range p.Addrs {
				if p.Up && pa.Addr() == a && !slices.Contains(l.LocalOf, fe) {
					l.LocalOf = append(l.LocalOf, fe)
				}
			}
		}
	}
	if len(l.LocalOf) > 0 {
		l.Kind = LookupLocal
	}
	fib := r.fibs.v4
	if !a.Is4() {
		fib = r.fibs.v6
	}
	for bits := a.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(a, bits).Masked()
		if e, ok := conn[p]; ok {
			if l.Kind == LookupNone {
				l.Kind = LookupConnected
			}
			l.Prefix = p
			l.Egress = []HopEgress{eg.hopEgress(netip.Addr{}, e)}
			return l
		}
		if hops := fib.LookupAll(p); hops != nil {
			if l.Kind == LookupNone {
				l.Kind = LookupRoute
			}
			l.Prefix, l.NextHops = p, hops
			for _, h := range hops {
				var e forces.NexthopEgressInfo
				if cs := eg.egressCandidates(h); len(cs) > 0 {
					e = cs[0]
				}
				l.Egress = append(l.Egress, eg.hopEgress(h, e))
			}
			return l
		}
	}
	return l
}

// hopEgress names egress e (FE 0: none) of gateway gw.
func (e *egress) hopEgress(gw netip.Addr, in forces.NexthopEgressInfo) HopEgress {
	h := HopEgress{Gateway: gw}
	if in.FE == 0 {
		return h
	}
	for _, fe := range e.order {
		if forces.FESubID(fe) != in.FE {
			continue
		}
		h.FE, h.Port = fe, in.Port
		for _, p := range e.ports[fe] {
			if p.ID == in.Port {
				h.Name = p.Name
			}
		}
	}
	return h
}

// lookupCE runs the CE's side of a lookup on the loop.
func (c *CE) lookupCE(ctx context.Context, addrs []netip.Addr, routes bool) (lookupReply, error) {
	reply := make(chan lookupReply, 1)
	if err := c.toLoop(ctx, apiLookup{addrs: addrs, routes: routes, reply: reply}); err != nil {
		return lookupReply{}, err
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return lookupReply{}, ctx.Err()
	}
}

// GetRoute looks addr up in the CE's FIB and on every associated FE, and
// says where an FE disagrees. addr must be an IPv4 or IPv6 address.
func (c *CE) GetRoute(ctx context.Context, addr netip.Addr) (RouteGet, error) {
	if !addr.IsValid() {
		return RouteGet{}, fmt.Errorf("%w: address: no address", ErrInvalidRoute)
	}
	addr = addr.Unmap()
	r, err := c.lookupCE(ctx, []netip.Addr{addr}, true)
	if err != nil {
		return RouteGet{}, err
	}
	g := RouteGet{RouteLookup: r.ce[0]}
	for _, s := range r.fes {
		name, ports := s.names()
		v := FEView{FE: s.fe, Name: name, Ports: ports}
		ls, err := s.queryLookups(ctx, []netip.Addr{addr})
		switch {
		case err != nil:
			v.Err = err
		case ls[0].err != nil:
			v.Err = ls[0].err
		default:
			v.Lookup = ls[0].l
			v.Differs = differs(g.RouteLookup, s.fe, v.Lookup)
		}
		g.FEs = append(g.FEs, v)
	}
	return g, nil
}

// names are the FE's name and its ports' by PHYPortID, as discovery and
// port events last reported them.
func (s *session) names() (string, map[uint32]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[uint32]string, len(s.info.ports))
	for _, p := range s.info.ports {
		m[p.ID] = p.Name
	}
	return s.info.name, m
}

// feLookup is an FE's answer for one address, or why there is none.
type feLookup struct {
	l   forces.FIBLookup
	err error
}

// lookupBatch is the most addresses one Query asks an FE for: the answers,
// with ECMP groups of 16 (about 830 bytes each), fit one message.
const lookupBatch = 256

// queryLookups asks the FE for the FIB lookup of every address, in Queries
// of at most lookupBatch.
func (s *session) queryLookups(ctx context.Context, addrs []netip.Addr) ([]feLookup, error) {
	out := make([]feLookup, 0, len(addrs))
	for chunk := range slices.Chunk(addrs, lookupBatch) {
		m, err := s.query(ctx, "FIB lookup", forces.LookupSelect(chunk))
		if err != nil {
			return nil, err
		}
		items := forces.Items(m)
		if len(items) != len(chunk) {
			return nil, fmt.Errorf("FE %s FIB lookup: %d answers for %d addresses", s.fe, len(items), len(chunk))
		}
		for i, it := range items {
			var r feLookup
			switch {
			case it.Result != nil && forces.ResultCode(*it.Result) != forces.ResultSuccess:
				r.err = fmt.Errorf("FE %s FIB lookup of %s: %s", s.fe, chunk[i], forces.ResultCode(*it.Result))
			case !it.HasFullData:
				r.err = fmt.Errorf("FE %s FIB lookup of %s: no data in the answer", s.fe, chunk[i])
			default:
				if r.l, err = forces.ParseFIBLookup(it.FullData); err != nil {
					r.err = fmt.Errorf("FE %s FIB lookup of %s: %w", s.fe, chunk[i], err)
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// differs says how FE fe's answer l disagrees with the CE's lookup c ("" if
// it agrees): the kind, the set of gateways, and where the CE knows the
// port a next hop is behind, the port (on fe) or the FE (behind another).
// Whether the neighbour's MAC is known yet is no disagreement.
func differs(c RouteLookup, fe forces.ID, l forces.FIBLookup) string {
	want := c.Kind
	if want == LookupLocal && !slices.Contains(c.LocalOf, fe) {
		want = LookupRoute // another FE's address: forwarded there
		if c.Prefix.IsValid() && len(c.NextHops) == 0 {
			want = LookupConnected
		}
		if !c.Prefix.IsValid() {
			want = LookupNone
		}
	}
	got := l.Kind.String()
	switch {
	case want == LookupLocal || want == LookupNone:
		if got != want {
			return fmt.Sprintf("CE: %s; FE: %s", want, describeFE(l))
		}
		return ""
	case l.Kind != forces.FIBLookupRoute:
		return fmt.Sprintf("CE: %s; FE: %s", describeCE(c), got)
	}
	var gws []netip.Addr
	for _, h := range l.Hops {
		gws = append(gws, h.Gateway)
	}
	wantGWs := slices.Clone(c.NextHops)
	if want == LookupConnected {
		wantGWs = []netip.Addr{{}}
	}
	if !sameAddrs(gws, wantGWs) {
		return fmt.Sprintf("CE: %s; FE: %s", describeCE(c), describeFE(l))
	}
	sub := forces.FESubID(fe)
	for _, e := range c.Egress {
		if e.FE == 0 {
			continue
		}
		for _, h := range l.Hops {
			if h.Gateway != e.Gateway {
				continue
			}
			eSub := forces.FESubID(e.FE)
			switch {
			case eSub == sub && h.RemoteFE == 0 && h.Port != e.Port:
				return fmt.Sprintf("next hop %s: CE: port %d (%s); FE: port %d", hopName(e.Gateway), e.Port, e.Name, h.Port)
			case eSub != sub && h.RemoteFE != 0 && (h.RemoteFE != eSub || h.RemotePort != e.Port):
				return fmt.Sprintf("next hop %s: CE: FE %s port %d; FE: FE %d port %d", hopName(e.Gateway), e.FE, e.Port, h.RemoteFE, h.RemotePort)
			}
		}
	}
	return ""
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func hopName(a netip.Addr) string {
	if !a.IsValid() {
		return "connected"
	}
	return a.String()
}

func describeCE(c RouteLookup) string {
	switch c.Kind {
	case LookupRoute:
		return fmt.Sprintf("%s via %s", c.Prefix, joinHops(c.NextHops))
	case LookupConnected:
		return fmt.Sprintf("%s connected", c.Prefix)
	}
	return c.Kind
}

func describeFE(l forces.FIBLookup) string {
	if l.Kind != forces.FIBLookupRoute {
		return l.Kind.String()
	}
	if len(l.Hops) == 0 {
		return fmt.Sprintf("route to empty nexthop %d", l.ID)
	}
	var gws []netip.Addr
	for _, h := range l.Hops {
		gws = append(gws, h.Gateway)
	}
	return "via " + joinHops(gws)
}

func joinHops(as []netip.Addr) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += ", "
		}
		s += hopName(a)
	}
	return s
}
