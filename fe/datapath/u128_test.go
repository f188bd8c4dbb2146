//go:build linux

package datapath

import "encoding/binary"

// u128 is an IPv6 address as two halves, for address arithmetic in tests.
type u128 struct{ hi, lo uint64 }

func u128Of(a [16]byte) u128 {
	return u128{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

func (x u128) bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return b
}

// mask128 returns the netmask of a /bits.
func mask128(bits int) u128 {
	switch {
	case bits == 0:
		return u128{}
	case bits <= 64:
		return u128{^uint64(0) << (64 - bits), 0}
	}
	return u128{^uint64(0), ^uint64(0) << (128 - bits)}
}

func (x u128) and(m u128) u128 { return u128{x.hi & m.hi, x.lo & m.lo} }
func (x u128) or(m u128) u128  { return u128{x.hi | m.hi, x.lo | m.lo} }
func (x u128) not() u128       { return u128{^x.hi, ^x.lo} }
