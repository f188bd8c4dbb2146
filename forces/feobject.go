package forces

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unicode/utf8"
)

// FE Object LFB (class 1, RFC 5812 §5 and its Appendix) component IDs. The
// numbers are the author's knowledge of the RFC's XML definition; they could
// not be re-checked against its text from this workplace.
const (
	FEObjectLFBTopology           uint32 = 1  // array of LFBLinkType
	FEObjectLFBSelectors          uint32 = 2  // array of LFBSelectorType (class, instance)
	FEObjectFEName                uint32 = 3  // string[40]
	FEObjectFEID                  uint32 = 4  // uint32
	FEObjectFEVendor              uint32 = 5  // string[40]
	FEObjectFEModel               uint32 = 6  // string[40]
	FEObjectFEState               uint32 = 7  // FEStateValues (uchar)
	FEObjectFENeighbors           uint32 = 8  // array of FEConfiguredNeighborType
	FEObjectModifiableLFBTopology uint32 = 30 // capability: boolean
	FEObjectSupportedLFBs         uint32 = 31 // capability: array of SupportedLFBType
)

// FE Protocol LFB (class 2, RFC 5810 §7.2 and Appendix B; 13 and 31 added by
// RFC 7121) component IDs, from the author's knowledge of the RFCs.
// Intervals (CEHDI, FEHI, CEFTI) are uint32 milliseconds.
const (
	FEProtoCurrentRunningVersion uint32 = 1  // uchar
	FEProtoFEID                  uint32 = 2  // uint32
	FEProtoMulticastFEIDs        uint32 = 3  // array of uint32
	FEProtoCEHBPolicy            uint32 = 4  // CEHBPolicyValues (uchar)
	FEProtoCEHDI                 uint32 = 5  // uint32 ms: CE heartbeat dead interval
	FEProtoFEHBPolicy            uint32 = 6  // FEHBPolicyValues (uchar)
	FEProtoFEHI                  uint32 = 7  // uint32 ms: FE heartbeat interval
	FEProtoCEID                  uint32 = 8  // uint32: the primary CE
	FEProtoBackupCEs             uint32 = 9  // array of uint32
	FEProtoCEFailoverPolicy      uint32 = 10 // CEFailoverPolicyValues (uchar)
	FEProtoCEFTI                 uint32 = 11 // uint32 ms: CE failover timeout interval
	FEProtoFERestartPolicy       uint32 = 12 // FERestartPolicyValues (uchar)
	FEProtoLastCEID              uint32 = 13 // uint32 (RFC 7121)
	FEProtoSupportableVersions   uint32 = 30 // capability: array of uchar
	FEProtoHACapabilities        uint32 = 31 // capability (RFC 7121)
)

// Scalar FULLDATA encodings, following the package's packing rule (see
// IPv4PrefixInfo): uint32 is 4 bytes big-endian; uchar and boolean take one
// byte followed by three zero bytes, so every value is 32-bit aligned. The
// parsers also accept a bare one-byte uchar, which some encoders send since
// the TLV padding supplies the alignment anyway. A string is its bytes, with
// no terminator; its length is the TLV's.

// Uint32FullData returns the FULLDATA value of a uint32 component.
func Uint32FullData(v uint32) []byte { return binary.BigEndian.AppendUint32(make([]byte, 0, 4), v) }

// ParseUint32FullData decodes a uint32 FULLDATA value.
func ParseUint32FullData(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("%w: uint32 value is %d bytes, want 4", ErrMalformed, len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// UcharFullData returns the FULLDATA value of a uchar component.
func UcharFullData(v uint8) []byte { return []byte{v, 0, 0, 0} }

// ParseUcharFullData decodes a uchar FULLDATA value of 1 byte, or of 4 bytes
// with zero padding.
func ParseUcharFullData(b []byte) (uint8, error) {
	switch len(b) {
	case 1:
		return b[0], nil
	case 4:
		return padded(b)
	}
	return 0, fmt.Errorf("%w: uchar value is %d bytes, want 1 or 4", ErrMalformed, len(b))
}

// FEState is the FE Object's FEState component (FEStateValues, RFC 5812).
type FEState uint8

// FE states.
const (
	FEStateAdminDisable FEState = 0 // administratively disabled
	FEStateOperDisable  FEState = 1 // operationally disabled
	FEStateOperEnable   FEState = 2 // operating
)

// String returns the RFC 5812 name of s.
func (s FEState) String() string {
	switch s {
	case FEStateAdminDisable:
		return "AdminDisable"
	case FEStateOperDisable:
		return "OperDisable"
	case FEStateOperEnable:
		return "OperEnable"
	}
	return fmt.Sprintf("FEState(%d)", uint8(s))
}

// MarshalFullData returns the FULLDATA value of s.
func (s FEState) MarshalFullData() []byte { return UcharFullData(uint8(s)) }

// ParseFEState decodes an FEState FULLDATA value, rejecting unknown states.
func ParseFEState(b []byte) (FEState, error) {
	v, err := ParseUcharFullData(b)
	if err != nil {
		return 0, fmt.Errorf("FEState: %w", err)
	}
	if v > uint8(FEStateOperEnable) {
		return 0, fmt.Errorf("%w: FEState %d", ErrMalformed, v)
	}
	return FEState(v), nil
}

// CEHBPolicy is the FE Protocol LFB's CEHBPolicy (RFC 5810 §4.3.3).
type CEHBPolicy uint8

// CE heartbeat policies.
const (
	// CEHBPolicy0: the CE sends a Heartbeat whenever CEHDI-bounded idle time
	// passes without other messages to the FE; the FE declares the CE dead
	// after CEHDI without traffic. This is the default.
	CEHBPolicy0 CEHBPolicy = 0
	// CEHBPolicy1: the CE sends no Heartbeats on its own.
	CEHBPolicy1 CEHBPolicy = 1
)

// FEHBPolicy is the FE Protocol LFB's FEHBPolicy (RFC 5810 §4.3.3).
type FEHBPolicy uint8

// FE heartbeat policies.
const (
	// FEHBPolicy0: the FE sends no Heartbeats on its own (the default); it
	// still answers a Heartbeat that asks for an ACK.
	FEHBPolicy0 FEHBPolicy = 0
	// FEHBPolicy1: the FE sends a Heartbeat whenever FEHI passes without
	// other messages to the CE.
	FEHBPolicy1 FEHBPolicy = 1
)

// ParseCEHBPolicy decodes a CEHBPolicy FULLDATA value, rejecting unknown values.
func ParseCEHBPolicy(b []byte) (CEHBPolicy, error) {
	v, err := ParseUcharFullData(b)
	if err == nil && v > 1 {
		err = fmt.Errorf("%w: CEHBPolicy %d", ErrMalformed, v)
	}
	return CEHBPolicy(v), err
}

// ParseFEHBPolicy decodes an FEHBPolicy FULLDATA value, rejecting unknown values.
func ParseFEHBPolicy(b []byte) (FEHBPolicy, error) {
	v, err := ParseUcharFullData(b)
	if err == nil && v > 1 {
		err = fmt.Errorf("%w: FEHBPolicy %d", ErrMalformed, v)
	}
	return FEHBPolicy(v), err
}

// HeartbeatPolicy is the heartbeat configuration a CE sets in an FE's FE
// Protocol LFB after association. Intervals are in milliseconds.
type HeartbeatPolicy struct {
	CEHBPolicy CEHBPolicy
	CEHDI      uint32 // CE heartbeat dead interval, ms
	FEHBPolicy FEHBPolicy
	FEHI       uint32 // FE heartbeat interval, ms
}

// Ops returns the four SETs that apply p to FE Protocol LFB instance 1, for
// BuildConfig.
func (p HeartbeatPolicy) Ops() []TableOp {
	set := func(comp uint32, v []byte) TableOp {
		return TableOp{Op: OpSet, ClassID: ClassFEProtocol, InstanceID: 1, Path: []uint32{comp}, FullData: v}
	}
	return []TableOp{
		set(FEProtoCEHBPolicy, UcharFullData(uint8(p.CEHBPolicy))),
		set(FEProtoCEHDI, Uint32FullData(p.CEHDI)),
		set(FEProtoFEHBPolicy, UcharFullData(uint8(p.FEHBPolicy))),
		set(FEProtoFEHI, Uint32FullData(p.FEHI)),
	}
}

// Variable-length fields inside a struct. RFC 5810's data packing rules
// (§7.1.8) encapsulate every variable-length value inside a FULLDATA value
// (strings, octet strings, arrays) in a FULLDATA-TLV of its own, while
// fixed-size fields sit inline. A table (array) read as a whole is its rows in
// index order, each prefixed by its 32-bit index; a row of variable size is
// itself wrapped in a FULLDATA-TLV. So the FULLDATA of SupportedLFBs is
//
//	index(32) FULLDATA{ FULLDATA{LFBName} LFBClassID(32) FULLDATA{LFBVersion} }  ...
//
// The optional SupportedLFBType fields (LFBOccurrenceLimit, PortGroupLimits,
// CanOccurAfters, CanOccurBefores) are neither written nor accepted: a row
// holding more than the three mandatory fields is rejected.

// maxStringLen bounds strings so that a row stays within one TLV.
const maxStringLen = MaxTLVLen - 4

// SupportedLFB is one row of the FE Object's SupportedLFBs capability: an LFB
// class the FE implements.
type SupportedLFB struct {
	Name    string // e.g. "IPv4UcastLPM"
	ClassID uint32
	Version string // e.g. "1.0"
}

// AppendFullData appends the FULLDATA encoding of the row s to b.
func (s SupportedLFB) AppendFullData(b []byte) ([]byte, error) {
	var err error
	if b, err = appendString(b, "LFBName", s.Name); err != nil {
		return b, err
	}
	b = binary.BigEndian.AppendUint32(b, s.ClassID)
	return appendString(b, "LFBVersion", s.Version)
}

// ParseSupportedLFB decodes one SupportedLFBs row.
func ParseSupportedLFB(b []byte) (SupportedLFB, error) {
	name, rest, err := cutString(b, "LFBName")
	if err != nil {
		return SupportedLFB{}, err
	}
	if len(rest) < 4 {
		return SupportedLFB{}, fmt.Errorf("%w: SupportedLFB row ends before LFBClassID", ErrMalformed)
	}
	s := SupportedLFB{Name: name, ClassID: binary.BigEndian.Uint32(rest)}
	if s.Version, rest, err = cutString(rest[4:], "LFBVersion"); err != nil {
		return SupportedLFB{}, err
	}
	if len(rest) != 0 {
		return SupportedLFB{}, fmt.Errorf("%w: %d bytes after a SupportedLFB row", ErrMalformed, len(rest))
	}
	return s, nil
}

// MarshalSupportedLFBs returns the FULLDATA value of the whole SupportedLFBs
// table, rows indexed from 0.
func MarshalSupportedLFBs(rows []SupportedLFB) ([]byte, error) {
	return marshalTable(rows, SupportedLFB.AppendFullData)
}

// ParseSupportedLFBs decodes the FULLDATA value of the SupportedLFBs table,
// returning the rows in wire order; indices must be distinct.
func ParseSupportedLFBs(b []byte) ([]SupportedLFB, error) {
	return parseTable(b, "SupportedLFBs", ParseSupportedLFB)
}

// PortInfo is one port of a splitplane FE as the CE learns it: the EtherPHYCop
// PHYPortID (RFC 6956 EtherPHYCop component 1, used as the PHYPortID metadata
// in Packet Redirect), the kernel interface name, the MAC address and whether
// the link is up (EtherPHYCop OperStatus reduced to a boolean). The struct
// and its component IDs (FieldPort*) are splitplane's own: RFC 6956 spreads
// these over EtherPHYCop and EtherMACIn instances and has no name field.
//
// FULLDATA layout: ID(32) FULLDATA{Name} MAC(6 bytes + 2 zero) Up(1 byte + 3
// zero), then, if the port has addresses, Addrs: a count(32) and per prefix
// family(8: 4 or 6) length(8) 2 zero bytes and the address in 16 bytes (IPv4
// in the first 4, the rest zero). The CE resolves next hops through them.
type PortInfo struct {
	ID    uint32
	Name  string
	MAC   [6]byte
	Up    bool
	Addrs []netip.Prefix // the port's addresses, with their prefix lengths
}

// splitplane-specific component IDs of PortInfo's fields.
const (
	FieldPortID   uint32 = 1
	FieldPortName uint32 = 2
	FieldPortMAC  uint32 = 3
	FieldPortUp   uint32 = 4
	FieldPortAddr uint32 = 5

	// maxPortAddrs bounds the addresses of one port on the wire.
	maxPortAddrs = 256
)

// AppendFullData appends the FULLDATA encoding of p to b.
func (p PortInfo) AppendFullData(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, p.ID)
	var err error
	if b, err = appendString(b, "port name", p.Name); err != nil {
		return b, err
	}
	b = append(b, p.MAC[:]...)
	b = append(b, 0, 0, boolByte(p.Up), 0, 0, 0)
	if len(p.Addrs) == 0 {
		return b, nil
	}
	if len(p.Addrs) > maxPortAddrs {
		return b, fmt.Errorf("%w: port %d has %d addresses, limit %d", ErrTooLarge, p.ID, len(p.Addrs), maxPortAddrs)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.Addrs)))
	for _, a := range p.Addrs {
		if !a.IsValid() || a.Addr().Zone() != "" {
			return b, fmt.Errorf("%w: port %d address %v", ErrInvalid, p.ID, a)
		}
		fam, raw := byte(6), a.Addr().As16()
		if a.Addr().Is4() {
			fam, raw = 4, [16]byte{}
			v4 := a.Addr().As4()
			copy(raw[:], v4[:])
		}
		b = append(b, fam, byte(a.Bits()), 0, 0)
		b = append(b, raw[:]...)
	}
	return b, nil
}

// ParsePortInfo decodes one PortInfo row.
func ParsePortInfo(b []byte) (PortInfo, error) {
	if len(b) < 4 {
		return PortInfo{}, fmt.Errorf("%w: PortInfo is %d bytes", ErrMalformed, len(b))
	}
	p := PortInfo{ID: binary.BigEndian.Uint32(b)}
	name, rest, err := cutString(b[4:], "port name")
	if err != nil {
		return PortInfo{}, err
	}
	p.Name = name
	if len(rest) < 12 {
		return PortInfo{}, fmt.Errorf("%w: PortInfo has %d bytes after its name, want at least 12", ErrMalformed, len(rest))
	}
	copy(p.MAC[:], rest)
	up, err := padded(rest[8:12])
	if err != nil || rest[6] != 0 || rest[7] != 0 || up > 1 {
		return PortInfo{}, fmt.Errorf("%w: PortInfo MAC padding or Up flag", ErrMalformed)
	}
	p.Up = up == 1
	if rest = rest[12:]; len(rest) == 0 {
		return p, nil
	}
	if len(rest) < 4 {
		return PortInfo{}, fmt.Errorf("%w: PortInfo address count cut short", ErrMalformed)
	}
	n := int(binary.BigEndian.Uint32(rest))
	if rest = rest[4:]; n == 0 || n > maxPortAddrs || len(rest) != 20*n {
		return PortInfo{}, fmt.Errorf("%w: PortInfo: %d addresses in %d bytes", ErrMalformed, n, len(rest))
	}
	p.Addrs = make([]netip.Prefix, n)
	for i := range p.Addrs {
		e := rest[20*i : 20*i+20]
		var a netip.Addr
		switch {
		case e[0] == 4 && e[1] <= 32 && [12]byte(e[8:20]) == [12]byte{}:
			a = netip.AddrFrom4([4]byte(e[4:8]))
		case e[0] == 6 && e[1] <= 128:
			a = netip.AddrFrom16([16]byte(e[4:20]))
		default:
			return PortInfo{}, fmt.Errorf("%w: PortInfo address %d: family %d length %d", ErrMalformed, i, e[0], e[1])
		}
		if e[2] != 0 || e[3] != 0 {
			return PortInfo{}, fmt.Errorf("%w: PortInfo address %d padding", ErrMalformed, i)
		}
		p.Addrs[i] = netip.PrefixFrom(a, int(e[1]))
	}
	return p, nil
}

// MarshalPortInfos returns the FULLDATA value of a port table, rows indexed from 0.
func MarshalPortInfos(rows []PortInfo) ([]byte, error) {
	return marshalTable(rows, PortInfo.AppendFullData)
}

// ParsePortInfos decodes the FULLDATA value of a port table.
func ParsePortInfos(b []byte) ([]PortInfo, error) {
	return parseTable(b, "ports", ParsePortInfo)
}

func appendString(b []byte, field, s string) ([]byte, error) {
	if len(s) > maxStringLen {
		return b, fmt.Errorf("%w: %s of %d bytes", ErrTooLarge, field, len(s))
	}
	if !utf8.ValidString(s) {
		return b, fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, field)
	}
	b, at := beginTLV(b, TLVFullData)
	b = append(b, s...)
	return endTLV(b, at)
}

// cutString splits a FULLDATA-TLV holding a string off the front of b.
func cutString(b []byte, field string) (string, []byte, error) {
	typ, v, rest, err := nextTLV(b)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", field, err)
	}
	if typ != TLVFullData {
		return "", nil, fmt.Errorf("%w: %s is TLV %#04x, want FULLDATA", ErrMalformed, field, typ)
	}
	if !utf8.Valid(v) {
		return "", nil, fmt.Errorf("%w: %s is not UTF-8", ErrMalformed, field)
	}
	return string(v), rest, nil
}

func marshalTable[T any](rows []T, appendRow func(T, []byte) ([]byte, error)) ([]byte, error) {
	var b []byte
	for i, r := range rows {
		b = binary.BigEndian.AppendUint32(b, uint32(i))
		var at int
		var err error
		b, at = beginTLV(b, TLVFullData)
		if b, err = appendRow(r, b); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if b, err = endTLV(b, at); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	return b, nil
}

func parseTable[T any](b []byte, what string, parseRow func([]byte) (T, error)) ([]T, error) {
	var (
		out  []T
		seen = make(map[uint32]struct{})
	)
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: %s: %d bytes left, too short for a row index", ErrMalformed, what, len(b))
		}
		idx := binary.BigEndian.Uint32(b)
		if _, dup := seen[idx]; dup {
			return nil, fmt.Errorf("%w: %s: duplicate row index %d", ErrMalformed, what, idx)
		}
		seen[idx] = struct{}{}
		typ, v, rest, err := nextTLV(b[4:])
		if err != nil {
			return nil, fmt.Errorf("%s row %d: %w", what, idx, err)
		}
		if typ != TLVFullData {
			return nil, fmt.Errorf("%w: %s row %d is TLV %#04x, want FULLDATA", ErrMalformed, what, idx, typ)
		}
		r, err := parseRow(v)
		if err != nil {
			return nil, fmt.Errorf("%s row %d: %w", what, idx, err)
		}
		out = append(out, r)
		b = rest
	}
	return out, nil
}

// NewDiscoveryQuery returns the Query a CE sends after association to learn
// an FE: its FE Object's FEName, FEState and SupportedLFBs, and its FE
// Protocol LFB's heartbeat settings.
func NewDiscoveryQuery(src, dst ID, corr uint64) *Message {
	return NewQuery(src, dst, corr,
		GetSelect(ClassFEObject, 1,
			[]uint32{FEObjectFEName}, []uint32{FEObjectFEState}, []uint32{FEObjectSupportedLFBs}),
		GetSelect(ClassFEProtocol, 1,
			[]uint32{FEProtoCEHBPolicy}, []uint32{FEProtoCEHDI}, []uint32{FEProtoFEHBPolicy}, []uint32{FEProtoFEHI}),
	)
}
