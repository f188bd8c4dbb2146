package forces

import (
	"encoding/binary"
	"fmt"
)

// ECMP groups.
//
// RFC 6956's IPv4UcastLPM and IPv6UcastLPM mark a route as equal-cost
// multipath with the ECMPFlag of its prefix row; the HopSelector of such a
// row then selects an ECMP group, which RFC 6956 leaves to an LFB it does not
// define. splitplane defines that LFB, one class per address family, with
// class IDs above 65535, outside the range IANA assigns:
//
//	SplitplaneIPv4ECMP (65537), SplitplaneIPv6ECMP (65538)
//	  component 1: GroupTable, array indexed by group ID of
//	    ECMPGroupInfo: the HopSelectors (rows of the family's NextHop
//	    table) of the group's members, 1 to MaxECMPMembers of them.
//
// FULLDATA of a group row: the members as uint32s, back to back (4 bytes
// each). An FE that supports ECMP groups lists these classes in its
// SupportedLFBs; a CE sends groups only to such FEs.
const (
	ClassIPv4ECMP uint32 = 65537
	ClassIPv6ECMP uint32 = 65538

	// CompECMPGroupTable is the group table of both ECMP classes.
	CompECMPGroupTable uint32 = 1

	// MaxECMPMembers is the most members a group may have.
	MaxECMPMembers = 16
)

// ECMPGroupInfo is a row of an ECMP group table.
type ECMPGroupInfo struct {
	Members []uint32 // HopSelectors of the family's NextHop table
}

// Validate reports whether g can be encoded: 1 to MaxECMPMembers members,
// none of them 0.
func (g ECMPGroupInfo) Validate() error {
	if len(g.Members) == 0 || len(g.Members) > MaxECMPMembers {
		return fmt.Errorf("%w: ECMP group of %d members, want 1 to %d", ErrInvalid, len(g.Members), MaxECMPMembers)
	}
	for i, m := range g.Members {
		if m == 0 {
			return fmt.Errorf("%w: ECMP group member %d is HopSelector 0", ErrInvalid, i)
		}
	}
	return nil
}

// AppendFullData appends the FULLDATA encoding of g to b, or returns b and
// Validate's error.
func (g ECMPGroupInfo) AppendFullData(b []byte) ([]byte, error) {
	if err := g.Validate(); err != nil {
		return b, err
	}
	for _, m := range g.Members {
		b = binary.BigEndian.AppendUint32(b, m)
	}
	return b, nil
}

// ParseECMPGroupInfo decodes a group row's FULLDATA. It rejects a size that
// is not a whole number of members, no members, too many and HopSelector 0.
func ParseECMPGroupInfo(b []byte) (ECMPGroupInfo, error) {
	if len(b)%4 != 0 || len(b) == 0 || len(b)/4 > MaxECMPMembers {
		return ECMPGroupInfo{}, fmt.Errorf("%w: ECMPGroupInfo is %d bytes, want 4 to %d in steps of 4", ErrMalformed, len(b), 4*MaxECMPMembers)
	}
	g := ECMPGroupInfo{Members: make([]uint32, len(b)/4)}
	for i := range g.Members {
		if g.Members[i] = binary.BigEndian.Uint32(b[4*i:]); g.Members[i] == 0 {
			return ECMPGroupInfo{}, fmt.Errorf("%w: ECMPGroupInfo member %d is HopSelector 0", ErrMalformed, i)
		}
	}
	return g, nil
}
