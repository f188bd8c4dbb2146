package forces

import (
	"encoding/binary"
	"fmt"
)

// One port space for several FEs (issue 23): each FE tells the CE which of
// its ports are inter-FE links and to which peer FE, and the CE tells every
// FE, for each nexthop row, which FE (and which port of it) the gateway is
// behind.
//
// Inter-FE links: component InterFELinksComponent of the port table's
// instance (PortTableClass, instance 1), read-only, a table of InterFELink
// rows indexed from 0. It sits beside the port table rather than in
// PortInfo because PortInfo's layout tolerates nothing after its addresses
// (an older CE refuses such a row: see ParsePortInfo), and the links are
// configuration, not port state: a link's state is its port's Up, which the
// port table and its events carry. An FE that does not know the component
// answers E_COMPONENT_DOES_NOT_EXIST, which a CE takes for no links.
//
// FULLDATA of an InterFELink row: Port(32: the port's PHYPortID, its
// ifindex) PeerFE(32: the peer FE's sub-ID, 1 to 0x3FFFFFFF, as in FEID).
// A parser reads the first 8 bytes and ignores whatever follows, in steps
// of 4, so a later version may append fields.
//
// Nexthop egress: a splitplane LFB per address family, with class IDs above
// 65535 like the ECMP groups:
//
//	SplitplaneIPv4NexthopEgress (65539), SplitplaneIPv6NexthopEgress (65540)
//	  component 1: EgressTable, array indexed by the family's nexthop row
//	    (HopSelector of its NextHop table) of NexthopEgressInfo.
//
// FULLDATA of an egress row: FE(32: the egress FE's sub-ID) Port(32: the
// PHYPortID of the egress port on that FE). Every FE gets the same rows (one
// FIB, one nexthop numbering); an FE whose own sub-ID is the row's FE
// forwards locally, any other reaches the egress FE over an inter-FE link.
// A nexthop without a row has no known egress (its gateway is behind no
// FE's port that is up): each FE resolves it through its own kernel, as
// before. An FE lists these classes in its SupportedLFBs; a CE sends egress
// rows only to such FEs.
const (
	InterFELinksComponent = 1003

	ClassIPv4NexthopEgress uint32 = 65539
	ClassIPv6NexthopEgress uint32 = 65540

	// CompNexthopEgressTable is the egress table of both egress classes.
	CompNexthopEgressTable uint32 = 1

	// MaxFESubID is the largest FE sub-ID (FEID's n).
	MaxFESubID = subIDMask
)

// FESubID returns the sub-ID of an FE ID (FEID's n).
func FESubID(id ID) uint32 { return uint32(id) & subIDMask }

// InterFELink is one inter-FE link of an FE: its port (PHYPortID) and the FE
// at the other end (sub-ID).
type InterFELink struct {
	Port   uint32
	PeerFE uint32
}

// AppendFullData appends the FULLDATA encoding of l to b.
func (l InterFELink) AppendFullData(b []byte) ([]byte, error) {
	if l.PeerFE == 0 || l.PeerFE > MaxFESubID {
		return b, fmt.Errorf("%w: inter-FE link on port %d: peer FE %d, want 1 to %d", ErrInvalid, l.Port, l.PeerFE, MaxFESubID)
	}
	b = binary.BigEndian.AppendUint32(b, l.Port)
	return binary.BigEndian.AppendUint32(b, l.PeerFE), nil
}

// ParseInterFELink decodes one InterFELink row: 8 bytes, and any fields a
// later version appended (ignored).
func ParseInterFELink(b []byte) (InterFELink, error) {
	if len(b) < 8 || len(b)%4 != 0 {
		return InterFELink{}, fmt.Errorf("%w: InterFELink is %d bytes, want 8 or more in steps of 4", ErrMalformed, len(b))
	}
	l := InterFELink{Port: binary.BigEndian.Uint32(b), PeerFE: binary.BigEndian.Uint32(b[4:])}
	if l.PeerFE == 0 || l.PeerFE > MaxFESubID {
		return InterFELink{}, fmt.Errorf("%w: InterFELink on port %d: peer FE %d", ErrMalformed, l.Port, l.PeerFE)
	}
	return l, nil
}

// MarshalInterFELinks returns the FULLDATA value of the inter-FE link
// table, rows indexed from 0.
func MarshalInterFELinks(rows []InterFELink) ([]byte, error) {
	return marshalTable(rows, InterFELink.AppendFullData)
}

// ParseInterFELinks decodes the FULLDATA value of the inter-FE link table.
func ParseInterFELinks(b []byte) ([]InterFELink, error) {
	return parseTable(b, "inter-FE links", ParseInterFELink)
}

// NexthopEgressInfo is a row of a nexthop egress table: the FE the nexthop's
// gateway is behind (sub-ID) and the port of that FE (PHYPortID).
type NexthopEgressInfo struct {
	FE   uint32
	Port uint32
}

// Validate reports whether e can be encoded: an FE sub-ID of 1 to
// MaxFESubID.
func (e NexthopEgressInfo) Validate() error {
	if e.FE == 0 || e.FE > MaxFESubID {
		return fmt.Errorf("%w: nexthop egress FE %d, want 1 to %d", ErrInvalid, e.FE, MaxFESubID)
	}
	return nil
}

// AppendFullData appends the FULLDATA encoding of e to b, or returns b and
// Validate's error.
func (e NexthopEgressInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return b, err
	}
	b = binary.BigEndian.AppendUint32(b, e.FE)
	return binary.BigEndian.AppendUint32(b, e.Port), nil
}

// ParseNexthopEgressInfo decodes an egress row's FULLDATA: exactly 8 bytes
// and an FE sub-ID of 1 to MaxFESubID.
func ParseNexthopEgressInfo(b []byte) (NexthopEgressInfo, error) {
	if len(b) != 8 {
		return NexthopEgressInfo{}, fmt.Errorf("%w: NexthopEgressInfo is %d bytes, want 8", ErrMalformed, len(b))
	}
	e := NexthopEgressInfo{FE: binary.BigEndian.Uint32(b), Port: binary.BigEndian.Uint32(b[4:])}
	if e.FE == 0 || e.FE > MaxFESubID {
		return NexthopEgressInfo{}, fmt.Errorf("%w: NexthopEgressInfo FE %d", ErrMalformed, e.FE)
	}
	return e, nil
}
