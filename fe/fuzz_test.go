package fe

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// Fuzzing of what the FE does with a CE's message once it has parsed: the
// applier's answer (or teardown) to arbitrary Configs and Queries, run
// against the recording datapath. The corpora are under
// testdata/fuzz/FuzzApply and testdata/fuzz/FuzzApplyRows.

// fuzzAgent is an agent with a nexthop, a group and two routes installed,
// for a message to change or leave alone.
func fuzzAgent(t *testing.T) (*Agent, *fakeDatapath) {
	a, dp := testAgent(t, Config{})
	base := configMsg(t, setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"),
		forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4ECMP, InstanceID: 1, Path: []uint32{1, 1},
			FullData: groupData(1, 2)},
		setRoute(1, "198.51.100.0/24", 1), setRoute(2, "203.0.113.0/24", 2))
	if _, failed := a.applyConfig(base); failed {
		t.Fatal("base config failed")
	}
	return a, dp
}

// splitMessages cuts b into the messages it holds back to back, each as
// long as its header says (a short tail is one more, malformed, message).
func splitMessages(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 && len(out) < 16 {
		n := len(b)
		if len(b) >= 4 {
			if l := 4 * int(binary.BigEndian.Uint16(b[2:])); l >= forces.HeaderLen && l <= len(b) {
				n = l
			}
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// deliver hands m to the agent as the applier does and checks what came
// of it: no panic; a response that encodes (or, for one too large, the
// teardown the applier then makes); and a datapath unchanged by what the
// FE refused, by a message staged in a transaction, or by a failed COMMIT.
func deliver(t *testing.T, a *Agent, dp *fakeDatapath, m *forces.Message) {
	before := dp.String()
	resp, err := a.respond(m)
	after := dp.String()
	if err != nil {
		if !errors.Is(err, errUnanswerable) {
			t.Fatalf("respond: %v", err)
		}
		if after != before {
			t.Fatalf("an unanswerable %v changed the datapath:\n%s\nwas\n%s", m.Header.Type, after, before)
		}
		return
	}
	if resp != nil {
		if _, err := resp.MarshalBinary(); err != nil && !errors.Is(err, forces.ErrTooLarge) {
			t.Fatalf("the response to a %v does not encode: %v", m.Header.Type, err)
		}
	}
	if m.Header.Type != forces.MsgConfig {
		if after != before {
			t.Fatalf("a %v changed the datapath", m.Header.Type)
		}
		return
	}
	f := m.Header.Flags
	_, screenErr := screen(m)
	refused := screenErr != nil
	switch {
	case refused, f.Atomic && f.TP != forces.PhaseABT && !hasOp(m, forces.OpCommit):
		// Refused whole, or staged: nothing reaches the datapath.
	case hasOp(m, forces.OpCommit):
		if resp == nil {
			return // unanswered by the ACK flag: committed or not
		}
		if r, err := forces.CommitResult(resp); err != nil || r == forces.ResultSuccess {
			return // committed: anything may change
		}
	case f.ExecMode == forces.ExecAllOrNone && resp != nil:
		rs, err := forces.ConfigResults(resp)
		if err != nil || len(rs) == 0 || rs[0] == forces.ResultSuccess {
			return // applied
		}
	default:
		return
	}
	if after != before {
		t.Fatalf("a refused Config (flags %+v) changed the datapath:\n%s\nwas\n%s", f, after, before)
	}
}

// seedGetTable is the message of issue 21: a GET of the whole IPv4 prefix
// table in a Config.
func seedGetTable() *forces.Message {
	return ceMsg(forces.MsgConfig, forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecAllOrNone},
		lfb(forces.ClassIPv4UcastLPM, forces.Operation{Type: forces.OpGet, Paths: paths([]uint32{1})}))
}

func FuzzApply(f *testing.F) {
	enc := func(ms ...*forces.Message) []byte {
		var out []byte
		for _, m := range ms {
			b, err := m.MarshalBinary()
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	flags := func(em forces.ExecMode, atomic bool, tp forces.TransactionPhase) forces.Flags {
		return forces.Flags{ACK: forces.AlwaysACK, ExecMode: em, Atomic: atomic, TP: tp}
	}
	rows := func(fl forces.Flags, ops ...forces.Operation) *forces.Message {
		return ceMsg(forces.MsgConfig, fl, lfb(forces.ClassIPv4UcastLPM, ops...))
	}
	set := forces.Operation{Type: forces.OpSet, Paths: []forces.PathData{{IDs: []uint32{1, 9},
		FullData: forces.IPv4PrefixInfo{Prefix: netip.MustParsePrefix("100.64.0.0/10"), HopSelector: 1}.MarshalFullData(), HasFullData: true}}}
	delRow := forces.Operation{Type: forces.OpDel, Paths: paths([]uint32{1, 1})}
	f.Add(enc(seedGetTable()))
	for _, op := range []forces.OpType{forces.OpGet, forces.OpGetProp, forces.OpSetProp, forces.OpReport, 0x42} {
		f.Add(enc(rows(flags(forces.ExecAllOrNone, false, 0), delRow, forces.Operation{Type: op, Paths: paths([]uint32{1}, []uint32{1, 2})})))
	}
	f.Add(enc(rows(flags(forces.ExecContinueOnFailure, false, 0), set, delRow)))
	f.Add(enc(rows(flags(forces.ExecAllOrNone, true, forces.PhaseSOT), forces.Operation{Type: forces.OpDel, Paths: paths([]uint32{1})}, set),
		forces.NewCommit(ceID, forces.FEID(1), 2), forces.NewTRComp(ceID, forces.FEID(1), 3)))
	f.Add(enc(rows(flags(forces.ExecAllOrNone, true, forces.PhaseSOT), forces.Operation{Type: forces.OpGet, Paths: paths([]uint32{1})}),
		forces.NewCommit(ceID, forces.FEID(1), 2)))
	f.Add(enc(ceMsg(forces.MsgConfig, flags(0, false, 0), lfb(forces.ClassFEProtocol,
		forces.Operation{Type: forces.OpSet, Paths: []forces.PathData{{IDs: []uint32{forces.FEProtoCEHDI}, FullData: forces.Uint32FullData(0xFFFFFFFF), HasFullData: true}}}))))
	f.Add(enc(forces.NewQuery(ceID, forces.FEID(1), 4, forces.GetSelect(forces.ClassFEObject, 1, []uint32{forces.FEObjectSupportedLFBs}),
		forces.GetSelect(forces.PortTableClass, 1, []uint32{forces.FEStatusComponent}, []uint32{forces.PortTableComponent}))))
	f.Add(enc(bigDel(4, forces.ExecContinueOnFailure)))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, dp := fuzzAgent(t)
		for _, raw := range splitMessages(b) {
			m, err := forces.Parse(raw)
			if err != nil {
				continue
			}
			if m.Header.Type != forces.MsgQuery {
				m.Header.Type = forces.MsgConfig // what else reaches the applier
			}
			deliver(t, a, dp, m)
		}
	})
}

// FuzzApplyRows builds Configs from structured random rows (five bytes a
// row: operation, table, row, value, flags), valid and not, and delivers
// them as FuzzApply does.
func FuzzApplyRows(f *testing.F) {
	f.Add([]byte{0, 1, 9, 1, 0, 5, 1, 1, 0, 0})
	f.Add([]byte{2, 1, 0, 0, 0x80, 0, 1, 9, 1, 0x80})                // GET of the whole prefix table, then a SET
	f.Add([]byte{1, 2, 3, 7, 0x40, 0, 2, 3, 7, 0x40, 5, 2, 1, 0, 0}) // SETs and a DEL
	f.Fuzz(func(t *testing.T, b []byte) {
		a, dp := fuzzAgent(t)
		var batch []forces.TableOp
		var fl forces.Flags
		flush := func() {
			if len(batch) == 0 {
				return
			}
			hdr := forces.Header{Type: forces.MsgConfig, Src: ceID, Dst: forces.FEID(1), Flags: fl}
			ms, err := forces.BuildConfig(hdr, nil, batch)
			batch = batch[:0]
			if err != nil {
				return
			}
			for _, m := range ms {
				deliver(t, a, dp, m)
			}
		}
		for len(b) >= 5 && len(batch) < 64 {
			op, tbl, row, val, flags := b[0], b[1], b[2], b[3], b[4]
			b = b[5:]
			batch = append(batch, fuzzRow(op, tbl, row, val))
			fl = forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecMode(flags & 3)}
			if flags&0x40 != 0 {
				fl.Atomic, fl.TP = true, forces.TransactionPhase(flags>>4&3)
			}
			if flags&0x80 != 0 {
				flush()
				if flags&0x08 != 0 {
					deliver(t, a, dp, forces.NewCommit(ceID, forces.FEID(1), 1))
				}
			}
		}
		flush()
	})
}

// fuzzRow makes a row operation of a few random bytes: mostly SETs and DELs
// of the six route tables (and of the FE Protocol LFB), some of other
// operations, classes and paths.
func fuzzRow(op, tbl, row, val byte) forces.TableOp {
	ops := [...]forces.OpType{forces.OpSet, forces.OpSet, forces.OpDel, forces.OpGet, forces.OpSetProp, forces.OpGetProp, forces.OpReport, 0x42}
	t := forces.Table(tbl%7 + 1) // 7: none
	class := forces.ClassFEProtocol
	if t <= forces.TableIPv6Group {
		class = t.Class()
	}
	path := []uint32{1, uint32(row % 16)}
	switch {
	case op&0x10 != 0:
		path = path[:1] // the whole table
	case op&0x20 != 0:
		path = append(path, uint32(val))
	}
	o := forces.TableOp{Op: ops[op%8], ClassID: class, InstanceID: 1, Path: path}
	if o.Op != forces.OpSet {
		return o
	}
	v6 := val&0x80 != 0
	nh := uint32(val % 4)
	switch {
	case class == forces.ClassFEProtocol:
		o.Path = []uint32{uint32(row % 8)}
		o.FullData = forces.Uint32FullData(uint32(val) << (row % 32))
	case t.IsPrefix():
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, val, row, 0}), int(val%33))
		if v6 {
			p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, val, row}), int(val%129))
		}
		if v6 { // in an IPv4 table, FULLDATA of the wrong length
			o.FullData = forces.IPv6PrefixInfo{Prefix: p, HopSelector: nh, ECMP: val&0x40 != 0}.MarshalFullData()
		} else {
			o.FullData = forces.IPv4PrefixInfo{Prefix: p, HopSelector: nh, ECMP: val&0x40 != 0}.MarshalFullData()
		}
	case t.IsNextHop():
		gw := netip.AddrFrom4([4]byte{192, 0, 2, val})
		if t == forces.TableIPv6NextHop {
			gw = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: val})
			o.FullData = forces.IPv6NextHopInfo{NextHop: gw}.MarshalFullData()
		} else {
			o.FullData = forces.IPv4NextHopInfo{NextHop: gw}.MarshalFullData()
		}
	default:
		members := make([]uint32, val%5)
		for i := range members {
			members[i] = uint32(i + 1)
		}
		o.FullData = groupData(members...)
	}
	return o
}

// groupData is an ECMP group row's FULLDATA; with no members (which does
// not encode) it is empty, for the FE to refuse.
func groupData(members ...uint32) []byte {
	b, _ := forces.ECMPGroupInfo{Members: members}.AppendFullData(nil)
	return b
}
