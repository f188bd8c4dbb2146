package forces

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// FIBLookupComponent, beside the port table (PortTableClass, instance 1), is
// read-only and keyed: a GET of it with a KEYINFO of key FIBLookupKeyID,
// whose content is an IPv4 (4 bytes) or IPv6 (16 bytes) address, returns
// what the FE's datapath does with a packet to that address, read from the
// tables its fast path reads (a FIBLookup). One Query may carry many such
// GETs (LookupSelect); each is answered on its own leaf. A CE uses it to
// show a route on every FE and to check that the FEs forward as its FIB
// says. An FE that does not know the component answers
// E_COMPONENT_DOES_NOT_EXIST.
const (
	FIBLookupComponent = 1004
	FIBLookupKeyID     = 1
)

// FIBLookupKind is what the FE's datapath decides.
type FIBLookupKind uint8

const (
	FIBLookupNone  FIBLookupKind = iota // no route: to the FE's kernel
	FIBLookupRoute                      // forwarded by the route's nexthop or group
	FIBLookupLocal                      // an address of the router: to the FE's kernel
)

var fibLookupKindNames = [...]string{FIBLookupNone: "no_route", FIBLookupRoute: "route", FIBLookupLocal: "local"}

func (k FIBLookupKind) String() string {
	if int(k) < len(fibLookupKindNames) {
		return fibLookupKindNames[k]
	}
	return fmt.Sprintf("FIBLookupKind(%d)", k)
}

// FIBLookup is an FE's answer for one address.
type FIBLookup struct {
	Kind FIBLookupKind
	// ID is the nexthop row (or, at GroupIDBase and above, the ECMP group)
	// the FE's FIB returned, for FIBLookupRoute.
	ID uint32
	// Hops are the nexthop or the group's members; empty when the slot or
	// group the route points at is empty.
	Hops []FIBLookupHop
}

// FIBLookupHop is one nexthop as the FE's datapath holds it.
type FIBLookupHop struct {
	ID uint32
	// Gateway is the neighbour packets go to; invalid for a connected
	// route (the destination is the neighbour).
	Gateway netip.Addr
	// Port is the egress port (PHYPortID) on this FE; 0 for a remote hop.
	Port uint32
	// RemoteFE is the egress FE's sub-ID for a hop behind another FE
	// (RemotePort its port there); 0 for a local hop.
	RemoteFE, RemotePort uint32
	SrcMAC, DstMAC       [6]byte
	// Resolved: DstMAC is known (a packet leaves with it); otherwise the
	// packet goes to the FE's kernel, which resolves the neighbour.
	Resolved bool
}

// LookupSelect returns the LFBselect that asks for FIBLookupComponent of
// every address in addrs, one PATH-DATA each, in order.
func LookupSelect(addrs []netip.Addr) LFBSelect {
	op := Operation{Type: OpGet, Paths: make([]PathData, len(addrs))}
	for i, a := range addrs {
		op.Paths[i] = PathData{IDs: []uint32{FIBLookupComponent}, Key: &KeyInfo{KeyID: FIBLookupKeyID, Data: a.Unmap().AsSlice()}}
	}
	return LFBSelect{ClassID: PortTableClass, InstanceID: PortTableInstance, Ops: []Operation{op}}
}

// ParseLookupKey returns the address of a FIBLookupComponent GET's key.
func ParseLookupKey(k *KeyInfo) (netip.Addr, error) {
	if k == nil {
		return netip.Addr{}, fmt.Errorf("%w: FIB lookup without a KEYINFO", ErrMalformed)
	}
	if k.KeyID != FIBLookupKeyID {
		return netip.Addr{}, fmt.Errorf("%w: FIB lookup key ID %d, want %d", ErrMalformed, k.KeyID, FIBLookupKeyID)
	}
	a, ok := netip.AddrFromSlice(k.Data)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: FIB lookup key of %d bytes, want an address of 4 or 16", ErrMalformed, len(k.Data))
	}
	return a, nil
}

// fibLookupHopLen is a hop's encoding: ID(32) Family(8: 0 connected, 4 or
// 6) Flags(8: 1 resolved) pad(16) Port(32) RemoteFE(32) RemotePort(32)
// SrcMAC(48) DstMAC(48) Gateway(128, zero when connected; an IPv4 one in
// the first 4 bytes).
const fibLookupHopLen = 4 + 4 + 4 + 4 + 4 + 6 + 6 + 16

// MaxFIBLookupHops is the most hops an answer carries (an ECMP group's).
const MaxFIBLookupHops = 64

// MarshalFullData encodes l as the FULLDATA of a FIBLookupComponent GET:
// Kind(8) HopCount(8) pad(16) ID(32), then the hops.
func (l FIBLookup) MarshalFullData() ([]byte, error) {
	if len(l.Hops) > MaxFIBLookupHops {
		return nil, fmt.Errorf("%w: FIB lookup with %d hops, at most %d", ErrInvalid, len(l.Hops), MaxFIBLookupHops)
	}
	b := make([]byte, 8, 8+fibLookupHopLen*len(l.Hops))
	b[0], b[1] = byte(l.Kind), byte(len(l.Hops))
	binary.BigEndian.PutUint32(b[4:], l.ID)
	for _, h := range l.Hops {
		var fam, flags byte
		var gw [16]byte
		switch {
		case h.Gateway.Is4():
			fam, gw = 4, [16]byte(append(h.Gateway.AsSlice(), make([]byte, 12)...))
		case h.Gateway.Is6():
			fam, gw = 6, h.Gateway.As16()
		}
		if h.Resolved {
			flags = 1
		}
		b = binary.BigEndian.AppendUint32(b, h.ID)
		b = append(b, fam, flags, 0, 0)
		b = binary.BigEndian.AppendUint32(b, h.Port)
		b = binary.BigEndian.AppendUint32(b, h.RemoteFE)
		b = binary.BigEndian.AppendUint32(b, h.RemotePort)
		b = append(b, h.SrcMAC[:]...)
		b = append(b, h.DstMAC[:]...)
		b = append(b, gw[:]...)
	}
	return b, nil
}

// ParseFIBLookup decodes a FIBLookupComponent FULLDATA, refusing a
// truncated or inconsistent one.
func ParseFIBLookup(b []byte) (FIBLookup, error) {
	if len(b) < 8 {
		return FIBLookup{}, fmt.Errorf("%w: FIB lookup of %d bytes", ErrMalformed, len(b))
	}
	l := FIBLookup{Kind: FIBLookupKind(b[0]), ID: binary.BigEndian.Uint32(b[4:])}
	n := int(b[1])
	switch {
	case l.Kind > FIBLookupLocal:
		return FIBLookup{}, fmt.Errorf("%w: FIB lookup kind %d", ErrMalformed, b[0])
	case len(b) != 8+n*fibLookupHopLen:
		return FIBLookup{}, fmt.Errorf("%w: FIB lookup of %d bytes for %d hops", ErrMalformed, len(b), n)
	}
	for i := range n {
		p := b[8+i*fibLookupHopLen:]
		h := FIBLookupHop{ID: binary.BigEndian.Uint32(p), Resolved: p[5]&1 != 0, Port: binary.BigEndian.Uint32(p[8:]),
			RemoteFE: binary.BigEndian.Uint32(p[12:]), RemotePort: binary.BigEndian.Uint32(p[16:])}
		copy(h.SrcMAC[:], p[20:26])
		copy(h.DstMAC[:], p[26:32])
		switch p[4] {
		case 0:
		case 4:
			h.Gateway = netip.AddrFrom4([4]byte(p[32:36]))
		case 6:
			h.Gateway = netip.AddrFrom16([16]byte(p[32:48]))
		default:
			return FIBLookup{}, fmt.Errorf("%w: FIB lookup hop %d of family %d", ErrMalformed, i, p[4])
		}
		l.Hops = append(l.Hops, h)
	}
	return l, nil
}
