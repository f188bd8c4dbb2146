package forces

import (
	"fmt"
	"slices"
)

// NewAssociationSetup returns an Association Setup request from src to dst.
func NewAssociationSetup(src, dst ID, corr uint64) *Message {
	return &Message{Header: Header{Version: ProtocolVersion, Type: MsgAssociationSetup, Src: src, Dst: dst, Correlator: corr,
		Flags: Flags{Priority: PriorityOf(MsgAssociationSetup)}}}
}

// NewAssociationSetupResponse answers req with an ASResult-TLV carrying
// result (see SetupResult), echoing req's correlator.
func NewAssociationSetupResponse(req *Message, result uint32) *Message {
	return &Message{
		Header:   responseHeader(req, MsgAssociationSetupResponse),
		ASResult: &result,
	}
}

// NewAssociationTeardown returns an Association Teardown from src to dst with
// an ASTreason-TLV carrying reason (see TeardownReason).
func NewAssociationTeardown(src, dst ID, reason uint32) *Message {
	return &Message{
		Header: Header{Version: ProtocolVersion, Type: MsgAssociationTeardown, Src: src, Dst: dst,
			Flags: Flags{Priority: PriorityOf(MsgAssociationTeardown)}},
		ASTReason: &reason,
	}
}

// NewHeartbeat returns a Heartbeat; ack is NoACK or AlwaysACK (a request for
// a Heartbeat in reply).
func NewHeartbeat(src, dst ID, corr uint64, ack ACKFlag) *Message {
	return &Message{Header: Header{
		Version: ProtocolVersion, Type: MsgHeartbeat, Src: src, Dst: dst,
		Correlator: corr, Flags: Flags{ACK: ack, Priority: PriorityOf(MsgHeartbeat)},
	}}
}

func responseHeader(req *Message, t MessageType) Header {
	return Header{
		Version:    ProtocolVersion,
		Type:       t,
		Src:        req.Header.Dst,
		Dst:        req.Header.Src,
		Correlator: req.Header.Correlator,
		Flags:      Flags{Priority: req.Header.Flags.Priority},
	}
}

// TableOp is one row operation on an array component: SET (with FullData) or
// DEL (without).
type TableOp struct {
	Op                  OpType // OpSet or OpDel
	ClassID, InstanceID uint32
	Path                []uint32 // e.g. {1 (table component), rowIndex}
	FullData            []byte   // FULLDATA value; nil means no FULLDATA-TLV
}

// Sizes of the fixed parts of the TLVs a ConfigWriter emits.
const (
	lfbOverhead  = 4 + 8 // LFBselect header, class and instance IDs
	opOverhead   = 4     // operation TLV header
	pathOverhead = 4 + 4 // PATH-DATA header, flags and IDcount
	resultTLVLen = 8
)

// BuildConfig packs ops, in order, into Config messages, as a ConfigWriter
// packs them (it is a ConfigWriter whose output is parsed back): for a caller
// that wants Message values, such as a handful of FE Protocol settings. Each
// message gets hdr with Type set to Config and a Correlator from
// nextCorrelator (or hdr.Correlator, +1 per message, when nextCorrelator is
// nil). Bulk row traffic should use a ConfigWriter directly and skip the
// parse.
func BuildConfig(hdr Header, nextCorrelator func() uint64, ops []TableOp) ([]*Message, error) {
	corr := hdr.Correlator
	w := NewConfigWriter(hdr, func(h *Header) {
		if nextCorrelator != nil {
			h.Correlator = nextCorrelator()
		} else {
			h.Correlator = corr
			corr++
		}
	})
	for i := range ops {
		t := &ops[i]
		if err := w.Add(t.Op, t.ClassID, t.InstanceID, t.Path, t.FullData); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	enc := w.Flush()
	msgs := make([]*Message, len(enc))
	for i, b := range enc {
		// The writer is not used again, so the messages may alias its
		// buffer.
		m, err := parseOwned(b)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d does not parse back: %v", ErrInvalid, i, err)
		}
		msgs[i] = m
	}
	return msgs, nil
}

// Item is one leaf PATH-DATA of a message (a PATH-DATA without nested
// PATH-DATA), with the path IDs concatenated from the LFB's root.
type Item struct {
	ClassID, InstanceID uint32
	Op                  OpType
	Path                []uint32
	Key                 *KeyInfo // the innermost KEYINFO on the way, if any
	FullData            []byte
	HasFullData         bool
	SparseData          []byte
	HasSparseData       bool
	Result              *uint8
}

// Items flattens m into its leaf PATH-DATAs, depth first, in message order.
// This is the order NewConfigResponse and ConfigResults use. Paths alias m
// where no concatenation is needed.
func Items(m *Message) []Item {
	return AppendItems(nil, m)
}

// AppendItems appends m's leaf PATH-DATAs to dst, as Items does, so that a
// caller can reuse one slice for every message. The concatenated paths share
// one array, and a leaf without IDs of its own shares its parent's path, so
// flattening a parsed message (whose paths hold at most MaxPathIDs IDs)
// costs memory linear in its size.
func AppendItems(dst []Item, m *Message) []Item {
	n, ids := 0, 0
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				if len(op.Paths[i].Children) == 0 {
					n++ // a row, as a full sync's thousands are
					continue
				}
				l, c := countLeaves(&op.Paths[i], 0)
				n, ids = n+l, ids+c
			}
		}
	}
	if n == 0 {
		return dst
	}
	out := slices.Grow(dst, n)
	var arena []uint32
	if ids > 0 {
		arena = make([]uint32, 0, ids)
	}
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				out = appendItems(out, &arena, &s, op.Type, nil, nil, &op.Paths[i])
			}
		}
	}
	return out
}

// appendItems appends the leaves under p to out, carving concatenated paths
// from arena (sized by countLeaves). The slice being built travels by value,
// as the full sync's flat rows (no concatenation) want it in registers.
func appendItems(out []Item, arena *[]uint32, s *LFBSelect, op OpType, prefix []uint32, key *KeyInfo, p *PathData) []Item {
	path := p.IDs
	switch {
	case len(prefix) == 0:
	case len(p.IDs) == 0:
		path = prefix
	default:
		start := len(*arena)
		*arena = append(append(*arena, prefix...), p.IDs...)
		path = (*arena)[start:len(*arena):len(*arena)]
	}
	if p.Key != nil {
		key = p.Key
	}
	if len(p.Children) == 0 {
		return append(out, Item{
			ClassID: s.ClassID, InstanceID: s.InstanceID, Op: op, Path: path, Key: key,
			FullData: p.FullData, HasFullData: p.HasFullData || len(p.FullData) > 0,
			SparseData: p.SparseData, HasSparseData: p.HasSparseData || len(p.SparseData) > 0,
			Result: p.Result,
		})
	}
	for i := range p.Children {
		out = appendItems(out, arena, s, op, path, key, &p.Children[i])
	}
	return out
}

// NewConfigResponse answers the Config req with a Config Response of the same
// shape: each operation becomes its response type (SET -> SET-RESPONSE, DEL
// -> DEL-RESPONSE), and each PATH-DATA is echoed with its flags, IDs and key,
// with a RESULT-TLV in place of its data. results gives the code of each leaf
// in Items order; no results means all succeeded, and a single result applies
// to every leaf. A COMMIT is answered by a COMMIT-RESPONSE carrying the single
// result (or success), and a TRCOMP is not answered.
func NewConfigResponse(req *Message, results ...ResultCode) (*Message, error) {
	if req.Header.Type != MsgConfig {
		return nil, fmt.Errorf("%w: cannot answer a %v with a Config Response", ErrInvalid, req.Header.Type)
	}
	n := 0
	for _, s := range req.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				l, _ := countLeaves(&op.Paths[i], 0)
				n += l
			}
		}
	}
	switch len(results) {
	case 0:
		results = []ResultCode{ResultSuccess}
	case 1, n:
	default:
		return nil, fmt.Errorf("%w: %d results for %d paths", ErrInvalid, len(results), n)
	}
	// One backing array for all result bytes keeps this at O(1) allocations per op.
	codes := make([]uint8, n)
	for i := range codes {
		if len(results) == 1 {
			codes[i] = uint8(results[0])
		} else {
			codes[i] = uint8(results[i])
		}
	}
	resp := &Message{Header: responseHeader(req, MsgConfigResponse)}
	resp.LFBs = make([]LFBSelect, 0, len(req.LFBs))
	next := 0
	for _, s := range req.LFBs {
		rs := LFBSelect{ClassID: s.ClassID, InstanceID: s.InstanceID, Ops: make([]Operation, 0, len(s.Ops))}
		for _, op := range s.Ops {
			switch op.Type {
			case OpTRComp:
				continue // TRCOMP is not answered
			case OpCommit:
				c := ResultSuccess
				if len(results) == 1 {
					c = results[0]
				}
				rs.Ops = append(rs.Ops, Operation{Type: OpCommitResponse, Result: &c})
				continue
			}
			ro := Operation{Type: op.Type.Response()}
			if len(op.Paths) > 0 {
				ro.Paths = make([]PathData, len(op.Paths))
			}
			for pi := range op.Paths {
				ro.Paths[pi] = echoPath(&op.Paths[pi], codes, &next)
			}
			rs.Ops = append(rs.Ops, ro)
		}
		if len(rs.Ops) > 0 {
			resp.LFBs = append(resp.LFBs, rs)
		}
	}
	if len(resp.LFBs) == 0 && len(req.LFBs) > 0 {
		return nil, fmt.Errorf("%w: Config holds nothing to answer (only TRCOMP)", ErrInvalid)
	}
	return resp, nil
}

// countLeaves returns the leaf PATH-DATAs under p and the IDs that
// flattening them concatenates (above: the IDs of p's ancestors).
func countLeaves(p *PathData, above int) (leaves, ids int) {
	if len(p.IDs) > 0 && above > 0 {
		ids = above + len(p.IDs)
	}
	if len(p.Children) == 0 {
		return 1, ids
	}
	for i := range p.Children {
		l, c := countLeaves(&p.Children[i], above+len(p.IDs))
		leaves, ids = leaves+l, ids+c
	}
	return leaves, ids
}

func echoPath(p *PathData, codes []uint8, next *int) PathData {
	r := PathData{Flags: p.Flags, IDs: p.IDs, Key: p.Key}
	if len(p.Children) == 0 {
		r.Result = &codes[*next]
		*next++
		return r
	}
	r.Children = make([]PathData, len(p.Children))
	for i := range p.Children {
		r.Children[i] = echoPath(&p.Children[i], codes, next)
	}
	return r
}

// ConfigResults returns the RESULT code of every leaf PATH-DATA of the Config
// Response m, in Items order, so the sender can check that all succeeded. A
// leaf without a RESULT-TLV is an error wrapping ErrMalformed.
func ConfigResults(m *Message) ([]ResultCode, error) {
	if m.Header.Type != MsgConfigResponse {
		return nil, fmt.Errorf("%w: %v is not a Config Response", ErrInvalid, m.Header.Type)
	}
	var out []ResultCode
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				var err error
				if out, err = appendResults(out, &op.Paths[i]); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

func appendResults(out []ResultCode, p *PathData) ([]ResultCode, error) {
	if len(p.Children) == 0 {
		if p.Result == nil {
			return nil, fmt.Errorf("%w: response PATH-DATA %v has no RESULT-TLV", ErrMalformed, p.IDs)
		}
		return append(out, ResultCode(*p.Result)), nil
	}
	var err error
	for i := range p.Children {
		if out, err = appendResults(out, &p.Children[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
