//go:build linux

package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// SetRoute makes packets to p (masked to its prefix length) use nexthop
// nexthopID, or the nexthop group nexthopID (see GroupIDBase), replacing
// any previous route for p. p is IPv4 or IPv6 (not
// IPv4-mapped IPv6). Setting a route it already has changes nothing.
func (d *Datapath) SetRoute(p netip.Prefix, nexthopID uint32) error {
	if err := d.SetRoutes([]Route{{Prefix: p, Nexthop: nexthopID}}); err != nil {
		return fmt.Errorf("set route: %w", err)
	}
	return nil
}

// SetRoutes sets all routes as SetRoute does, as one batch: either all are
// applied, or none is and the error says why (ErrInvalid for a bad route,
// ErrFIBFull when the groups of either family's table, MaxRoutes or
// MaxRoutes6 would be exceeded). Packets forwarded meanwhile use, for each address, its old or
// its new route; longer prefixes are installed first so that no address
// passes through a shorter prefix of the batch that does not apply to it. A
// prefix given twice ends with the last nexthop.
func (d *Datapath) SetRoutes(routes []Route) error {
	var ps []pfx.V4
	var nhs []uint32
	var ps6 []prefix6
	var nhs6 []uint32
	for _, r := range routes {
		p, p6, is6, err := routePrefix(r.Prefix)
		if err != nil {
			return err
		}
		if err := checkRouteTarget(r.Nexthop); err != nil {
			return fmt.Errorf("route %s: %w", r.Prefix.Masked(), err)
		}
		if is6 {
			ps6, nhs6 = append(ps6, p6), append(nhs6, r.Nexthop)
		} else {
			ps, nhs = append(ps, p), append(nhs, r.Nexthop)
		}
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	// Both families are checked (and their groups reserved) before either
	// changes; after that nothing can fail.
	if err := d.fib6.prepare(ps6); err != nil {
		return err
	}
	if err := d.fib.prepare(ps); err != nil {
		return err
	}
	d.fib6.apply(ps6, nhs6)
	d.fib.apply(ps, nhs)
	return nil
}

// DeleteRoute removes the route for p (masked to its prefix length); a
// missing route gives an error wrapping ErrNotFound. Addresses it covered
// fall back to the next shorter prefix that covers them.
func (d *Datapath) DeleteRoute(p netip.Prefix) error {
	if err := d.DeleteRoutes([]netip.Prefix{p}); err != nil {
		return fmt.Errorf("delete route: %w", err)
	}
	return nil
}

// DeleteRoutes removes the routes for all prefixes as one batch: if one is
// not present (ErrNotFound) or invalid (ErrInvalid), none is removed.
// Shorter prefixes are removed first, so that no address passes through a
// prefix of the batch that does not apply to it. A prefix given twice is
// removed once.
func (d *Datapath) DeleteRoutes(prefixes []netip.Prefix) error {
	var ps []pfx.V4
	var ps6 []prefix6
	for _, p := range prefixes {
		p4, p6, is6, err := routePrefix(p)
		if err != nil {
			return err
		}
		if is6 {
			ps6 = append(ps6, p6)
		} else {
			ps = append(ps, p4)
		}
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	// Both families are checked before either changes.
	if err := d.fib.check(ps); err != nil {
		return err
	}
	if err := d.fib6.check(ps6); err != nil {
		return err
	}
	d.fib6.deleteChecked(ps6)
	d.fib.deleteChecked(ps)
	return nil
}

// RouteCount returns the number of routes of both address families.
func (d *Datapath) RouteCount() (int, error) {
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return 0, ErrClosed
	}
	return d.fib.count + d.fib6.count, nil
}

// SetNexthop stores nexthop id, replacing what was there.
func (d *Datapath) SetNexthop(id uint32, nh Nexthop) error {
	if err := checkNexthopID(id); err != nil {
		return fmt.Errorf("set nexthop: %w", err)
	}
	if err := checkIfindex(nh.Ifindex); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	if err := checkMAC("source MAC", nh.SrcMAC); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	v := xdpNexthop{Ifindex: uint32(nh.Ifindex)}
	var ref gwRef
	if gw := nh.Gateway; gw.IsValid() && !gw.IsUnspecified() {
		is6, err := checkAddr("gateway", gw)
		if err != nil {
			return fmt.Errorf("set nexthop %d: %w", id, err)
		}
		if is6 {
			v.GwFamily, v.Gateway6 = gwIPv6, gw.As16()
		} else {
			v.GwFamily, v.Gateway = gwIPv4, be32(gw)
		}
		ref = gwRef{nh.Ifindex, gw}
	}
	copy(v.Smac[:], nh.SrcMAC)
	if err := d.putNexthop(id, v, ref); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	return nil
}

// DeleteNexthop empties slot id; routes still pointing at it then send their
// packets to the kernel. An empty slot gives an error wrapping ErrNotFound.
func (d *Datapath) DeleteNexthop(id uint32) error {
	if err := checkNexthopID(id); err != nil {
		return fmt.Errorf("delete nexthop: %w", err)
	}
	var v xdpNexthop
	if err := d.objs.Nexthops.Lookup(id, &v); err != nil {
		return fmt.Errorf("delete nexthop %d: %w", id, err)
	}
	if v.Ifindex == 0 {
		return fmt.Errorf("delete nexthop %d: %w", id, ErrNotFound)
	}
	// Array slots cannot be deleted; ifindex 0 marks them empty.
	if err := d.putNexthop(id, xdpNexthop{}, gwRef{}); err != nil {
		return fmt.Errorf("delete nexthop %d: %w", id, err)
	}
	return nil
}

// SetNeighbor records that ip is reachable at mac through port ifindex.
func (d *Datapath) SetNeighbor(ifindex int, ip netip.Addr, mac net.HardwareAddr) error {
	key, err := neighKey(ifindex, ip)
	if err != nil {
		return fmt.Errorf("set neighbor: %w", err)
	}
	if err := checkMAC("neighbor MAC", mac); err != nil {
		return fmt.Errorf("set neighbor %s on %s: %w", ip, ifName(ifindex), err)
	}
	var v xdpNeigh
	copy(v.Mac[:], mac)
	d.nhMu.Lock()
	defer d.nhMu.Unlock()
	if err := d.neighMap(ip).Put(key, &v); err != nil {
		return fmt.Errorf("set neighbor %s on %s: %w", ip, ifName(ifindex), err)
	}
	if err := d.neighborChanged(gwRef{ifindex, ip}, mac); err != nil {
		return fmt.Errorf("set neighbor %s on %s: %w", ip, ifName(ifindex), err)
	}
	return nil
}

// DeleteNeighbor forgets the neighbour ip on port ifindex; a missing entry
// gives an error wrapping ErrNotFound.
func (d *Datapath) DeleteNeighbor(ifindex int, ip netip.Addr) error {
	key, err := neighKey(ifindex, ip)
	if err != nil {
		return fmt.Errorf("delete neighbor: %w", err)
	}
	what := fmt.Sprintf("delete neighbor %s on %s", ip, ifName(ifindex))
	d.nhMu.Lock()
	defer d.nhMu.Unlock()
	// The nexthops first: from then on they read the neighbour hash, and
	// find the entry gone.
	if err := d.neighborChanged(gwRef{ifindex, ip}, nil); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return deleteKey(d.neighMap(ip), key, what)
}

// SetLocalAddr marks ip (IPv4 or IPv6) as an address of the router: packets
// to it go to the kernel, after GTSM, control-flow steering and the policer
// (see SetGTSM, AddControlFlow, SetPolicer). IPv6 link-local and multicast
// destinations go to the kernel anyway, unprotected.
func (d *Datapath) SetLocalAddr(ip netip.Addr) error {
	m, key, err := d.localKey(ip)
	if err != nil {
		return fmt.Errorf("set local address: %w", err)
	}
	if err := m.Put(key, uint8(1)); err != nil {
		return fmt.Errorf("set local address %s: %w", ip, err)
	}
	return d.setLocalRange(ip, true)
}

// DeleteLocalAddr unmarks ip; a missing address gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteLocalAddr(ip netip.Addr) error {
	m, key, err := d.localKey(ip)
	if err != nil {
		return fmt.Errorf("delete local address: %w", err)
	}
	if err := d.setLocalRange(ip, false); err != nil {
		return err
	}
	return deleteKey(m, key, "delete local address "+ip.String())
}

// setLocalRange puts an IPv4 address of the router into the range table
// (on) or takes it out; local_addrs keeps it too, for the /16s on
// DIR-24-8 and the packets with options.
func (d *Datapath) setLocalRange(ip netip.Addr, on bool) error {
	if !ip.Unmap().Is4() {
		return nil
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	a := ip.Unmap().As4()
	d.fib.dxr.setLocal(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]), on)
	return nil
}

func (d *Datapath) localKey(ip netip.Addr) (*ebpf.Map, any, error) {
	is6, err := checkAddr("local address", ip)
	if err != nil {
		return nil, nil, err
	}
	if is6 {
		return d.objs.LocalAddrs6, ip.As16(), nil
	}
	return d.objs.LocalAddrs, be32(ip), nil
}

func deleteKey(m *ebpf.Map, key any, what string) error {
	err := m.Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// neighKey returns the key of neighbour ip on ifindex in the map of its
// family (see neighMap).
func neighKey(ifindex int, ip netip.Addr) (any, error) {
	if err := checkIfindex(ifindex); err != nil {
		return nil, err
	}
	is6, err := checkAddr("neighbor address", ip)
	if err != nil {
		return nil, err
	}
	if is6 {
		return &xdpNeighKey6{Ifindex: uint32(ifindex), Addr: ip.As16()}, nil
	}
	return &xdpNeighKey{Ifindex: uint32(ifindex), Addr: be32(ip)}, nil
}

// neighMap returns the neighbour map of ip's family; ip has passed checkAddr.
func (d *Datapath) neighMap(ip netip.Addr) *ebpf.Map {
	if ip.Is4() {
		return d.objs.Neighbors
	}
	return d.objs.Neighbors6
}

func checkNexthopID(id uint32) error {
	if id >= MaxNexthops {
		return fmt.Errorf("nexthop id %d out of range [0, %d): %w", id, MaxNexthops, ErrInvalid)
	}
	return nil
}

func checkIfindex(ifindex int) error {
	if ifindex <= 0 || ifindex > 1<<31-1 {
		return fmt.Errorf("ifindex %d out of range: %w", ifindex, ErrInvalid)
	}
	return nil
}

func checkMAC(field string, mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("%s %q is %d bytes, want 6: %w", field, mac.String(), len(mac), ErrInvalid)
	}
	return nil
}

// Values of nexthop.gw_family (GW_* in xdp.c).
const (
	gwIPv4 = 4
	gwIPv6 = 6
)

// checkAddr accepts IPv4 and IPv6 addresses and says which ip is. IPv4-mapped
// IPv6 addresses are refused (the IPv4 path never looks them up), and so are
// zones (the ifindex names the link).
func checkAddr(field string, ip netip.Addr) (is6 bool, err error) {
	switch {
	case ip.Is4():
		return false, nil
	case !ip.IsValid():
		return false, fmt.Errorf("%s %s is not IPv4 or IPv6: %w", field, ip, ErrInvalid)
	case ip.Is4In6():
		return false, fmt.Errorf("%s %s is IPv4-mapped IPv6, give the IPv4 address: %w", field, ip, ErrInvalid)
	case ip.Zone() != "":
		return false, fmt.Errorf("%s %s has a zone: %w", field, ip, ErrInvalid)
	}
	return true, nil
}

// be32 returns the IPv4 address as the uint32 whose in-memory bytes are in
// network order, as the BPF program keeps addresses.
func be32(ip netip.Addr) uint32 {
	a := ip.As4()
	return binary.NativeEndian.Uint32(a[:])
}

// ifName names a port in error messages.
func ifName(ifindex int) string {
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		return fmt.Sprintf("%s (ifindex %d)", ifi.Name, ifindex)
	}
	return fmt.Sprintf("ifindex %d", ifindex)
}

// FIBStats says how the IPv4 FIB is held: the range table's chunks (/16s)
// by form, and the bytes a lookup can read.
type FIBStats struct {
	DXRStats
	// LookupBytes is DXRStats.Bytes: what the lookups of this table read.
	// DIR24_8Bytes is what they would read from DIR-24-8 alone (tbl24 and
	// the tbl8 groups in use).
	LookupBytes, DIR24_8Bytes int
}

// FIBStats returns the IPv4 FIB's statistics.
func (d *Datapath) FIBStats() (FIBStats, error) {
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return FIBStats{}, ErrClosed
	}
	s := d.fib.dxr.statsNow()
	return FIBStats{
		DXRStats:     s,
		LookupBytes:  s.Bytes(),
		DIR24_8Bytes: 4 * (fibTbl24Entries + (d.fib.groupsInUse()-len(d.fib.quarantine))*fibGroupEntries),
	}, nil
}

// FIB6Stats says how the IPv6 FIB is held.
type FIB6Stats struct {
	DXR6Stats
	// StrideGroups are the stride table's groups in use. LookupBytes is
	// what the lookups of this table read: the range table's bytes
	// (DXR6Stats.Bytes) and, for the /16s and /24s it leaves to the
	// stride table, tbl16 and their groups. StrideBytes is what they
	// would read from the stride table alone (tbl16 and every group).
	StrideGroups, LookupBytes, StrideBytes int
}

// FIB6Stats returns the IPv6 FIB's statistics.
func (d *Datapath) FIB6Stats() (FIB6Stats, error) {
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib6 == nil {
		return FIB6Stats{}, ErrClosed
	}
	f := d.fib6
	groups := len(f.users) - len(f.free) - len(f.quarantine)
	s := f.dxr.statsNow()
	lookup := s.Bytes()
	if s.StrideChunks > 0 {
		lookup += 4 * (fib6Tbl16Entries + f.dxr.strideGroups()*fibGroupEntries)
	}
	return FIB6Stats{
		DXR6Stats:    s,
		StrideGroups: groups,
		LookupBytes:  lookup,
		StrideBytes:  4 * (fib6Tbl16Entries + groups*fibGroupEntries),
	}, nil
}
