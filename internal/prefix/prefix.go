// Package prefix packs IPv4 prefixes into integers: the one key the CE's
// RIB and FIB, the FE's table and the FE's datapath all store prefixes
// under; and IPv6 addresses as two integers (U128) for mask arithmetic. It
// imports nothing of the project, so any layer may use it.
package prefix

import "net/netip"

// V4 is a masked IPv4 prefix packed into an integer, address<<8 | length.
// As a map key it hashes fast (internal/flatmap's tables hold a million of
// them) and holds no pointer for the garbage collector to follow, unlike
// netip.Prefix. The zero value is 0.0.0.0/0.
type V4 uint64

// Make packs the prefix of length bits (at most 32) at addr, an address in
// host order, masking the bits beyond the length.
func Make(addr uint32, bits uint8) V4 {
	addr &^= 1<<(32-uint32(bits)) - 1 // a shift by 32 gives 0: /0 keeps no bit
	return V4(uint64(addr)<<8 | uint64(bits))
}

// FromV4 packs p, which must be a valid IPv4 prefix, masked.
func FromV4(p netip.Prefix) V4 {
	a := p.Addr().As4()
	return Make(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]), uint8(p.Bits()))
}

// Addr is k's address in host order.
func (k V4) Addr() uint32 { return uint32(k >> 8) }

// Bits is k's length.
func (k V4) Bits() uint8 { return uint8(k) }

// Prefix returns k as a netip.Prefix.
func (k V4) Prefix() netip.Prefix {
	a := k.Addr()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), int(k.Bits()))
}

// String formats k as a netip.Prefix does.
func (k V4) String() string { return k.Prefix().String() }
