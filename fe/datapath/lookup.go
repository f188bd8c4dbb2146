//go:build linux

package datapath

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// LookupKind is what the XDP program decides for a packet to an address
// from its tables.
type LookupKind uint8

const (
	LookupNone  LookupKind = iota // no route: passed to the kernel (pass_no_route)
	LookupRoute                   // forwarded by the route's nexthop or group
	LookupLocal                   // an address of the router: passed to the kernel
)

var lookupKindNames = [...]string{LookupNone: "no_route", LookupRoute: "route", LookupLocal: "local"}

func (k LookupKind) String() string {
	if int(k) < len(lookupKindNames) {
		return lookupKindNames[k]
	}
	return fmt.Sprintf("LookupKind(%d)", k)
}

// Lookup is what the datapath does with a packet to an address, read from
// the tables the XDP program reads (the mmapped FIB arrays, the nexthop,
// group and neighbour maps), not from what the Go side meant to write:
// an entry changed behind the datapath's back shows here.
type Lookup struct {
	Kind LookupKind
	// ID is the nexthop or group ID the FIB returned (LookupRoute).
	ID uint32
	// Hops are the nexthop, or the group's members in slot order without
	// repeats; empty for a route whose nexthop slot or group is empty.
	Hops []LookupHop
}

// LookupHop is one nexthop slot as the datapath holds it.
type LookupHop struct {
	ID      uint32
	Ifindex int // egress port; 0 for an empty slot
	// Gateway is the neighbour the packet goes to; invalid for a connected
	// route (the destination itself) and for a remote nexthop.
	Gateway netip.Addr
	SrcMAC  net.HardwareAddr
	// DstMAC is the MAC the packet leaves with: the nexthop's copy of its
	// gateway's, or for a connected route the destination's neighbour
	// entry; nil while unresolved (the packet goes to the kernel).
	DstMAC net.HardwareAddr
	// Remote is set for a nexthop behind another FE (Ifindex is then no
	// port).
	Remote *RemoteNexthop
}

// Lookup returns what the datapath does with a packet to each of addrs,
// in order, as its XDP program would find it (TTL, martians and the like
// aside). It fails with ErrInvalid for an address that is neither IPv4
// nor IPv6 and with ErrClosed once closed.
func (d *Datapath) Lookup(addrs []netip.Addr) ([]Lookup, error) {
	for _, a := range addrs {
		if _, err := checkAddr("address", a); err != nil {
			return nil, fmt.Errorf("lookup: %w", err)
		}
	}
	out := make([]Lookup, len(addrs))
	d.fibMu.Lock()
	if d.fib == nil {
		d.fibMu.Unlock()
		return nil, ErrClosed
	}
	for i, a := range addrs {
		out[i].Kind, out[i].ID = d.lookupFIB(a)
	}
	d.fibMu.Unlock()
	for i, a := range addrs {
		if out[i].Kind != LookupRoute {
			continue
		}
		hops, err := d.lookupHops(out[i].ID, a)
		if err != nil {
			return nil, fmt.Errorf("lookup %s: %w", a, err)
		}
		out[i].Hops = hops
	}
	return out, nil
}

// lookupFIB is fib_lookup and fib6_lookup with their local address checks;
// d.fibMu is held.
func (d *Datapath) lookupFIB(a netip.Addr) (LookupKind, uint32) {
	var e uint32
	if a.Is4() {
		b := a.As4()
		n := binary.BigEndian.Uint32(b[:])
		if d.fib.dxr.direct[n>>16]&(dxrRanges|dxrTbl24) == dxrTbl24 && d.isLocal(a) {
			return LookupLocal, 0
		}
		e = d.fib.dxr.lookup(n)
		if e&(fibValid|fibLocal) == fibValid|fibLocal {
			return LookupLocal, 0
		}
	} else {
		if d.isLocal(a) {
			return LookupLocal, 0
		}
		id, ok := d.fib6.dxr.lookup(a.As16())
		if !ok {
			return LookupNone, 0
		}
		return LookupRoute, id
	}
	if e&fibValid == 0 {
		return LookupNone, 0
	}
	return LookupRoute, e & fibNexthopMask
}

// isLocal reports whether a is in local_addrs (local_addrs6).
func (d *Datapath) isLocal(a netip.Addr) bool {
	m, key, err := d.localKey(a)
	if err != nil {
		return false
	}
	var v uint8
	return m.Lookup(key, &v) == nil
}

// lookupHops reads the nexthop or group id returns, and the MAC a packet
// to dst leaves with.
func (d *Datapath) lookupHops(id uint32, dst netip.Addr) ([]LookupHop, error) {
	ids := []uint32{id}
	if id >= GroupIDBase {
		var g xdpNhGroup
		if err := d.objs.NhGroups.Lookup(id-GroupIDBase, &g); err != nil {
			return nil, fmt.Errorf("group %d: %w", id, err)
		}
		ids = ids[:0]
		for _, m := range g.Members[:min(int(g.Count), len(g.Members))] {
			if !slices.Contains(ids, m) {
				ids = append(ids, m)
			}
		}
	}
	var hops []LookupHop
	for _, nid := range ids {
		var v xdpNexthop
		if err := d.objs.Nexthops.Lookup(nid, &v); err != nil {
			return nil, fmt.Errorf("nexthop %d: %w", nid, err)
		}
		if v.Ifindex == 0 {
			continue
		}
		h := LookupHop{ID: nid, Ifindex: int(v.Ifindex), SrcMAC: slices.Clone(net.HardwareAddr(v.Smac[:]))}
		switch v.GwFamily {
		case gwRemote:
			h.Ifindex = 0
			h.Remote = &RemoteNexthop{FE: binary.NativeEndian.Uint32(v.Gateway6[0:]),
				Key: binary.NativeEndian.Uint32(v.Gateway6[4:]), Port: binary.NativeEndian.Uint32(v.Gateway6[8:])}
		case gwIPv4:
			h.Gateway = addr4(v.Gateway)
		case gwIPv6:
			h.Gateway = netip.AddrFrom16(v.Gateway6)
		}
		switch {
		case h.Remote != nil:
		case h.Gateway.IsValid():
			if v.DmacOk != 0 {
				h.DstMAC = slices.Clone(net.HardwareAddr(v.Dmac[:]))
			}
		default:
			h.DstMAC = d.neighborMAC(h.Ifindex, dst)
		}
		hops = append(hops, h)
	}
	return hops, nil
}

// neighborMAC is the neighbour entry of ip on port ifindex, nil if none.
func (d *Datapath) neighborMAC(ifindex int, ip netip.Addr) net.HardwareAddr {
	key, err := neighKey(ifindex, ip)
	if err != nil {
		return nil
	}
	var n xdpNeigh
	if d.neighMap(ip).Lookup(key, &n) != nil {
		return nil
	}
	return slices.Clone(net.HardwareAddr(n.Mac[:]))
}
