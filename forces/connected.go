package forces

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Connected subnets across FEs (issue 23, one port space): the CE tells
// every FE, for each subnet of a port that is up on an associated FE,
// which FE and which port of it the subnet is on, so that an FE forwards
// to a host on another FE's port as it forwards to a gateway behind one.
// A splitplane LFB per address family, class IDs above 65535 like the
// nexthop egress LFBs:
//
//	SplitplaneIPv4ConnectedEgress (65541), SplitplaneIPv6ConnectedEgress (65542)
//	  component 1: ConnectedEgressTable, array of ConnectedEgressInfo
//	    indexed by a connected row (0 to MaxConnectedRows-1).
//
// Both families share one row numbering (a row index is in one of the two
// tables at a time), so that a row is an NE-wide key on its own: the
// egress FE maps it to the port's connected nexthop, the ingress FE sends
// it in the inter-FE frame. FULLDATA of a row, fields aligned on 32 bits
// as IPv4PrefixInfo's:
//
//	IPv4 (16 bytes)                     IPv6 (28 bytes)
//	 0  Address   byte[4]                0  Address   byte[16]
//	 4  Prefixlen uchar + 3 pad         16  Prefixlen uchar + 3 pad
//	 8  FE        uint32 (sub-ID)       20  FE        uint32
//	12  Port      uint32 (PHYPortID)    24  Port      uint32
//
// Every FE gets the same rows. An FE lists these classes in its
// SupportedLFBs; a CE sends connected rows only to such FEs.
const (
	ClassIPv4ConnectedEgress uint32 = 65541
	ClassIPv6ConnectedEgress uint32 = 65542

	// CompConnectedEgressTable is the table of both connected classes.
	CompConnectedEgressTable uint32 = 1

	// MaxConnectedRows bounds the connected rows of both families
	// together: rows are 0 to MaxConnectedRows-1.
	MaxConnectedRows = 4096

	// ConnectedEgressInfoLen and ConnectedEgressInfo6Len are the FULLDATA
	// sizes of an IPv4 and an IPv6 row.
	ConnectedEgressInfoLen  = 16
	ConnectedEgressInfo6Len = 28
)

// ConnectedEgressInfo is a row of a connected egress table: a port's
// subnet, the FE it is on (sub-ID) and the port (PHYPortID).
type ConnectedEgressInfo struct {
	Prefix netip.Prefix // host bits are cleared on encoding
	FE     uint32
	Port   uint32
}

// Validate reports whether c can be encoded as a row of the IPv6 table
// when v6, of the IPv4 table otherwise: a valid prefix of that family and
// an FE sub-ID of 1 to MaxFESubID.
func (c ConnectedEgressInfo) Validate(v6 bool) error {
	a := c.Prefix.Addr()
	if !c.Prefix.IsValid() || a.Is4() == v6 || a.Is4In6() {
		fam := "IPv4"
		if v6 {
			fam = "IPv6"
		}
		return fmt.Errorf("%w: connected egress prefix %v is not a valid %s prefix", ErrInvalid, c.Prefix, fam)
	}
	if c.FE == 0 || c.FE > MaxFESubID {
		return fmt.Errorf("%w: connected egress %v: FE %d, want 1 to %d", ErrInvalid, c.Prefix, c.FE, MaxFESubID)
	}
	return nil
}

// AppendFullData appends the FULLDATA encoding of c (IPv6 when v6) to b, or
// returns b and Validate's error.
func (c ConnectedEgressInfo) AppendFullData(b []byte, v6 bool) ([]byte, error) {
	if err := c.Validate(v6); err != nil {
		return b, err
	}
	if a := c.Prefix.Masked().Addr(); v6 {
		a16 := a.As16()
		b = append(b, a16[:]...)
	} else {
		a4 := a.As4()
		b = append(b, a4[:]...)
	}
	b = append(b, byte(c.Prefix.Bits()), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, c.FE)
	return binary.BigEndian.AppendUint32(b, c.Port), nil
}

// ParseConnectedEgressInfo decodes a row's FULLDATA (IPv6 when v6): exactly
// ConnectedEgressInfoLen (or ConnectedEgressInfo6Len) bytes, a prefix
// length within the family's, zero padding and an FE sub-ID of 1 to
// MaxFESubID. The prefix is returned masked.
func ParseConnectedEgressInfo(b []byte, v6 bool) (ConnectedEgressInfo, error) {
	alen, want, maxBits := 4, ConnectedEgressInfoLen, 32
	if v6 {
		alen, want, maxBits = 16, ConnectedEgressInfo6Len, 128
	}
	if len(b) != want {
		return ConnectedEgressInfo{}, fmt.Errorf("%w: ConnectedEgressInfo is %d bytes, want %d", ErrMalformed, len(b), want)
	}
	a, _ := netip.AddrFromSlice(b[:alen])
	bits, pad := int(b[alen]), b[alen+1:alen+4]
	if bits > maxBits {
		return ConnectedEgressInfo{}, fmt.Errorf("%w: ConnectedEgressInfo prefix length %d, want 0 to %d", ErrMalformed, bits, maxBits)
	}
	if pad[0]|pad[1]|pad[2] != 0 {
		return ConnectedEgressInfo{}, fmt.Errorf("%w: ConnectedEgressInfo prefix length padding %x not zero", ErrMalformed, pad)
	}
	if v6 && a.Is4In6() {
		return ConnectedEgressInfo{}, fmt.Errorf("%w: ConnectedEgressInfo IPv6 prefix %v is an IPv4-mapped address", ErrMalformed, a)
	}
	c := ConnectedEgressInfo{
		Prefix: netip.PrefixFrom(a, bits).Masked(),
		FE:     binary.BigEndian.Uint32(b[alen+4:]),
		Port:   binary.BigEndian.Uint32(b[alen+8:]),
	}
	if c.FE == 0 || c.FE > MaxFESubID {
		return ConnectedEgressInfo{}, fmt.Errorf("%w: ConnectedEgressInfo %v: FE %d", ErrMalformed, c.Prefix, c.FE)
	}
	return c, nil
}
