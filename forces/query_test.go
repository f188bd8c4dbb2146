package forces

import (
	"errors"
	"reflect"
	"testing"
)

func roundTrip(t *testing.T, m *Message) *Message {
	t.Helper()
	raw, err := m.MarshalBinary()
	if err != nil {
		t.Fatalf("marshal %v: %v", m.Header.Type, err)
	}
	p, err := Parse(raw)
	if err != nil {
		t.Fatalf("parse %v: %v", m.Header.Type, err)
	}
	return p
}

func TestQueryAndResponse(t *testing.T) {
	q := NewQuery(testCE, testFE, 5,
		GetSelect(ClassFEObject, 1, []uint32{FEObjectFEState}, []uint32{FEObjectFEName}),
		LFBSelect{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Ops: []Operation{{Type: OpGet, Paths: []PathData{
			{IDs: []uint32{CompIPv4PrefixTable}, Children: []PathData{{IDs: []uint32{9}}, {IDs: []uint32{10}}}},
		}}}},
	)
	q = roundTrip(t, q)
	var asked [][]uint32
	resp, err := NewQueryResponse(q, func(it Item) ([]byte, ResultCode) {
		asked = append(asked, it.Path)
		switch {
		case it.ClassID == ClassFEObject && it.Path[0] == FEObjectFEState:
			return FEStateOperEnable.MarshalFullData(), ResultSuccess
		case it.ClassID == ClassIPv4UcastLPM && it.Path[1] == 9:
			return prefixRow198(), ResultSuccess
		}
		return nil, ResultNotFound
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]uint32{{FEObjectFEState}, {FEObjectFEName}, {CompIPv4PrefixTable, 9}, {CompIPv4PrefixTable, 10}}
	if !reflect.DeepEqual(asked, want) {
		t.Errorf("answer called for %v, want %v", asked, want)
	}
	resp = roundTrip(t, resp)
	if resp.Header.Type != MsgQueryResponse || resp.Header.Correlator != 5 || resp.Header.Dst != testCE {
		t.Errorf("response header %+v", resp.Header)
	}
	items := Items(resp)
	if len(items) != 4 || items[0].Op != OpGetResponse {
		t.Fatalf("items %+v", items)
	}
	if st, err := ParseFEState(items[0].FullData); err != nil || st != FEStateOperEnable {
		t.Errorf("FEState %v %v", st, err)
	}
	if items[1].Result == nil || ResultCode(*items[1].Result) != ResultNotFound || items[1].HasFullData {
		t.Errorf("FEName leaf %+v", items[1])
	}
	if r, err := ParseIPv4PrefixInfo(items[2].FullData); err != nil || r.HopSelector != 7 {
		t.Errorf("route leaf %+v %v", r, err)
	}

	if _, err := NewQueryResponse(configSet(), nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("answering a Config: %v", err)
	}
	setQ := NewQuery(testCE, testFE, 1, LFBSelect{ClassID: 1, InstanceID: 1, Ops: []Operation{{Type: OpSet}}})
	if _, err := NewQueryResponse(setQ, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("SET in a Query: %v", err)
	}
	huge := NewQuery(testCE, testFE, 1, GetSelect(ClassFEObject, 1, []uint32{1}, []uint32{2}))
	if _, err := NewQueryResponse(huge, func(Item) ([]byte, ResultCode) { return make([]byte, 40000), ResultSuccess }); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized answers: %v", err)
	}
}

func TestEventNotification(t *testing.T) {
	m := roundTrip(t, NewEventNotification(testFE, testCE, 3, ClassEtherPHYCop, 2, []uint32{6, 1}, []byte{0, 0, 0, 1}))
	reps, err := Reports(m)
	if err != nil || len(reps) != 1 {
		t.Fatalf("Reports: %v %v", reps, err)
	}
	r := reps[0]
	if r.ClassID != ClassEtherPHYCop || r.InstanceID != 2 || !reflect.DeepEqual(r.Path, []uint32{6, 1}) ||
		!reflect.DeepEqual(r.FullData, []byte{0, 0, 0, 1}) || r.Op != OpReport {
		t.Errorf("report %+v", r)
	}
	if _, err := Reports(configSet()); !errors.Is(err, ErrInvalid) {
		t.Errorf("Reports of a Config: %v", err)
	}
}

func TestTwoPhaseCommit(t *testing.T) {
	commit := NewCommit(testCE, testFE, 20)
	raw, err := commit.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Config, flags AlwaysACK | EM all-or-none | A; LFBselect FE Object/1 with an
	// empty COMMIT operation TLV (length 4, no value).
	want := unhex(t, `10 03 000a  40000000 00000001 0000000000000014  f0600000
		1000 0010 00000001 00000001  000c 0004`)
	if !reflect.DeepEqual(raw, want) {
		t.Fatalf("COMMIT\n got %x\nwant %x", raw, want)
	}
	commit = roundTrip(t, commit)
	if op := commit.LFBs[0].Ops[0]; op.Type != OpCommit || op.Paths != nil || op.Result != nil {
		t.Errorf("parsed COMMIT %+v", op)
	}

	resp, err := NewCommitResponse(commit, ResultSuccess)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = resp.MarshalBinary()
	want = unhex(t, `10 13 000c  00000001 40000000 0000000000000014  30000000
		1000 0018 00000001 00000001  000d 000c  0114 0008 00000000`)
	if !reflect.DeepEqual(raw, want) {
		t.Fatalf("COMMIT-RESPONSE\n got %x\nwant %x", raw, want)
	}
	if code, err := CommitResult(roundTrip(t, resp)); err != nil || code != ResultSuccess {
		t.Errorf("CommitResult %v %v", code, err)
	}
	// NewConfigResponse answers a COMMIT the same way.
	resp2, err := NewConfigResponse(commit, ResultInternalError)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := CommitResult(roundTrip(t, resp2)); err != nil || code != ResultInternalError {
		t.Errorf("NewConfigResponse COMMIT: %v %v", code, err)
	}

	tr := roundTrip(t, NewTRComp(testCE, testFE, 21))
	if op := tr.LFBs[0].Ops[0]; op.Type != OpTRComp || op.Paths != nil || tr.Header.Flags.ACK != NoACK {
		t.Errorf("parsed TRCOMP %+v", tr)
	}
	if _, err := NewConfigResponse(tr); !errors.Is(err, ErrInvalid) {
		t.Errorf("answering a lone TRCOMP: %v", err)
	}
	if _, err := NewCommitResponse(configSet(), ResultSuccess); !errors.Is(err, ErrInvalid) {
		t.Errorf("CommitResponse without COMMIT: %v", err)
	}
	if _, err := CommitResult(resp2.withType(MsgConfig)); !errors.Is(err, ErrInvalid) {
		t.Errorf("CommitResult of a Config: %v", err)
	}

	// Shapes the RFC forbids are refused both ways.
	for _, c := range []struct {
		name string
		body string
	}{
		{"COMMIT with PATH-DATA", "000c 000c 0110 0008 00000000"},
		{"TRCOMP with PATH-DATA", "000e 000c 0110 0008 00000000"},
		{"COMMIT-RESPONSE without RESULT", "000d 0004"},
		{"COMMIT-RESPONSE with two RESULTs", "000d 0014 0114 0008 00000000 0114 0008 00000000"},
		{"COMMIT-RESPONSE with RESULT and PATH-DATA", "000d 0014 0114 0008 00000000 0110 0008 00000000"},
		{"RESULT directly in SET-RESPONSE", "0003 000c 0114 0008 00000000"},
		{"short RESULT", "000d 0008 0114 0004"},
	} {
		if _, err := Parse(msgWith(MsgConfigResponse, lfbBody(t, c.body))); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
	c := ResultSuccess
	for _, op := range []Operation{
		{Type: OpCommit, Paths: []PathData{{}}},
		{Type: OpCommitResponse},
		{Type: OpSetResponse, Result: &c},
		{Type: OpTRComp, Result: &c},
	} {
		m := &Message{Header: Header{Type: MsgConfig}, LFBs: []LFBSelect{{ClassID: 1, InstanceID: 1, Ops: []Operation{op}}}}
		if _, err := m.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("marshal %v: %v, want ErrInvalid", op.Type, err)
		}
	}
}

func (m *Message) withType(t MessageType) *Message {
	c := *m
	c.Header.Type = t
	return &c
}
