package fe

import (
	"errors"
	"fmt"

	"github.com/splitplane/splitplane/forces"
)

// errResult carries a ForCES result code for a rejected row operation.
type errResult struct {
	code forces.ResultCode
	err  error
}

func (e *errResult) Error() string { return e.err.Error() }

func reject(code forces.ResultCode, format string, args ...any) error {
	return &errResult{code: code, err: fmt.Errorf(format, args...)}
}

var (
	errSlotsFull  = errors.New("datapath nexthop table full")
	errGroupsFull = errors.New("datapath ECMP group table full")
)

func resultOf(err error) forces.ResultCode {
	var r *errResult
	if errors.As(err, &r) {
		return r.code
	}
	return forces.ResultInternalError
}

// txn is an open atomic transaction (RFC 5810 §4.3.1.2.2): rows are applied
// to a staged copy of the table, which replaces the live one at COMMIT. Until
// TRCOMP, an abort restores the table from before the commit.
type txn struct {
	staged    *table
	failed    bool
	committed *table // the table before COMMIT, kept until TRCOMP
}

// applyConfig applies a Config message and, when its ACK flag asks for one,
// builds its Config Response (one RESULT per PATH-DATA, echoing the path).
// failed reports whether anything was rejected. It honours the execution mode
// and the transaction flags. The message is applied by the owner of the
// agent's state in one request, its rows decoded and written there in bulk.
func (a *Agent) applyConfig(m *forces.Message) (resp *forces.Message, failed bool) {
	if code, err := screen(m); err != nil {
		// Refused whole, before anything of it is applied; an open
		// transaction it belongs to can no longer commit.
		a.refused(m, code, err)
		if m.Header.Flags.Atomic {
			a.do(func() {
				if a.txn != nil && a.txn.staged != nil {
					a.txn.failed = true
				}
			})
		}
		if !wantsResponse(m.Header.Flags.ACK, true) {
			return nil, true
		}
		return refusal(m, code), true
	}
	var results []forces.ResultCode
	commit := hasOp(m, forces.OpCommit)
	a.do(func() { results, failed = a.apply(m, commit) })
	if !wantsResponse(m.Header.Flags.ACK, failed) {
		return nil, failed
	}
	if commit {
		return a.commitResponse(m, failed), failed
	}
	resp, err := forces.NewConfigResponse(m, results...)
	if err != nil {
		a.refusals.Warn(a.log, "forces: cannot build the config response", "correlator", m.Header.Correlator, "err", err)
		resp = &forces.Message{Header: forces.Header{Type: forces.MsgConfigResponse, Src: m.Header.Dst, Dst: m.Header.Src, Correlator: m.Header.Correlator}}
	}
	return resp, failed
}

// apply applies m to the table (or the open transaction) and programs the
// datapath; called by the owner of the agent's state.
func (a *Agent) apply(m *forces.Message, commit bool) (results []forces.ResultCode, failed bool) {
	a.items = forces.AppendItems(a.items[:0], m)
	items := a.items
	results = make([]forces.ResultCode, len(items))
	defer clear(a.items) // drop references into m
	switch {
	case commit:
		failed = a.commit(results)
	case hasOp(m, forces.OpTRComp):
		a.txn = nil // the transaction is complete; nothing left to undo
	case m.Header.Flags.Atomic && m.Header.Flags.TP == forces.PhaseABT:
		a.abort()
	case m.Header.Flags.Atomic:
		failed = a.stage(m, items, results)
	default:
		failed = a.applyNow(m.Header.Flags.ExecMode, items, results)
	}
	return results, failed
}

// wantsResponse reports whether a Config with the ACK flag ack is answered
// (RFC 5810 §7.1.3: SuccessACK only on success, FailureACK only on failure).
func wantsResponse(ack forces.ACKFlag, failed bool) bool {
	return ack == forces.AlwaysACK || ack == forces.SuccessACK && !failed || ack == forces.FailureACK && failed
}

// commitResponse answers a COMMIT with a COMMIT-RESPONSE carrying its RESULT.
func (a *Agent) commitResponse(m *forces.Message, failed bool) *forces.Message {
	code := forces.ResultSuccess
	if failed {
		code = forces.ResultUnspecifiedError
	}
	resp, err := forces.NewCommitResponse(m, code)
	if err != nil { // cannot happen: m holds a COMMIT
		a.log.Error("forces: build commit response", "err", err)
	}
	return resp
}

func hasOp(m *forces.Message, op forces.OpType) bool {
	for _, s := range m.LFBs {
		for _, o := range s.Ops {
			if o.Type == op {
				return true
			}
		}
	}
	return false
}

// applyNow applies rows to the live table and programs the datapath.
//   - execute-all-or-none: a rejected row undoes the rows before it; every row
//     reports the rejection's code.
//   - execute-until-failure: rows after the rejected one are not executed and
//     report E_UNSPECIFIED_ERROR.
//   - continue-execute-on-failure (and the reserved value): every row is tried.
func (a *Agent) applyNow(em forces.ExecMode, items []forces.Item, results []forces.ResultCode) (failed bool) {
	d := newDirtySized(len(items))
	// Only all-or-none needs to undo rows: the other modes keep what was done.
	var undo []func()
	undoTo := &undo
	if em != forces.ExecAllOrNone {
		undoTo = nil
	}
	for i, r := range a.table.decoded(items) {
		it := items[i]
		var err error
		if it.ClassID == forces.ClassFEProtocol {
			err = a.setProtocol(it)
		} else {
			err = a.table.apply(r, d, undoTo)
		}
		if err == nil {
			continue
		}
		failed = true
		results[i] = resultOf(err)
		a.rejects.Warn(a.log, "forces: config row rejected", "lfb", forces.ClassName(it.ClassID), "op", it.Op, "path", it.Path, "err", err)
		switch em {
		case forces.ExecAllOrNone:
			for j := len(undo) - 1; j >= 0; j-- {
				undo[j]()
			}
			for j := range results {
				results[j] = results[i]
			}
			return true
		case forces.ExecUntilFailure:
			for j := i + 1; j < len(results); j++ {
				results[j] = forces.ResultUnspecifiedError
			}
			a.prog.program(a.table, d)
			return true
		}
	}
	a.prog.program(a.table, d)
	return failed
}

// stage applies the rows of a transaction message to the staged table.
func (a *Agent) stage(m *forces.Message, items []forces.Item, results []forces.ResultCode) (failed bool) {
	if m.Header.Flags.TP == forces.PhaseSOT {
		if a.txn != nil && a.txn.committed == nil {
			a.log.Warn("forces: new transaction replaces one that was never committed")
		}
		a.txn = &txn{staged: a.table.stage()}
	}
	if a.txn == nil || a.txn.staged == nil {
		for i := range results {
			results[i] = forces.ResultInvalidFlags
		}
		a.log.Warn("forces: transaction message without a start (SOT)", "phase", m.Header.Flags.TP)
		return true
	}
	for i, r := range a.txn.staged.decoded(items) {
		if err := a.txn.staged.apply(r, nil, nil); err != nil {
			results[i] = resultOf(err)
			a.txn.failed, failed = true, true
		}
	}
	return failed
}

// commit makes the staged table live and programs the difference, so routes
// that did not change are never touched in the datapath.
func (a *Agent) commit(results []forces.ResultCode) (failed bool) {
	if a.txn == nil || a.txn.staged == nil || a.txn.failed {
		a.log.Warn("forces: COMMIT without a valid staged transaction")
		return true
	}
	prev := a.table
	a.table = a.txn.staged
	a.txn = &txn{committed: prev}
	d := newDirty()
	diff(prev, a.table, d)
	a.prog.program(a.table, d)
	return false
}

// abort drops a staged transaction, or rolls back one committed but not yet
// completed.
func (a *Agent) abort() {
	if a.txn != nil && a.txn.committed != nil {
		cur := a.table
		a.table = a.txn.committed
		d := newDirty()
		diff(cur, a.table, d)
		a.prog.program(a.table, d)
	}
	a.txn = nil
}
