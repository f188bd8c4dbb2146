package fe

import (
	"errors"
	"fmt"

	"github.com/splitplane/splitplane/forces"
)

// What the FE checks of a CE's Config or Query before it applies or answers
// any of it, and the answer it gives a message it refuses whole: every
// message of the CE gets an answer (or the association is torn down), and
// none costs more memory than a small multiple of its size.

// maxLeafIDsPerWord bounds the path IDs the leaves of a message may hold
// together, per 32-bit word of the message. A leaf's path is its own IDs
// after its ancestors', so a message of many empty PATH-DATAs under one
// long path would otherwise flatten into a copy of that path per leaf:
// quadratic in the message's size. A CE's own messages hold about one ID a
// word (a row is [table, index] in five words or more).
const maxLeafIDsPerWord = 4

// screen checks the shape of the Config or Query m before anything of it
// is applied or answered, and returns the code every leaf of it is refused
// with, and why, when it is refused whole.
func screen(m *forces.Message) (forces.ResultCode, error) {
	ids, ops, control := 0, 0, 0
	for _, s := range m.LFBs {
		for _, op := range s.Ops {
			ops++
			switch op.Type {
			case forces.OpCommit, forces.OpTRComp:
				control++
			default:
				if len(op.Paths) == 0 {
					return forces.ResultInvalidTLV, fmt.Errorf("%v of LFB class %d holds no PATH-DATA", op.Type, s.ClassID)
				}
			}
			for i := range op.Paths {
				if p := &op.Paths[i]; len(p.Children) == 0 {
					ids += len(p.IDs) // a row, as a full sync's thousands are
				} else {
					ids += leafIDs(p, 0)
				}
			}
		}
	}
	if words := int(m.Header.Length); ids > maxLeafIDsPerWord*max(words, forces.HeaderLen/4) {
		return forces.ResultContentsTooLong, fmt.Errorf("its leaves' paths hold %d IDs, more than %d for a message of %d words", ids, maxLeafIDsPerWord*words, words)
	}
	switch {
	case m.Header.Type == forces.MsgQuery && control > 0:
		return forces.ResultNotSupported, fmt.Errorf("a Query holds COMMIT or TRCOMP")
	case control > 0 && ops > 1:
		return forces.ResultNotSupported, fmt.Errorf("COMMIT or TRCOMP beside %d other operations", ops-1)
	}
	return forces.ResultSuccess, nil
}

// leafIDs returns the path IDs p's leaves hold once their ancestors' IDs
// (above: how many) are put before their own: what flattening p costs.
func leafIDs(p *forces.PathData, above int) int {
	above += len(p.IDs)
	if len(p.Children) == 0 {
		return above
	}
	n := 0
	for i := range p.Children {
		n += leafIDs(&p.Children[i], above)
	}
	return n
}

// refusal answers the Config or Query req with code for every leaf of it: a
// response of req's shape (each operation its response, each PATH-DATA
// echoed with its IDs and key, a RESULT-TLV at each leaf), built without
// flattening paths, so in memory linear in req's size. A COMMIT is answered
// by a COMMIT-RESPONSE with code; operations that hold no PATH-DATA
// otherwise are not answered.
func refusal(req *forces.Message, code forces.ResultCode) *forces.Message {
	typ := forces.MsgConfigResponse
	if req.Header.Type == forces.MsgQuery {
		typ = forces.MsgQueryResponse
	}
	resp := &forces.Message{Header: forces.Header{
		Version: forces.ProtocolVersion, Type: typ, Src: req.Header.Dst, Dst: req.Header.Src,
		Correlator: req.Header.Correlator, Flags: forces.Flags{Priority: req.Header.Flags.Priority},
	}}
	c := uint8(code)
	for _, s := range req.LFBs {
		rs := forces.LFBSelect{ClassID: s.ClassID, InstanceID: s.InstanceID}
		for _, op := range s.Ops {
			switch {
			case op.Type == forces.OpCommit:
				rc := code
				rs.Ops = append(rs.Ops, forces.Operation{Type: forces.OpCommitResponse, Result: &rc})
				continue
			case len(op.Paths) == 0:
				continue
			}
			ro := forces.Operation{Type: responseOp(op.Type), Paths: make([]forces.PathData, len(op.Paths))}
			for i := range op.Paths {
				ro.Paths[i] = refusePath(&op.Paths[i], &c)
			}
			rs.Ops = append(rs.Ops, ro)
		}
		if len(rs.Ops) > 0 {
			resp.LFBs = append(resp.LFBs, rs)
		}
	}
	return resp
}

// responseOp is the operation that answers t in a response: its response
// type, or, for a type that has none and cannot stand in a response with
// PATH-DATA as it is (a COMMIT-RESPONSE), the response of a SET.
func responseOp(t forces.OpType) forces.OpType {
	r := t.Response()
	if r == forces.OpCommitResponse || r == forces.OpCommit || r == forces.OpTRComp {
		return forces.OpSetResponse
	}
	return r
}

func refusePath(p *forces.PathData, code *uint8) forces.PathData {
	r := forces.PathData{Flags: p.Flags, IDs: p.IDs, Key: p.Key}
	if len(p.Children) == 0 {
		r.Result = code
		return r
	}
	r.Children = make([]forces.PathData, len(p.Children))
	for i := range p.Children {
		r.Children[i] = refusePath(&p.Children[i], code)
	}
	return r
}

// errUnanswerable is why the FE ends an association over a message of the
// CE it cannot answer.
var errUnanswerable = errors.New("message cannot be answered")

// configResponseFits reports why the Config Response echoing the Config m
// (its PATH-DATA tree, each leaf's data replaced by a RESULT-TLV, each
// COMMIT answered by a COMMIT-RESPONSE) would not encode: a TLV or the
// message longer than its 16-bit length allows. An echoed leaf can grow by
// a few bytes, so a request that just fits can have a response that does
// not.
func configResponseFits(m *forces.Message) error {
	n := forces.HeaderLen
	for _, s := range m.LFBs {
		lfb := 12 // header, class and instance
		for _, op := range s.Ops {
			ol := 4
			switch op.Type {
			case forces.OpTRComp:
				continue // not answered
			case forces.OpCommit:
				ol += 8
			}
			for i := range op.Paths {
				p := &op.Paths[i]
				if len(p.Children) == 0 && p.Key == nil {
					ol += 16 + 4*len(p.IDs) // a row: its IDs and a RESULT-TLV
					continue
				}
				pl, err := echoLen(p)
				if err != nil {
					return err
				}
				ol += pl
			}
			if ol > forces.MaxTLVLen {
				return fmt.Errorf("the answer to its %v of LFB class %d would be %d bytes, more than a TLV holds (%d)", op.Type, s.ClassID, ol, forces.MaxTLVLen)
			}
			lfb += ol
		}
		if lfb > forces.MaxTLVLen {
			return fmt.Errorf("the answer to its LFBselect of class %d would be %d bytes, more than a TLV holds (%d)", s.ClassID, lfb, forces.MaxTLVLen)
		}
		n += lfb
	}
	if n > forces.MaxMessageLen {
		return fmt.Errorf("its Config Response would be %d bytes, more than a message holds (%d)", n, forces.MaxMessageLen)
	}
	return nil
}

// echoLen is the length of p's PATH-DATA TLV echoed in a response.
func echoLen(p *forces.PathData) (int, error) {
	n := 8 + 4*len(p.IDs)
	if p.Key != nil {
		n += 12 + (len(p.Key.Data)+3)&^3 // KEYINFO: header, key ID, FULLDATA
	}
	if len(p.Children) == 0 {
		n += 8 // the RESULT-TLV
	}
	for i := range p.Children {
		c, err := echoLen(&p.Children[i])
		if err != nil {
			return 0, err
		}
		n += c
	}
	if n > forces.MaxTLVLen {
		return 0, fmt.Errorf("the answer to its PATH-DATA %v would be %d bytes, more than a TLV holds (%d)", p.IDs[:min(len(p.IDs), 4)], n, forces.MaxTLVLen)
	}
	return n, nil
}
