package forces

import (
	"encoding/binary"
	"fmt"
)

// Packet Redirect (RFC 5810 §7.9). A PacketRedirect message carries one or
// more REDIRECT-TLVs, each holding one packet and its metadata:
//
//	REDIRECT-TLV     := METADATA-TLV REDIRECTDATA-TLV
//	METADATA-TLV     := *META-DATA-ILV
//	META-DATA-ILV    := ID(32) Length(32) Value [padding to 32 bits]
//	REDIRECTDATA-TLV := packet bytes [padding to 32 bits]
//
// An ILV follows the TLV rules with 32-bit fields (RFC 5810 §6.3): its
// Length counts the 8-byte ID and Length header plus the unpadded value, and
// the next ILV starts at the next 32-bit boundary. This is also how the
// tcpdump dissector, written by one of the RFC's editors, walks ILVs.
//
// RFC 5810 draws the REDIRECT-TLV as one METADATA-TLV followed by one
// REDIRECTDATA-TLV. Both the encoder and the parser hold to exactly that
// order and count; a Redirect without metadata travels with an empty
// METADATA-TLV (a bare 4-byte header).

// ilvHeaderLen is the size of an ILV's ID and Length fields.
const ilvHeaderLen = 8

// Metadata is one META-DATA-ILV: an RFC 6956 metadata ID (see MetaPHYPortID
// and the constants beside it) and its value in network byte order.
type Metadata struct {
	ID    uint32
	Value []byte
}

// Redirect is one REDIRECT-TLV: a packet exchanged between CE and FE through
// the RedirectIn/RedirectOut LFBs, with its metadata.
type Redirect struct {
	Metadata []Metadata
	Data     []byte // the packet, starting at its L2 (or L3) header
}

// Metadata IDs of RFC 6956 §4.4 (IANA "Metadata ID" registry), as known to the
// author; they could not be re-checked against the RFC text from this
// workplace. Values are big-endian; MACs are 6 bytes, IPv4 addresses 4 and
// IPv6 addresses 16.
const (
	MetaPHYPortID           uint32 = 1  // uint32: physical port a packet arrived on or leaves by
	MetaSrcMAC              uint32 = 2  // byte[6]
	MetaDstMAC              uint32 = 3  // byte[6]
	MetaLogicalPortID       uint32 = 4  // uint32
	MetaEtherType           uint32 = 5  // uint16
	MetaVlanID              uint32 = 6  // uint16
	MetaVlanPriority        uint32 = 7  // uchar
	MetaNexthopIPv4Addr     uint32 = 8  // byte[4]
	MetaNexthopIPv6Addr     uint32 = 9  // byte[16]
	MetaHopSelector         uint32 = 10 // uint32
	MetaExceptionID         uint32 = 11 // uint32
	MetaValidateErrorID     uint32 = 12 // uint32
	MetaL3PortID            uint32 = 13 // uint32
	MetaRedirectIndex       uint32 = 14 // uint32
	MetaMediaEncapInfoIndex uint32 = 15 // uint32
)

// PortMetadata returns PHYPortID metadata for port id: the ingress port of a
// packet the FE redirects to the CE, or the egress port of a packet the CE
// sends out through the FE.
func PortMetadata(id uint32) Metadata {
	return Metadata{ID: MetaPHYPortID, Value: binary.BigEndian.AppendUint32(make([]byte, 0, 4), id)}
}

// Uint32Metadata returns metadata id with a 32-bit value, the type of most
// RFC 6956 metadata.
func Uint32Metadata(id, v uint32) Metadata {
	return Metadata{ID: id, Value: binary.BigEndian.AppendUint32(make([]byte, 0, 4), v)}
}

// Lookup returns the value of the first metadata with ID id.
func (r Redirect) Lookup(id uint32) ([]byte, bool) {
	for _, m := range r.Metadata {
		if m.ID == id {
			return m.Value, true
		}
	}
	return nil, false
}

// Port returns the PHYPortID metadata of r. It reports false when r has none
// or its value is not 4 bytes.
func (r Redirect) Port() (uint32, bool) {
	v, ok := r.Lookup(MetaPHYPortID)
	if !ok || len(v) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(v), true
}

// NewPacketRedirect returns a PacketRedirect message from src to dst carrying
// rs, one REDIRECT-TLV each. Its slices alias rs.
func NewPacketRedirect(src, dst ID, corr uint64, rs ...Redirect) *Message {
	return &Message{
		Header: Header{Version: ProtocolVersion, Type: MsgPacketRedirect, Src: src, Dst: dst, Correlator: corr,
			Flags: Flags{Priority: PriorityOf(MsgPacketRedirect)}},
		Redirects: rs,
	}
}

func appendRedirect(b []byte, r *Redirect) ([]byte, error) {
	b, at := beginTLV(b, TLVRedirect)
	var err error
	{
		var mat int
		b, mat = beginTLV(b, TLVMetadata)
		for _, md := range r.Metadata {
			l := ilvHeaderLen + len(md.Value)
			if l > MaxTLVLen {
				return b, fmt.Errorf("%w: metadata %d value of %d bytes", ErrTooLarge, md.ID, len(md.Value))
			}
			b = binary.BigEndian.AppendUint32(b, md.ID)
			b = binary.BigEndian.AppendUint32(b, uint32(l))
			b = append(b, md.Value...)
			for len(b)%4 != 0 {
				b = append(b, 0)
			}
		}
		if b, err = endTLV(b, mat); err != nil {
			return b, err
		}
	}
	if b, err = appendBytesTLV(b, TLVRedirectData, r.Data); err != nil {
		return b, err
	}
	return endTLV(b, at)
}

// parseRedirect decodes the value of a REDIRECT-TLV; the result aliases val.
func parseRedirect(val []byte) (Redirect, error) {
	var (
		r           Redirect
		sawMeta     bool
		sawData     bool
		typ         uint16
		v, rest     []byte
		err         error
		remain      = val
		errRedirect = func(format string, a ...any) error {
			return fmt.Errorf("%w: REDIRECT-TLV: "+format, append([]any{ErrMalformed}, a...)...)
		}
	)
	for len(remain) > 0 {
		if typ, v, rest, err = nextTLV(remain); err != nil {
			return Redirect{}, err
		}
		remain = rest
		switch {
		case sawData:
			return Redirect{}, errRedirect("TLV %#04x after REDIRECTDATA-TLV", typ)
		case !sawMeta && typ != TLVMetadata:
			return Redirect{}, errRedirect("TLV %#04x where the METADATA-TLV belongs", typ)
		case typ == TLVMetadata && !sawMeta:
			sawMeta = true
			if r.Metadata, err = parseILVs(v); err != nil {
				return Redirect{}, err
			}
		case typ == TLVMetadata:
			return Redirect{}, errRedirect("second METADATA-TLV")
		case typ == TLVRedirectData:
			sawData = true
			r.Data = bytesOrNil(v)
		default:
			return Redirect{}, errRedirect("unexpected TLV %#04x", typ)
		}
	}
	if !sawData {
		return Redirect{}, errRedirect("no REDIRECTDATA-TLV")
	}
	return r, nil
}

func parseILVs(b []byte) ([]Metadata, error) {
	n := 0
	for p := b; len(p) >= ilvHeaderLen; n++ {
		l := binary.BigEndian.Uint32(p[4:])
		if l < ilvHeaderLen || (uint64(l)+3)&^3 > uint64(len(p)) {
			break
		}
		p = p[(l+3)&^3:]
	}
	var out []Metadata
	if n > 0 {
		out = make([]Metadata, 0, n)
	}
	for len(b) > 0 {
		if len(b) < ilvHeaderLen {
			return nil, fmt.Errorf("%w: %d bytes left in METADATA-TLV, too short for an ILV", ErrMalformed, len(b))
		}
		id, l := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
		if l < ilvHeaderLen {
			return nil, fmt.Errorf("%w: metadata ILV %d length %d is less than 8", ErrMalformed, id, l)
		}
		if (uint64(l)+3)&^3 > uint64(len(b)) {
			return nil, fmt.Errorf("%w: metadata ILV %d length %d runs past the %d bytes left", ErrMalformed, id, l, len(b))
		}
		out = append(out, Metadata{ID: id, Value: bytesOrNil(b[ilvHeaderLen:l:l])})
		b = b[(l+3)&^3:]
	}
	return out, nil
}
