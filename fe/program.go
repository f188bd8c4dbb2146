package fe

import (
	"net/netip"

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
	routes  map[prefix4]uint32 // prefix -> gateway (ip4) it is programmed with
	slots   map[netip.Addr]*slot
	free    []uint32
	next    uint32
	errors  uint64 // datapath updates that failed (map full, ...)
	lastErr error
}

func newProgrammed() *programmed {
	return &programmed{routes: map[prefix4]uint32{}, slots: map[netip.Addr]*slot{}, next: 1}
}

// program brings the datapath in line with the table for everything d marks.
// Called with a.mu held.
func (a *Agent) program(d *dirty) {
	if d.all {
		for p := range a.prog.routes {
			if _, ok := a.table.routes[p]; !ok {
				a.programPrefix(p)
			}
		}
		for p := range a.table.routes {
			a.programPrefix(p)
		}
		return
	}
	for p := range d.prefixes {
		a.programPrefix(p)
	}
	if len(d.nexthops) > 0 {
		for p, r := range a.table.routes {
			if _, ok := d.nexthops[r.nexthop]; ok {
				a.programPrefix(p)
			}
		}
		for p := range a.prog.routes {
			if _, ok := a.table.routes[p]; !ok {
				a.programPrefix(p)
			}
		}
	}
}

// programPrefix makes the datapath entry of p match the table. A connected
// route of a port shadows a CE route for the same prefix.
func (a *Agent) programPrefix(p prefix4) {
	want, ok := a.table.gateway(p)
	if _, shadowed := a.connected[p]; shadowed {
		ok = false
	}
	have, had := a.prog.routes[p]
	if ok == had && ip4(want) == have {
		return
	}
	if ok {
		s := a.ref(want)
		if s == nil {
			return
		}
		if err := a.dp.SetRoute(p.Prefix(), s.id); err != nil {
			a.datapathError(err)
			a.unref(want)
			return
		}
		a.prog.routes[p] = ip4(want)
	} else {
		if _, shadowed := a.connected[p]; !shadowed {
			if err := a.dp.DeleteRoute(p.Prefix()); err != nil {
				a.datapathError(err)
			}
		}
		delete(a.prog.routes, p)
	}
	if had {
		a.unref(addr4(have))
	}
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

func (a *Agent) unref(gw netip.Addr) {
	s := a.prog.slots[gw]
	if s.refs--; s.refs > 0 {
		return
	}
	delete(a.prog.slots, gw)
	if s.ifindex != 0 {
		if err := a.dp.DeleteNexthop(s.id); err != nil {
			a.datapathError(err)
		}
	}
	a.prog.free = append(a.prog.free, s.id)
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
