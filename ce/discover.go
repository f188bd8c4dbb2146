package ce

import (
	"context"
	"fmt"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// feInfo is what the CE learned of an FE by Query: its name, state, the LFB
// classes it implements and its ports.
type feInfo struct {
	name  string
	state forces.FEState
	lfbs  []forces.SupportedLFB
	ports []forces.PortInfo
	// links are the FE's inter-FE links (forces.InterFELinksComponent;
	// none from an FE that does not say).
	links    []forces.InterFELink
	linksErr error // the FE's link table did not parse (no links)
	// fibKept: the FE's datapath still held an earlier association's FIB
	// (forces.FIBKeptComponent; false from an FE that does not say).
	fibKept    bool
	fibKeptErr error // the FE's answer did not parse (fibKept false)
}

// queryTimeout bounds the wait for an FE's Query Response.
const queryTimeout = 10 * time.Second

// discover asks the FE what it is and can do (FE Object LFB), and which
// ports it has, and refuses an FE that cannot hold routes; then it sets the
// FE's heartbeat policy in its FE Protocol LFB.
func (s *session) discover(ctx context.Context) error {
	q := forces.NewDiscoveryQuery(s.ce.id, s.fe, s.corr.Add(1))
	q.LFBs = append(q.LFBs, forces.GetSelect(forces.PortTableClass, forces.PortTableInstance, []uint32{forces.PortTableComponent}, []uint32{forces.FIBKeptComponent}, []uint32{forces.InterFELinksComponent}))
	s.qmu.Lock() // one query at a time (FEDetails may ask already)
	defer s.qmu.Unlock()
	s.queryFor.Store(q.Header.Correlator)
	defer s.queryFor.Store(0)
	if err := s.conn.WriteMessage(q); err != nil {
		return fmt.Errorf("send discovery query: %w", err)
	}
	var resp *forces.Message
	timeout := time.NewTimer(queryTimeout)
	defer timeout.Stop()
	for resp == nil {
		select {
		case m := <-s.queries:
			if m.Header.Correlator == q.Header.Correlator {
				resp = m
			} else {
				s.ce.refuse(refuseStrayResponse, "forces: query response to another query dropped", "fe", s.fe, "correlator", m.Header.Correlator)
			}
		case <-timeout.C:
			return fmt.Errorf("no answer to the discovery query within %s", queryTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	info, err := parseDiscovery(resp)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	// Addresses the FE may not claim never reach the RIB.
	info.ports = s.vetPorts(info.ports)
	for _, need := range []uint32{forces.ClassIPv4UcastLPM, forces.ClassIPv4NextHop} {
		if !info.supports(need) {
			_ = s.conn.WriteMessage(forces.NewAssociationTeardown(s.ce.id, s.fe, uint32(forces.TeardownUnspecified)))
			return fmt.Errorf("FE %q does not implement the %s LFB", info.name, forces.ClassName(need))
		}
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
	s.ce.log.Info("forces: FE discovered", "fe", s.fe, "name", info.name, "state", info.state, "lfbs", len(info.lfbs), "ports", len(info.ports), "fib_kept", info.fibKept, "inter_fe_links", len(info.links))
	if info.fibKeptErr != nil {
		s.ce.log.Warn("forces: FE's answer on whether it kept its FIB is malformed; taken for no", "fe", s.fe, "err", info.fibKeptErr)
	}
	if info.linksErr != nil {
		s.ce.log.Warn("forces: FE's inter-FE link table is malformed; taken for none", "fe", s.fe, "err", info.linksErr)
	}
	s.ce.feReports.add(s.fe, info.fibKept)

	// Heartbeats both ways at the CE's interval; each side declares the
	// other dead after the configured number of silent intervals.
	iv := s.ce.cfg.HeartbeatInterval
	policy := forces.HeartbeatPolicy{
		CEHBPolicy: forces.CEHBPolicy0, CEHDI: uint32(time.Duration(s.ce.cfg.HeartbeatMissLimit) * iv / time.Millisecond),
		FEHBPolicy: forces.FEHBPolicy1, FEHI: uint32(iv / time.Millisecond),
	}
	msgs, err := s.configs(policy.Ops())
	if err != nil {
		return err
	}
	for _, m := range msgs {
		m.Header.Flags.ExecMode = forces.ExecAllOrNone
		m.Header.Flags.ACK = forces.FailureACK
	}
	return s.send(msgs)
}

func (f feInfo) supports(class uint32) bool {
	for _, l := range f.lfbs {
		if l.ClassID == class {
			return true
		}
	}
	return false
}

func parseDiscovery(m *forces.Message) (feInfo, error) {
	var info feInfo
	for _, it := range forces.Items(m) {
		if it.Result != nil && forces.ResultCode(*it.Result) != forces.ResultSuccess {
			continue // the FE does not have it; what matters is checked below
		}
		if !it.HasFullData || len(it.Path) != 1 {
			continue
		}
		var err error
		switch {
		case it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectFEName:
			info.name = string(it.FullData)
		case it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectFEState:
			info.state, err = forces.ParseFEState(it.FullData)
		case it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectSupportedLFBs:
			info.lfbs, err = forces.ParseSupportedLFBs(it.FullData)
		case it.ClassID == forces.PortTableClass && it.Path[0] == forces.PortTableComponent:
			info.ports, err = forces.ParsePortInfos(it.FullData)
		case it.ClassID == forces.PortTableClass && it.Path[0] == forces.FIBKeptComponent:
			// Not worth refusing the FE for: a value that does not parse
			// claims nothing.
			info.fibKept, info.fibKeptErr = forces.ParseBoolFullData(it.FullData)
		case it.ClassID == forces.PortTableClass && it.Path[0] == forces.InterFELinksComponent:
			// Not worth refusing the FE for either: it is then no
			// part of the mesh.
			info.links, info.linksErr = forces.ParseInterFELinks(it.FullData)
		}
		if err != nil {
			return info, err
		}
	}
	if info.lfbs == nil {
		return info, fmt.Errorf("the FE did not report its SupportedLFBs")
	}
	return info, nil
}
