package ce

import (
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
)

// Recursive next-hop resolution, bounded.
//
// A next hop on a connected subnet resolves to itself; any other resolves
// through the longest static route covering it, whose own next hops resolve
// the same way. Those static routes form a graph that an operator can make
// cyclic (a static default whose next hops only the default itself covers
// once the uplinks' subnets are gone) or deep. Resolution walks that graph
// breadth first from the static route a next hop falls into, never visits a
// route twice (so a route never resolves through itself or through a route
// already on its way), stops maxResolveDepth routes deep, and gives up after
// maxResolveSteps next hops examined. One pass (a new set, or a re-resolution
// of every set) works each static route's resolution out once and reuses it
// for every set whose next hops fall into that route.
//
// What a route resolves to is then exactly the connected next hops reachable
// within maxResolveDepth static routes, whatever the order of the work, so a
// re-resolution of unchanged routes never changes them.

// maxResolveDepth bounds the static routes one next hop may resolve through
// (a static route via a static route via ...).
const maxResolveDepth = 8

// maxResolveSteps bounds the next hops one static route's resolution
// examines; a resolution that needs more does not resolve.
const maxResolveSteps = 4096

// unresolved says why a set of next hops resolves to nothing.
type unresolved uint8

const (
	resolvedOK  unresolved = iota // it resolves
	noRoute                       // no connected subnet or static route covers its next hops
	viaDepth                      // only through more than maxResolveDepth static routes
	viaLoop                       // only through static routes that lead back to themselves
	tooMuchWork                   // its resolution needed more than maxResolveSteps steps
	numUnresolved
)

var unresolvedNames = [numUnresolved]string{resolvedOK: "", noRoute: "no_route", viaDepth: "depth", viaLoop: "loop", tooMuchWork: "work"}

func (u unresolved) String() string { return unresolvedNames[u] }

// unresolvedWhy is why s resolves to nothing, or resolvedOK if it
// resolves.
func (s *nhSet) unresolvedWhy() unresolved {
	if s.resolved != nil {
		return resolvedOK
	}
	return s.why
}

// resolution is what a static route's next hops resolve to, or why nothing.
type resolution struct {
	hops []netip.Addr // directly connected, sorted, without duplicates
	why  unresolved
}

// resolver is one pass of resolution: it memoises each static route's
// resolution for the pass. Its zero value (with r) is ready.
type resolver struct {
	r     *RIB
	nodes map[netip.Prefix]resolution
	// seen is a static route's level in the walk under way (1: the route
	// the walk starts from), kept to reuse between walks.
	seen  map[netip.Prefix]int
	queue []netip.Prefix
	buf   []netip.Addr // resolveSet's result
}

// hopKind is what a next hop is reached through.
type hopKind uint8

const (
	hopNone      hopKind = iota // nothing, or it is the router's own address
	hopConnected                // a connected subnet: it is a resolved next hop
	hopStatic                   // the static route returned with it
)

// classify says what h is reached through. One step of work.
func (rv *resolver) classify(h netip.Addr) (hopKind, netip.Prefix) {
	r := rv.r
	r.resolveSteps++
	if !h.IsValid() || r.local[h] > 0 {
		return hopNone, netip.Prefix{}
	}
	if r.coveredBy(h, func(p netip.Prefix) bool { return r.connected[p] > 0 }) {
		return hopConnected, netip.Prefix{}
	}
	var via netip.Prefix
	if r.coveredBy(h, func(p netip.Prefix) bool {
		_, ok := r.tables[srcStatic].get(p)
		via = p
		return ok
	}) {
		return hopStatic, via
	}
	return hopNone, netip.Prefix{}
}

// resolveSet resolves each next hop of a set and returns the union, sorted,
// at most forces.MaxECMPMembers of them; nil if none resolves, and then why.
// The slice is the resolver's until its next resolveSet: a caller keeping it
// clones it (a pass over unchanged sets then allocates nothing for them).
func (rv *resolver) resolveSet(hops []netip.Addr) ([]netip.Addr, unresolved) {
	out := rv.buf[:0]
	defer func() { rv.buf = out[:0] }()
	why := noRoute
	for _, h := range hops {
		kind, via := rv.classify(h)
		switch kind {
		case hopConnected:
			out = append(out, h)
		case hopStatic:
			res := rv.node(via)
			out = append(out, res.hops...)
			why = max(why, res.why)
		}
	}
	if len(out) == 0 {
		return nil, why
	}
	slices.SortFunc(out, netip.Addr.Compare)
	out = slices.Compact(out)
	if len(out) > forces.MaxECMPMembers {
		out = out[:forces.MaxECMPMembers]
	}
	return out, resolvedOK
}

// node returns what static route p's next hops resolve to, worked out once
// a pass.
func (rv *resolver) node(p netip.Prefix) resolution {
	if res, ok := rv.nodes[p]; ok {
		return res
	}
	res := rv.walk(p)
	if rv.nodes == nil {
		rv.nodes = map[netip.Prefix]resolution{}
	}
	rv.nodes[p] = res
	return res
}

// walk resolves static route p breadth first: the connected next hops
// reachable from it through at most maxResolveDepth static routes (p
// included), each route visited once.
func (rv *resolver) walk(p netip.Prefix) resolution {
	r := rv.r
	if rv.seen == nil {
		rv.seen = map[netip.Prefix]int{}
	}
	clear(rv.seen)
	rv.seen[p] = 1
	queue := append(rv.queue[:0], p)
	defer func() { rv.queue = queue[:0] }()
	var out []netip.Addr
	start := r.resolveSteps
	revisited, deeper := false, false
	for i := 0; i < len(queue); i++ {
		u := queue[i]
		level := rv.seen[u]
		if level > maxResolveDepth {
			deeper = true
			continue
		}
		v, _ := r.tables[srcStatic].get(u)
		for _, h := range r.sets[v.set()].hops {
			if r.resolveSteps-start >= maxResolveSteps {
				return resolution{why: tooMuchWork}
			}
			kind, via := rv.classify(h)
			switch kind {
			case hopConnected:
				out = append(out, h)
			case hopStatic:
				if _, ok := rv.seen[via]; ok {
					revisited = true
					continue
				}
				rv.seen[via] = level + 1
				queue = append(queue, via)
			}
		}
	}
	if len(out) > 0 {
		slices.SortFunc(out, netip.Addr.Compare)
		return resolution{hops: slices.Compact(out)}
	}
	switch {
	case revisited && rv.cyclic(p):
		return resolution{why: viaLoop}
	case deeper:
		return resolution{why: viaDepth}
	}
	return resolution{why: noRoute}
}

// cyclic reports whether the static routes the last walk expanded, from p,
// lead back to one of themselves. Only asked of a walk that found nothing.
func (rv *resolver) cyclic(p netip.Prefix) bool {
	const (
		onPath = iota + 1
		done
	)
	state := make(map[netip.Prefix]int, len(rv.seen))
	var visit func(u netip.Prefix) bool
	visit = func(u netip.Prefix) bool {
		state[u] = onPath
		v, _ := rv.r.tables[srcStatic].get(u)
		for _, h := range rv.r.sets[v.set()].hops {
			kind, via := rv.classify(h)
			if kind != hopStatic || rv.seen[via] == 0 || rv.seen[via] > maxResolveDepth {
				continue // beyond the walk: not what it gave up on
			}
			switch state[via] {
			case onPath:
				return true
			case 0:
				if visit(via) {
					return true
				}
			}
		}
		state[u] = done
		return false
	}
	return visit(p)
}

// UnresolvedRoute is a static route whose next hops resolve to no directly
// connected one, and why.
type UnresolvedRoute struct {
	Prefix netip.Prefix `json:"prefix"`
	Reason string       `json:"reason"` // "no_route", "depth", "loop", "work"
}

// unresolvedRoutes counts the routes of every source whose next hops
// resolve to nothing, by reason (every reason, zeros included), and lists
// the static ones, sorted.
func (r *RIB) unresolvedRoutes() (map[string]int, []UnresolvedRoute) {
	counts := make(map[string]int, numUnresolved-1)
	for why := noRoute; why < numUnresolved; why++ {
		counts[why.String()] = 0
	}
	for id := 1; id < len(r.sets); id++ {
		if s := &r.sets[id]; s.refs > 0 && s.resolved == nil {
			counts[s.unresolvedWhy().String()] += s.refs
		}
	}
	var static []UnresolvedRoute
	add := func(p netip.Prefix, v srcRoute) {
		if s := &r.sets[v.set()]; s.resolved == nil {
			static = append(static, UnresolvedRoute{Prefix: p, Reason: s.unresolvedWhy().String()})
		}
	}
	for k, v := range r.tables[srcStatic].v4.All() {
		add(k.Prefix(), v)
	}
	for p, v := range r.tables[srcStatic].v6 {
		add(p, v)
	}
	slices.SortFunc(static, func(a, b UnresolvedRoute) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return counts, static
}

// warnStatics logs the static routes that stopped resolving for a loop,
// depth or work (a configuration to fix, not a port down), once, and those
// that resolve again.
func (r *RIB) warnStatics() {
	if r.log == nil {
		return
	}
	var bad map[netip.Prefix]unresolved // most often none: no map
	check := func(p netip.Prefix, v srcRoute) {
		s := &r.sets[v.set()]
		if s.resolved != nil || s.why < viaDepth {
			return
		}
		if bad == nil {
			bad = map[netip.Prefix]unresolved{}
		}
		bad[p] = s.why
		if r.warned[p] != s.why {
			r.log.Warn("rib: static route does not resolve, not installed", "prefix", p, "next_hops", s.hops, "reason", s.why.String())
		}
	}
	for k, v := range r.tables[srcStatic].v4.All() {
		check(k.Prefix(), v)
	}
	for p, v := range r.tables[srcStatic].v6 {
		check(p, v)
	}
	for p := range r.warned {
		if _, still := bad[p]; !still {
			if v, ok := r.tables[srcStatic].get(p); ok && r.sets[v.set()].resolved != nil {
				r.log.Info("rib: static route resolves again", "prefix", p, "resolved", r.sets[v.set()].resolved)
			}
		}
	}
	r.warned = bad
}
