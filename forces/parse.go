package forces

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Parse decodes exactly one message from b, which must hold the whole message
// and nothing else. Errors wrap ErrMalformed, ErrVersion, ErrLength or
// ErrTooDeep. The result does not alias b.
//
// Parse is canonical: empty slices come back nil, so two parses of equivalent
// encodings compare equal with reflect.DeepEqual.
func Parse(b []byte) (*Message, error) {
	if err := checkHeader(b, len(b)); err != nil {
		return nil, err
	}
	own := make([]byte, len(b))
	copy(own, b)
	return parseOwned(own)
}

// checkHeader validates the fixed part of the common header against n, the
// number of bytes the message occupies.
func checkHeader(b []byte, n int) error {
	if len(b) < HeaderLen {
		return fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrMalformed, len(b), HeaderLen)
	}
	if v := b[0] >> 4; v != ProtocolVersion {
		return fmt.Errorf("%w: version %d", ErrVersion, v)
	}
	words := int(binary.BigEndian.Uint16(b[2:]))
	if words*4 < HeaderLen {
		return fmt.Errorf("%w: header Length %d words is less than the header", ErrLength, words)
	}
	if words*4 != n {
		return fmt.Errorf("%w: header Length %d words, have %d bytes", ErrLength, words, n)
	}
	return nil
}

// parseOwned parses b, which the caller hands over: the message aliases it.
func parseOwned(b []byte) (*Message, error) {
	return parseInto(b, nil)
}

// MessageBuffer is memory to read messages into (Conn.ReadMessageInto): the
// message, its bytes, and the slices a parse fills, kept from one message
// to the next, so that a stream of large Config messages (a full sync's
// thousands) allocates nothing per message. A message read into a buffer is
// valid until the buffer is used again. The zero value is ready to use.
type MessageBuffer struct {
	m     Message
	bytes []byte
	ids   []uint32
	paths []PathData
	ops   []Operation
	lfbs  []LFBSelect
}

// Parse decodes one message from b as the package's Parse does, into mb's
// memory: b is copied into the buffer, as a read from a connection fills it,
// and the message is valid until mb is used again. Once the buffer has grown
// to the largest message, parsing allocates nothing.
func (mb *MessageBuffer) Parse(b []byte) (*Message, error) {
	mb.bytes = append(mb.bytes[:0], b...)
	return parseInto(mb.bytes, mb)
}

// parseInto parses b, which the caller hands over: the message aliases it.
// With mem, the message is mem's, and its slices are carved from mem's
// arrays, which grow as needed.
func parseInto(b []byte, mem *MessageBuffer) (*Message, error) {
	if err := checkHeader(b, len(b)); err != nil {
		return nil, err
	}
	p := parser{mem: mem}
	var m *Message
	if mem != nil {
		p.ids = mem.ids[:0]
		mem.paths, mem.ops, mem.lfbs = mem.paths[:0], mem.ops[:0], mem.lfbs[:0]
		m = &mem.m
	} else {
		m = new(Message)
	}
	if cap(p.ids) < len(b)/4 {
		// Room for every ID the message can hold: p.ids never grows.
		p.ids = make([]uint32, 0, len(b)/4)
		if mem != nil {
			mem.ids = p.ids
		}
	}
	*m = Message{Header: Header{
		Version:    ProtocolVersion,
		Type:       MessageType(b[1]),
		Length:     binary.BigEndian.Uint16(b[2:]),
		Src:        ID(binary.BigEndian.Uint32(b[4:])),
		Dst:        ID(binary.BigEndian.Uint32(b[8:])),
		Correlator: binary.BigEndian.Uint64(b[12:]),
		Flags:      decodeFlags(binary.BigEndian.Uint32(b[20:])),
	}}
	rest := b[HeaderLen:]
	for len(rest) > 0 {
		typ, val, next, err := nextTLV(rest)
		if err != nil {
			return nil, err
		}
		rest = next
		switch typ {
		case TLVLFBSelect:
			s, err := p.lfbSelect(val)
			if err != nil {
				return nil, err
			}
			if mem != nil {
				mem.lfbs = append(mem.lfbs, s)
				m.LFBs = mem.lfbs
				continue
			}
			m.LFBs = append(m.LFBs, s)
		case TLVRedirect:
			if m.Header.Type != MsgPacketRedirect {
				m.Extra = append(m.Extra, TLV{Type: typ, Value: bytesOrNil(val)})
				continue
			}
			r, err := parseRedirect(val)
			if err != nil {
				return nil, err
			}
			m.Redirects = append(m.Redirects, r)
		case TLVASResult:
			if m.ASResult != nil {
				return nil, fmt.Errorf("%w: duplicate ASResult-TLV", ErrMalformed)
			}
			v, err := u32Value(typ, val)
			if err != nil {
				return nil, err
			}
			m.ASResult = &v
		case TLVASTReason:
			if m.ASTReason != nil {
				return nil, fmt.Errorf("%w: duplicate ASTreason-TLV", ErrMalformed)
			}
			v, err := u32Value(typ, val)
			if err != nil {
				return nil, err
			}
			m.ASTReason = &v
		default:
			m.Extra = append(m.Extra, TLV{Type: typ, Value: bytesOrNil(val)})
		}
	}
	return m, nil
}

// nextTLV splits the first TLV off b. The TLV's padding must be present.
func nextTLV(b []byte) (typ uint16, val, rest []byte, err error) {
	if len(b) < 4 {
		return 0, nil, nil, fmt.Errorf("%w: %d bytes left, too short for a TLV header", ErrMalformed, len(b))
	}
	typ = binary.BigEndian.Uint16(b)
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < 4 {
		return 0, nil, nil, fmt.Errorf("%w: TLV %#04x length %d is less than 4", ErrMalformed, typ, l)
	}
	if l > len(b) {
		return 0, nil, nil, fmt.Errorf("%w: TLV %#04x length %d runs past the %d bytes left", ErrMalformed, typ, l, len(b))
	}
	padded := (l + 3) &^ 3
	if padded > len(b) {
		return 0, nil, nil, fmt.Errorf("%w: TLV %#04x lacks its padding", ErrMalformed, typ)
	}
	return typ, b[4:l:l], b[padded:], nil
}

// countTLVs returns how many well-formed TLVs b starts with, so that slices
// can be sized once; the caller still validates each TLV.
func countTLVs(b []byte) int {
	n := 0
	for len(b) >= 4 {
		l := int(binary.BigEndian.Uint16(b[2:]))
		if l < 4 || (l+3)&^3 > len(b) {
			break
		}
		b = b[(l+3)&^3:]
		n++
	}
	return n
}

func u32Value(typ uint16, val []byte) (uint32, error) {
	if len(val) != 4 {
		return 0, fmt.Errorf("%w: TLV %#04x value is %d bytes, want 4", ErrMalformed, typ, len(val))
	}
	return binary.BigEndian.Uint32(val), nil
}

func bytesOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// parser carries a single backing array for every path's IDs, sized from the
// input, so that a message of many small paths costs one allocation for IDs;
// with mem, operations and their top-level paths come from mem's arrays too
// (a slice carved from an array that later grows keeps the old one).
type parser struct {
	ids []uint32
	mem *MessageBuffer
}

func (p *parser) lfbSelect(val []byte) (LFBSelect, error) {
	if len(val) < 8 {
		return LFBSelect{}, fmt.Errorf("%w: LFBselect value is %d bytes, want at least 8", ErrMalformed, len(val))
	}
	s := LFBSelect{
		ClassID:    binary.BigEndian.Uint32(val),
		InstanceID: binary.BigEndian.Uint32(val[4:]),
	}
	rest := val[8:]
	if len(rest) == 0 {
		return LFBSelect{}, fmt.Errorf("%w: LFBselect for class %d has no operation", ErrMalformed, s.ClassID)
	}
	opStart := 0
	if p.mem != nil {
		opStart = len(p.mem.ops)
	}
	for len(rest) > 0 {
		typ, opVal, next, err := nextTLV(rest)
		if err != nil {
			return LFBSelect{}, err
		}
		rest = next
		if typ == 0 {
			return LFBSelect{}, fmt.Errorf("%w: operation type 0 is reserved", ErrMalformed)
		}
		op := Operation{Type: OpType(typ)}
		pathStart := 0
		if n := countTLVs(opVal); n > 0 && p.mem != nil {
			// At most n paths are appended: they stay within the carving.
			p.mem.paths = slices.Grow(p.mem.paths, n)
			pathStart = len(p.mem.paths)
			op.Paths = p.mem.paths[pathStart : pathStart : pathStart+n]
		} else if n > 0 {
			op.Paths = make([]PathData, 0, n)
		}
		for len(opVal) > 0 {
			ptyp, pval, pnext, err := nextTLV(opVal)
			if err != nil {
				return LFBSelect{}, err
			}
			opVal = pnext
			if ptyp == TLVResult && op.Type == OpCommitResponse && op.Result == nil && len(op.Paths) == 0 {
				if len(pval) != 4 {
					return LFBSelect{}, fmt.Errorf("%w: RESULT value is %d bytes, want 4", ErrMalformed, len(pval))
				}
				r := ResultCode(pval[0])
				op.Result = &r
				continue
			}
			if ptyp != TLVPathData {
				return LFBSelect{}, fmt.Errorf("%w: TLV %#04x inside operation %v, want PATH-DATA", ErrMalformed, ptyp, op.Type)
			}
			op.Paths = append(op.Paths, PathData{})
			if err := p.pathData(&op.Paths[len(op.Paths)-1], pval, 1, 0); err != nil {
				return LFBSelect{}, err
			}
		}
		if err := checkOpShape(op.Type, len(op.Paths), op.Result != nil); err != nil {
			return LFBSelect{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if len(op.Paths) == 0 {
			op.Paths = nil
		}
		if p.mem != nil {
			p.mem.paths = p.mem.paths[:pathStart+len(op.Paths)]
			p.mem.ops = append(p.mem.ops, op)
			continue
		}
		s.Ops = append(s.Ops, op)
	}
	if p.mem != nil {
		s.Ops = p.mem.ops[opStart:len(p.mem.ops):len(p.mem.ops)]
	}
	return s, nil
}

// pathData parses a PATH-DATA value into pd, which must be zero: in place,
// as a full sync's Configs hold thousands each. above is the number of IDs
// its ancestors hold.
func (p *parser) pathData(pd *PathData, val []byte, depth, above int) error {
	if depth > MaxPathDepth {
		return fmt.Errorf("%w: depth %d exceeds %d", ErrTooDeep, depth, MaxPathDepth)
	}
	if len(val) < 4 {
		return fmt.Errorf("%w: PATH-DATA value is %d bytes, want at least 4", ErrMalformed, len(val))
	}
	pd.Flags = binary.BigEndian.Uint16(val)
	n := int(binary.BigEndian.Uint16(val[2:]))
	rest := val[4:]
	if n*4 > len(rest) {
		return fmt.Errorf("%w: PATH-DATA IDcount %d runs past the %d bytes left", ErrMalformed, n, len(rest))
	}
	if above+n > MaxPathIDs {
		return fmt.Errorf("%w: a path of %d IDs exceeds %d", ErrTooDeep, above+n, MaxPathIDs)
	}
	if n > 0 {
		start := len(p.ids)
		ids := slices.Grow(p.ids, n)[start : start+n]
		for i := range ids {
			ids[i] = binary.BigEndian.Uint32(rest[4*i:])
		}
		p.ids = p.ids[:start+n]
		pd.IDs = ids[:n:n]
	}
	rest = rest[4*n:]

	sawData := false
	for len(rest) > 0 {
		typ, v, next, err := nextTLV(rest)
		if err != nil {
			return err
		}
		rest = next
		if sawData && !(typ == TLVPathData && len(pd.Children) > 0) {
			return fmt.Errorf("%w: TLV %#04x after the DATA of a PATH-DATA", ErrMalformed, typ)
		}
		switch typ {
		case TLVKeyInfo:
			if pd.Key != nil {
				return fmt.Errorf("%w: duplicate KEYINFO", ErrMalformed)
			}
			k, err := keyInfo(v)
			if err != nil {
				return err
			}
			pd.Key = k
			continue
		case TLVFullData:
			pd.FullData, pd.HasFullData = bytesOrNil(v), true
		case TLVSparseData:
			pd.SparseData, pd.HasSparseData = bytesOrNil(v), true
		case TLVResult:
			if len(v) != 4 {
				return fmt.Errorf("%w: RESULT value is %d bytes, want 4", ErrMalformed, len(v))
			}
			r := v[0]
			pd.Result = &r
		case TLVPathData:
			if pd.Children == nil {
				// Sized once: a PATH-DATA over thousands of rows would
				// otherwise allocate twice their room while growing.
				pd.Children = make([]PathData, 0, 1+countTLVs(rest))
			}
			pd.Children = append(pd.Children, PathData{})
			if err := p.pathData(&pd.Children[len(pd.Children)-1], v, depth+1, above+n); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: TLV %#04x inside PATH-DATA", ErrMalformed, typ)
		}
		sawData = true
	}
	return nil
}

func keyInfo(v []byte) (*KeyInfo, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("%w: KEYINFO value is %d bytes, want at least 4", ErrMalformed, len(v))
	}
	typ, data, rest, err := nextTLV(v[4:])
	if err != nil {
		return nil, err
	}
	if typ != TLVFullData || len(rest) != 0 {
		return nil, fmt.Errorf("%w: KEYINFO must hold exactly one FULLDATA", ErrMalformed)
	}
	return &KeyInfo{KeyID: binary.BigEndian.Uint32(v), Data: bytesOrNil(data)}, nil
}
