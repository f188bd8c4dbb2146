package forces

import (
	"fmt"
)

// GetSelect returns an LFBselect that GETs each of paths (component IDs from
// the LFB's root) of LFB class and instance: the usual body of a Query.
func GetSelect(class, instance uint32, paths ...[]uint32) LFBSelect {
	op := Operation{Type: OpGet, Paths: make([]PathData, len(paths))}
	for i, p := range paths {
		op.Paths[i] = PathData{IDs: p}
	}
	return LFBSelect{ClassID: class, InstanceID: instance, Ops: []Operation{op}}
}

// NewQuery returns a Query from src to dst over lfbs, whose operations should
// be GET or GET-PROP (see GetSelect). Its slices alias lfbs.
func NewQuery(src, dst ID, corr uint64, lfbs ...LFBSelect) *Message {
	return &Message{
		Header: Header{Version: ProtocolVersion, Type: MsgQuery, Src: src, Dst: dst, Correlator: corr,
			Flags: Flags{Priority: PriorityOf(MsgQuery)}},
		LFBs: lfbs,
	}
}

// NewQueryResponse answers the Query req. Every operation becomes its
// response (GET -> GET-RESPONSE, GET-PROP -> GET-PROP-RESPONSE) with the
// request's PATH-DATA tree echoed; answer is called once per leaf, in Items
// order, and its leaf carries a FULLDATA-TLV with the returned bytes when the
// code is ResultSuccess, and otherwise a RESULT-TLV with the code. It fails
// with ErrInvalid when req is not a Query of GET and GET-PROP operations, and
// with ErrTooLarge when the answers do not fit one message.
func NewQueryResponse(req *Message, answer func(it Item) ([]byte, ResultCode)) (*Message, error) {
	if req.Header.Type != MsgQuery {
		return nil, fmt.Errorf("%w: cannot answer a %v with a Query Response", ErrInvalid, req.Header.Type)
	}
	resp := &Message{Header: responseHeader(req, MsgQueryResponse)}
	resp.LFBs = make([]LFBSelect, len(req.LFBs))
	for si := range req.LFBs {
		s := &req.LFBs[si]
		rs := LFBSelect{ClassID: s.ClassID, InstanceID: s.InstanceID, Ops: make([]Operation, len(s.Ops))}
		for oi, op := range s.Ops {
			if op.Type != OpGet && op.Type != OpGetProp {
				return nil, fmt.Errorf("%w: %v in a Query", ErrInvalid, op.Type)
			}
			ro := Operation{Type: op.Type.Response()}
			if len(op.Paths) > 0 {
				ro.Paths = make([]PathData, len(op.Paths))
			}
			for pi := range op.Paths {
				ro.Paths[pi] = answerPath(s, op.Type, nil, nil, &op.Paths[pi], answer)
			}
			rs.Ops[oi] = ro
		}
		resp.LFBs[si] = rs
	}
	if _, err := appendMessage(nil, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func answerPath(s *LFBSelect, op OpType, prefix []uint32, key *KeyInfo, p *PathData,
	answer func(Item) ([]byte, ResultCode)) PathData {
	r := PathData{Flags: p.Flags, IDs: p.IDs, Key: p.Key}
	path := p.IDs
	if len(prefix) > 0 {
		path = append(append(make([]uint32, 0, len(prefix)+len(p.IDs)), prefix...), p.IDs...)
	}
	if p.Key != nil {
		key = p.Key
	}
	if len(p.Children) == 0 {
		data, code := answer(Item{ClassID: s.ClassID, InstanceID: s.InstanceID, Op: op, Path: path, Key: key})
		if code == ResultSuccess {
			r.FullData, r.HasFullData = data, true
		} else {
			c := uint8(code)
			r.Result = &c
		}
		return r
	}
	r.Children = make([]PathData, len(p.Children))
	for i := range p.Children {
		r.Children[i] = answerPath(s, op, path, key, &p.Children[i], answer)
	}
	return r
}

// NewEventNotification returns an Event Notification from src to dst: one
// REPORT of data (a FULLDATA value) at path (usually the events component
// and the event ID, as the LFB class defines) of LFB class and instance.
func NewEventNotification(src, dst ID, corr uint64, class, instance uint32, path []uint32, data []byte) *Message {
	return &Message{
		Header: Header{Version: ProtocolVersion, Type: MsgEventNotification, Src: src, Dst: dst, Correlator: corr,
			Flags: Flags{Priority: PriorityOf(MsgEventNotification)}},
		LFBs: []LFBSelect{{ClassID: class, InstanceID: instance, Ops: []Operation{{
			Type: OpReport, Paths: []PathData{{IDs: path, FullData: data, HasFullData: true}},
		}}}},
	}
}

// Reports returns the REPORT leaves of the Event Notification m, in message
// order; each carries the event's LFB, path and FULLDATA.
func Reports(m *Message) ([]Item, error) {
	if m.Header.Type != MsgEventNotification {
		return nil, fmt.Errorf("%w: %v is not an Event Notification", ErrInvalid, m.Header.Type)
	}
	var out []Item
	for _, it := range Items(m) {
		if it.Op != OpReport {
			return nil, fmt.Errorf("%w: %v in an Event Notification", ErrMalformed, it.Op)
		}
		out = append(out, it)
	}
	return out, nil
}

// Two-phase commit (RFC 5810 §4.3.1.2.2). The CE sends its Config messages
// with the A (atomic) flag set and the transaction phases SOT ... EOT, then
// a Config holding an empty COMMIT operation; the FE answers with a Config
// Response whose COMMIT-RESPONSE holds one RESULT-TLV, and the CE closes the
// transaction with an empty TRCOMP operation (which is not answered).
// RFC 5810 does not tie COMMIT and TRCOMP to any LFB; splitplane addresses
// them to the FE Object LFB, instance 1.

// NewCommit returns a Config carrying the COMMIT of a two-phase-commit
// transaction, with the A flag, execute-all-or-none and AlwaysACK set.
func NewCommit(src, dst ID, corr uint64) *Message {
	return txnMessage(src, dst, corr, OpCommit, AlwaysACK)
}

// NewTRComp returns a Config carrying the TRCOMP that ends a committed
// transaction; it asks for no response.
func NewTRComp(src, dst ID, corr uint64) *Message {
	return txnMessage(src, dst, corr, OpTRComp, NoACK)
}

func txnMessage(src, dst ID, corr uint64, op OpType, ack ACKFlag) *Message {
	return &Message{
		Header: Header{
			Version: ProtocolVersion, Type: MsgConfig, Src: src, Dst: dst, Correlator: corr,
			Flags: Flags{ACK: ack, ExecMode: ExecAllOrNone, Atomic: true, Priority: PriorityOf(MsgConfig)},
		},
		LFBs: []LFBSelect{{ClassID: ClassFEObject, InstanceID: 1, Ops: []Operation{{Type: op}}}},
	}
}

// NewCommitResponse answers a COMMIT Config with a Config Response carrying a
// COMMIT-RESPONSE with code for each COMMIT of req.
func NewCommitResponse(req *Message, code ResultCode) (*Message, error) {
	if req.Header.Type != MsgConfig {
		return nil, fmt.Errorf("%w: cannot answer a %v with a Config Response", ErrInvalid, req.Header.Type)
	}
	resp := &Message{Header: responseHeader(req, MsgConfigResponse)}
	for _, s := range req.LFBs {
		for _, op := range s.Ops {
			if op.Type == OpCommit {
				c := code
				resp.LFBs = append(resp.LFBs, LFBSelect{ClassID: s.ClassID, InstanceID: s.InstanceID,
					Ops: []Operation{{Type: OpCommitResponse, Result: &c}}})
			}
		}
	}
	if len(resp.LFBs) == 0 {
		return nil, fmt.Errorf("%w: Config holds no COMMIT", ErrInvalid)
	}
	return resp, nil
}

// CommitResult returns the result of the COMMIT-RESPONSE in the Config
// Response m; with several, the first failure wins.
func CommitResult(m *Message) (ResultCode, error) {
	if m.Header.Type != MsgConfigResponse {
		return 0, fmt.Errorf("%w: %v is not a Config Response", ErrInvalid, m.Header.Type)
	}
	found := false
	res := ResultSuccess
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			if op.Type != OpCommitResponse || op.Result == nil {
				continue
			}
			if !found || res == ResultSuccess {
				res = *op.Result
			}
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: Config Response holds no COMMIT-RESPONSE", ErrMalformed)
	}
	return res, nil
}
