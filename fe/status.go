package fe

import "github.com/splitplane/splitplane/forces"

// Status is a snapshot of the FE for operators: the document the FE
// returns to the CE's status query, defined in forces so that its readers
// need not import the FE.
type Status = forces.FEStatus

// status is the port as the FE's status reports it (without counters).
func (p *port) status() forces.FEPortStatus {
	return forces.FEPortStatus{Name: p.Name, Ifindex: p.Ifindex, MAC: p.MAC, Addrs: p.Addrs, Mode: p.Mode, Up: p.Up}
}

// Status returns a snapshot of the FE.
func (a *Agent) Status() Status {
	st := Status{ID: a.id.String(), Associated: a.associated.Load(), CE: a.cfg.CEAddress, FIBKept: a.fibKept.Load()}
	var dp Datapath
	var queues []portQueues
	a.do(func() {
		st.Routes = a.table.v4.len() + a.table.v6.len()
		st.Nexthops = len(a.table.v4.nexthops) + len(a.table.v6.nexthops)
		st.EgressRows, st.RemoteNexthops = a.table.egress.counts(forces.FESubID(a.id))
		st.ConnectedRows, _ = a.table.conn.counts(forces.FESubID(a.id))
		st.RemoteConnected = len(a.prog.connRemote)
		st.Gateways, st.Programmed, st.DatapathErrors = len(a.prog.slots), a.prog.routes.len()+a.prog.routes6.len(), a.prog.errors
		for _, s := range a.prog.slots {
			if s.resolved() {
				st.Resolved++
			}
		}
		if a.prog.kernel != nil {
			ks := a.prog.kernel.stats()
			st.KernelRoutes, st.KernelErrors = ks.routes, ks.errors
		}
		for _, name := range a.cfg.Ports {
			for _, p := range a.ports {
				if p.Name == name {
					st.Ports = append(st.Ports, p.status())
					queues = append(queues, portQueues{p.Name, p.rxQueues})
				}
			}
		}
		st.InterFELinks = a.linkStatus()
		dp = a.prog.dp
		st.VLB = a.vlb.status()
	})
	st.Neighbors = a.neighbors.len()
	st.ProtocolErrors = a.protocolErrors.Load()
	st.Low = forces.FELowStatus{Up: a.lowq.Load() != nil, Redirected: a.low.redirected.Load(), Dropped: a.low.dropped.Load(),
		Injected: a.low.injected.Load(), Events: a.low.events.Load()}
	if !a.noPorts {
		st.Lanes = lanes("/sys", "/proc/interrupts", queues)
	}
	if dp != nil {
		if c, err := dp.Counters(); err == nil {
			st.Counters = forces.FECounters(c)
		}
		if cs, err := dp.CPUCounters(); err == nil {
			st.PerCPU = make([]forces.FECounters, len(cs))
			for i, c := range cs {
				st.PerCPU[i] = forces.FECounters(c)
			}
		}
		if pc, err := dp.PortCounters(); err == nil {
			for i := range st.Ports {
				st.Ports[i].Counters = forces.FEPortCounters(pc[st.Ports[i].Ifindex])
				for _, v := range a.veths {
					if v.ifindex == st.Ports[i].Ifindex {
						st.Ports[i].RedirectLost = v.lost.Load()
					}
				}
			}
		}
	}
	counts := controlFlowCounts(dp)
	a.do(func() { st.Classifier = a.classifierStatus(counts) })
	return st
}

// linkStatus lists the inter-FE links as configured, with their state.
// Called in the loop.
func (a *Agent) linkStatus() []forces.FEInterFELinkStatus {
	var out []forces.FEInterFELinkStatus
	for _, l := range a.cfg.InterFELinks {
		for _, p := range a.ports {
			if p.Name != l.Port {
				continue
			}
			ls := forces.FEInterFELinkStatus{Port: p.Name, Ifindex: p.Ifindex, PeerFE: l.PeerFE, Up: p.Up}
			if il := a.links[p.Ifindex]; il != nil {
				if il.peerMAC != nil {
					ls.PeerMAC = il.peerMAC.String()
				}
				ls.Declared, ls.Alive = il.declared, il.declared && il.alive
				lv := il.probe.liveness()
				ls.ProbesSent, ls.ProbesAnswered = lv.Sent, lv.Answered
				ls.LastRTTMicros = float64(lv.LastRTT.Nanoseconds()) / 1e3
			}
			out = append(out, ls)
		}
	}
	return out
}
