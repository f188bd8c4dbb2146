package ce

import (
	"context"
	"fmt"
	"slices"
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
	msgs, err := s.configs(toTableOps(s.forFE(batch)))
	if err != nil {
		return err
	}
	return s.send(msgs)
}

// configs packs row operations into Config messages.
func (s *session) configs(ops []forces.TableOp) ([]*forces.Message, error) {
	hdr := forces.Header{
		Type: forces.MsgConfig, Src: s.ce.id, Dst: s.fe,
		Flags: forces.Flags{ACK: forces.AlwaysACK, ExecMode: forces.ExecContinueOnFailure, Priority: forces.PriorityConfig},
	}
	msgs, err := forces.BuildConfig(hdr, func() uint64 { return s.corr.Add(1) }, ops)
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

// syncChunk is how many FIB rows the full sync encodes at a time.
const syncChunk = 32768

// commitTimeout bounds the wait for an FE's answer to a COMMIT.
const commitTimeout = 60 * time.Second

// fullSync replaces whatever the FE holds with the CE's FIB in one atomic
// transaction (RFC 5810 §4.3.1.2.2): both tables are cleared and refilled in
// staged messages (SOT, MOT...), then COMMIT makes them live at once and
// TRCOMP completes the transaction. The FE programs only what differs, so an
// FE that kept forwarding through a CE restart sees no gap.
func (s *session) fullSync(ctx context.Context) error {
	// Built and sent in chunks, so the first bytes leave at once and a
	// full table is never held twice in encoded form.
	ops := []forces.TableOp{
		{Op: forces.OpDel, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{forces.CompIPv4PrefixTable}},
		{Op: forces.OpDel, ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Path: []uint32{forces.CompIPv4NextHopTable}},
	}
	s.snapshot = s.forFE(s.snapshot)
	if s.info.supports(forces.ClassIPv6UcastLPM) && s.info.supports(forces.ClassIPv6NextHop) {
		ops = append(ops,
			forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1, Path: []uint32{forces.CompIPv6PrefixTable}},
			forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv6NextHop, InstanceID: 1, Path: []uint32{forces.CompIPv6NextHopTable}})
	}
	first := true
	for start := 0; ; start += syncChunk {
		end := min(start+syncChunk, len(s.snapshot))
		ops = append(ops, toTableOps(s.snapshot[start:end])...)
		msgs, err := s.configs(ops)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			m.Header.Flags.Atomic = true
			m.Header.Flags.ExecMode = forces.ExecAllOrNone
			m.Header.Flags.ACK = forces.FailureACK
			m.Header.Flags.TP = forces.PhaseMOT
			if first {
				m.Header.Flags.TP, first = forces.PhaseSOT, false
			}
		}
		if err := s.send(msgs); err != nil {
			return err
		}
		ops = ops[:0]
		if end == len(s.snapshot) {
			break
		}
	}
	if err := s.send([]*forces.Message{forces.NewCommit(s.ce.id, s.fe, s.corr.Add(1))}); err != nil {
		return err
	}
	select {
	case code := <-s.commits:
		if code != forces.ResultSuccess {
			_ = s.send([]*forces.Message{s.abortMessage()})
			return fmt.Errorf("FE refused to commit the full sync: %s", code)
		}
	case <-time.After(commitTimeout):
		_ = s.send([]*forces.Message{s.abortMessage()})
		return fmt.Errorf("no answer to the full sync's COMMIT within %s", commitTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.send([]*forces.Message{forces.NewTRComp(s.ce.id, s.fe, s.corr.Add(1))}); err != nil {
		return err
	}
	s.acked.Add(uint64(len(s.snapshot)))
	s.synced.Store(true)
	return nil
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

// toTableOps maps FIB changes onto RFC 6956 table rows.
func toTableOps(ch []Change) []forces.TableOp {
	ops := make([]forces.TableOp, len(ch))
	for i, c := range ch {
		if c.ipv6() {
			ops[i] = toTableOp6(c)
			continue
		}
		switch c.Kind {
		case NexthopSet:
			ops[i] = forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4NextHop, InstanceID: 1,
				Path:     []uint32{forces.CompIPv4NextHopTable, c.ID},
				FullData: forces.IPv4NextHopInfo{NextHop: c.NextHop}.MarshalFullData()}
		case NexthopDel:
			ops[i] = forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv4NextHop, InstanceID: 1,
				Path: []uint32{forces.CompIPv4NextHopTable, c.ID}}
		case RouteSet:
			ops[i] = forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1,
				Path:     []uint32{forces.CompIPv4PrefixTable, c.Row},
				FullData: forces.IPv4PrefixInfo{Prefix: c.Prefix, HopSelector: c.ID}.MarshalFullData()}
		case RouteDel:
			ops[i] = forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1,
				Path: []uint32{forces.CompIPv4PrefixTable, c.Row}}
		}
	}
	return ops
}

// toTableOp6 maps an IPv6 FIB change onto the RFC 6956 IPv6 tables.
func toTableOp6(c Change) forces.TableOp {
	switch c.Kind {
	case NexthopSet:
		return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6NextHop, InstanceID: 1,
			Path:     []uint32{forces.CompIPv6NextHopTable, c.ID},
			FullData: forces.IPv6NextHopInfo{NextHop: c.NextHop}.MarshalFullData()}
	case NexthopDel:
		return forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv6NextHop, InstanceID: 1,
			Path: []uint32{forces.CompIPv6NextHopTable, c.ID}}
	case RouteSet:
		return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1,
			Path:     []uint32{forces.CompIPv6PrefixTable, c.Row},
			FullData: forces.IPv6PrefixInfo{Prefix: c.Prefix, HopSelector: c.ID}.MarshalFullData()}
	}
	return forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1,
		Path: []uint32{forces.CompIPv6PrefixTable, c.Row}}
}

// forFE drops the IPv6 changes for an FE that has no IPv6 tables.
func (s *session) forFE(ch []Change) []Change {
	s.mu.Lock()
	v6 := s.info.supports(forces.ClassIPv6UcastLPM) && s.info.supports(forces.ClassIPv6NextHop)
	s.mu.Unlock()
	if v6 {
		return ch
	}
	return slices.DeleteFunc(ch, Change.ipv6)
}
