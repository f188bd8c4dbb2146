package fe

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/fe/datapath"
)

// slot is a datapath nexthop entry, one per gateway. The FE numbers slots
// itself, so a CE that renumbers its nexthop rows (after a restart, say)
// causes no datapath change as long as the gateways stay the same.
type slot struct {
	id      uint32
	refs    int
	ifindex int // egress port once resolved, 0 before
}

// programmed is what the datapath holds for the CE's routes.
type programmed struct {
	routes  map[prefix4]uint32          // IPv4 prefix -> gateway (ip4) it is programmed with
	routes6 map[netip.Prefix]netip.Addr // IPv6 prefix -> gateway
	slots   map[netip.Addr]*slot
	free    []uint32
	next    uint32
	errors  uint64 // datapath updates that failed (map full, ...)
	lastErr error
}

func newProgrammed() *programmed {
	return &programmed{routes: map[prefix4]uint32{}, routes6: map[netip.Prefix]netip.Addr{}, slots: map[netip.Addr]*slot{}, next: 1}
}

// famProg is one family's view of the datapath: its programmed routes and
// how its keys and gateways convert.
type famProg[K comparable, V comparable] struct {
	routes   map[K]V
	reserve  func(n int) map[K]V // replaces an empty routes with one sized for n
	enc      func(netip.Addr) V
	dec      func(V) netip.Addr
	prefix   func(K) netip.Prefix
	shadowed func(K) bool // a port's connected route owns the prefix
}

func (a *Agent) prog4() famProg[prefix4, uint32] {
	return famProg[prefix4, uint32]{routes: a.prog.routes, enc: ip4,
		reserve: func(n int) map[prefix4]uint32 { a.prog.routes = make(map[prefix4]uint32, n); return a.prog.routes }, dec: addr4, prefix: prefix4.Prefix,
		shadowed: func(p prefix4) bool { _, ok := a.connected[p]; return ok }}
}

func (a *Agent) prog6() famProg[netip.Prefix, netip.Addr] {
	id := func(x netip.Addr) netip.Addr { return x }
	return famProg[netip.Prefix, netip.Addr]{routes: a.prog.routes6, enc: id, dec: id,
		reserve: func(n int) map[netip.Prefix]netip.Addr {
			a.prog.routes6 = make(map[netip.Prefix]netip.Addr, n)
			return a.prog.routes6
		},
		prefix:   func(p netip.Prefix) netip.Prefix { return p },
		shadowed: func(p netip.Prefix) bool { _, ok := a.connected6[p]; return ok }}
}

// program brings the datapath in line with the table for everything d marks,
// in one batch of route writes. Called with a.mu held.
func (a *Agent) program(d *dirty) {
	var b batch
	programFam(a, a.table.v4, a.prog4(), d.v4, &b)
	programFam(a, a.table.v6, a.prog6(), d.v6, &b)
	a.flush(&b)
}

func programFam[K comparable, V comparable](a *Agent, t *famTable[K], fp famProg[K, V], d *famDirty[K], b *batch) {
	if d.all {
		for p := range fp.routes {
			if _, ok := t.routes[p]; !ok {
				programPrefix(a, t, fp, p, b)
			}
		}
		if len(fp.routes) == 0 && t.len() > 0 {
			// A first full sync: nothing to compare with, everything to
			// write, all sized once.
			fp.routes = fp.reserve(t.len())
			b.sets = slices.Grow(b.sets, t.len())
			for _, r := range t.rows.all() {
				if gw, ok := t.nexthops[r.nexthop]; ok && !fp.shadowed(r.prefix) {
					programNew(a, fp, r.prefix, gw, b)
				}
			}
			return
		}
		for _, r := range t.rows.all() {
			gw, ok := t.nexthops[r.nexthop]
			programTo(a, fp, r.prefix, gw, ok, b)
		}
		return
	}
	for p := range d.prefixes {
		programPrefix(a, t, fp, p, b)
	}
	if len(d.nexthops) > 0 {
		for _, r := range t.rows.all() {
			if _, ok := d.nexthops[r.nexthop]; ok {
				p := r.prefix
				programPrefix(a, t, fp, p, b)
			}
		}
		for p := range fp.routes {
			if _, ok := t.routes[p]; !ok {
				programPrefix(a, t, fp, p, b)
			}
		}
	}
}

// batch collects the datapath writes of one program call. Slots that lose
// their last route are freed only after the routes stop pointing at them.
type batch struct {
	sets  []datapath.Route
	dels  []netip.Prefix
	freed []netip.Addr
}

// programPrefix decides the datapath entry of p from the table. A connected
// route of a port shadows a CE route for the same prefix.
func programPrefix[K comparable, V comparable](a *Agent, t *famTable[K], fp famProg[K, V], p K, b *batch) {
	want, ok := t.gateway(p)
	programTo(a, fp, p, want, ok, b)
}

// programTo makes the datapath forward p to want (ok) or not at all (!ok).
func programTo[K comparable, V comparable](a *Agent, fp famProg[K, V], p K, want netip.Addr, ok bool, b *batch) {
	if fp.shadowed(p) {
		ok = false
	}
	have, had := fp.routes[p]
	if ok == had && fp.enc(want) == have {
		return
	}
	if ok {
		if !programNew(a, fp, p, want, b) {
			return
		}
	} else {
		if !fp.shadowed(p) {
			b.dels = append(b.dels, fp.prefix(p))
		}
		delete(fp.routes, p)
	}
	if had {
		a.unref(fp.dec(have), b)
	}
}

// programNew programs p, which the datapath does not hold, towards gw. It
// reports false when no nexthop slot is left.
func programNew[K comparable, V comparable](a *Agent, fp famProg[K, V], p K, gw netip.Addr, b *batch) bool {
	s := a.ref(gw)
	if s == nil {
		return false
	}
	b.sets = append(b.sets, datapath.Route{Prefix: fp.prefix(p), Nexthop: s.id})
	fp.routes[p] = fp.enc(gw)
	return true
}

// flush writes a batch: new and changed routes first, then deletions, then
// the slots nothing points at any more. A batch the datapath refuses as a
// whole (a full FIB) is retried route by route, so what fits is installed.
func (a *Agent) flush(b *batch) {
	if len(b.sets) > 0 {
		if err := a.dp.SetRoutes(b.sets); err != nil {
			for _, r := range b.sets {
				if err := a.dp.SetRoute(r.Prefix, r.Nexthop); err != nil {
					a.datapathError(err)
					a.forget(r.Prefix, b)
				}
			}
		}
	}
	if len(b.dels) > 0 {
		if err := a.dp.DeleteRoutes(b.dels); err != nil {
			for _, p := range b.dels {
				if err := a.dp.DeleteRoute(p); err != nil && !errors.Is(err, datapath.ErrNotFound) {
					a.datapathError(err)
				}
			}
		}
	}
	if a.kernel != nil {
		for _, r := range b.sets {
			if r.Prefix.Addr().Is4() {
				p := toPrefix4(r.Prefix)
				a.kernel.sync(p, a.prog.routes[p])
			}
		}
		for _, p := range b.dels {
			if p.Addr().Is4() {
				a.kernel.sync(toPrefix4(p), 0)
			}
		}
	}
	for _, gw := range b.freed {
		s := a.prog.slots[gw]
		if s == nil || s.refs > 0 {
			continue // taken again within the batch
		}
		delete(a.prog.slots, gw)
		if s.ifindex != 0 {
			if err := a.dp.DeleteNexthop(s.id); err != nil {
				a.datapathError(err)
			}
		}
		a.prog.free = append(a.prog.free, s.id)
	}
}

// forget drops a route the datapath refused from what is programmed.
func (a *Agent) forget(p netip.Prefix, b *batch) {
	if p.Addr().Is4() {
		k := toPrefix4(p)
		gw := addr4(a.prog.routes[k])
		delete(a.prog.routes, k)
		a.unref(gw, b)
		return
	}
	gw := a.prog.routes6[p]
	delete(a.prog.routes6, p)
	a.unref(gw, b)
}

func (a *Agent) ref(gw netip.Addr) *slot {
	if s, ok := a.prog.slots[gw]; ok {
		s.refs++
		return s
	}
	var id uint32
	switch {
	case len(a.prog.free) > 0:
		id = a.prog.free[len(a.prog.free)-1]
		a.prog.free = a.prog.free[:len(a.prog.free)-1]
	case a.prog.next <= MaxCENexthopID:
		id = a.prog.next
		a.prog.next++
	default:
		a.datapathError(errSlotsFull)
		return nil
	}
	s := &slot{id: id, refs: 1}
	a.prog.slots[gw] = s
	a.resolve(gw, s)
	select {
	case a.kick <- struct{}{}: // solicit its MAC now, not at the next tick
	default:
	}
	return s
}

func (a *Agent) unref(gw netip.Addr, b *batch) {
	s := a.prog.slots[gw]
	if s.refs--; s.refs == 0 {
		b.freed = append(b.freed, gw)
	}
}

func (a *Agent) datapathError(err error) {
	a.prog.errors++
	if a.prog.lastErr == nil || a.prog.lastErr.Error() != err.Error() {
		a.log.Error("fe: datapath update failed; affected packets go to the kernel", "err", err)
	}
	a.prog.lastErr = err
}

// resolve finds the egress port of a gateway through the kernel's routing
// table (the port's connected route) and programs the slot. An unresolved
// slot stays empty in the datapath, so its packets go to the kernel.
func (a *Agent) resolve(gw netip.Addr, s *slot) {
	ifindex := a.egressPort(gw)
	if ifindex == 0 || ifindex == s.ifindex {
		return
	}
	p := a.ports[ifindex]
	if err := a.dp.SetNexthop(s.id, datapath.Nexthop{Ifindex: ifindex, Gateway: gw, SrcMAC: p.mac}); err != nil {
		a.datapathError(err)
		return
	}
	s.ifindex = ifindex
}
