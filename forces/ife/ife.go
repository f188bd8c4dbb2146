package ife

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// EtherType is the IEEE-registered EtherType of the inter-FE LFB, which
// RFC 8013 names for its Ethernet encapsulation (ETH_P_IFE in Linux).
const EtherType = 0xED3E

// Sizes of the fixed parts of a frame, in bytes.
const (
	EthHeaderLen = 14 // outer (and inner) Ethernet header: dst, src, EtherType
	MetaLenLen   = 2  // the metadata length field (IFE_METAHDRLEN in Linux)
	TLVHeaderLen = 4  // TLV type and TLV length (NLA_HDRLEN in Linux)

	// MinInnerLen is the shortest inner frame accepted: an Ethernet header,
	// what Linux's ife_decode requires after the metadata.
	MinInnerLen = EthHeaderLen

	// MaxMetaLen is the largest metadata length field, the field itself
	// and every TLV with its padding.
	MaxMetaLen = 0xFFFF
)

// Metadata types. 1 to 5 are Linux's IFE_META_* (include/uapi/linux/ife.h),
// the only deployed implementation: splitplane sends TypeFlowHash, whose
// meaning is Linux's HASHID, and knows the others only to name them. Its own
// types sit in a block (0x5350, "SP") far from Linux's and from the ForCES
// metadata IDs RFC 6956 registered (1 to 15), because their meaning is
// neither: a Linux receiver passes over them, and a Linux sender's mark or
// priority is never read as an egress port.
const (
	TypeSKBMark  uint16 = 1 // Linux IFE_META_SKBMARK: u32, becomes skb->mark
	TypeFlowHash uint16 = 2 // Linux IFE_META_HASHID: u32 hash of the flow's 5-tuple
	TypePrio     uint16 = 3 // Linux IFE_META_PRIO: u32, becomes skb->priority
	TypeQMap     uint16 = 4 // Linux IFE_META_QMAP: u16 queue map
	TypeTCIndex  uint16 = 5 // Linux IFE_META_TCINDEX: u16, becomes skb->tc_index

	TypeEgressPort uint16 = 0x5350 // u32: the receiving FE's port to transmit on (its own numbering)
	TypeIngressFE  uint16 = 0x5351 // u32: ForCES FE ID of the FE the packet entered the router on
	TypeEgressFE   uint16 = 0x5352 // u32: ForCES FE ID of the FE the packet leaves the router by
	TypeNexthopKey uint16 = 0x5353 // u32: NE-wide nexthop key, which the egress FE maps to its own nexthop
	TypeProbe      uint16 = 0x5354 // ProbeLen bytes: a liveness probe of an inter-FE link (Probe), answered by the peer's datapath
)

// Errors returned by Decode, Encode and the metadata accessors, always
// wrapped with the field and the value at fault.
var (
	// ErrTruncated: the frame ends before a field it must hold.
	ErrTruncated = errors.New("ife: frame truncated")
	// ErrEtherType: the outer EtherType is not 0xED3E.
	ErrEtherType = errors.New("ife: not an inter-FE frame")
	// ErrMetaLen: the metadata length field is impossible.
	ErrMetaLen = errors.New("ife: bad metadata length")
	// ErrTLV: a metadata TLV is malformed, or its value has the wrong size for its type.
	ErrTLV = errors.New("ife: bad metadata TLV")
	// ErrTooLong: Encode was asked for more metadata than the 16-bit lengths hold.
	ErrTooLong = errors.New("ife: metadata too long")
	// ErrMissing: a metadatum the receiver needs is absent or given twice.
	ErrMissing = errors.New("ife: metadatum missing")
)

// Header is the outer Ethernet header of an inter-FE frame, whose
// EtherType is always EtherType.
type Header struct {
	Dst, Src [6]byte
}

// Meta is one metadatum: a TLV type and its value as carried, without
// padding. After Decode, Value aliases the frame.
type Meta struct {
	Type  uint16
	Value []byte
}

// Uint32 returns metadatum t with the 32-bit big-endian value v, the form
// of every type splitplane sends. It allocates; on a hot path build the
// slice once and rewrite its Value in place.
func Uint32(t uint16, v uint32) Meta {
	return Meta{Type: t, Value: binary.BigEndian.AppendUint32(make([]byte, 0, 4), v)}
}

// EgressPort returns the egress port metadatum for port.
func EgressPort(port uint32) Meta { return Uint32(TypeEgressPort, port) }

// IngressFE returns the ingress FE metadatum for FE ID id.
func IngressFE(id uint32) Meta { return Uint32(TypeIngressFE, id) }

// EgressFE returns the egress FE metadatum for FE ID id.
func EgressFE(id uint32) Meta { return Uint32(TypeEgressFE, id) }

// NexthopKey returns the NE nexthop key metadatum for key.
func NexthopKey(key uint32) Meta { return Uint32(TypeNexthopKey, key) }

// FlowHash returns the flow hash metadatum for hash h.
func FlowHash(h uint32) Meta { return Uint32(TypeFlowHash, h) }

// valueLen is the value size a type must have, or -1 when any size goes
// (types splitplane neither sends nor reads).
func valueLen(t uint16) int {
	switch t {
	case TypeEgressPort, TypeIngressFE, TypeEgressFE, TypeNexthopKey, TypeFlowHash, TypeSKBMark, TypePrio:
		return 4
	case TypeTCIndex:
		return 2
	case TypeProbe:
		return ProbeLen
	}
	return -1
}

// Known reports whether t is a metadata type this package gives a meaning
// to (splitplane's and Linux's). Decode returns unknown types too; RFC 8013
// receivers and Linux pass over what they do not understand.
func Known(t uint16) bool { return valueLen(t) >= 0 || t == TypeQMap }

// align4 rounds n up to a multiple of 4 (NLA_ALIGN).
func align4(n int) int { return (n + 3) &^ 3 }

// TLVSize is the room one metadatum takes on the wire: the 4-byte TLV
// header, the value and the padding to a 4-byte boundary.
func TLVSize(m Meta) int { return TLVHeaderLen + align4(len(m.Value)) }

// MetaLen is the value of the metadata length field for meta: the 2-byte
// field itself plus every TLV with its padding.
func MetaLen(meta []Meta) int {
	n := MetaLenLen
	for i := range meta {
		n += TLVSize(meta[i])
	}
	return n
}

// Overhead is how many bytes encapsulation adds to a frame carrying meta:
// the outer Ethernet header, the metadata length field and the TLVs
// (14 + 2 + 8 per 32-bit metadatum). It is also what an inter-FE link's MTU
// must exceed a port's MTU by (see LinkMTU).
func Overhead(meta []Meta) int { return EthHeaderLen + MetaLen(meta) }

// LinkMTU is the smallest MTU an inter-FE link needs to carry, with meta,
// every packet a port of MTU portMTU may send or receive. A Linux MTU counts
// the bytes after the Ethernet header: on the inter-FE link these are the
// metadata and the whole inner frame, its Ethernet header included, so the
// inner header takes the place of the outer one and the link needs
// portMTU + Overhead(meta) (1500 + 24 with an egress port alone, 1500 + 40
// with egress port, ingress FE and flow hash). Inner VLAN tags add 4 each.
func LinkMTU(portMTU int, meta []Meta) int { return portMTU + Overhead(meta) }

// Encode appends to dst the inter-FE frame carrying inner (a whole Ethernet
// frame) with the metadata meta, in order, under the outer header h, and
// returns the extended slice. It allocates only when dst lacks room for
// Overhead(meta)+len(inner) more bytes. Values of splitplane's and Linux's
// types must have their type's size; a value may be empty (a TLV of length 4).
func Encode(dst []byte, h Header, meta []Meta, inner []byte) ([]byte, error) {
	if len(inner) < MinInnerLen {
		return dst, fmt.Errorf("%w: inner frame of %d bytes, shorter than an Ethernet header (%d)", ErrTruncated, len(inner), MinInnerLen)
	}
	metaLen := MetaLenLen
	for i := range meta {
		m := &meta[i]
		if want := valueLen(m.Type); want >= 0 && len(m.Value) != want {
			return dst, fmt.Errorf("%w: metadatum %d (type %#x) has a %d-byte value, its type takes %d", ErrTLV, i, m.Type, len(m.Value), want)
		}
		if len(m.Value) > MaxMetaLen-MetaLenLen-TLVHeaderLen {
			return dst, fmt.Errorf("%w: metadatum %d (type %#x) has a %d-byte value, more than a TLV length holds", ErrTooLong, i, m.Type, len(m.Value))
		}
		metaLen += TLVSize(*m)
	}
	if metaLen > MaxMetaLen {
		return dst, fmt.Errorf("%w: metadata length %d exceeds %d", ErrTooLong, metaLen, MaxMetaLen)
	}
	dst = append(dst, h.Dst[:]...)
	dst = append(dst, h.Src[:]...)
	dst = binary.BigEndian.AppendUint16(dst, EtherType)
	dst = binary.BigEndian.AppendUint16(dst, uint16(metaLen))
	for i := range meta {
		m := &meta[i]
		dst = binary.BigEndian.AppendUint16(dst, m.Type)
		dst = binary.BigEndian.AppendUint16(dst, uint16(TLVHeaderLen+len(m.Value)))
		dst = append(dst, m.Value...)
		for pad := align4(len(m.Value)) - len(m.Value); pad > 0; pad-- {
			dst = append(dst, 0)
		}
	}
	return append(dst, inner...), nil
}

// Decode parses an inter-FE frame. It appends the metadata, in wire order
// and unknown types included, to meta (pass a reused meta[:0] to decode
// without allocating) and returns the outer header, the metadata and the
// inner frame; on error meta comes back as it was passed. Metadata values
// and inner alias frame. Padding bytes are not
// checked, as Linux does not; everything else is, and an error names the
// field, its offset and its value.
func Decode(frame []byte, meta []Meta) (Header, []Meta, []byte, error) {
	var h Header
	if len(frame) < EthHeaderLen+MetaLenLen {
		return h, meta, nil, fmt.Errorf("%w: %d bytes, shorter than the outer Ethernet header and the metadata length (%d)", ErrTruncated, len(frame), EthHeaderLen+MetaLenLen)
	}
	if et := binary.BigEndian.Uint16(frame[12:]); et != EtherType {
		return h, meta, nil, fmt.Errorf("%w: EtherType %#04x, want %#04x", ErrEtherType, et, EtherType)
	}
	copy(h.Dst[:], frame[0:6])
	copy(h.Src[:], frame[6:12])
	metaLen := int(binary.BigEndian.Uint16(frame[EthHeaderLen:]))
	if metaLen < MetaLenLen {
		return h, meta, nil, fmt.Errorf("%w: metadata length %d is less than the field's own %d bytes", ErrMetaLen, metaLen, MetaLenLen)
	}
	end := EthHeaderLen + metaLen
	if end > len(frame) {
		return h, meta, nil, fmt.Errorf("%w: metadata length %d runs past the end of the %d-byte frame", ErrMetaLen, metaLen, len(frame))
	}
	if len(frame)-end < MinInnerLen {
		return h, meta, nil, fmt.Errorf("%w: inner frame of %d bytes after metadata length %d, shorter than an Ethernet header (%d)", ErrTruncated, len(frame)-end, metaLen, MinInnerLen)
	}
	kept := len(meta) // on error, meta goes back as it came
	for off := EthHeaderLen + MetaLenLen; off < end; {
		if end-off < TLVHeaderLen {
			return h, meta[:kept], nil, fmt.Errorf("%w: %d bytes left at offset %d, too few for a TLV header (metadata length %d)", ErrTLV, end-off, off, metaLen)
		}
		t := binary.BigEndian.Uint16(frame[off:])
		l := int(binary.BigEndian.Uint16(frame[off+2:]))
		if l < TLVHeaderLen {
			return h, meta[:kept], nil, fmt.Errorf("%w: type %#x at offset %d has length %d, less than its own %d-byte header", ErrTLV, t, off, l, TLVHeaderLen)
		}
		if off+align4(l) > end {
			return h, meta[:kept], nil, fmt.Errorf("%w: type %#x at offset %d has length %d (%d padded), past the metadata's end at %d", ErrTLV, t, off, l, align4(l), end)
		}
		v := frame[off+TLVHeaderLen : off+l : off+l]
		if want := valueLen(t); want >= 0 && len(v) != want {
			return h, meta[:kept], nil, fmt.Errorf("%w: type %#x at offset %d has a %d-byte value, its type takes %d", ErrTLV, t, off, len(v), want)
		}
		meta = append(meta, Meta{Type: t, Value: v})
		off += align4(l)
	}
	return h, meta, frame[end:], nil
}

// Lookup returns the value of the first metadatum of type t.
func Lookup(meta []Meta, t uint16) ([]byte, bool) {
	for i := range meta {
		if meta[i].Type == t {
			return meta[i].Value, true
		}
	}
	return nil, false
}

// One returns the 32-bit value of the metadatum of type t, which must be
// present exactly once: a frame naming two egress ports, or none, is not
// forwarded on a guess.
func One(meta []Meta, t uint16) (uint32, error) {
	var (
		v     uint32
		found bool
	)
	for i := range meta {
		if meta[i].Type != t {
			continue
		}
		if found {
			return 0, fmt.Errorf("%w: type %#x given twice (%d and %d)", ErrMissing, t, v, be32(meta[i].Value))
		}
		if len(meta[i].Value) != 4 {
			return 0, fmt.Errorf("%w: type %#x has a %d-byte value, want 4", ErrTLV, t, len(meta[i].Value))
		}
		v, found = be32(meta[i].Value), true
	}
	if !found {
		return 0, fmt.Errorf("%w: no type %#x among %d metadata", ErrMissing, t, len(meta))
	}
	return v, nil
}

func be32(b []byte) uint32 {
	if len(b) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
