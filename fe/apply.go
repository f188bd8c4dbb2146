package fe

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/splitplane/splitplane/fe/datapath"
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

// applyConfig applies a Config message row by row, in order, and builds the
// Config Response: one RESULT per PATH-DATA, echoing its path. failed reports
// whether any row was rejected.
func (a *Agent) applyConfig(m *forces.Message) (resp *forces.Message, failed bool) {
	items := forces.Items(m)
	results := make([]forces.ResultCode, len(items))
	a.mu.Lock()
	for i, it := range items {
		if err := a.applyRow(it); err != nil {
			failed = true
			results[i] = forces.ResultInternalError
			var r *errResult
			if errors.As(err, &r) {
				results[i] = r.code
			}
			a.log.Warn("forces: config row rejected", "lfb", forces.ClassName(it.ClassID), "op", it.Op, "path", it.Path, "err", err)
		}
	}
	a.mu.Unlock()
	resp, err := forces.NewConfigResponse(m, results...)
	if err != nil {
		// Cannot happen for a message that parsed; answer with a bare header.
		a.log.Error("forces: build config response", "err", err)
		resp = &forces.Message{Header: forces.Header{Type: forces.MsgConfigResponse, Src: m.Header.Dst, Dst: m.Header.Src, Correlator: m.Header.Correlator}}
	}
	return resp, failed
}

func (a *Agent) applyRow(it forces.Item) error {
	if it.InstanceID != 1 {
		return reject(forces.ResultLFBInstanceIDNotFound, "%s instance %d does not exist", forces.ClassName(it.ClassID), it.InstanceID)
	}
	if len(it.Path) != 2 || it.Path[0] != 1 {
		return reject(forces.ResultInvalidPath, "path %v: want [1 row]", it.Path)
	}
	row := it.Path[1]
	if it.Op == forces.OpSet && !it.HasFullData {
		return reject(forces.ResultInvalidParameters, "SET of row %d without FULLDATA", row)
	}
	switch {
	case it.ClassID == forces.ClassIPv4UcastLPM && it.Op == forces.OpSet:
		info, err := forces.ParseIPv4PrefixInfo(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", row, err)
		}
		return a.setRoute(row, info.Prefix, info.HopSelector)
	case it.ClassID == forces.ClassIPv4UcastLPM && it.Op == forces.OpDel:
		return a.deleteRoute(row)
	case it.ClassID == forces.ClassIPv4NextHop && it.Op == forces.OpSet:
		info, err := forces.ParseIPv4NextHopInfo(it.FullData)
		if err != nil {
			return reject(forces.ResultInvalidParameters, "row %d: %v", row, err)
		}
		return a.setNexthop(row, info.NextHop)
	case it.ClassID == forces.ClassIPv4NextHop && it.Op == forces.OpDel:
		return a.deleteNexthop(row)
	}
	return reject(forces.ResultNotSupported, "%s on %s is not supported", it.Op, forces.ClassName(it.ClassID))
}

func (a *Agent) setRoute(row uint32, p netip.Prefix, nh uint32) error {
	if !p.Addr().Is4() {
		return reject(forces.ResultInvalidParameters, "row %d: prefix %s is not IPv4", row, p)
	}
	if _, ok := a.nexthops[nh]; !ok {
		return reject(forces.ResultNotFound, "row %d: prefix %s: HopSelector %d: no such nexthop", row, p, nh)
	}
	p = p.Masked()
	if old, ok := a.rows[row]; ok && old != p {
		if err := a.deleteRoute(row); err != nil {
			return err
		}
	}
	if _, shadowed := a.connected[p]; !shadowed {
		if err := a.dp.SetRoute(p, nh); err != nil {
			return reject(forces.ResultMemoryError, "row %d: prefix %s: %v", row, p, err)
		}
	}
	a.rows[row] = p
	a.ceRoutes[p] = nh
	return nil
}

func (a *Agent) deleteRoute(row uint32) error {
	p, ok := a.rows[row]
	if !ok {
		return reject(forces.ResultNotFound, "prefix table row %d does not exist", row)
	}
	delete(a.rows, row)
	delete(a.ceRoutes, p)
	if _, shadowed := a.connected[p]; shadowed {
		return nil
	}
	if err := a.dp.DeleteRoute(p); err != nil && !errors.Is(err, datapath.ErrNotFound) {
		return reject(forces.ResultInternalError, "row %d: prefix %s: %v", row, p, err)
	}
	return nil
}

func (a *Agent) setNexthop(id uint32, gw netip.Addr) error {
	if id == 0 || id > MaxCENexthopID {
		return reject(forces.ResultValueOutOfRange, "nexthop row %d: outside 1..%d", id, MaxCENexthopID)
	}
	if !gw.Is4() {
		return reject(forces.ResultInvalidParameters, "nexthop row %d: NextHopIPAddr %s is not IPv4", id, gw)
	}
	a.nexthops[id] = gw
	delete(a.resolved, id)
	a.resolveLocked(id)
	select {
	case a.kick <- struct{}{}: // solicit its MAC now, not at the next tick
	default:
	}
	return nil
}

func (a *Agent) deleteNexthop(id uint32) error {
	if _, ok := a.nexthops[id]; !ok {
		return reject(forces.ResultNotFound, "nexthop row %d does not exist", id)
	}
	delete(a.nexthops, id)
	delete(a.resolved, id)
	if err := a.dp.DeleteNexthop(id); err != nil && !errors.Is(err, datapath.ErrNotFound) {
		return reject(forces.ResultInternalError, "nexthop row %d: %v", id, err)
	}
	return nil
}

// resetCEState forgets everything a previous CE association installed; the
// new association's full sync rebuilds it.
func (a *Agent) resetCEState() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p := range a.ceRoutes {
		if _, shadowed := a.connected[p]; !shadowed {
			_ = a.dp.DeleteRoute(p)
		}
	}
	for id := range a.nexthops {
		_ = a.dp.DeleteNexthop(id)
	}
	clear(a.ceRoutes)
	clear(a.rows)
	clear(a.nexthops)
	clear(a.resolved)
}
