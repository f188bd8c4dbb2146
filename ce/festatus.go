package ce

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// festatusTimeout bounds the wait for an FE's answer to a status query.
const festatusTimeout = 5 * time.Second

// FEDetails asks FE fe for its status document (splitplane's FE status:
// datapath counters in total and per CPU, ports with counters, lanes) with
// a ForCES Query of the FE status component. ErrNoFE if fe is not
// associated.
func (c *CE) FEDetails(ctx context.Context, fe forces.ID) (json.RawMessage, error) {
	s := c.session(ctx, fe)
	if s == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoFE, fe)
	}
	return s.queryStatus(ctx)
}

// queryStatus asks the FE for its status document.
func (s *session) queryStatus(ctx context.Context) (json.RawMessage, error) {
	m, err := s.query(ctx, "status", forces.GetSelect(forces.PortTableClass, forces.PortTableInstance, []uint32{forces.FEStatusComponent}))
	if err != nil {
		return nil, err
	}
	for _, it := range forces.Items(m) {
		if it.Result != nil && forces.ResultCode(*it.Result) != forces.ResultSuccess {
			return nil, fmt.Errorf("FE %s status: %s", s.fe, forces.ResultCode(*it.Result))
		}
		if it.HasFullData && json.Valid(it.FullData) {
			return json.RawMessage(it.FullData), nil
		}
	}
	return nil, fmt.Errorf("FE %s status: no valid document in the response", s.fe)
}

// query sends a Query of lfbs and waits for its response (queries after
// discovery are serialised: the reader hands responses over one at a
// time, matched by correlator). what names the query in errors.
func (s *session) query(ctx context.Context, what string, lfbs ...forces.LFBSelect) (*forces.Message, error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	corr := s.corr.Add(1)
	q := forces.NewQuery(s.ce.id, s.fe, corr, lfbs...)
	s.queryFor.Store(corr)
	defer s.queryFor.Store(0)
	select {
	case <-s.queries: // left over from an earlier query
	default:
	}
	if err := s.send([]*forces.Message{q}); err != nil {
		return nil, err
	}
	timeout := time.NewTimer(festatusTimeout)
	defer timeout.Stop()
	for {
		select {
		case m := <-s.queries:
			if m.Header.Correlator != corr {
				continue // an answer that came too late for an earlier query
			}
			return m, nil
		case <-timeout.C:
			return nil, fmt.Errorf("FE %s %s: no answer within %s", s.fe, what, festatusTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
