package ce

import (
	"log/slog"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/flatmap"
	"github.com/splitplane/splitplane/internal/prefix"
)

// The RIB: every route source's routes, the choice between them by
// administrative distance, and the resolution of their next hops to
// directly connected addresses, feeding the FIB.
//
// A source's route is a prefix and a set of next hops as the source gave
// them (a BGP next hop may be several hops away). Sets are interned: the
// million routes of a full table share a few hundred sets, and each set's
// resolution (through the FEs' connected prefixes and the static routes,
// recursively) is worked out once. When a connected prefix or a static
// route changes, the sets whose resolution changes are found, and only the
// routes that use them are chosen and installed again. Recursive
// resolution is bounded (loops, depth, work): resolve.go.

// source is where a route comes from, in the order that breaks a tie of
// distances.
type source uint8

const (
	srcStatic source = iota
	srcAPI
	srcBGP
	numSources
)

// Default administrative distances.
const (
	DefaultDistanceStatic = 1
	DefaultDistanceAPI    = 5
	DefaultDistanceEBGP   = 20
	DefaultDistanceIBGP   = 200
)

// srcRoute is one source's route for a prefix, packed: the distance in the
// top byte, the next-hop set's ID below.
type srcRoute uint32

func mkRoute(distance uint8, set uint32) srcRoute { return srcRoute(uint32(distance)<<24 | set) }
func (r srcRoute) distance() uint8                { return uint8(r >> 24) }
func (r srcRoute) set() uint32                    { return uint32(r) & 0xFFFFFF }

// maxSets is how many distinct next-hop sets the RIB can hold.
const maxSets = 1 << 24

// srcTable is one source's routes.
type srcTable struct {
	v4 *flatmap.Map[prefix.V4, srcRoute]
	v6 map[netip.Prefix]srcRoute
}

func newSrcTable() srcTable {
	return srcTable{v4: flatmap.New[prefix.V4, srcRoute](0), v6: map[netip.Prefix]srcRoute{}}
}

func (t srcTable) len() int { return t.v4.Len() + len(t.v6) }

func (t srcTable) get(p netip.Prefix) (srcRoute, bool) {
	if p.Addr().Is4() {
		return t.v4.Get(prefix.FromV4(p))
	}
	r, ok := t.v6[p]
	return r, ok
}

func (t srcTable) put(p netip.Prefix, r srcRoute) (old srcRoute, had bool) {
	if p.Addr().Is4() {
		k := prefix.FromV4(p)
		old, had = t.v4.Get(k)
		t.v4.Put(k, r)
		return old, had
	}
	old, had = t.v6[p]
	t.v6[p] = r
	return old, had
}

func (t srcTable) del(p netip.Prefix) (old srcRoute, had bool) {
	if p.Addr().Is4() {
		k := prefix.FromV4(p)
		if old, had = t.v4.Get(k); had {
			t.v4.Del(k)
		}
		return old, had
	}
	if old, had = t.v6[p]; had {
		delete(t.v6, p)
	}
	return old, had
}

// nhSet is an interned set of next hops and its resolution.
type nhSet struct {
	hops     []netip.Addr // sorted, as the sources gave them
	refs     int
	resolved []netip.Addr // directly connected next hops; nil: unresolved
	why      unresolved   // why resolved is nil
}

// RIB holds the routes of every source and installs the chosen ones into the
// FIBs. It is owned by the CE loop.
type RIB struct {
	fibs      fibs
	distances [numSources]uint8 // static, api; BGP's are per route (eBGP or iBGP)
	ebgp      uint8
	ibgp      uint8
	tables    [numSources]srcTable

	sets     []nhSet // by ID; 0 is never used
	freeSets []uint32
	byKey    map[string]uint32     // sets of several next hops
	byAddr   map[netip.Addr]uint32 // sets of one next hop

	// connected counts the FEs' port prefixes that are up (several FEs may
	// share a subnet); local are the ports' own addresses, never a next hop.
	connected map[netip.Prefix]int
	local     map[netip.Addr]int
	// byFE is what each FE reported, to take it back when it changes or goes.
	byFE map[forces.ID][]netip.Prefix

	// resolveSteps counts the next hops resolution examined, ever: the work
	// resolution does, which tests bound.
	resolveSteps uint64
	// log, when set, hears of static routes that stop resolving for a
	// loop, depth or work, and resolve again; warned is those routes.
	log    *slog.Logger
	warned map[netip.Prefix]unresolved
}

// NewRIB returns an empty RIB feeding fib, with distances d (zero fields:
// the defaults).
func NewRIB(fib fibs, d Distances) *RIB {
	or := func(v, def uint8) uint8 {
		if v == 0 {
			return def
		}
		return v
	}
	r := &RIB{
		fibs: fib, ebgp: or(d.EBGP, DefaultDistanceEBGP), ibgp: or(d.IBGP, DefaultDistanceIBGP),
		sets: make([]nhSet, 1), byKey: map[string]uint32{}, byAddr: map[netip.Addr]uint32{},
		connected: map[netip.Prefix]int{}, local: map[netip.Addr]int{}, byFE: map[forces.ID][]netip.Prefix{},
	}
	r.distances[srcStatic] = or(d.Static, DefaultDistanceStatic)
	r.distances[srcAPI] = or(d.API, DefaultDistanceAPI)
	for i := range r.tables {
		r.tables[i] = newSrcTable()
	}
	return r
}

// Len is the number of routes in the FIBs.
func (r *RIB) Len() int { return r.fibs.Len() }

// SetBGP makes hops (one or more, ECMP) BGP's next hops for p and installs
// whatever p's choice becomes. ok is false when a table was full.
func (r *RIB) SetBGP(p netip.Prefix, hops []netip.Addr, ibgp bool, out []Change) ([]Change, bool) {
	d := r.ebgp
	if ibgp {
		d = r.ibgp
	}
	return r.set(srcBGP, p, hops, d, out)
}

// prefetch starts loading the slots a set or delete of src's route for p
// will look at first, in src's table and the FIB, for a loop over a batch
// of routes to call prefetch.Ahead routes early (a million-entry table
// misses the cache on nearly every route; prefetched, the misses overlap).
func (r *RIB) prefetch(src source, p netip.Prefix) {
	if !p.Addr().Is4() {
		return
	}
	k := prefix.FromV4(p.Masked())
	r.tables[src].v4.Prefetch(k)
	r.fibs.v4.routes.v4.Prefetch(k)
}

// DeleteBGP withdraws BGP's route for p.
func (r *RIB) DeleteBGP(p netip.Prefix, out []Change) []Change { return r.del(srcBGP, p, out) }

// SetStatic adds or replaces a static route (distance 0: the default).
func (r *RIB) SetStatic(p netip.Prefix, hops []netip.Addr, distance uint8, out []Change) ([]Change, bool) {
	if distance == 0 {
		distance = r.distances[srcStatic]
	}
	out, ok := r.set(srcStatic, p, hops, distance, out)
	return r.reresolve(out), ok
}

// DeleteStatic removes a static route.
func (r *RIB) DeleteStatic(p netip.Prefix, out []Change) []Change {
	return r.reresolve(r.del(srcStatic, p, out))
}

// Statics lists the static routes, for a reload to compare against.
func (r *RIB) Statics() map[netip.Prefix]StaticRoute {
	out := map[netip.Prefix]StaticRoute{}
	add := func(p netip.Prefix, v srcRoute) {
		s := StaticRoute{Prefix: p.String(), Distance: v.distance()}
		if s.Distance == r.distances[srcStatic] {
			s.Distance = 0
		}
		for _, a := range r.sets[v.set()].hops {
			s.NextHops = append(s.NextHops, a.String())
		}
		out[p] = s
	}
	for k, v := range r.tables[srcStatic].v4.All() {
		add(k.Prefix(), v)
	}
	for p, v := range r.tables[srcStatic].v6 {
		add(p, v)
	}
	return out
}

// SetConnected replaces what FE fe reports as its ports' prefixes (those of
// ports that are up), re-resolving the routes whose next hops it changes.
// A nil prefixes forgets the FE.
func (r *RIB) SetConnected(fe forces.ID, prefixes []netip.Prefix, out []Change) []Change {
	for _, p := range r.byFE[fe] {
		if r.connected[p.Masked()]--; r.connected[p.Masked()] <= 0 {
			delete(r.connected, p.Masked())
		}
		if isHost(p) {
			if r.local[p.Addr()]--; r.local[p.Addr()] <= 0 {
				delete(r.local, p.Addr())
			}
		}
	}
	delete(r.byFE, fe)
	if len(prefixes) > 0 {
		r.byFE[fe] = slices.Clone(prefixes)
	}
	for _, p := range prefixes {
		r.connected[p.Masked()]++
		if isHost(p) {
			r.local[p.Addr()]++
		}
	}
	return r.reresolve(out)
}

// isHost reports whether p names a port's own address (10.0.0.1/24), not
// only a subnet (10.0.0.0/24).
func isHost(p netip.Prefix) bool { return p.Addr() != p.Masked().Addr() }

// Connected lists the connected prefixes.
func (r *RIB) Connected() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(r.connected))
	for p := range r.connected {
		out = append(out, p)
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

func (r *RIB) set(src source, p netip.Prefix, hops []netip.Addr, distance uint8, out []Change) ([]Change, bool) {
	p = p.Masked()
	id, ok := r.intern(hops)
	if !ok {
		return r.del(src, p, out), false
	}
	old, had := r.tables[src].put(p, mkRoute(distance, id))
	if had {
		if old == mkRoute(distance, id) {
			r.release(id) // the same route again: keep one reference
			return out, true
		}
		r.release(old.set())
	}
	return r.installKnown(p, src, mkRoute(distance, id), out)
}

func (r *RIB) del(src source, p netip.Prefix, out []Change) []Change {
	p = p.Masked()
	old, had := r.tables[src].del(p)
	if !had {
		return out
	}
	r.release(old.set())
	return r.installOrKeep(p, out)
}

// installOrKeep installs p's choice, or deletes p when no source has it.
func (r *RIB) installOrKeep(p netip.Prefix, out []Change) []Change {
	out, _ = r.install(p, out)
	return out
}

// choose returns p's chosen route and its source: the lowest distance (a
// tie: the first source).
func (r *RIB) choose(p netip.Prefix) (best srcRoute, from source, found bool) {
	return r.chooseKnown(p, numSources, 0)
}

// chooseKnown is choose when source known (numSources: none) is already
// known to have route v for p: its table is not looked up again.
func (r *RIB) chooseKnown(p netip.Prefix, known source, v srcRoute) (best srcRoute, from source, found bool) {
	for src := range numSources {
		w, ok := v, true
		if src != known {
			w, ok = r.tables[src].get(p)
		}
		if ok && (!found || w.distance() < best.distance()) {
			best, from, found = w, src, true
		}
	}
	return best, from, found
}

// install puts p's chosen route into the FIB: the lowest distance (a tie:
// the first source), through its set's resolved next hops. With no route,
// or an unresolved one, p leaves the FIB.
func (r *RIB) install(p netip.Prefix, out []Change) ([]Change, bool) {
	return r.installKnown(p, numSources, 0, out)
}

// installKnown is install when source known has route v for p.
func (r *RIB) installKnown(p netip.Prefix, known source, v srcRoute, out []Change) ([]Change, bool) {
	best, _, found := r.chooseKnown(p, known, v)
	fib := r.fibs.of(p)
	if !found {
		return fib.Delete(p, out), true
	}
	hops := r.sets[best.set()].resolved
	switch len(hops) {
	case 0:
		return fib.Delete(p, out), true
	case 1:
		return fib.Set(p, hops[0], out)
	}
	return fib.SetECMP(p, hops, out)
}

// intern returns the ID of the set of hops, with a reference taken.
func (r *RIB) intern(hops []netip.Addr) (uint32, bool) {
	if len(hops) == 1 {
		if id, ok := r.byAddr[hops[0]]; ok {
			r.sets[id].refs++
			return id, true
		}
	}
	var key string
	if len(hops) > 1 {
		hops = slices.Clone(hops)
		slices.SortFunc(hops, netip.Addr.Compare)
		hops = slices.Compact(hops)
		key = groupKey(hops)
		if id, ok := r.byKey[key]; ok {
			r.sets[id].refs++
			return id, true
		}
	}
	var id uint32
	switch {
	case len(r.freeSets) > 0:
		id = r.freeSets[len(r.freeSets)-1]
		r.freeSets = r.freeSets[:len(r.freeSets)-1]
	case len(r.sets) < maxSets:
		id = uint32(len(r.sets))
		r.sets = append(r.sets, nhSet{})
	default:
		return 0, false
	}
	s := nhSet{hops: slices.Clone(hops), refs: 1}
	rv := resolver{r: r}
	res, why := rv.resolveSet(s.hops)
	s.resolved, s.why = slices.Clone(res), why
	r.sets[id] = s
	if len(hops) == 1 {
		r.byAddr[hops[0]] = id
	} else {
		r.byKey[key] = id
	}
	return id, true
}

func (r *RIB) release(id uint32) {
	s := &r.sets[id]
	if s.refs--; s.refs > 0 {
		return
	}
	if len(s.hops) == 1 {
		delete(r.byAddr, s.hops[0])
	} else {
		delete(r.byKey, groupKey(s.hops))
	}
	*s = nhSet{}
	r.freeSets = append(r.freeSets, id)
}

// coveredBy reports whether has holds for a prefix covering h, trying the
// longest first.
func (r *RIB) coveredBy(h netip.Addr, has func(netip.Prefix) bool) bool {
	for bits := h.BitLen(); bits >= 0; bits-- {
		p, _ := h.Prefix(bits)
		if has(p) {
			return true
		}
	}
	return false
}

// reresolve works every set's resolution out again and installs again the
// routes of every set whose resolution changed.
func (r *RIB) reresolve(out []Change) []Change {
	changed := map[uint32]bool{}
	rv := resolver{r: r} // one pass: each static route is resolved once
	for id := 1; id < len(r.sets); id++ {
		s := &r.sets[id]
		if s.refs == 0 {
			continue
		}
		res, why := rv.resolveSet(s.hops)
		s.why = why
		if !slices.Equal(res, s.resolved) {
			s.resolved = slices.Clone(res)
			changed[uint32(id)] = true
		}
	}
	r.warnStatics()
	if len(changed) == 0 {
		return out
	}
	// A prefix several sources have is installed once per source: the
	// second time changes nothing.
	for src := range numSources {
		t := r.tables[src]
		for k, v := range t.v4.All() {
			if changed[v.set()] {
				out = r.installOrKeep(k.Prefix(), out)
			}
		}
		for p, v := range t.v6 {
			if changed[v.set()] {
				out = r.installOrKeep(p, out)
			}
		}
	}
	return out
}
