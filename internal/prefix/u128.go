package prefix

import "encoding/binary"

// U128 is an IPv6 address as two 64-bit halves, for the address arithmetic
// of masks and host parts that netip.Addr does not offer.
type U128 struct{ Hi, Lo uint64 }

// U128Of splits a 16-byte address.
func U128Of(a [16]byte) U128 {
	return U128{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

// Bytes is the address as 16 bytes.
func (x U128) Bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.Hi)
	binary.BigEndian.PutUint64(b[8:], x.Lo)
	return b
}

// Mask128 returns the netmask of a /bits (0 to 128).
func Mask128(bits int) U128 {
	switch {
	case bits <= 0:
		return U128{}
	case bits <= 64:
		return U128{^uint64(0) << (64 - bits), 0}
	case bits >= 128:
		return U128{^uint64(0), ^uint64(0)}
	}
	return U128{^uint64(0), ^uint64(0) << (128 - bits)}
}

// And, Or and Not are the bitwise operations.
func (x U128) And(m U128) U128 { return U128{x.Hi & m.Hi, x.Lo & m.Lo} }

// Or is x | m.
func (x U128) Or(m U128) U128 { return U128{x.Hi | m.Hi, x.Lo | m.Lo} }

// Not is ^x.
func (x U128) Not() U128 { return U128{^x.Hi, ^x.Lo} }
