package fe

import (
	"errors"
	"log/slog"
	"maps"
	"net/netip"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

// slot is a datapath nexthop entry, one per gateway. The FE numbers slots
// itself, so a CE that renumbers its nexthop rows (after a restart, say)
// causes no datapath change as long as the gateways stay the same.
type slot struct {
	id      uint32
	gw      netip.Addr
	refs    int
	ifindex int // egress port once resolved, 0 before
	// remote: the gateway is behind another FE (an egress row says so),
	// and the slot is the remote nexthop rn, never resolved locally.
	remote bool
	rn     datapath.RemoteNexthop
}

// dgroup is a datapath ECMP group, one per set of gateways, numbered by the
// FE like the slots (from datapath.GroupIDBase), so it too survives a CE's
// renumbering.
type dgroup struct {
	id      uint32
	key     string // target.key of its gateways
	refs    int
	members []*slot
}

// programmer owns the datapath's forwarding state: the handle, the routes
// programmed for the CE's rows, the gateway slots and ECMP groups they point
// at, the ports' connected routes, and the kernel's copy. It takes desired
// state (a table and what changed in it) idempotently: a route already
// programmed as wanted is not written again, so applying the same table twice
// writes nothing and a diff writes only what differs. It is not safe for
// concurrent use: the agent's loop is its only caller.
type programmer struct {
	dp     Datapath
	kernel *kernelFIB // nil: the kernel's table is left alone
	log    *slog.Logger
	ports  map[int]*port // the agent's ports, for their MACs
	// egressPort, if set, returns the port a gateway is reached through (0:
	// none of ours) without asking the kernel (WithDatapath, tests): a new
	// slot is then resolved at once. Otherwise the resolver, kicked when a
	// slot is made, asks the kernel outside the loop and sends the answer.
	egressPort func(gw netip.Addr) int
	kick       chan struct{}

	// connected are the ports' own subnets (prefix -> local nexthop ID):
	// they shadow a CE route for the same prefix.
	connected  map[prefix.V4]uint32
	connected6 map[netip.Prefix]uint32

	// Per prefix, the target ID it is programmed with (a slot's, or a
	// group's at or above datapath.GroupIDBase).
	routes    prefixMap[prefix.V4, uint32]
	routes6   prefixMap[netip.Prefix, uint32]
	slots     map[netip.Addr]*slot
	slotByID  map[uint32]*slot
	free      []uint32
	next      uint32
	groups    map[string]*dgroup
	groupByID map[uint32]*dgroup
	freeGroup []uint32
	nextGroup uint32
	lastSlot  *slot  // the slot slotOf found last: most routes of a batch share one
	errors    uint64 // datapath updates that failed (map full, ...)
	lastErr   error

	// Inter-FE forwarding (ife.go), when the FE is one of a cluster: the
	// datapath's inter-FE side (nil: the egress rows are not programmed),
	// this FE's ID, and the nexthop keys programmed (key -> slot ID).
	ife  InterFEDatapath
	self uint32
	keys map[uint32]uint32
	// What the remote state was last mapped from (programRemote): the
	// table, its egress rows' version; slotsMade, a slot made since.
	mappedTable   *table
	mappedVersion uint64
	slotsMade     bool
	// Connected subnets across FEs (connremote.go): the remote subnets
	// programmed (they shadow CE routes of the same prefix; connRemote4
	// is the IPv4 ones' set, for the shadow test), the connected keys
	// programmed (key -> connected nexthop), and what they were last
	// mapped from.
	connRemote  map[netip.Prefix]*connRoute
	connRemote4 map[prefix.V4]struct{}
	connKeys    map[uint32]uint32
	connTable   *table
	connVersion uint64
}

func newProgrammer(log *slog.Logger, ports map[int]*port, kick chan struct{}) *programmer {
	return &programmer{
		log: log, ports: ports, kick: kick,
		connected: map[prefix.V4]uint32{}, connected6: map[netip.Prefix]uint32{},
		routes: newPrefixMap[prefix.V4, uint32](0), routes6: newPrefixMap[netip.Prefix, uint32](0),
		slots: map[netip.Addr]*slot{}, slotByID: map[uint32]*slot{}, next: 1,
		groups: map[string]*dgroup{}, groupByID: map[uint32]*dgroup{}, nextGroup: datapath.GroupIDBase,
		keys:       map[uint32]uint32{},
		connRemote: map[netip.Prefix]*connRoute{}, connRemote4: map[prefix.V4]struct{}{}, connKeys: map[uint32]uint32{},
	}
}

// famProg is one family's view of the datapath: its programmed routes and
// how its keys convert.
type famProg[K comparable] struct {
	routes   prefixMap[K, uint32]
	reserve  func(n int) prefixMap[K, uint32] // replaces an empty routes with one sized for n
	prefix   func(K) netip.Prefix
	shadowed func(K) bool // a port's connected route (or another FE's port's) owns the prefix
}

func (pr *programmer) prog4() famProg[prefix.V4] {
	return famProg[prefix.V4]{routes: pr.routes, prefix: prefix.V4.Prefix,
		reserve: func(n int) prefixMap[prefix.V4, uint32] {
			pr.routes = newPrefixMap[prefix.V4, uint32](n)
			return pr.routes
		},
		shadowed: func(p prefix.V4) bool {
			_, ok := pr.connected[p]
			if !ok && len(pr.connRemote4) > 0 {
				_, ok = pr.connRemote4[p]
			}
			return ok
		}}
}

func (pr *programmer) prog6() famProg[netip.Prefix] {
	return famProg[netip.Prefix]{routes: pr.routes6, prefix: func(p netip.Prefix) netip.Prefix { return p },
		reserve: func(n int) prefixMap[netip.Prefix, uint32] {
			pr.routes6 = newPrefixMap[netip.Prefix, uint32](n)
			return pr.routes6
		},
		shadowed: func(p netip.Prefix) bool {
			_, ok := pr.connected6[p]
			if !ok && len(pr.connRemote) > 0 {
				_, ok = pr.connRemote[p]
			}
			return ok
		}}
}

// program brings the datapath in line with the table for everything d marks,
// in one batch of route writes.
func (pr *programmer) program(t *table, d *dirty) {
	var b batch
	pr.programConnected(t, &b) // first: it decides which prefixes CE routes may have
	programFam(pr, t.v4, pr.prog4(), d.v4, &b)
	programFam(pr, t.v6, pr.prog6(), d.v6, &b)
	if pr.ife != nil && (pr.slotsMade || t != pr.mappedTable || t.egress.version != pr.mappedVersion ||
		d.v4.all || d.v6.all || len(d.v4.nexthops) > 0 || len(d.v6.nexthops) > 0) {
		pr.programRemote(t)
		pr.mappedTable, pr.mappedVersion, pr.slotsMade = t, t.egress.version, false
	}
	pr.flush(&b)
}

func programFam[K comparable](pr *programmer, t *famTable[K], fp famProg[K], d *famDirty[K], b *batch) {
	// Routes through one ECMP group share its target: work it out once.
	memo := map[uint32]target{}
	targetOf := func(r rowSlot[K]) target {
		if !r.ecmp {
			return t.targetOf(r)
		}
		w, ok := memo[r.nexthop]
		if !ok {
			w = t.targetOf(r)
			memo[r.nexthop] = w
		}
		return w
	}
	if d.all {
		if fp.routes.len() == 0 && !t.empty() {
			programFirst(pr, t, fp, b)
			return
		}
		t.index()
		unprogramGone(pr, t, fp, b)
		for _, r := range t.rows.all() {
			programTo(pr, fp, r.prefix, targetOf(r), b)
		}
		return
	}
	for p, at := range aheadOf(maps.All(d.prefixes), dirtyPrefix, fp.routes.prefetch) {
		programTo(pr, fp, p, t.dirtyTarget(p, at), b)
	}
	if len(d.nexthops) > 0 || len(d.groups) > 0 {
		// Groups whose members changed change too.
		groups := maps.Clone(d.groups)
		for id, members := range t.groups {
			for _, m := range members {
				if _, ok := d.nexthops[m]; ok {
					groups[id] = struct{}{}
				}
			}
		}
		for _, r := range t.rows.all() {
			_, nh := d.nexthops[r.nexthop]
			_, grp := groups[r.nexthop]
			if r.ecmp && grp || !r.ecmp && nh {
				programTo(pr, fp, r.prefix, targetOf(r), b)
			}
		}
		unprogramGone(pr, t, fp, b)
	}
}

// unprogramGone takes out of the datapath the prefixes t no longer has.
func unprogramGone[K comparable](pr *programmer, t *famTable[K], fp famProg[K], b *batch) {
	var gone []K
	for p := range fp.routes.all() {
		if _, ok := t.index().get(p); !ok {
			gone = append(gone, p)
		}
	}
	for _, p := range gone { // not while iterating: a prefixMap must not change then
		programTo(pr, fp, p, target{}, b)
	}
}

// programFirst programs every row of t into a datapath that holds none of
// the family's routes (a first full sync): nothing to compare with,
// everything to write, all sized once, and each nexthop or group row's
// target worked out once for all the routes that share it. The datapath
// takes the routes a chunk at a time on a goroutine of its own while this
// one records them, and a staged full sync's prefix index is built on a
// third: the three million-entry writes run side by side. The rows go in
// the order they were set, so a prefix sent in two rows (which indexing
// resolves in favour of the later) ends up programmed as the later too.
func programFirst[K comparable](pr *programmer, t *famTable[K], fp famProg[K], b *batch) {
	rows := t.rows.all()
	var indexed chan struct{}
	var index prefixMap[K, uint32]
	var stale []uint32
	if t.indexing {
		indexed = make(chan struct{})
		go func() {
			defer close(indexed)
			index, stale = t.buildIndex()
		}()
		rows = t.unindexedRows()
		fp.routes = fp.reserve(len(t.unindexed))
	} else {
		fp.routes = fp.reserve(t.routes.len())
	}
	w := newChunkWriter(pr.dp)
	sets := w.buffer()
	var kern []netip.Prefix // copied into the kernel once the datapath has them
	type known struct {
		id   uint32 // 0: no target (unresolvable, or no slot left)
		refs *int   // its slot's or group's references
	}
	targets := map[uint64]*known{}
	var last *known
	var lastKey uint64 = 1 << 63 // no row has this key
	for _, r := range aheadOf(rows, rowPrefix, fp.routes.prefetch) {
		if fp.shadowed(r.prefix) {
			continue
		}
		key := uint64(r.nexthop)
		if r.ecmp {
			key |= 1 << 32
		}
		k, first := last, false
		if key != lastKey {
			if k = targets[key]; k == nil {
				k, first = &known{}, true
				if w := t.targetOf(r); w.ok {
					if id, ok := pr.refTarget(w); ok { // the first reference
						k.id, k.refs = id, pr.refsOf(id)
					}
				}
				targets[key] = k
			}
			last, lastKey = k, key
		}
		if k.id != 0 && !first {
			*k.refs++
		}
		if k.id == 0 {
			continue
		}
		p := fp.prefix(r.prefix)
		sets = append(sets, datapath.Route{Prefix: p, Nexthop: k.id})
		if have, had := fp.routes.get(r.prefix); had {
			pr.unrefTarget(have, b) // a prefix in two rows: the later replaces it
		}
		fp.routes.put(r.prefix, k.id)
		if pr.kernel != nil && pr.kernel.wants(p) {
			kern = append(kern, p)
		}
		if len(sets) == firstChunk {
			w.chunks <- sets
			sets = w.buffer()
		}
	}
	w.chunks <- sets
	close(w.chunks)
	<-w.done
	if indexed != nil {
		<-indexed
		t.indexed(index, stale)
	}
	for _, c := range w.failed {
		b.sets = append(b.sets, c...)
		pr.writeSets(b) // route by route: what fits is installed
		b.sets = b.sets[:0]
	}
	pr.copyToKernel(kern)
}

// firstChunk is how many routes programFirst writes at a time: few enough
// that the chunks in flight stay in the cache.
const firstChunk = 1 << 13

// chunkWriter writes chunks of routes into the datapath on its own
// goroutine, in order, recycling their buffers. A chunk the datapath
// refuses as a whole is kept in failed, for the agent to retry once done
// is closed.
type chunkWriter struct {
	chunks chan []datapath.Route
	free   chan []datapath.Route
	failed [][]datapath.Route
	done   chan struct{}
}

func newChunkWriter(dp Datapath) *chunkWriter {
	w := &chunkWriter{chunks: make(chan []datapath.Route, 2), free: make(chan []datapath.Route, 4), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for c := range w.chunks {
			if len(c) > 0 && dp.SetRoutes(c) != nil {
				w.failed = append(w.failed, c)
				continue
			}
			select {
			case w.free <- c[:0]:
			default:
			}
		}
	}()
	return w
}

// buffer returns an empty chunk, recycled if one is free.
func (w *chunkWriter) buffer() []datapath.Route {
	select {
	case c := <-w.free:
		return c
	default:
		return make([]datapath.Route, 0, firstChunk)
	}
}

// refsOf returns the reference count of slot or group id.
func (pr *programmer) refsOf(id uint32) *int {
	if g := pr.groupByID[id]; g != nil {
		return &g.refs
	}
	return &pr.slotByID[id].refs
}

// batch collects the datapath writes of one program call. Slots and groups
// that lose their last route are freed only after the routes stop pointing
// at them.
type batch struct {
	sets        []datapath.Route
	dels        []netip.Prefix
	freed       []netip.Addr
	freedGroups []string
}

// programTo makes the datapath forward p to w, or (w not ok) not at all. A
// connected route of a port shadows a CE route for the same prefix.
func programTo[K comparable](pr *programmer, fp famProg[K], p K, w target, b *batch) {
	if fp.shadowed(p) {
		w.ok = false
	}
	have, had := fp.routes.get(p)
	switch {
	case !w.ok && !had:
		return
	case w.ok && had && pr.targetID(w) == have:
		return
	case w.ok:
		if !programNew(pr, fp, p, w, b) {
			return
		}
	default:
		if !fp.shadowed(p) {
			b.dels = append(b.dels, fp.prefix(p))
		}
		fp.routes.del(p)
	}
	if had {
		pr.unrefTarget(have, b)
	}
}

// programNew programs p towards w, replacing what the datapath holds. It
// reports false when no slot or group is left.
func programNew[K comparable](pr *programmer, fp famProg[K], p K, w target, b *batch) bool {
	id, ok := pr.refTarget(w)
	if !ok {
		return false
	}
	b.sets = append(b.sets, datapath.Route{Prefix: fp.prefix(p), Nexthop: id})
	fp.routes.put(p, id)
	return true
}

// targetID returns the datapath ID of w's slot or group, 0 if it has none.
func (pr *programmer) targetID(w target) uint32 {
	if w.group == nil {
		if s := pr.slotOf(w.gw); s != nil {
			return s.id
		}
	} else if g := pr.groups[w.key]; g != nil {
		return g.id
	}
	return 0
}

// refTarget takes a reference on the slot or group of w, making it if new.
func (pr *programmer) refTarget(w target) (uint32, bool) {
	if w.group == nil {
		s := pr.ref(w.gw)
		if s == nil {
			return 0, false
		}
		return s.id, true
	}
	if g := pr.groups[w.key]; g != nil {
		g.refs++
		return g.id, true
	}
	var id uint32
	switch {
	case len(pr.freeGroup) > 0:
		id = pr.freeGroup[len(pr.freeGroup)-1]
		pr.freeGroup = pr.freeGroup[:len(pr.freeGroup)-1]
	case pr.nextGroup < datapath.GroupIDBase+datapath.MaxGroups:
		id = pr.nextGroup
		pr.nextGroup++
	default:
		pr.datapathError(errGroupsFull)
		return 0, false
	}
	g := &dgroup{id: id, key: w.key, refs: 1}
	ids := make([]uint32, 0, len(w.group))
	for _, gw := range w.group {
		s := pr.ref(gw)
		if s == nil {
			break
		}
		g.members = append(g.members, s)
		ids = append(ids, s.id)
	}
	var err error
	if len(ids) < len(w.group) {
		err = errSlotsFull
	} else {
		err = pr.dp.SetNexthopGroup(id, ids)
	}
	if err != nil {
		pr.datapathError(err)
		var b batch
		for _, s := range g.members {
			pr.unref(s.gw, &b)
		}
		pr.flush(&b)
		pr.freeGroup = append(pr.freeGroup, id)
		return 0, false
	}
	pr.groups[w.key] = g
	pr.groupByID[id] = g
	return id, true
}

// unrefTarget drops a route's reference on the slot or group id.
func (pr *programmer) unrefTarget(id uint32, b *batch) {
	if g := pr.groupByID[id]; g != nil {
		if g.refs--; g.refs == 0 {
			b.freedGroups = append(b.freedGroups, g.key)
		}
		return
	}
	if s := pr.slotByID[id]; s != nil {
		pr.unref(s.gw, b)
	}
}

// gatewayOf returns the gateway of target id for the kernel's copy of a
// route: the slot's, or a group's first member's.
func (pr *programmer) gatewayOf(id uint32) netip.Addr {
	if g := pr.groupByID[id]; g != nil && len(g.members) > 0 {
		return g.members[0].gw
	}
	if s := pr.slotByID[id]; s != nil {
		return s.gw
	}
	return netip.Addr{}
}

// flushSets writes the batch's new and changed routes, into the datapath and
// the kernel's table, and empties its list of them.
func (pr *programmer) flushSets(b *batch) {
	if len(b.sets) == 0 {
		return
	}
	pr.writeSets(b)
	if pr.kernel != nil {
		var kern []netip.Prefix
		for _, r := range b.sets {
			if pr.kernel.wants(r.Prefix) { // most modes copy few or none of the CE's routes
				kern = append(kern, r.Prefix)
			}
		}
		pr.copyToKernel(kern)
	}
	b.sets = b.sets[:0]
}

// writeSets writes the batch's routes into the datapath. A batch the
// datapath refuses as a whole (a full FIB) is retried route by route; the
// routes that still fail are forgotten.
func (pr *programmer) writeSets(b *batch) {
	if err := pr.dp.SetRoutes(b.sets); err != nil {
		for _, r := range b.sets {
			if err := pr.dp.SetRoute(r.Prefix, r.Nexthop); err != nil {
				pr.datapathError(err)
				pr.forget(r.Prefix, b)
			}
		}
	}
}

// copyToKernel gives the kernel's table the routes of ps as programmed (a
// route the datapath refused, none).
func (pr *programmer) copyToKernel(ps []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			id, _ := pr.routes.get(prefix.FromV4(p))
			pr.kernel.sync(prefix.FromV4(p), ip4(pr.gatewayOf(id)))
		} else {
			id, _ := pr.routes6.get(p)
			pr.kernel.sync6(p, pr.gatewayOf(id))
		}
	}
}

// flush writes a batch: new and changed routes first, then deletions, then
// the slots nothing points at any more. A batch the datapath refuses as a
// whole (a full FIB) is retried route by route, so what fits is installed.
func (pr *programmer) flush(b *batch) {
	pr.flushSets(b)
	if len(b.dels) > 0 {
		if err := pr.dp.DeleteRoutes(b.dels); err != nil {
			for _, p := range b.dels {
				if err := pr.dp.DeleteRoute(p); err != nil && !errors.Is(err, datapath.ErrNotFound) {
					pr.datapathError(err)
				}
			}
		}
	}
	if pr.kernel != nil {
		for _, p := range b.dels {
			if p.Addr().Is4() {
				pr.kernel.sync(prefix.FromV4(p), 0)
			} else {
				pr.kernel.sync6(p, netip.Addr{})
			}
		}
	}
	// Groups first: freeing one frees its members' references.
	for _, key := range b.freedGroups {
		g := pr.groups[key]
		if g == nil || g.refs > 0 {
			continue // taken again within the batch
		}
		delete(pr.groups, key)
		delete(pr.groupByID, g.id)
		if err := pr.dp.DeleteNexthopGroup(g.id); err != nil {
			pr.datapathError(err)
		}
		pr.freeGroup = append(pr.freeGroup, g.id)
		for _, s := range g.members {
			pr.unref(s.gw, b)
		}
	}
	for _, gw := range b.freed {
		s := pr.slots[gw]
		if s == nil || s.refs > 0 {
			continue // taken again within the batch
		}
		delete(pr.slots, gw)
		if pr.lastSlot == s {
			pr.lastSlot = nil
		}
		delete(pr.slotByID, s.id)
		if s.ifindex != 0 || s.remote {
			if err := pr.dp.DeleteNexthop(s.id); err != nil {
				pr.datapathError(err)
			}
		}
		if pr.ife != nil {
			pr.dropKeysOf(s.id)
		}
		pr.free = append(pr.free, s.id)
	}
}

// forget drops a route the datapath refused from what is programmed.
func (pr *programmer) forget(p netip.Prefix, b *batch) {
	if p.Addr().Is4() {
		k := prefix.FromV4(p)
		id, _ := pr.routes.get(k)
		pr.routes.del(k)
		pr.unrefTarget(id, b)
		return
	}
	id, _ := pr.routes6.get(p)
	pr.routes6.del(p)
	pr.unrefTarget(id, b)
}

// slotOf returns the slot of gw, nil if it has none.
func (pr *programmer) slotOf(gw netip.Addr) *slot {
	if c := pr.lastSlot; c != nil && c.gw == gw {
		return c
	}
	s := pr.slots[gw]
	if s != nil {
		pr.lastSlot = s
	}
	return s
}

func (pr *programmer) ref(gw netip.Addr) *slot {
	if s := pr.slotOf(gw); s != nil {
		s.refs++
		return s
	}
	var id uint32
	switch {
	case len(pr.free) > 0:
		id = pr.free[len(pr.free)-1]
		pr.free = pr.free[:len(pr.free)-1]
	case pr.next <= forces.MaxNexthopID:
		id = pr.next
		pr.next++
	default:
		pr.datapathError(errSlotsFull)
		return nil
	}
	s := &slot{id: id, gw: gw, refs: 1}
	pr.slotsMade = true
	pr.slots[gw] = s
	pr.slotByID[id] = s
	if pr.egressPort != nil {
		pr.resolve(s, pr.egressPort(gw))
	}
	select {
	case pr.kick <- struct{}{}: // solicit its MAC now, not at the next tick
	default:
	}
	return s
}

func (pr *programmer) unref(gw netip.Addr, b *batch) {
	s := pr.slotOf(gw)
	if s.refs--; s.refs == 0 {
		b.freed = append(b.freed, gw)
	}
}

func (pr *programmer) datapathError(err error) {
	pr.errors++
	if pr.lastErr == nil || pr.lastErr.Error() != err.Error() {
		pr.log.Error("fe: datapath update failed; affected packets go to the kernel", "err", err)
	}
	pr.lastErr = err
}

// resolved reports whether the slot's egress is known: a port of this FE,
// or another FE's for a remote slot.
func (s *slot) resolved() bool { return s.ifindex != 0 || s.remote }

// resolve programs slot s as reached through port ifindex (0: not known,
// which changes nothing, as it changes nothing for a remote slot). An
// unresolved slot stays empty in the datapath, so its packets go to the
// kernel.
func (pr *programmer) resolve(s *slot, ifindex int) {
	if ifindex == 0 || ifindex == s.ifindex || s.remote {
		return
	}
	p := pr.ports[ifindex]
	if err := pr.dp.SetNexthop(s.id, datapath.Nexthop{Ifindex: ifindex, Gateway: s.gw, SrcMAC: p.mac}); err != nil {
		pr.datapathError(err)
		return
	}
	s.ifindex = ifindex
}
