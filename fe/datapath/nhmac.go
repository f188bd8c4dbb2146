//go:build linux

package datapath

import (
	"fmt"
	"net/netip"
)

// A nexthop via a gateway holds a copy of the gateway's MAC (struct
// nexthop's dmac), so that forwarding a packet reads the nexthop and not
// the neighbour hash too. The copy follows the neighbour: SetNeighbor and
// DeleteNeighbor rewrite every nexthop through that gateway, SetNexthop
// takes the MAC the neighbour map has. A nexthop is rewritten as a whole
// (an array map update), so a packet racing with the change of a
// neighbour's MAC may leave with the old MAC, as it may with the
// neighbour hash alone.

// gwRef names a gateway: the port and the address its neighbour entry has.
type gwRef struct {
	ifindex int
	addr    netip.Addr
}

// nhMACs is the Go side's record of the nexthops via gateways, guarded by
// Datapath.nhMu.
type nhMACs struct {
	// gw is each gateway nexthop's gateway and value as last written;
	// users the nexthops through each gateway.
	gw    map[uint32]gwRef
	val   map[uint32]xdpNexthop
	users map[gwRef]map[uint32]struct{}
}

func (n *nhMACs) init() {
	if n.gw == nil {
		n.gw, n.val, n.users = make(map[uint32]gwRef), make(map[uint32]xdpNexthop), make(map[gwRef]map[uint32]struct{})
	}
}

// forget drops nexthop id from the record.
func (n *nhMACs) forget(id uint32) {
	n.init()
	g, ok := n.gw[id]
	if !ok {
		return
	}
	delete(n.gw, id)
	delete(n.val, id)
	if us := n.users[g]; us != nil {
		delete(us, id)
		if len(us) == 0 {
			delete(n.users, g)
		}
	}
}

// putNexthop writes nexthop id, with its gateway's MAC if the neighbour is
// known (gw is the zero gwRef for a nexthop without a gateway).
func (d *Datapath) putNexthop(id uint32, v xdpNexthop, gw gwRef) error {
	d.nhMu.Lock()
	defer d.nhMu.Unlock()
	d.nh.forget(id)
	if gw.addr.IsValid() {
		key, err := neighKey(gw.ifindex, gw.addr)
		if err != nil {
			return err
		}
		var n xdpNeigh
		if err := d.neighMap(gw.addr).Lookup(key, &n); err == nil {
			v.Dmac, v.DmacOk = n.Mac, 1
		}
		d.nh.gw[id], d.nh.val[id] = gw, v
		if d.nh.users[gw] == nil {
			d.nh.users[gw] = make(map[uint32]struct{})
		}
		d.nh.users[gw][id] = struct{}{}
	}
	return d.objs.Nexthops.Put(id, &v)
}

// neighborChanged rewrites the nexthops through gateway g with its new
// MAC, or with none (mac nil). d.nhMu must be held.
func (d *Datapath) neighborChanged(g gwRef, mac []byte) error {
	for id := range d.nh.users[g] {
		v := d.nh.val[id]
		v.Dmac, v.DmacOk = [6]uint8{}, 0
		if mac != nil {
			copy(v.Dmac[:], mac)
			v.DmacOk = 1
		}
		if err := d.objs.Nexthops.Put(id, &v); err != nil {
			return fmt.Errorf("nexthop %d via %s on %s: %w", id, g.addr, ifName(g.ifindex), err)
		}
		d.nh.val[id] = v
	}
	return nil
}
