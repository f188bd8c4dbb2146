package fe

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// Tests of what a hostile (or broken) CE can send the FE: every message gets
// an answer or a teardown, never a crash, a stall or a 49-day wait.

func setProto(comp, ms uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassFEProtocol, InstanceID: 1, Path: []uint32{comp},
		FullData: forces.Uint32FullData(ms)}
}

// TestHeartbeatPolicyClamped: the CE's dead interval and the FE's heartbeat
// interval are honoured only within a fixed range; beyond it they are
// clamped, not refused, and the FE waits no longer than the range allows.
func TestHeartbeatPolicyClamped(t *testing.T) {
	for _, tc := range []struct {
		cehdi, fehi         uint32
		wantCEHDI, wantFEHI uint32
	}{
		{0xFFFFFFFF, 0xFFFFFFFF, 30_000, 30_000},
		{30_001, 30_001, 30_000, 30_000},
		{10, 10, 100, 10},
		{1500, 500, 1500, 500},
	} {
		a, _ := testAgent(t, Config{HeartbeatInterval: time.Second})
		resp, failed := a.applyConfig(configMsg(t, setProto(forces.FEProtoCEHDI, tc.cehdi), setProto(forces.FEProtoFEHI, tc.fehi)))
		if failed {
			t.Fatalf("CEHDI %d FEHI %d: refused: %v", tc.cehdi, tc.fehi, results(t, resp))
		}
		p := a.policy()
		if p.CEHDI != tc.wantCEHDI || p.FEHI != tc.wantFEHI {
			t.Errorf("CEHDI %d FEHI %d: policy now CEHDI %d FEHI %d, want %d and %d", tc.cehdi, tc.fehi, p.CEHDI, p.FEHI, tc.wantCEHDI, tc.wantFEHI)
		}
		send, dead := a.intervals()
		if dead != time.Duration(tc.wantCEHDI)*time.Millisecond || send != time.Duration(tc.wantFEHI)*time.Millisecond {
			t.Errorf("CEHDI %d FEHI %d: the association would send every %s and wait %s", tc.cehdi, tc.fehi, send, dead)
		}
	}
}

// rawMsg encodes m and parses it back, as the FE receives it.
func rawMsg(t testing.TB, m *forces.Message) *forces.Message {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	p, err := forces.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ceMsg(typ forces.MessageType, flags forces.Flags, lfbs ...forces.LFBSelect) *forces.Message {
	return &forces.Message{Header: forces.Header{Version: forces.ProtocolVersion, Type: typ, Src: ceID, Dst: forces.FEID(1),
		Correlator: 77, Flags: flags}, LFBs: lfbs}
}

func lfb(class uint32, ops ...forces.Operation) forces.LFBSelect {
	return forces.LFBSelect{ClassID: class, InstanceID: 1, Ops: ops}
}

func paths(ps ...[]uint32) []forces.PathData {
	out := make([]forces.PathData, len(ps))
	for i, p := range ps {
		out[i] = forces.PathData{IDs: p}
	}
	return out
}

// TestConfigUnsupportedOperations: a Config doing anything but SET and DEL
// on a route table (a whole one or a row), or on the FE Protocol LFB, is
// answered with the RFC 5810 result code, applies nothing of its
// all-or-none batch or transaction, and the FE goes on.
func TestConfigUnsupportedOperations(t *testing.T) {
	ops := []forces.OpType{forces.OpGet, forces.OpGetProp, forces.OpSetProp, forces.OpReport, forces.OpSetResponse,
		forces.OpDelResponse, forces.OpGetResponse, 0x42, 0xFFFF}
	classes := []uint32{forces.ClassIPv4UcastLPM, forces.ClassIPv4NextHop, forces.ClassIPv4ECMP,
		forces.ClassIPv6UcastLPM, forces.ClassIPv6NextHop, forces.ClassIPv6ECMP, forces.ClassFEProtocol}
	for _, op := range ops {
		for _, class := range classes {
			for _, path := range [][]uint32{{1}, {1, 1}} {
				name := fmt.Sprintf("%v/class%d/%v", op, class, path)
				a, dp := testAgent(t, Config{})
				if _, failed := a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1))); failed {
					t.Fatal("setup config failed")
				}
				before := dp.String()

				// All or none: a good row, then the bad operation.
				bad := forces.Operation{Type: op, Paths: paths(path)}
				good := forces.Operation{Type: forces.OpDel, Paths: paths([]uint32{1, 1})}
				m := rawMsg(t, ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecAllOrNone},
					lfb(forces.ClassIPv4UcastLPM, good), lfb(class, bad)))
				resp, failed := a.applyConfig(m)
				got := results(t, rawMsg(t, resp))
				if !failed || len(got) != 2 || got[1] == forces.ResultSuccess {
					t.Fatalf("%s: failed %v, results %v; want a refusal", name, failed, got)
				}
				if want := forces.ResultNotSupported; got[1] != want {
					t.Errorf("%s: result %v, want %v", name, got[1], want)
				}
				if after := dp.String(); after != before {
					t.Fatalf("%s: the datapath changed:\n%s\nwas\n%s", name, after, before)
				}

				// A transaction holding it does not commit.
				sot := rawMsg(t, ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK, Atomic: true, TP: forces.PhaseSOT},
					lfb(forces.ClassIPv4UcastLPM, good), lfb(class, bad)))
				if _, failed := a.applyConfig(sot); !failed {
					t.Fatalf("%s: transaction message accepted", name)
				}
				commit := rawMsg(t, forces.NewCommit(ceID, forces.FEID(1), 78))
				resp, _ = a.applyConfig(commit)
				if r, err := forces.CommitResult(resp); err != nil || r == forces.ResultSuccess {
					t.Fatalf("%s: COMMIT answered %v, %v; want a failure", name, r, err)
				}
				if after := dp.String(); after != before {
					t.Fatalf("%s: the datapath changed by the transaction:\n%s\nwas\n%s", name, after, before)
				}
			}
		}
	}
}

// TestRowOperationChecked: a row with an operation other than SET or DEL is
// refused by the table itself, whoever made it: a GET of a whole prefix
// table must not empty it (as the DEL it is not).
func TestRowOperationChecked(t *testing.T) {
	for _, op := range []forces.OpType{forces.OpGet, forces.OpSetProp, forces.OpSet, 0x42} {
		for _, tbl := range []forces.Table{forces.TableIPv4Prefix, forces.TableIPv4NextHop, forces.TableIPv4Group, forces.TableIPv6Prefix} {
			a, _ := testAgent(t, Config{})
			a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1)))
			tb := a.table
			r := &cfgRow{Row: forces.Row{Op: op, Table: tbl, Whole: true}}
			err := tb.apply(r, newDirty(), nil)
			if err == nil {
				t.Fatalf("%v of whole table %d: accepted", op, tbl)
			}
			if tb.v4.len() != 1 || len(tb.v4.nexthops) != 1 {
				t.Fatalf("%v of whole table %d: the table changed (%d routes, %d nexthops)", op, tbl, tb.v4.len(), len(tb.v4.nexthops))
			}
		}
	}
	a, _ := testAgent(t, Config{})
	for _, tbl := range []forces.Table{0, forces.TableIPv6Connected + 1, 255} {
		if err := a.table.apply(&cfgRow{Row: forces.Row{Op: forces.OpDel, Table: tbl, Index: 1}}, newDirty(), nil); err == nil {
			t.Errorf("DEL in table %d: accepted", tbl)
		}
	}
}

// associated runs an agent associated with a fake CE, with one route
// installed, and returns the CE's end.
func associated(t *testing.T) *association {
	t.Helper()
	as := startAssociation(t, Config{HeartbeatInterval: time.Second})
	if err := as.ce.WriteMessage(forces.NewAssociationSetupResponse(as.setup, uint32(forces.SetupSuccess))); err != nil {
		t.Fatal(err)
	}
	cfg := configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1))
	if err := as.ce.WriteMessage(cfg); err != nil {
		t.Fatal(err)
	}
	if r := results(t, readType(t, as.ce, forces.MsgConfigResponse)); len(r) != 2 || r[1] != forces.ResultSuccess {
		t.Fatalf("setup config: %v", r)
	}
	as.ce.SetReadDeadline(time.Now().Add(10 * time.Second)) // no test waits forever on a silent FE
	return as
}

// bigDel is a Config of DELs of prefix-table rows, in one message, each
// answered with a RESULT-TLV (16 bytes a row asked, 24 answered): n
// LFBselects (a TLV holds 64 KiB) of 3750 rows.
func bigDel(n int, em forces.ExecMode) *forces.Message {
	m := ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK, ExecMode: em})
	row := uint32(1)
	for range n {
		ps := make([][]uint32, 3750)
		for i := range ps {
			ps[i] = []uint32{1, row}
			row++
		}
		m.LFBs = append(m.LFBs, lfb(forces.ClassIPv4UcastLPM, forces.Operation{Type: forces.OpDel, Paths: paths(ps...)}))
	}
	return m
}

// TestUnanswerableConfigTearsDown: a Config whose response cannot be encoded
// (it would not fit a message) is not applied, and the FE tears the
// association down saying why, instead of going on with heartbeats and no
// applier. A Config holding an operation whose echo would not encode (a
// COMMIT-RESPONSE) is answered before that.
func TestUnanswerableConfigTearsDown(t *testing.T) {
	as := associated(t)

	commitResp := forces.ResultSuccess
	odd := ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK},
		lfb(forces.ClassFEObject, forces.Operation{Type: forces.OpCommitResponse, Result: &commitResp}))
	if err := as.ce.WriteMessage(odd); err != nil {
		t.Fatal(err)
	}
	if resp := readType(t, as.ce, forces.MsgConfigResponse); resp.Header.Correlator != odd.Header.Correlator {
		t.Fatalf("answer to correlator %d, want %d", resp.Header.Correlator, odd.Header.Correlator)
	}

	big := bigDel(4, forces.ExecContinueOnFailure) // row 1 exists: DEL would remove it
	if err := as.ce.WriteMessage(big); err != nil {
		t.Fatal(err)
	}
	td := readType(t, as.ce, forces.MsgAssociationTeardown)
	if td.ASTReason == nil || forces.TeardownReason(*td.ASTReason) != forces.TeardownUnspecified {
		t.Fatalf("teardown reason %v, want unspecified", td.ASTReason)
	}
	select {
	case err := <-as.done:
		if err == nil || !strings.Contains(err.Error(), "cannot be answered") || !strings.Contains(err.Error(), "correlator 77") {
			t.Fatalf("associate: %v, want the unanswerable Config named", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("associate did not end")
	}
	if _, ok := as.dp.Route("198.51.100.0/24"); !ok {
		t.Error("the unanswerable Config was applied")
	}
	if n := as.a.Status().ProtocolErrors; n != 2 {
		t.Errorf("protocol errors %d, want 2 (one refused, one unanswerable)", n)
	}
}

// TestUnanswerableConfigNotApplied: a Config that fits a message but whose
// answer does not (one LFBselect of 3750 DELs: 60 KB asked, 90 KB to
// answer, more than a TLV holds) is refused as unanswerable before any of
// it is applied; a Config that asks for no answer is applied.
func TestUnanswerableConfigNotApplied(t *testing.T) {
	for _, ack := range []forces.ACKFlag{forces.AlwaysACK, forces.SuccessACK, forces.FailureACK} {
		a, dp := testAgent(t, Config{})
		a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1)))
		m := bigDel(1, forces.ExecContinueOnFailure)
		m.Header.Flags.ACK = ack
		resp, err := a.respond(rawMsg(t, m))
		if !errors.Is(err, errUnanswerable) || resp != nil || !strings.Contains(err.Error(), "more than a TLV holds") {
			t.Fatalf("%v: respond: %v, %v; want it unanswerable", ack, resp, err)
		}
		if _, ok := dp.Route("198.51.100.0/24"); !ok {
			t.Fatalf("%v: the unanswerable Config was applied", ack)
		}
	}
	a, dp := testAgent(t, Config{})
	a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1)))
	m := bigDel(1, forces.ExecContinueOnFailure)
	m.Header.Flags.ACK = forces.NoACK
	if resp, err := a.respond(rawMsg(t, m)); err != nil || resp != nil {
		t.Fatalf("NoACK: respond: %v, %v", resp, err)
	}
	if _, ok := dp.Route("198.51.100.0/24"); ok {
		t.Fatal("NoACK: the Config was not applied")
	}
}

// TestApplierTearsDownOnWriteFailure: a response that fails to go out ends
// the association through fail, and the applier keeps draining its queue
// (the reader never blocks on it).
func TestApplierTearsDownOnWriteFailure(t *testing.T) {
	a, _ := testAgent(t, Config{})
	work := make(chan received, 1)
	free := make(chan *forces.MessageBuffer, 3)
	failed := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.applier(work, free, func(*forces.Message) error { return forces.ErrTooLarge },
			func(err error) { failed <- err })
	}()
	for range 5 {
		work <- received{m: configMsg(t, setNH(1, "192.0.2.1"))}
	}
	close(work)
	select {
	case err := <-failed:
		if !errors.Is(err, forces.ErrTooLarge) {
			t.Fatalf("fail(%v)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the applier never ended the association")
	}
	if err := <-done; err == nil {
		t.Fatal("applier returned nil")
	}
}

// TestQueryAlwaysAnswered: a Query the FE cannot answer as asked still gets
// a Query Response, with the RFC 5810 result code at every leaf.
func TestQueryAlwaysAnswered(t *testing.T) {
	a, _ := testAgent(t, Config{})
	status := []uint32{forces.FEStatusComponent}
	many := make([][]uint32, 3000)
	for i := range many {
		many[i] = status
	}
	// A path every leaf below it repeats: as long as the parser allows
	// (forces.MaxPathIDs with the leaf's own ID), over many leaves.
	long := make([]uint32, forces.MaxPathIDs-1)
	deep := forces.PathData{IDs: long, Children: make([]forces.PathData, 2000)}
	for _, tc := range []struct {
		name string
		m    *forces.Message
		want forces.ResultCode
	}{
		{"SET in a Query", ceMsg(forces.MsgQuery, forces.Flags{}, lfb(forces.ClassFEObject,
			forces.Operation{Type: forces.OpSet, Paths: []forces.PathData{{IDs: []uint32{forces.FEObjectFEName}, FullData: []byte("x"), HasFullData: true}}})),
			forces.ResultNotSupported},
		{"GET-PROP", ceMsg(forces.MsgQuery, forces.Flags{}, lfb(forces.ClassFEObject,
			forces.Operation{Type: forces.OpGetProp, Paths: paths([]uint32{forces.FEObjectFEName})})), forces.ResultNotSupported},
		{"answers too large", ceMsg(forces.MsgQuery, forces.Flags{}, lfb(forces.PortTableClass,
			forces.Operation{Type: forces.OpGet, Paths: paths(many...)})), forces.ResultContentsTooLong},
		{"paths flattening quadratically", ceMsg(forces.MsgQuery, forces.Flags{}, lfb(forces.ClassFEObject,
			forces.Operation{Type: forces.OpGet, Paths: []forces.PathData{deep}})), forces.ResultContentsTooLong},
	} {
		m := rawMsg(t, tc.m)
		resp := a.answerQuery(m)
		if resp == nil {
			t.Fatalf("%s: no answer", tc.name)
		}
		r := rawMsg(t, resp)
		if r.Header.Type != forces.MsgQueryResponse || r.Header.Correlator != m.Header.Correlator {
			t.Fatalf("%s: answered with %v correlator %d", tc.name, r.Header.Type, r.Header.Correlator)
		}
		var codes []forces.ResultCode
		for _, it := range forces.Items(r) {
			if it.Result == nil {
				t.Fatalf("%s: a leaf without RESULT", tc.name)
			}
			codes = append(codes, forces.ResultCode(*it.Result))
		}
		if len(codes) == 0 || slices.ContainsFunc(codes, func(c forces.ResultCode) bool { return c != tc.want }) {
			t.Errorf("%s: results %v, want all %v", tc.name, codes[:min(len(codes), 5)], tc.want)
		}
	}
}

// TestConfigMemoryBounded: a Config whose leaves would each repeat a long
// path (quadratic once flattened) is refused whole before it is flattened,
// with E_CONTENTS_TOO_LONG, and applies nothing.
func TestConfigMemoryBounded(t *testing.T) {
	a, dp := testAgent(t, Config{})
	a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1)))
	before := dp.String()
	long := make([]uint32, forces.MaxPathIDs-1)
	long[0] = 1
	kids := make([]forces.PathData, 3000)
	kids[0] = forces.PathData{IDs: []uint32{1}} // DEL of row 1, would it apply
	m := rawMsg(t, ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecContinueOnFailure},
		lfb(forces.ClassIPv4UcastLPM, forces.Operation{Type: forces.OpDel, Paths: []forces.PathData{{IDs: long, Children: kids}}})))
	resp, failed := a.applyConfig(m)
	if !failed || resp == nil {
		t.Fatal("accepted")
	}
	r := results(t, rawMsg(t, resp))
	if len(r) != len(kids) || r[0] != forces.ResultContentsTooLong {
		t.Fatalf("%d results, first %v; want %d of E_CONTENTS_TOO_LONG", len(r), r[0], len(kids))
	}
	if dp.String() != before {
		t.Fatal("the datapath changed")
	}
}

// TestRejectionsLoggedAtBoundedRate: a Config of a thousand bad rows, or a
// stream of refused messages, logs a line, not a thousand.
func TestRejectionsLoggedAtBoundedRate(t *testing.T) {
	a, _ := testAgent(t, Config{})
	var buf bytes.Buffer
	a.log = slog.New(slog.NewTextHandler(&buf, nil))
	var ops []forces.TableOp
	for i := range 1000 {
		ops = append(ops, del(forces.ClassIPv4UcastLPM, uint32(i+1))) // no such row
	}
	if _, failed := a.applyConfig(configWith(t, forces.Flags{ExecMode: forces.ExecContinueOnFailure}, ops...)); !failed {
		t.Fatal("DELs of missing rows succeeded")
	}
	for range 1000 {
		a.applyConfig(rawMsg(t, seedGetTable()))
		a.answerQuery(rawMsg(t, ceMsg(forces.MsgQuery, forces.Flags{}, lfb(forces.ClassFEObject,
			forces.Operation{Type: forces.OpSet, Paths: paths([]uint32{1})}))))
	}
	if n := strings.Count(buf.String(), "\n"); n > 4 {
		t.Fatalf("%d log lines, want a few:\n%s", n, buf.String()[:min(buf.Len(), 1000)])
	}
	if n := a.Status().ProtocolErrors; n != 1000 {
		t.Errorf("protocol errors %d, want 1000 (the refused Queries)", n)
	}
}

// TestSetupResponseFromNonCERefused: an FE does not associate with a peer
// whose Setup Response comes from an FE ID, or is addressed to another FE.
func TestSetupResponseFromNonCERefused(t *testing.T) {
	for _, edit := range []func(h *forces.Header){
		func(h *forces.Header) { h.Src = forces.FEID(9) },
		func(h *forces.Header) { h.Src = forces.AllBroadcast },
		func(h *forces.Header) { h.Dst = forces.FEID(2) },
	} {
		as := startAssociation(t, Config{})
		resp := forces.NewAssociationSetupResponse(as.setup, uint32(forces.SetupSuccess))
		edit(&resp.Header)
		if err := as.ce.WriteMessage(resp); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-as.done:
			if !errors.Is(err, forces.ErrSetupRefused) {
				t.Fatalf("associate: %v, want a refused setup", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("associate did not end")
		}
		if as.a.Status().Associated {
			t.Fatal("associated")
		}
	}
}

// pathBomb is a Config or Query of four LFBselects, each one PATH-DATA of
// as many IDs as the parser allows over 5300 one-ID children: 250 KB that
// flattens into 21200 paths of 32 IDs (2.7 MB). (A longer path, which
// would flatten quadratically, does not parse: forces.MaxPathIDs.)
func pathBomb(typ forces.MessageType, op forces.OpType) *forces.Message {
	m := ceMsg(typ, forces.Flags{ACK: forces.AlwaysACK})
	for range 4 {
		parent := forces.PathData{IDs: slices.Repeat([]uint32{1}, forces.MaxPathIDs-1), Children: make([]forces.PathData, 5300)}
		for i := range parent.Children {
			parent.Children[i] = forces.PathData{IDs: []uint32{uint32(i)}}
		}
		m.LFBs = append(m.LFBs, lfb(forces.ClassIPv4UcastLPM, forces.Operation{Type: op, Paths: []forces.PathData{parent}}))
	}
	return m
}

// TestMessageMemoryLinear: what the FE allocates to handle a message of
// the CE (answer it, or decide it cannot) is a small multiple of the
// message's size, however its paths nest.
func TestMessageMemoryLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *forces.Message
	}{
		{"Config SET", pathBomb(forces.MsgConfig, forces.OpSet)},
		{"Config DEL", pathBomb(forces.MsgConfig, forces.OpDel)},
		{"Query GET", pathBomb(forces.MsgQuery, forces.OpGet)},
	} {
		a, _ := testAgent(t, Config{})
		b, err := tc.m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		m, err := forces.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := a.respond(m)
		runtime.ReadMemStats(&after)
		if err == nil && resp == nil {
			t.Fatalf("%s: neither an answer nor a teardown", tc.name)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 16*uint64(len(b)) {
			t.Errorf("%s: %d bytes allocated for a message of %d", tc.name, n, len(b))
		}
	}
}
