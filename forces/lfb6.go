package forces

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// RFC 6956's IPv6 classes mirror the IPv4 ones: IPv6UcastLPM's IPv6PrefixTable
// (component 1) of IPv6PrefixInfo {IPv6Address, Prefixlen, HopSelector,
// ECMPFlag, DefaultRouteFlag} and IPv6NextHop's IPv6NextHopTable (component 1)
// of IPv6NextHopInfo {L3PortID, MTU, NextHopIPAddr, MediaEncapInfoIndex,
// LFBOutputSelectIndex}. They are packed like the IPv4 rows, with 16-byte
// addresses:
//
//	IPv6PrefixInfo (32 bytes)            IPv6NextHopInfo (32 bytes)
//	 0  IPv6Address      byte[16]         0  L3PortID             uint32
//	16  Prefixlen        uchar + 3 pad    4  MTU                  uint32
//	20  HopSelector      uint32           8  NextHopIPAddr        byte[16]
//	24  ECMPFlag         boolean + 3 pad 24  MediaEncapInfoIndex  uint32
//	28  DefaultRouteFlag boolean + 3 pad 28  LFBOutputSelectIndex uchar + 3 pad
const (
	CompIPv6PrefixTable  uint32 = 1
	CompIPv6NextHopTable uint32 = 1

	// IPv6PrefixInfoLen is the FULLDATA size of one IPv6PrefixInfo row.
	IPv6PrefixInfoLen = 32
	// IPv6NextHopInfoLen is the FULLDATA size of one IPv6NextHopInfo row.
	IPv6NextHopInfoLen = 32
)

// IPv6PrefixInfo is a row of the IPv6UcastLPM LFB's IPv6PrefixTable.
type IPv6PrefixInfo struct {
	Prefix       netip.Prefix // IPv6 (not IPv4-mapped); host bits are cleared on encoding
	HopSelector  uint32       // index into IPv6NextHopTable
	ECMP         bool
	DefaultRoute bool
}

// Validate reports whether p can be encoded.
func (p IPv6PrefixInfo) Validate() error {
	if !p.Prefix.IsValid() || !p.Prefix.Addr().Is6() || p.Prefix.Addr().Is4In6() || p.Prefix.Addr().Zone() != "" {
		return fmt.Errorf("%w: IPv6PrefixInfo prefix %v is not a valid IPv6 prefix", ErrInvalid, p.Prefix)
	}
	return nil
}

// MarshalFullData returns the 32-byte FULLDATA encoding of p, or nil when p
// fails Validate.
func (p IPv6PrefixInfo) MarshalFullData() []byte {
	b, err := p.AppendFullData(make([]byte, 0, IPv6PrefixInfoLen))
	if err != nil {
		return nil
	}
	return b
}

// AppendFullData appends the FULLDATA encoding of p to b, or returns b and
// Validate's error.
func (p IPv6PrefixInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return b, err
	}
	a := p.Prefix.Masked().Addr().As16()
	b = append(b, a[:]...)
	b = append(b, byte(p.Prefix.Bits()), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, p.HopSelector)
	b = append(b, boolByte(p.ECMP), 0, 0, 0)
	return append(b, boolByte(p.DefaultRoute), 0, 0, 0), nil
}

// ParseIPv6PrefixInfo decodes a FULLDATA value written by MarshalFullData,
// rejecting a wrong size, a prefix length over 128, non-zero padding,
// booleans other than 0 or 1 and IPv4-mapped addresses. The prefix is
// returned masked.
func ParseIPv6PrefixInfo(b []byte) (IPv6PrefixInfo, error) {
	if len(b) != IPv6PrefixInfoLen {
		return IPv6PrefixInfo{}, fmt.Errorf("%w: IPv6PrefixInfo is %d bytes, want %d", ErrMalformed, len(b), IPv6PrefixInfoLen)
	}
	if b[16] > 128 {
		return IPv6PrefixInfo{}, fmt.Errorf("%w: IPv6PrefixInfo prefix length %d", ErrMalformed, b[16])
	}
	_, err1 := padded(b[16:20])
	ecmp, err2 := padded(b[24:28])
	def, err3 := padded(b[28:32])
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return IPv6PrefixInfo{}, fmt.Errorf("IPv6PrefixInfo: %w", err)
		}
	}
	if ecmp > 1 || def > 1 {
		return IPv6PrefixInfo{}, fmt.Errorf("%w: IPv6PrefixInfo boolean not 0 or 1", ErrMalformed)
	}
	addr := netip.AddrFrom16([16]byte(b[0:16]))
	if addr.Is4In6() {
		return IPv6PrefixInfo{}, fmt.Errorf("%w: IPv6PrefixInfo address %s is IPv4-mapped", ErrMalformed, addr)
	}
	return IPv6PrefixInfo{
		Prefix:       netip.PrefixFrom(addr, int(b[16])).Masked(),
		HopSelector:  binary.BigEndian.Uint32(b[20:]),
		ECMP:         ecmp == 1,
		DefaultRoute: def == 1,
	}, nil
}

// IPv6NextHopInfo is a row of the IPv6NextHop LFB's IPv6NextHopTable.
type IPv6NextHopInfo struct {
	L3PortID             uint32
	MTU                  uint32
	NextHop              netip.Addr // IPv6; the zero Addr (directly connected) encodes as ::
	MediaEncapInfoIndex  uint32
	LFBOutputSelectIndex uint8
}

// Validate reports whether n can be encoded: NextHop must be zero or IPv6.
func (n IPv6NextHopInfo) Validate() error {
	if n.NextHop.IsValid() && (!n.NextHop.Is6() || n.NextHop.Is4In6()) {
		return fmt.Errorf("%w: IPv6NextHopInfo next hop %v is not IPv6", ErrInvalid, n.NextHop)
	}
	return nil
}

// MarshalFullData returns the 32-byte FULLDATA encoding of n, or nil when n
// fails Validate. A zone on the next hop is not carried.
func (n IPv6NextHopInfo) MarshalFullData() []byte {
	b, err := n.AppendFullData(make([]byte, 0, IPv6NextHopInfoLen))
	if err != nil {
		return nil
	}
	return b
}

// AppendFullData appends the FULLDATA encoding of n to b, or returns b and
// Validate's error. A zone on the next hop is not carried.
func (n IPv6NextHopInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return b, err
	}
	b = binary.BigEndian.AppendUint32(b, n.L3PortID)
	b = binary.BigEndian.AppendUint32(b, n.MTU)
	var a [16]byte
	if n.NextHop.IsValid() {
		a = n.NextHop.As16()
	}
	b = append(b, a[:]...)
	b = binary.BigEndian.AppendUint32(b, n.MediaEncapInfoIndex)
	return append(b, n.LFBOutputSelectIndex, 0, 0, 0), nil
}

// ParseIPv6NextHopInfo decodes a FULLDATA value written by MarshalFullData.
// :: comes back as the zero Addr.
func ParseIPv6NextHopInfo(b []byte) (IPv6NextHopInfo, error) {
	if len(b) != IPv6NextHopInfoLen {
		return IPv6NextHopInfo{}, fmt.Errorf("%w: IPv6NextHopInfo is %d bytes, want %d", ErrMalformed, len(b), IPv6NextHopInfoLen)
	}
	sel, err := padded(b[28:32])
	if err != nil {
		return IPv6NextHopInfo{}, fmt.Errorf("IPv6NextHopInfo: %w", err)
	}
	n := IPv6NextHopInfo{
		L3PortID:             binary.BigEndian.Uint32(b),
		MTU:                  binary.BigEndian.Uint32(b[4:]),
		MediaEncapInfoIndex:  binary.BigEndian.Uint32(b[24:]),
		LFBOutputSelectIndex: sel,
	}
	if a := [16]byte(b[8:24]); a != [16]byte{} {
		n.NextHop = netip.AddrFrom16(a)
		if n.NextHop.Is4In6() {
			return IPv6NextHopInfo{}, fmt.Errorf("%w: IPv6NextHopInfo next hop %s is IPv4-mapped", ErrMalformed, n.NextHop)
		}
	}
	return n, nil
}
