package ce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// flush sends every pending change as batched Config messages.
func (s *session) flush() error {
	s.mu.Lock()
	batch := s.pending.take()
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	w := forces.NewConfigWriter(s.configHeader(), func(h *forces.Header) { h.Correlator = s.corr.Add(1) })
	if err := writeChanges(w, s.forFE(batch)); err != nil {
		return err
	}
	return s.sendEncoded(w.Flush())
}

// configHeader is the header of the Config messages that carry changes:
// every row is answered, and one refused row does not stop the others.
func (s *session) configHeader() forces.Header {
	return forces.Header{
		Type: forces.MsgConfig, Src: s.ce.id, Dst: s.fe,
		Flags: forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecContinueOnFailure, Priority: forces.PriorityConfig},
	}
}

// configs packs row operations into Config messages.
func (s *session) configs(ops []forces.TableOp) ([]*forces.Message, error) {
	msgs, err := forces.BuildConfig(s.configHeader(), func() uint64 { return s.corr.Add(1) }, ops)
	if err != nil {
		return nil, fmt.Errorf("build config: %w", err)
	}
	return msgs, nil
}

func (s *session) send(msgs []*forces.Message) error {
	for _, m := range msgs {
		if err := s.conn.WriteMessage(m); err != nil {
			return fmt.Errorf("send %s: %w", m.Header.Type, err)
		}
	}
	return nil
}

func (s *session) sendEncoded(msgs [][]byte) error {
	if err := s.conn.WriteEncoded(msgs...); err != nil {
		return fmt.Errorf("send config: %w", err)
	}
	return nil
}

// syncChunk is how many FIB rows the full sync encodes at a time.
const syncChunk = 32768

// syncMessage caps the size of the full sync's messages: a heartbeat waits
// for the message being written and those queued ahead of it, so they are
// kept small (64 KiB: about 1,600 routes) while still amortising the
// per-message costs.
const syncMessage = 64 << 10

// sendEach writes messages one at a time, so the heartbeat goroutine can
// slip its message in between them.
func (s *session) sendEach(msgs [][]byte) error {
	for _, m := range msgs {
		if err := s.sendEncoded([][]byte{m}); err != nil {
			return err
		}
	}
	return nil
}

// commitTimeout bounds the wait for an FE's answer to a COMMIT.
const commitTimeout = 60 * time.Second

// fullSync replaces whatever the FE holds with the CE's FIB in one atomic
// transaction (RFC 5810 §4.3.1.2.2): both tables are cleared and refilled in
// staged messages (SOT, MOT...), then COMMIT makes them live at once and
// TRCOMP completes the transaction. The FE programs only what differs, so an
// FE that kept forwarding through a CE restart sees no gap.
func (s *session) fullSync(ctx context.Context) error {
	// Encoded and sent in chunks, so the first bytes leave at once and a
	// full table is never held twice in encoded form. Only a failure is
	// answered: the COMMIT's answer acknowledges the whole transaction.
	hdr := s.configHeader()
	hdr.Flags.Atomic, hdr.Flags.ExecMode, hdr.Flags.ACK = true, forces.ExecAllOrNone, forces.FailureACK
	first := true
	w := forces.NewConfigWriter(hdr, func(h *forces.Header) {
		h.Correlator, h.Flags.TP = s.corr.Add(1), forces.PhaseMOT
		if first {
			h.Flags.TP, first = forces.PhaseSOT, false
		}
	})
	tables := []forces.Table{forces.TableIPv4Prefix, forces.TableIPv4NextHop}
	v6, ecmp := s.features()
	egress, conn := s.hasEgress(), s.hasConnected()
	if ecmp {
		tables = append(tables, forces.TableIPv4Group)
	}
	if egress {
		tables = append(tables, forces.TableIPv4Egress)
	}
	if conn {
		tables = append(tables, forces.TableIPv4Connected)
	}
	if v6 {
		tables = append(tables, forces.TableIPv6Prefix, forces.TableIPv6NextHop)
		if ecmp {
			tables = append(tables, forces.TableIPv6Group)
		}
		if egress {
			tables = append(tables, forces.TableIPv6Egress)
		}
		if conn {
			tables = append(tables, forces.TableIPv6Connected)
		}
	}
	for _, t := range tables {
		r := forces.Row{Op: forces.OpDel, Table: t, Whole: true}
		if _, err := r.AppendTo(w, nil); err != nil {
			return err
		}
	}
	w.MaxMessage = syncMessage
	sent := 0
	for chunk := range s.snapshot.Chunks(syncChunk) {
		chunk = s.forFE(chunk)
		sent += len(chunk)
		if err := writeChanges(w, chunk); err != nil {
			return err
		}
		if err := s.sendEach(w.Flush()); err != nil {
			return err
		}
	}
	if err := s.sendEach(w.Flush()); err != nil { // an empty FIB: just the deletions
		return err
	}
	code, err := s.commit(ctx)
	switch {
	case errors.Is(err, errNoCommitAnswer):
		_ = s.send([]*forces.Message{s.abortMessage()})
		return fmt.Errorf("the full sync's COMMIT: %w", err)
	case err != nil:
		return err
	case code != forces.ResultSuccess:
		_ = s.send([]*forces.Message{s.abortMessage()})
		return fmt.Errorf("FE refused to commit the full sync: %s", code)
	}
	if err := s.send([]*forces.Message{forces.NewTRComp(s.ce.id, s.fe, s.corr.Add(1))}); err != nil {
		return err
	}
	s.acked.Add(uint64(sent))
	s.synced.Store(true)
	return nil
}

// transaction plays this FE's part of an API transaction: the changes
// staged (SOT, MOT...), the COMMIT answered (reported on t.staged), then
// TRCOMP or an abort as the coordinator decides. An error ends the
// association (the FE then resyncs).
func (s *session) transaction(ctx context.Context, t *feTxn) error {
	hdr := s.configHeader()
	hdr.Flags.Atomic, hdr.Flags.ExecMode, hdr.Flags.ACK = true, forces.ExecAllOrNone, forces.FailureACK
	first := true
	w := forces.NewConfigWriter(hdr, func(h *forces.Header) {
		h.Correlator, h.Flags.TP = s.corr.Add(1), forces.PhaseMOT
		if first {
			h.Flags.TP, first = forces.PhaseSOT, false
		}
	})
	w.MaxMessage = syncMessage
	changes := s.forFE(t.changes)
	if err := writeChanges(w, changes); err != nil {
		t.staged <- err
		return err
	}
	msgs := w.Flush()
	if len(msgs) == 0 {
		// Nothing for this FE (an IPv6 change to an IPv4-only FE, say).
		t.staged <- nil
		<-t.decide
		return nil
	}
	if err := s.sendEach(msgs); err != nil {
		t.staged <- err
		return err
	}
	code, err := s.commit(ctx)
	switch {
	case errors.Is(err, errNoCommitAnswer):
		t.staged <- err
	case err != nil:
		t.staged <- err
		return err
	case code != forces.ResultSuccess:
		t.staged <- fmt.Errorf("COMMIT refused: %s", code)
	default:
		t.staged <- nil
	}
	var complete bool
	select {
	case complete = <-t.decide:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !complete {
		return s.send([]*forces.Message{s.abortMessage()})
	}
	s.mu.Lock()
	s.pending.synced(changes)
	s.mu.Unlock()
	s.acked.Add(uint64(len(changes)))
	return s.send([]*forces.Message{forces.NewTRComp(s.ce.id, s.fe, s.corr.Add(1))})
}

// errNoCommitAnswer: the FE did not answer a COMMIT within commitTimeout.
var errNoCommitAnswer = fmt.Errorf("no answer to COMMIT within %s", commitTimeout)

// commit sends a COMMIT and waits for the FE's answer to it: only a
// COMMIT-RESPONSE echoing this COMMIT's correlator counts (configResponse
// drops the others), so a stray or late answer can never complete another
// transaction.
func (s *session) commit(ctx context.Context) (forces.ResultCode, error) {
	corr := s.corr.Add(1)
	s.commitFor.Store(corr)
	defer s.commitFor.Store(0)
	select {
	case <-s.commits: // left over from an earlier COMMIT
	default:
	}
	if err := s.send([]*forces.Message{forces.NewCommit(s.ce.id, s.fe, corr)}); err != nil {
		return 0, err
	}
	t := time.NewTimer(commitTimeout)
	defer t.Stop()
	for {
		select {
		case r := <-s.commits:
			if r.corr == corr {
				return r.code, nil
			}
		case <-t.C:
			return 0, errNoCommitAnswer
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// abortMessage aborts the open transaction (TP=ABT).
func (s *session) abortMessage() *forces.Message {
	return &forces.Message{Header: forces.Header{
		Type: forces.MsgConfig, Src: s.ce.id, Dst: s.fe, Correlator: s.corr.Add(1),
		Flags: forces.Flags{ACK: forces.NoACK, Atomic: true, TP: forces.PhaseABT, ExecMode: forces.ExecAllOrNone},
	}}
}

func isCommitResponse(m *forces.Message) bool {
	for _, l := range m.LFBs {
		for _, o := range l.Ops {
			if o.Type == forces.OpCommitResponse {
				return true
			}
		}
	}
	return false
}

// writeChanges encodes FIB changes as RFC 6956 table rows: IPv4UcastLPM and
// IPv4NextHop rows, or their IPv6 counterparts, and ECMP group rows.
func writeChanges(w *forces.ConfigWriter, ch []Change) error {
	scratch := make([]byte, 0, 4*forces.MaxECMPMembers)
	var err error
	for i := range ch {
		r := ch[i].row()
		if scratch, err = r.AppendTo(w, scratch); err != nil {
			return fmt.Errorf("encode %v: %w", ch[i], err)
		}
	}
	return nil
}

// row is the table row c sets or deletes.
func (c *Change) row() forces.Row {
	v6 := c.ipv6()
	switch c.Kind {
	case NexthopSet:
		return forces.Row{Op: forces.OpSet, Table: forces.TableIPv4NextHop.In(v6), Index: c.ID, NextHop: c.NextHop}
	case NexthopDel:
		return forces.Row{Op: forces.OpDel, Table: forces.TableIPv4NextHop.In(v6), Index: c.ID}
	case RouteSet:
		return forces.Row{Op: forces.OpSet, Table: forces.TableIPv4Prefix.In(v6), Index: c.Row, Prefix: c.Prefix, HopSelector: c.ID, ECMP: c.ECMP}
	case RouteDel:
		return forces.Row{Op: forces.OpDel, Table: forces.TableIPv4Prefix.In(v6), Index: c.Row}
	case GroupSet:
		return forces.Row{Op: forces.OpSet, Table: forces.TableIPv4Group.In(v6), Index: c.ID, Members: c.Members}
	case GroupDel:
		return forces.Row{Op: forces.OpDel, Table: forces.TableIPv4Group.In(v6), Index: c.ID}
	case EgressSet:
		return forces.Row{Op: forces.OpSet, Table: forces.TableIPv4Egress.In(v6), Index: c.ID, Egress: c.Egress}
	case EgressDel:
		return forces.Row{Op: forces.OpDel, Table: forces.TableIPv4Egress.In(v6), Index: c.ID}
	case ConnectedSet:
		return forces.Row{Op: forces.OpSet, Table: forces.TableIPv4Connected.In(v6), Index: c.ID, Prefix: c.Prefix, Egress: c.Egress}
	case ConnectedDel:
		return forces.Row{Op: forces.OpDel, Table: forces.TableIPv4Connected.In(v6), Index: c.ID}
	}
	return forces.Row{} // AppendTo refuses it
}

// features reports whether the FE has the IPv6 tables and the ECMP group
// tables, as its SupportedLFBs said.
func (s *session) features() (v6, ecmp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v6 = s.info.supports(forces.ClassIPv6UcastLPM) && s.info.supports(forces.ClassIPv6NextHop)
	ecmp = s.info.supports(forces.ClassIPv4ECMP) && (!v6 || s.info.supports(forces.ClassIPv6ECMP))
	return v6, ecmp
}

// hasEgress reports whether the FE has the nexthop egress tables (both, if
// it has IPv6 tables), as its SupportedLFBs said.
func (s *session) hasEgress() bool {
	v6, _ := s.features()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.supports(forces.ClassIPv4NexthopEgress) && (!v6 || s.info.supports(forces.ClassIPv6NexthopEgress))
}

// hasConnected reports whether the FE has the connected egress tables
// (both, if it has IPv6 tables), as its SupportedLFBs said.
func (s *session) hasConnected() bool {
	v6, _ := s.features()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.supports(forces.ClassIPv4ConnectedEgress) && (!v6 || s.info.supports(forces.ClassIPv6ConnectedEgress))
}

// forFE fits changes to what the FE has: no IPv6 changes for an FE without
// IPv6 tables, no egress rows for one without the egress tables (nor
// connected rows for one without the connected tables), and for
// one without ECMP groups, no groups and ECMP routes through their group's
// first member alone.
func (s *session) forFE(ch []Change) []Change {
	v6, ecmp := s.features()
	egress, conn := s.hasEgress(), s.hasConnected()
	if v6 && ecmp && egress && conn {
		return ch
	}
	out := ch[:0]
	for _, c := range ch {
		switch {
		case !v6 && c.ipv6():
			continue
		case !egress && (c.Kind == EgressSet || c.Kind == EgressDel):
			continue
		case !conn && (c.Kind == ConnectedSet || c.Kind == ConnectedDel):
			continue
		case !ecmp && (c.Kind == GroupSet || c.Kind == GroupDel):
			continue
		case !ecmp && c.Kind == RouteSet && c.ECMP:
			c.ECMP, c.ID = false, c.First
		}
		out = append(out, c)
	}
	return out
}
