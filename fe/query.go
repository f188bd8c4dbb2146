package fe

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// supportedLFBs is what this FE implements, as its FE Object LFB reports it.
var supportedLFBs = [...]forces.SupportedLFB{
	{Name: "FEObject", ClassID: forces.ClassFEObject, Version: "1.0"},
	{Name: "FEProtocolObject", ClassID: forces.ClassFEProtocol, Version: "1.0"},
	{Name: "EtherPHYCop", ClassID: forces.ClassEtherPHYCop, Version: "1.0"},
	{Name: "IPv4UcastLPM", ClassID: forces.ClassIPv4UcastLPM, Version: "1.0"},
	{Name: "IPv4NextHop", ClassID: forces.ClassIPv4NextHop, Version: "1.0"},
	{Name: "IPv6UcastLPM", ClassID: forces.ClassIPv6UcastLPM, Version: "1.0"},
	{Name: "IPv6NextHop", ClassID: forces.ClassIPv6NextHop, Version: "1.0"},
	{Name: "SplitplaneIPv4ECMP", ClassID: forces.ClassIPv4ECMP, Version: "1.0"},
	{Name: "SplitplaneIPv6ECMP", ClassID: forces.ClassIPv6ECMP, Version: "1.0"},
	{Name: "SplitplaneIPv4NexthopEgress", ClassID: forces.ClassIPv4NexthopEgress, Version: "1.0"},
	{Name: "SplitplaneIPv6NexthopEgress", ClassID: forces.ClassIPv6NexthopEgress, Version: "1.0"},
	{Name: "SplitplaneIPv4ConnectedEgress", ClassID: forces.ClassIPv4ConnectedEgress, Version: "1.0"},
	{Name: "SplitplaneIPv6ConnectedEgress", ClassID: forces.ClassIPv6ConnectedEgress, Version: "1.0"},
}

// answerQuery answers a Query from the FE Object LFB, the FE Protocol LFB and
// the port table; anything else gets a RESULT saying why not. A Query that
// cannot be answered as asked (an operation other than GET, answers that do
// not fit one message) is answered with a RESULT at every leaf.
func (a *Agent) answerQuery(m *forces.Message) *forces.Message {
	if code, err := screen(m); err != nil {
		a.refused(m, code, err)
		return refusal(m, code)
	}
	// The answers are held until the response is built: once they pass
	// what one message can carry, the rest are not worked out.
	budget := forces.MaxMessageLen
	resp, err := forces.NewQueryResponse(m, func(it forces.Item) ([]byte, forces.ResultCode) {
		if budget <= 0 {
			return nil, forces.ResultContentsTooLong
		}
		b, code := a.answer(it)
		budget -= len(b)
		return b, code
	})
	if err == nil {
		return resp
	}
	code := forces.ResultContentsTooLong
	if !errors.Is(err, forces.ErrTooLarge) {
		code = forces.ResultNotSupported
	}
	a.refused(m, code, err)
	return refusal(m, code)
}

// refused counts and logs (at a bounded rate) a message of the CE refused
// whole with code.
func (a *Agent) refused(m *forces.Message, code forces.ResultCode, err error) {
	a.protocolErrors.Add(1)
	a.refusals.Warn(a.log, "forces: message from the CE refused", "type", m.Header.Type, "correlator", m.Header.Correlator, "result", code, "err", err)
}

func (a *Agent) answer(it forces.Item) ([]byte, forces.ResultCode) {
	if it.Op != forces.OpGet {
		return nil, forces.ResultNotSupported
	}
	if it.InstanceID != 1 {
		return nil, forces.ResultLFBInstanceIDNotFound
	}
	if len(it.Path) != 1 {
		return nil, forces.ResultInvalidPath
	}
	comp := it.Path[0]
	switch it.ClassID {
	case forces.ClassFEObject:
		switch comp {
		case forces.FEObjectFEName:
			return []byte(a.name()), forces.ResultSuccess
		case forces.FEObjectFEID:
			return forces.Uint32FullData(uint32(a.id)), forces.ResultSuccess
		case forces.FEObjectFEState:
			return forces.FEStateOperEnable.MarshalFullData(), forces.ResultSuccess
		case forces.FEObjectSupportedLFBs:
			b, err := forces.MarshalSupportedLFBs(supportedLFBs[:])
			if err != nil {
				return nil, forces.ResultInternalError
			}
			return b, forces.ResultSuccess
		}
	case forces.ClassFEProtocol:
		p := a.policy()
		switch comp {
		case forces.FEProtoFEID:
			return forces.Uint32FullData(uint32(a.id)), forces.ResultSuccess
		case forces.FEProtoCEHBPolicy:
			return forces.UcharFullData(uint8(p.CEHBPolicy)), forces.ResultSuccess
		case forces.FEProtoCEHDI:
			return forces.Uint32FullData(p.CEHDI), forces.ResultSuccess
		case forces.FEProtoFEHBPolicy:
			return forces.UcharFullData(uint8(p.FEHBPolicy)), forces.ResultSuccess
		case forces.FEProtoFEHI:
			return forces.Uint32FullData(p.FEHI), forces.ResultSuccess
		}
	case forces.PortTableClass:
		switch comp {
		case forces.PortTableComponent:
			b, err := forces.MarshalPortInfos(a.portInfos())
			if err != nil {
				return nil, forces.ResultInternalError
			}
			return b, forces.ResultSuccess
		case forces.FIBKeptComponent:
			return forces.BoolFullData(a.fibKept.Load()), forces.ResultSuccess
		case forces.FIBLookupComponent:
			return a.fibLookup(it.Key)
		case forces.InterFELinksComponent:
			b, err := forces.MarshalInterFELinks(a.interFELinks())
			if err != nil {
				return nil, forces.ResultInternalError
			}
			return b, forces.ResultSuccess
		case forces.FEStatusComponent:
			b, err := json.Marshal(a.Status())
			switch {
			case err != nil:
				return nil, forces.ResultInternalError
			case len(b) > forces.MaxTLVLen-8:
				return nil, forces.ResultContentsTooLong
			}
			return b, forces.ResultSuccess
		}
	default:
		return nil, forces.ResultLFBNotFound
	}
	return nil, forces.ResultComponentDoesNotExist
}

func (a *Agent) name() string {
	if a.cfg.Name != "" {
		return a.cfg.Name
	}
	return a.id.String()
}

// portInfos lists the ports in configuration order; their PHYPortID is the ifindex.
func (a *Agent) portInfos() []forces.PortInfo {
	var out []forces.PortInfo
	a.do(func() {
		out = make([]forces.PortInfo, 0, len(a.ports))
		for _, p := range a.ports {
			pi := forces.PortInfo{ID: uint32(p.Ifindex), Name: p.Name, Up: p.Up, Addrs: slices.Clone(p.Addrs)}
			copy(pi.MAC[:], p.mac)
			out = append(out, pi)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// policy is the FE Protocol LFB's heartbeat settings: the CE sets them after
// association; until then they come from the FE's configuration.
func (a *Agent) policy() (p forces.HeartbeatPolicy) {
	a.do(func() { p = a.hb })
	return p
}

// setProtocol applies a SET on the FE Protocol LFB.
func (a *Agent) setProtocol(it forces.Item) error {
	if it.Op != forces.OpSet {
		return reject(forces.ResultNotSupported, "FE Protocol LFB: %v is not supported in a Config", it.Op)
	}
	if it.InstanceID != 1 || len(it.Path) != 1 || !it.HasFullData {
		return reject(forces.ResultInvalidPath, "FE Protocol LFB: only SET of a top-level component is supported")
	}
	p := a.hb
	var err error
	switch it.Path[0] {
	case forces.FEProtoCEHBPolicy:
		p.CEHBPolicy, err = forces.ParseCEHBPolicy(it.FullData)
	case forces.FEProtoFEHBPolicy:
		p.FEHBPolicy, err = forces.ParseFEHBPolicy(it.FullData)
	case forces.FEProtoCEHDI:
		p.CEHDI, err = forces.ParseUint32FullData(it.FullData)
		if err == nil && p.CEHDI < 10 {
			return reject(forces.ResultValueOutOfRange, "CEHDI %d ms: below 10 ms", p.CEHDI)
		}
		p.CEHDI = a.clampPolicy("CEHDI", p.CEHDI, minCEHDI, maxCEHDI)
	case forces.FEProtoFEHI:
		p.FEHI, err = forces.ParseUint32FullData(it.FullData)
		if err == nil && p.FEHI < 10 {
			return reject(forces.ResultValueOutOfRange, "FEHI %d ms: below 10 ms", p.FEHI)
		}
		p.FEHI = a.clampPolicy("FEHI", p.FEHI, minFEHI, maxFEHI)
	case forces.FEProtoCurrentRunningVersion, forces.FEProtoFEID:
		return reject(forces.ResultReadOnly, "FE Protocol component %d is read-only", it.Path[0])
	default:
		return reject(forces.ResultNotSupported, "FE Protocol component %d is not supported", it.Path[0])
	}
	if err != nil {
		return reject(forces.ResultInvalidParameters, "FE Protocol component %d: %v", it.Path[0], err)
	}
	a.setPolicy(p)
	return nil
}

// The range the FE honours the CE's heartbeat settings in (milliseconds): a
// value outside is clamped to it, with a warning, so that no CE can make the
// FE wait 49 days for it (CEHDI 0xFFFFFFFF) or for its own next heartbeat
// (FEHI 0xFFFFFFFF), nor give up on a CE after a few milliseconds. Below
// 10 ms a value is refused (E_VALUE_OUT_OF_RANGE), as it always was.
const (
	minCEHDI = 100    // the CE's dead interval: 100 ms ...
	maxCEHDI = 30_000 // ... to 30 s
	minFEHI  = 10     // the FE's heartbeat interval: 10 ms ...
	maxFEHI  = 30_000 // ... to 30 s
)

// clampPolicy returns v (ms) within lo..hi, warning when it changes it.
func (a *Agent) clampPolicy(name string, v, lo, hi uint32) uint32 {
	c := min(max(v, lo), hi)
	if c != v {
		a.log.Warn("forces: CE heartbeat setting clamped", "component", name, "value_ms", v, "clamped_ms", c, "min_ms", lo, "max_ms", hi)
	}
	return c
}

// setPolicy records the heartbeat policy; called by the owner of the agent's
// state (or New, before anything else runs). The reader
// and the heartbeat sender read the intervals from atomics, never waiting for
// the lock that a long commit holds.
func (a *Agent) setPolicy(p forces.HeartbeatPolicy) {
	a.hb = p
	var send time.Duration
	if p.FEHBPolicy == forces.FEHBPolicy1 {
		send = time.Duration(p.FEHI) * time.Millisecond
	}
	a.sendEvery.Store(int64(send))
	a.deadAfter.Store(int64(time.Duration(p.CEHDI) * time.Millisecond))
}

// intervals returns how often the FE sends heartbeats (0: it does not, by
// policy) and how long the CE may stay silent before the FE declares it dead.
func (a *Agent) intervals() (send, dead time.Duration) {
	return time.Duration(a.sendEvery.Load()), time.Duration(a.deadAfter.Load())
}
