package ife

import (
	"encoding/binary"
	"fmt"
)

// A liveness probe of an inter-FE link, like a BFD echo: the FE sends a
// probe request to its peer over the link, and the peer's XDP program, not
// its kernel, turns it around (MACs swapped, its own FE ID written in,
// the reply flag set), so that a reply proves the peer's datapath alive,
// not only the link's carrier. A probe frame has a fixed layout, which the
// datapath checks byte by byte rather than parsing TLVs: the outer header,
// a metadata length of ProbeMetaLen, one TypeProbe TLV and an inner frame
// of MinInnerLen zero bytes (RFC 8013 and Linux want an inner Ethernet
// header; a Linux receiver would find a frame of EtherType 0 there).
//
// The TLV's value, ProbeLen bytes, big-endian:
//
//	0  sender FE      u32  the FE that sent the request
//	4  responder FE   u32  0 in a request; the answering FE's ID in a reply
//	8  flags          u32  ProbeFlagReply in a reply
//	12 sequence       u32  the sender's, echoed
//	16 time           u64  the sender's clock at sending (ns), echoed

// Sizes of a probe.
const (
	ProbeLen      = 24                                        // the Probe TLV's value
	ProbeMetaLen  = MetaLenLen + TLVHeaderLen + ProbeLen      // its metadata length field: 30
	ProbeFrameLen = EthHeaderLen + ProbeMetaLen + MinInnerLen // the whole frame: 58 bytes
)

// ProbeFlagReply marks a probe reply in the flags field.
const ProbeFlagReply = 1

// Probe is the value of a TypeProbe metadatum.
type Probe struct {
	Sender    uint32 // FE ID of the FE that sent the request
	Responder uint32 // FE ID of the FE that answered (0 in a request)
	Reply     bool
	Seq       uint32
	Time      uint64 // the sender's clock at sending, echoed unchanged
}

// Meta returns p as a metadatum.
func (p Probe) Meta() Meta {
	v := make([]byte, ProbeLen)
	binary.BigEndian.PutUint32(v[0:], p.Sender)
	binary.BigEndian.PutUint32(v[4:], p.Responder)
	if p.Reply {
		binary.BigEndian.PutUint32(v[8:], ProbeFlagReply)
	}
	binary.BigEndian.PutUint32(v[12:], p.Seq)
	binary.BigEndian.PutUint64(v[16:], p.Time)
	return Meta{Type: TypeProbe, Value: v}
}

// ParseProbe reads a TypeProbe metadatum's value. Flags other than
// ProbeFlagReply are ignored (a later version may set them).
func ParseProbe(v []byte) (Probe, error) {
	if len(v) != ProbeLen {
		return Probe{}, fmt.Errorf("%w: probe value of %d bytes, want %d", ErrTLV, len(v), ProbeLen)
	}
	return Probe{
		Sender:    binary.BigEndian.Uint32(v[0:]),
		Responder: binary.BigEndian.Uint32(v[4:]),
		Reply:     binary.BigEndian.Uint32(v[8:])&ProbeFlagReply != 0,
		Seq:       binary.BigEndian.Uint32(v[12:]),
		Time:      binary.BigEndian.Uint64(v[16:]),
	}, nil
}

// EncodeProbe appends to dst the probe frame carrying p under h:
// ProbeFrameLen bytes.
func EncodeProbe(dst []byte, h Header, p Probe) ([]byte, error) {
	var inner [MinInnerLen]byte
	return Encode(dst, h, []Meta{p.Meta()}, inner[:])
}

// DecodeProbe parses a probe frame: an inter-FE frame whose first
// metadatum is a probe, in the fixed layout EncodeProbe writes (more
// metadata or a longer inner frame are refused: the datapath would not
// answer such a frame as a probe either).
func DecodeProbe(frame []byte) (Header, Probe, error) {
	h, meta, _, err := Decode(frame, nil)
	if err != nil {
		return h, Probe{}, err
	}
	if len(meta) == 0 || meta[0].Type != TypeProbe {
		return h, Probe{}, fmt.Errorf("%w: no probe among %d metadata", ErrMissing, len(meta))
	}
	if MetaLen(meta) != ProbeMetaLen {
		return h, Probe{}, fmt.Errorf("%w: probe frame with metadata length %d, want %d", ErrMetaLen, MetaLen(meta), ProbeMetaLen)
	}
	p, err := ParseProbe(meta[0].Value)
	return h, p, err
}
