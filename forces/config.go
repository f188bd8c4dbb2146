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

// Sizes of the fixed parts of the TLVs BuildConfig emits.
const (
	lfbOverhead  = 4 + 8 // LFBselect header, class and instance IDs
	opOverhead   = 4     // operation TLV header
	pathOverhead = 4 + 4 // PATH-DATA header, flags and IDcount
	resultTLVLen = 8
)

// BuildConfig packs ops, in order, into as few Config messages as the 16-bit
// TLV and message length limits allow. Consecutive ops on the same LFB and op
// type share one LFBselect and operation TLV. Every message is also sized so
// that its Config Response (a RESULT-TLV per path, see NewConfigResponse)
// fits in one message. Each message gets hdr with Type set to Config and
// a Correlator from nextCorrelator (or hdr.Correlator, +1 per message, when
// nextCorrelator is nil). The messages share ops' Path and FullData slices.
func BuildConfig(hdr Header, nextCorrelator func() uint64, ops []TableOp) ([]*Message, error) {
	hdr.Type = MsgConfig
	hdr.Version = ProtocolVersion
	var (
		msgs            []*Message
		cur             *Message
		reqMsg, respMsg int // bytes of the request and of its response so far
		reqLFB, respLFB int // TLV lengths of the open LFBselect
		li, oi          int // indices of the open LFBselect and operation
		opStart         int // index in pool of the open operation's first path
		corr            = hdr.Correlator
	)
	// The paths of one operation are consecutive ops, so every operation's
	// Paths is a window of one array: one allocation for the whole batch.
	pool := make([]PathData, len(ops))
	finish := func() {
		if cur != nil {
			cur.Header.Length = uint16(reqMsg / 4)
		}
	}
	for i := range ops {
		t := &ops[i]
		if t.Op == 0 {
			return nil, fmt.Errorf("%w: op %d: operation type 0", ErrInvalid, i)
		}
		if t.Op == OpSet && t.FullData == nil {
			return nil, fmt.Errorf("%w: op %d: SET without FullData", ErrInvalid, i)
		}
		if len(t.Path) > 0xFFFF {
			return nil, fmt.Errorf("%w: op %d: %d path IDs", ErrTooLarge, i, len(t.Path))
		}
		pl := pathOverhead + 4*len(t.Path)
		rpl := pl + resultTLVLen
		if t.FullData != nil {
			if 4+len(t.FullData) > MaxTLVLen {
				return nil, fmt.Errorf("%w: op %d: FULLDATA of %d bytes", ErrTooLarge, i, len(t.FullData))
			}
			pl += 4 + (len(t.FullData)+3)&^3
		}
		pool[i] = PathData{IDs: t.Path, FullData: t.FullData, HasFullData: t.FullData != nil}

		fits := func(extra int) bool {
			return reqLFB+extra+pl <= MaxTLVLen && respLFB+extra+rpl <= MaxTLVLen &&
				reqMsg+extra+pl <= MaxMessageLen && respMsg+extra+rpl <= MaxMessageLen
		}
		if cur != nil {
			lfb := &cur.LFBs[li]
			if lfb.ClassID == t.ClassID && lfb.InstanceID == t.InstanceID {
				if lfb.Ops[oi].Type == t.Op && fits(0) {
					lfb.Ops[oi].Paths = pool[opStart : i+1 : i+1]
					reqLFB, respLFB, reqMsg, respMsg = reqLFB+pl, respLFB+rpl, reqMsg+pl, respMsg+rpl
					continue
				}
				if lfb.Ops[oi].Type != t.Op && fits(opOverhead) {
					lfb.Ops = append(lfb.Ops, Operation{Type: t.Op, Paths: pool[i : i+1 : i+1]})
					oi, opStart = len(lfb.Ops)-1, i
					reqLFB, respLFB = reqLFB+opOverhead+pl, respLFB+opOverhead+rpl
					reqMsg, respMsg = reqMsg+opOverhead+pl, respMsg+opOverhead+rpl
					continue
				}
			}
		}
		// A new LFBselect, in a new message if this one is full.
		need, rneed := lfbOverhead+opOverhead+pl, lfbOverhead+opOverhead+rpl
		if need > MaxTLVLen || rneed > MaxTLVLen {
			return nil, fmt.Errorf("%w: op %d does not fit in one LFBselect-TLV", ErrTooLarge, i)
		}
		if cur == nil || reqMsg+need > MaxMessageLen || respMsg+rneed > MaxMessageLen {
			finish()
			h := hdr
			if nextCorrelator != nil {
				h.Correlator = nextCorrelator()
			} else {
				h.Correlator = corr
				corr++
			}
			cur = &Message{Header: h}
			msgs = append(msgs, cur)
			reqMsg, respMsg = HeaderLen, HeaderLen
		}
		cur.LFBs = append(cur.LFBs, LFBSelect{
			ClassID: t.ClassID, InstanceID: t.InstanceID,
			Ops: []Operation{{Type: t.Op, Paths: pool[i : i+1 : i+1]}},
		})
		li, oi, opStart = len(cur.LFBs)-1, 0, i
		reqLFB, respLFB = need, rneed
		reqMsg, respMsg = reqMsg+need, respMsg+rneed
	}
	finish()
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
// caller can reuse one slice for every message.
func AppendItems(dst []Item, m *Message) []Item {
	n := 0
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				n += countLeaves(&op.Paths[i])
			}
		}
	}
	if n == 0 {
		return dst
	}
	out := slices.Grow(dst, n)
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			for i := range op.Paths {
				out = appendItems(out, &s, op.Type, nil, nil, &op.Paths[i])
			}
		}
	}
	return out
}

func appendItems(out []Item, s *LFBSelect, op OpType, prefix []uint32, key *KeyInfo, p *PathData) []Item {
	path := p.IDs
	if len(prefix) > 0 {
		path = make([]uint32, 0, len(prefix)+len(p.IDs))
		path = append(append(path, prefix...), p.IDs...)
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
		out = appendItems(out, s, op, path, key, &p.Children[i])
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
				n += countLeaves(&op.Paths[i])
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

func countLeaves(p *PathData) int {
	if len(p.Children) == 0 {
		return 1
	}
	n := 0
	for i := range p.Children {
		n += countLeaves(&p.Children[i])
	}
	return n
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
