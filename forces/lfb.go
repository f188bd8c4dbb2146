package forces

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// LFB class IDs (IANA "Logical Functional Block (LFB) Class Names and Class
// Identifiers"). 1 and 2 come from RFC 5812 and RFC 5810; 3-17 from RFC 6956
// §8.1. The RFC 6956 numbers are given from the author's knowledge of the RFC;
// they could not be re-checked against its text here.
const (
	ClassFEObject              uint32 = 1
	ClassFEProtocol            uint32 = 2
	ClassEtherPHYCop           uint32 = 3
	ClassEtherMACIn            uint32 = 4
	ClassEtherClassifier       uint32 = 5
	ClassEtherEncap            uint32 = 6
	ClassEtherMACOut           uint32 = 7
	ClassIPv4Validator         uint32 = 8
	ClassIPv6Validator         uint32 = 9
	ClassIPv4UcastLPM          uint32 = 10
	ClassIPv6UcastLPM          uint32 = 11
	ClassIPv4NextHop           uint32 = 12
	ClassIPv6NextHop           uint32 = 13
	ClassRedirectIn            uint32 = 14
	ClassRedirectOut           uint32 = 15
	ClassBasicMetadataDispatch uint32 = 16
	ClassGenericScheduler      uint32 = 17
)

// MaxNexthopID is the highest nexthop row (HopSelector) a CE programs into an
// FE's next-hop tables. The FE keeps the IDs above it for its own connected
// routes, so the CE hands out no higher ID and the FE refuses one.
const MaxNexthopID = 0xFBFF

// MaxGroupID is the highest ECMP group row a CE programs into an FE's group
// tables; the FE refuses a higher one.
const MaxGroupID = 0xFFFF

var classNames = [...]string{
	ClassFEObject:              "FEObject",
	ClassFEProtocol:            "FEProtocolObject",
	ClassEtherPHYCop:           "EtherPHYCop",
	ClassEtherMACIn:            "EtherMACIn",
	ClassEtherClassifier:       "EtherClassifier",
	ClassEtherEncap:            "EtherEncap",
	ClassEtherMACOut:           "EtherMACOut",
	ClassIPv4Validator:         "IPv4Validator",
	ClassIPv6Validator:         "IPv6Validator",
	ClassIPv4UcastLPM:          "IPv4UcastLPM",
	ClassIPv6UcastLPM:          "IPv6UcastLPM",
	ClassIPv4NextHop:           "IPv4NextHop",
	ClassIPv6NextHop:           "IPv6NextHop",
	ClassRedirectIn:            "RedirectIn",
	ClassRedirectOut:           "RedirectOut",
	ClassBasicMetadataDispatch: "BasicMetadataDispatch",
	ClassGenericScheduler:      "GenericScheduler",
}

// ClassName returns the registered name of LFB class id, or "LFBClass(n)".
func ClassName(id uint32) string {
	if id < uint32(len(classNames)) && classNames[id] != "" {
		return classNames[id]
	}
	switch id {
	case ClassIPv4ECMP:
		return "SplitplaneIPv4ECMP"
	case ClassIPv6ECMP:
		return "SplitplaneIPv6ECMP"
	case ClassIPv4NexthopEgress:
		return "SplitplaneIPv4NexthopEgress"
	case ClassIPv6NexthopEgress:
		return "SplitplaneIPv6NexthopEgress"
	case ClassIPv4ConnectedEgress:
		return "SplitplaneIPv4ConnectedEgress"
	case ClassIPv6ConnectedEgress:
		return "SplitplaneIPv6ConnectedEgress"
	}
	return fmt.Sprintf("LFBClass(%d)", id)
}

// Component IDs of RFC 6956 used by splitplane (author's knowledge of the RFC).
const (
	// IPv4UcastLPM: the prefix table, an array of IPv4PrefixInfo.
	CompIPv4PrefixTable uint32 = 1
	// IPv4PrefixInfo fields.
	FieldIPv4Address      uint32 = 1
	FieldPrefixlen        uint32 = 2
	FieldHopSelector      uint32 = 3
	FieldECMPFlag         uint32 = 4
	FieldDefaultRouteFlag uint32 = 5

	// IPv4NextHop: the next-hop table, an array of IPv4NextHopInfo.
	CompIPv4NextHopTable uint32 = 1
	// IPv4NextHopInfo fields.
	FieldL3PortID             uint32 = 1
	FieldMTU                  uint32 = 2
	FieldNextHopIPAddr        uint32 = 3
	FieldMediaEncapInfoIndex  uint32 = 4
	FieldLFBOutputSelectIndex uint32 = 5
)

// FULLDATA encoding of struct rows.
//
// RFC 5810's data packing rules put a struct's fields in the FULLDATA value in
// component-ID order, and, when the PATH already names the row index (as in
// {table, row}), the value holds only the row content. Every field is aligned
// on a 32-bit boundary: a field smaller than 32 bits (uchar, boolean) takes
// one byte, left-aligned, followed by three zero bytes. Booleans are 0 or 1.
// Multi-byte integers are big-endian; IPv4 addresses are in network order.
// This reading of the packing rule is the author's; it could not be checked
// against the RFC text from this workplace.
//
//	IPv4PrefixInfo (20 bytes)            IPv4NextHopInfo (20 bytes)
//	 0  IPv4Address      byte[4]          0  L3PortID             uint32
//	 4  Prefixlen        uchar + 3 pad    4  MTU                  uint32
//	 8  HopSelector      uint32           8  NextHopIPAddr        byte[4]
//	12  ECMPFlag         boolean + 3 pad 12  MediaEncapInfoIndex  uint32
//	16  DefaultRouteFlag boolean + 3 pad 16  LFBOutputSelectIndex uchar + 3 pad
const (
	// IPv4PrefixInfoLen is the FULLDATA size of one IPv4PrefixInfo row.
	IPv4PrefixInfoLen = 20
	// IPv4NextHopInfoLen is the FULLDATA size of one IPv4NextHopInfo row.
	IPv4NextHopInfoLen = 20
)

// IPv4PrefixInfo is a row of the IPv4UcastLPM LFB's IPv4PrefixTable.
type IPv4PrefixInfo struct {
	Prefix       netip.Prefix // IPv4, host bits are cleared on encoding
	HopSelector  uint32       // index into IPv4NextHopTable (or an ECMP group)
	ECMP         bool
	DefaultRoute bool
}

// Validate reports whether p can be encoded: Prefix must be a valid IPv4 prefix.
func (p IPv4PrefixInfo) Validate() error {
	if !p.Prefix.IsValid() || !p.Prefix.Addr().Is4() {
		return fmt.Errorf("%w: IPv4PrefixInfo prefix %v is not a valid IPv4 prefix", ErrInvalid, p.Prefix)
	}
	return nil
}

// MarshalFullData returns the 20-byte FULLDATA encoding of p, or nil when p
// fails Validate (BuildConfig rejects a SET without data).
func (p IPv4PrefixInfo) MarshalFullData() []byte {
	b, err := p.AppendFullData(make([]byte, 0, IPv4PrefixInfoLen))
	if err != nil {
		return nil
	}
	return b
}

// AppendFullData appends the FULLDATA encoding of p to b, or returns b and
// Validate's error.
func (p IPv4PrefixInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return b, err
	}
	a := p.Prefix.Masked().Addr().As4()
	b = append(b, a[:]...)
	b = append(b, byte(p.Prefix.Bits()), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, p.HopSelector)
	b = append(b, boolByte(p.ECMP), 0, 0, 0)
	return append(b, boolByte(p.DefaultRoute), 0, 0, 0), nil
}

// ParseIPv4PrefixInfo decodes a FULLDATA value written by MarshalFullData. It
// rejects a wrong size, a prefix length over 32, non-zero padding and
// booleans other than 0 or 1. The prefix is returned masked.
func ParseIPv4PrefixInfo(b []byte) (IPv4PrefixInfo, error) {
	if len(b) != IPv4PrefixInfoLen {
		return IPv4PrefixInfo{}, fmt.Errorf("%w: IPv4PrefixInfo is %d bytes, want %d", ErrMalformed, len(b), IPv4PrefixInfoLen)
	}
	// The length and the two booleans are each a byte and three of
	// padding: checked a word at a time, as this runs for every route of
	// a full sync (the error says which).
	bits, ecmp, def := binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[12:]), binary.BigEndian.Uint32(b[16:])
	if bits&0xFFFFFF != 0 || bits>>24 > 32 || ecmp&^(1<<24) != 0 || def&^(1<<24) != 0 {
		return IPv4PrefixInfo{}, ipv4PrefixInfoError(b)
	}
	// Masked as an integer: netip's Masked costs more than the rest of the
	// parse.
	a := binary.BigEndian.Uint32(b) &^ (1<<(32-b[4]) - 1)
	return IPv4PrefixInfo{
		Prefix:       netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), int(b[4])),
		HopSelector:  binary.BigEndian.Uint32(b[8:]),
		ECMP:         ecmp != 0,
		DefaultRoute: def != 0,
	}, nil
}

// ipv4PrefixInfoError says what is wrong with b, an IPv4PrefixInfo of the
// right size that ParseIPv4PrefixInfo refused.
func ipv4PrefixInfoError(b []byte) error {
	if b[4] > 32 {
		return fmt.Errorf("%w: IPv4PrefixInfo prefix length %d", ErrMalformed, b[4])
	}
	ecmp, err1 := padded(b[12:16])
	def, err2 := padded(b[16:20])
	_, err3 := padded(b[4:8])
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return fmt.Errorf("IPv4PrefixInfo: %w", err)
		}
	}
	if ecmp > 1 || def > 1 {
		return fmt.Errorf("%w: IPv4PrefixInfo boolean not 0 or 1", ErrMalformed)
	}
	return fmt.Errorf("%w: IPv4PrefixInfo", ErrMalformed) // not reached
}

// IPv4NextHopInfo is a row of the IPv4NextHop LFB's IPv4NextHopTable.
type IPv4NextHopInfo struct {
	L3PortID             uint32
	MTU                  uint32
	NextHop              netip.Addr // IPv4; the zero Addr (directly connected) encodes as 0.0.0.0
	MediaEncapInfoIndex  uint32
	LFBOutputSelectIndex uint8
}

// Validate reports whether n can be encoded: NextHop must be zero or IPv4.
func (n IPv4NextHopInfo) Validate() error {
	if n.NextHop.IsValid() && !n.NextHop.Is4() {
		return fmt.Errorf("%w: IPv4NextHopInfo next hop %v is not IPv4", ErrInvalid, n.NextHop)
	}
	return nil
}

// MarshalFullData returns the 20-byte FULLDATA encoding of n, or nil when n
// fails Validate.
func (n IPv4NextHopInfo) MarshalFullData() []byte {
	b, err := n.AppendFullData(make([]byte, 0, IPv4NextHopInfoLen))
	if err != nil {
		return nil
	}
	return b
}

// AppendFullData appends the FULLDATA encoding of n to b, or returns b and
// Validate's error.
func (n IPv4NextHopInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return b, err
	}
	b = binary.BigEndian.AppendUint32(b, n.L3PortID)
	b = binary.BigEndian.AppendUint32(b, n.MTU)
	var a [4]byte
	if n.NextHop.IsValid() {
		a = n.NextHop.As4()
	}
	b = append(b, a[:]...)
	b = binary.BigEndian.AppendUint32(b, n.MediaEncapInfoIndex)
	return append(b, n.LFBOutputSelectIndex, 0, 0, 0), nil
}

// ParseIPv4NextHopInfo decodes a FULLDATA value written by MarshalFullData.
// 0.0.0.0 comes back as the zero Addr.
func ParseIPv4NextHopInfo(b []byte) (IPv4NextHopInfo, error) {
	if len(b) != IPv4NextHopInfoLen {
		return IPv4NextHopInfo{}, fmt.Errorf("%w: IPv4NextHopInfo is %d bytes, want %d", ErrMalformed, len(b), IPv4NextHopInfoLen)
	}
	sel, err := padded(b[16:20])
	if err != nil {
		return IPv4NextHopInfo{}, fmt.Errorf("IPv4NextHopInfo: %w", err)
	}
	n := IPv4NextHopInfo{
		L3PortID:             binary.BigEndian.Uint32(b),
		MTU:                  binary.BigEndian.Uint32(b[4:]),
		MediaEncapInfoIndex:  binary.BigEndian.Uint32(b[12:]),
		LFBOutputSelectIndex: sel,
	}
	if a := [4]byte(b[8:12]); a != [4]byte{} {
		n.NextHop = netip.AddrFrom4(a)
	}
	return n, nil
}

// padded returns the first byte of a 4-byte padded field and checks that the
// padding is zero.
func padded(b []byte) (byte, error) {
	if b[1] != 0 || b[2] != 0 || b[3] != 0 {
		return 0, fmt.Errorf("%w: non-zero padding", ErrMalformed)
	}
	return b[0], nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
