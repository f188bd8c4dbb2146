package forces

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Flags is the decoded 32-bit flags word of the common header. Its layout,
// most significant bit first (RFC 5810 §6.1), is
//
//	ACK(2) Priority(3) rsvd(3) EM(2) A(1) TP(2) rsvd(19)
type Flags struct {
	ACK      ACKFlag
	Priority uint8 // 0..7
	ExecMode ExecMode
	Atomic   bool // A: part of a two-phase-commit transaction
	TP       TransactionPhase
}

func (f Flags) encode() (uint32, error) {
	if f.ACK > 3 || f.Priority > 7 || f.ExecMode > 3 || f.TP > 3 {
		return 0, fmt.Errorf("%w: header flag out of range: %+v", ErrInvalid, f)
	}
	w := uint32(f.ACK)<<30 | uint32(f.Priority)<<27 | uint32(f.ExecMode)<<22 | uint32(f.TP)<<19
	if f.Atomic {
		w |= 1 << 21
	}
	return w, nil
}

func decodeFlags(w uint32) Flags {
	return Flags{
		ACK:      ACKFlag(w >> 30 & 3),
		Priority: uint8(w >> 27 & 7),
		ExecMode: ExecMode(w >> 22 & 3),
		Atomic:   w>>21&1 == 1,
		TP:       TransactionPhase(w >> 19 & 3),
	}
}

// Header is the 24-byte common header (RFC 5810 §6.1).
type Header struct {
	Version    uint8 // 1; zero is encoded as 1
	Type       MessageType
	Length     uint16 // in 32-bit words, whole message; set by MarshalBinary and Parse
	Src, Dst   ID
	Correlator uint64
	Flags      Flags
}

// TLV is a generic top-level TLV that the typed fields of Message do not model.
type TLV struct {
	Type  uint16
	Value []byte
}

// KeyInfo is a KEYINFO-TLV: a key ID and the key content, which travels as the
// value of a FULLDATA-TLV.
type KeyInfo struct {
	KeyID uint32
	Data  []byte
}

// PathData is a PATH-DATA-TLV (RFC 5810 §7.1.5):
//
//	PATH-DATA := flags(16) IDcount(16) IDs(32 each) [KEYINFO] [DATA]
//	DATA      := FULLDATA | SPARSEDATA | RESULT | 1*PATH-DATA
//
// At most one of the DATA alternatives may be set. A FULLDATA (SPARSEDATA)
// TLV is present when HasFullData (HasSparseData) is true or the slice is
// non-empty.
type PathData struct {
	Flags         uint16
	IDs           []uint32
	Key           *KeyInfo
	FullData      []byte
	HasFullData   bool
	SparseData    []byte
	HasSparseData bool
	Result        *uint8
	Children      []PathData
}

// PathFlagSelectKey is the PATH-DATA flags bit that says a KEYINFO-TLV
// selects the row (F_SELKEY). RFC 5810 draws it as the "SELECTOR" bit; the
// numeric value 1 follows the tcpdump dissector written by the RFC's editor.
// The codec carries Flags verbatim and does not interpret it.
const PathFlagSelectKey uint16 = 0x0001

// Operation is an operation TLV (SET, DEL, GET, ...) holding PATH-DATA-TLVs.
//
// Three operations of the two-phase commit (RFC 5810 §4.3.1.2.2, §7.1.6)
// differ: COMMIT and TRCOMP are empty TLVs (a 4-byte header and no value),
// and COMMIT-RESPONSE carries a single RESULT-TLV directly, in Result,
// instead of PATH-DATA. Parse and MarshalBinary enforce these shapes.
type Operation struct {
	Type   OpType
	Paths  []PathData
	Result *ResultCode // COMMIT-RESPONSE only
}

// LFBSelect is an LFBselect-TLV: the target LFB class and instance and one or
// more operations on it.
type LFBSelect struct {
	ClassID, InstanceID uint32
	Ops                 []Operation
}

// Message is one ForCES protocol message.
type Message struct {
	Header    Header
	LFBs      []LFBSelect // Config, ConfigResponse, Query, QueryResponse, EventNotification, AssociationSetup
	Redirects []Redirect  // PacketRedirect: one per REDIRECT-TLV
	ASResult  *uint32     // AssociationSetupResponse
	ASTReason *uint32     // AssociationTeardown
	Extra     []TLV       // any other top-level TLV, preserved in order after the typed ones
}

// MarshalBinary encodes m, setting m.Header.Length. It returns an error
// wrapping ErrTooLarge if a TLV or the message exceeds its 16-bit length
// field, or ErrInvalid if m cannot be represented.
func (m *Message) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(nil)
}

// AppendBinary appends the encoding of m to b and sets m.Header.Length. On
// error b is returned unchanged.
func (m *Message) AppendBinary(b []byte) ([]byte, error) {
	out, err := appendMessage(b, m)
	if err != nil {
		return b, err
	}
	m.Header.Length = uint16((len(out) - len(b)) / 4)
	return out, nil
}

// appendMessage encodes m without modifying it, so that concurrent writers
// may encode the same message.
func appendMessage(b []byte, m *Message) ([]byte, error) {
	start := len(b)
	h := &m.Header
	if h.Version != 0 && h.Version != ProtocolVersion {
		return b, fmt.Errorf("%w: version %d", ErrVersion, h.Version)
	}
	flags, err := h.Flags.encode()
	if err != nil {
		return b, err
	}
	b = append(b, ProtocolVersion<<4, byte(h.Type), 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(h.Src))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Dst))
	b = binary.BigEndian.AppendUint64(b, h.Correlator)
	b = binary.BigEndian.AppendUint32(b, flags)

	for i := range m.LFBs {
		if b, err = appendLFBSelect(b, &m.LFBs[i]); err != nil {
			return b[:start], err
		}
	}
	for i := range m.Redirects {
		if b, err = appendRedirect(b, &m.Redirects[i]); err != nil {
			return b[:start], err
		}
	}
	if m.ASResult != nil {
		b = appendU32TLV(b, TLVASResult, *m.ASResult)
	}
	if m.ASTReason != nil {
		b = appendU32TLV(b, TLVASTReason, *m.ASTReason)
	}
	for _, t := range m.Extra {
		switch t.Type {
		case TLVLFBSelect, TLVASResult, TLVASTReason:
			return b[:start], fmt.Errorf("%w: Extra holds typed TLV %#04x", ErrInvalid, t.Type)
		case TLVRedirect:
			if h.Type == MsgPacketRedirect {
				return b[:start], fmt.Errorf("%w: Extra holds a REDIRECT-TLV of a PacketRedirect", ErrInvalid)
			}
		}
		if b, err = appendBytesTLV(b, t.Type, t.Value); err != nil {
			return b[:start], err
		}
	}
	n := len(b) - start
	if n > MaxMessageLen {
		return b[:start], fmt.Errorf("%w: message is %d bytes, limit %d", ErrTooLarge, n, MaxMessageLen)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(n/4))
	return b, nil
}

// beginTLV appends a TLV header with a zero length and returns the offset of
// the header, for endTLV to fill in.
func beginTLV(b []byte, typ uint16) ([]byte, int) {
	at := len(b)
	return append(b, byte(typ>>8), byte(typ), 0, 0), at
}

// endTLV sets the length of the TLV begun at offset at and pads it.
func endTLV(b []byte, at int) ([]byte, error) {
	l := len(b) - at
	if l > MaxTLVLen {
		typ := binary.BigEndian.Uint16(b[at:])
		return b, fmt.Errorf("%w: TLV %#04x is %d bytes, limit %d", ErrTooLarge, typ, l, MaxTLVLen)
	}
	binary.BigEndian.PutUint16(b[at+2:], uint16(l))
	for (len(b)-at)%4 != 0 {
		b = append(b, 0)
	}
	return b, nil
}

func appendBytesTLV(b []byte, typ uint16, v []byte) ([]byte, error) {
	b, at := beginTLV(b, typ)
	b = append(b, v...)
	return endTLV(b, at)
}

func appendU32TLV(b []byte, typ uint16, v uint32) []byte {
	b = append(b, byte(typ>>8), byte(typ), 0, 8)
	return binary.BigEndian.AppendUint32(b, v)
}

func appendLFBSelect(b []byte, s *LFBSelect) ([]byte, error) {
	if len(s.Ops) == 0 {
		return b, fmt.Errorf("%w: LFBselect for class %d has no operation", ErrInvalid, s.ClassID)
	}
	b, at := beginTLV(b, TLVLFBSelect)
	b = binary.BigEndian.AppendUint32(b, s.ClassID)
	b = binary.BigEndian.AppendUint32(b, s.InstanceID)
	var err error
	for i := range s.Ops {
		op := &s.Ops[i]
		if op.Type == 0 {
			return b, fmt.Errorf("%w: operation type 0 is reserved", ErrInvalid)
		}
		if err := checkOpShape(op.Type, len(op.Paths), op.Result != nil); err != nil {
			return b, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		var opAt int
		b, opAt = beginTLV(b, uint16(op.Type))
		if op.Result != nil {
			b = append(b, byte(TLVResult>>8), byte(TLVResult&0xFF), 0, 8, byte(*op.Result), 0, 0, 0)
		}
		for j := range op.Paths {
			if b, err = appendPathData(b, &op.Paths[j], 1, 0); err != nil {
				return b, err
			}
		}
		if b, err = endTLV(b, opAt); err != nil {
			return b, err
		}
	}
	return endTLV(b, at)
}

func appendPathData(b []byte, p *PathData, depth, above int) ([]byte, error) {
	if depth > MaxPathDepth {
		return b, fmt.Errorf("%w: depth %d exceeds %d", ErrTooDeep, depth, MaxPathDepth)
	}
	if above+len(p.IDs) > MaxPathIDs {
		return b, fmt.Errorf("%w: a path of %d IDs exceeds %d", ErrTooDeep, above+len(p.IDs), MaxPathIDs)
	}
	hasFull := p.HasFullData || len(p.FullData) > 0
	hasSparse := p.HasSparseData || len(p.SparseData) > 0
	kinds := 0
	for _, has := range [...]bool{hasFull, hasSparse, p.Result != nil, len(p.Children) > 0} {
		if has {
			kinds++
		}
	}
	if kinds > 1 {
		return b, fmt.Errorf("%w: PATH-DATA carries more than one of FULLDATA, SPARSEDATA, RESULT, PATH-DATA", ErrInvalid)
	}
	b, at := beginTLV(b, TLVPathData)
	b = binary.BigEndian.AppendUint16(b, p.Flags)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.IDs)))
	for _, id := range p.IDs {
		b = binary.BigEndian.AppendUint32(b, id)
	}
	var err error
	if p.Key != nil {
		var kat int
		b, kat = beginTLV(b, TLVKeyInfo)
		b = binary.BigEndian.AppendUint32(b, p.Key.KeyID)
		if b, err = appendBytesTLV(b, TLVFullData, p.Key.Data); err != nil {
			return b, err
		}
		if b, err = endTLV(b, kat); err != nil {
			return b, err
		}
	}
	switch {
	case hasFull:
		b, err = appendBytesTLV(b, TLVFullData, p.FullData)
	case hasSparse:
		b, err = appendBytesTLV(b, TLVSparseData, p.SparseData)
	case p.Result != nil:
		b = append(b, byte(TLVResult>>8), byte(TLVResult&0xFF), 0, 8, *p.Result, 0, 0, 0)
	default:
		for i := range p.Children {
			if b, err = appendPathData(b, &p.Children[i], depth+1, above+len(p.IDs)); err != nil {
				return b, err
			}
		}
	}
	if err != nil {
		return b, err
	}
	return endTLV(b, at)
}

// errOpShape is wrapped with ErrInvalid or ErrMalformed by the caller.
var errOpShape = errors.New("operation content does not fit its type")

// checkOpShape applies the RFC 5810 content rules of operation t: COMMIT and
// TRCOMP are empty, COMMIT-RESPONSE holds exactly one RESULT-TLV, and every
// other operation holds only PATH-DATA.
func checkOpShape(t OpType, paths int, hasResult bool) error {
	switch t {
	case OpCommit, OpTRComp:
		if paths > 0 || hasResult {
			return fmt.Errorf("%w: %v must be empty", errOpShape, t)
		}
	case OpCommitResponse:
		if paths > 0 || !hasResult {
			return fmt.Errorf("%w: %v must hold exactly one RESULT-TLV", errOpShape, t)
		}
	default:
		if hasResult {
			return fmt.Errorf("%w: RESULT-TLV directly inside %v", errOpShape, t)
		}
	}
	return nil
}
