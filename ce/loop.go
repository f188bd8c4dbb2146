package ce

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefetch"
)

// RouteUpdate is a change of the best route for a prefix, as the BGP speaker
// produces them: a new next hop, or a withdrawal.
type RouteUpdate = bgp.Update

// Update feeds route changes to the CE as if BGP had produced them. It is how
// benchmarks and tests drive the FIB; it blocks while the CE is busy.
func (c *CE) Update(ctx context.Context, us []RouteUpdate) error {
	select {
	case c.updates <- us:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Converged is closed once the CE's FIB is ready for FE full syncs after its
// start (see Config.SyncHold).
func (c *CE) Converged() <-chan struct{} { return c.converged }

// feConnected is what an FE's ports say of its connected prefixes (ports
// that are up), for the RIB to resolve next hops through; nil prefixes
// forget the FE.
type feConnected struct {
	fe       forces.ID
	prefixes []netip.Prefix
	ports    []forces.PortInfo // all of them, for the nexthop egress rows
}

// setConnected tells the loop an FE's connected prefixes.
func (c *CE) setConnected(ctx context.Context, fe forces.ID, ports []forces.PortInfo) {
	var prefixes []netip.Prefix
	for _, p := range ports {
		if p.Up {
			prefixes = append(prefixes, p.Addrs...)
		}
	}
	select {
	case c.connected <- feConnected{fe: fe, prefixes: prefixes, ports: slices.Clone(ports)}:
	case <-ctx.Done():
	}
}

// hold keeps the connected prefixes of an FE whose association ended for
// fe_hold_time: an FE that restarts comes back to the FIB it left, instead
// of the CE withdrawing every route resolved through its ports and
// installing them all again.
type hold struct {
	fe    forces.ID
	timer *time.Timer
	d     time.Duration // fe_hold_time, or cluster_fe_hold_time (holdTime)
}

// holdTime is how long the connected prefixes of FE s, whose association
// just ended, are kept: fe_hold_time, but cluster_fe_hold_time for an FE
// of a cluster (it declared inter-FE links) while others remain
// associated, which cannot reach its ports through it any more, so that
// the routes through them are withdrawn (or move to another path) at once
// rather than black-holed until fe_hold_time ends. others is the number
// of FEs still associated.
func (c *CE) holdTime(s *session, others int) (d time.Duration, cluster bool) {
	if others > 0 && s.inCluster() {
		return c.cfg.ClusterFEHoldTime, true
	}
	return c.cfg.FEHoldTime, false
}

// loop owns the RIB, the FIB and the set of associated FEs.
func (c *CE) loop(ctx context.Context) error {
	fib := fibs{v4: NewFIB(), v6: NewFIB()}
	rib := NewRIB(fib, c.cfg.Distances)
	rib.log = c.log
	fes := map[forces.ID]*session{}
	holds := map[forces.ID]*hold{}
	defer func() {
		for _, h := range holds {
			h.timer.Stop()
		}
	}()
	var changes []Change
	watches := watchers{}
	defer watches.closeAll()
	eg := newEgress() // which FE each nexthop is behind (egress.go)
	send := func() {
		c.lastUpdate.Store(time.Now().UnixNano())
		changes = eg.follow(changes, changes)
		if len(changes) > 0 {
			for _, s := range fes {
				s.enqueue(changes)
			}
			watches.publish(changes, fib)
		}
	}
	changes = c.setStatics(rib, c.cfg.StaticRoutes, changes[:0])
	// The API's routes on disk (apistate.go): back first, saved when they
	// changed, at most once per persistInterval and when the CE stops.
	var (
		persist    <-chan time.Time
		saver      *apiPersister
		apiChanged bool
		lastSave   time.Time     // when the last save began
		saveEvery  time.Duration // how long until the next may (apistate.go)
	)
	if c.cfg.APIRoutesFile != "" {
		if len(c.restoredAPI) > 0 {
			var err error
			if changes, err = c.applyAPI(rib, c.restoredAPI, changes[:0]); err != nil {
				// Not applied (a batch is all or nothing): the CE runs on
				// without them rather than not at all.
				c.restoreFailed(c.cfg.APIRoutesFile, err)
			} else {
				c.log.Info("api: routes restored", "api_routes_file", c.cfg.APIRoutesFile, "routes", len(c.restoredAPI))
			}
			c.restoredAPI = nil
		}
		saver = startAPIPersister(c.cfg.APIRoutesFile, c.log, &c.apiFile)
		defer func() {
			if apiChanged {
				saver.save(rib.apiRoutes())
			}
			saver.close()
		}()
		t := time.NewTicker(persistInterval)
		defer t.Stop()
		persist = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-persist:
			if apiChanged {
				if t, every := saver.saveFrom(rib, lastSave, saveEvery); t != lastSave {
					lastSave, saveEvery, apiChanged = t, every, false
				}
			}
		case u := <-c.updates:
			changes = c.apply(rib, u, changes[:0])
			// Coalesce a burst: take whatever else is already queued, up
			// to coalesceMax changes (the sessions coalesce further).
			for more := true; more && len(changes) < coalesceMax; {
				select {
				case u := <-c.updates:
					changes = c.apply(rib, u, changes)
				default:
					more = false
				}
			}
			send()
		case m := <-c.api:
			switch m := m.(type) {
			case apiOps:
				apiChanged = true
				if m.txn {
					// The synced FEs get these changes as a transaction,
					// the rest (and the watchers) the usual way.
					changes = c.startTxn(rib, m, fes, changes[:0])
					c.lastUpdate.Store(time.Now().UnixNano())
					watches.publish(changes, fib)
					// The egress rows of new nexthops follow, outside
					// the transaction (an FE keeps a row whatever its
					// nexthop table holds).
					if rows := eg.follow(changes, nil); len(rows) > 0 {
						for _, s := range fes {
							s.enqueue(rows)
						}
					}
					continue
				}
				var err error
				changes, err = c.applyAPI(rib, m.ops, changes[:0])
				m.done <- apiResult{fibChanges: len(changes), err: err}
				send()
			case apiList:
				c.listOnLoop(rib, m)
			case apiLookup:
				lookupOnLoop(rib, eg, fes, m)
			case apiVerifyAddrs:
				verifyAddrsOnLoop(fib, m)
			case apiWatch:
				watches.add(m, fib)
			case apiUnwatch:
				watches.remove(m.w)
			}
		case r := <-c.reloads:
			var rep ReloadReport
			changes, rep = c.applyReload(ctx, rib, r, changes[:0])
			r.done <- rep
			send()
		case m := <-c.connected:
			changes = rib.SetConnected(m.fe, m.prefixes, changes[:0])
			if len(changes) > 0 {
				c.log.Info("rib: connected prefixes changed", "fe", m.fe, "prefixes", m.prefixes, "fib_changes", len(changes))
			}
			if fes[m.fe] != nil { // not a late report of an FE that left
				eg.setPorts(m.fe, m.ports)
				n := len(changes)
				if changes = eg.recompute(fib, changes); len(changes) > n {
					c.log.Info("forces: nexthop egress rows changed", "fe", m.fe, "rows", len(changes)-n)
				}
				changes = c.connectedRows(eg, m.fe, changes)
			}
			send()
		case s := <-c.joins:
			if old, dup := fes[s.fe]; dup {
				s.reject(fmt.Errorf("FE %s is already associated from %s", s.fe, old.remote))
				continue
			}
			fes[s.fe] = s
			if h := holds[s.fe]; h != nil {
				h.timer.Stop() // back in time: its ports are reported again
				delete(holds, s.fe)
			}
			s.decided <- nil
		case s := <-c.syncs:
			snap := fib.Snapshot()
			snap.egress = append(eg.snapshot(), eg.connSnapshot()...)
			s.accept(snap)
			c.log.Info("forces: FE associated, full sync queued", "fe", s.fe, "remote", s.remote, "routes", fib.Len())
		case s := <-c.leaves:
			if fes[s.fe] == s {
				delete(fes, s.fe)
				d, cluster := c.holdTime(s, len(fes))
				if why := s.reason(); normalEnd(why) {
					c.log.Info("forces: FE association ended", "fe", s.fe, "reason", why, "connected_prefixes_kept", d)
				} else {
					c.log.Warn("forces: FE association ended", "fe", s.fe, "reason", why, "connected_prefixes_kept", d)
				}
				changes = changes[:0]
				if cluster && d == 0 {
					changes = rib.SetConnected(s.fe, nil, changes)
					c.log.Warn("forces: cluster FE gone while others remain; its connected prefixes are withdrawn at once", "fe", s.fe,
						"fes_associated", len(fes), "cluster_fe_hold_time", d, "fib_changes", len(changes))
				} else {
					h := &hold{fe: s.fe, d: d}
					h.timer = time.AfterFunc(d, func() {
						select {
						case c.unheld <- h:
						case <-ctx.Done():
						}
					})
					holds[s.fe] = h
				}
				// No longer an egress: the rows through its ports move
				// to another FE that has the subnet, or go.
				eg.setPorts(s.fe, nil)
				n := len(changes)
				if changes = eg.recompute(fib, changes); len(changes) > n {
					c.log.Info("forces: nexthop egress rows changed", "fe", s.fe, "rows", len(changes)-n)
				}
				if changes = c.connectedRows(eg, s.fe, changes); len(changes) > 0 {
					send()
				}
			}
		case h := <-c.unheld:
			if holds[h.fe] != h {
				continue // the FE came back (and maybe went again) meanwhile
			}
			delete(holds, h.fe)
			changes = rib.SetConnected(h.fe, nil, changes[:0])
			c.log.Info("forces: FE did not come back within fe_hold_time; its connected prefixes are withdrawn", "fe", h.fe,
				"hold_time", h.d, "fib_changes", len(changes))
			send()
		case l := <-c.lookups:
			l.reply <- fes[l.fe]
		case q := <-c.queries:
			st := Status{ID: c.id.String(), Routes: fib.Len(), Connected: rib.Connected(), ProtocolErrors: c.protocolErrors.Load()}
			st.UnresolvedRoutes, st.UnresolvedStatic = rib.unresolvedRoutes()
			egressOf, connOf := eg.counts(), eg.connCounts()
			for _, s := range fes {
				fs := s.status()
				fs.EgressOf = egressOf[forces.FESubID(s.fe)]
				fs.ConnectedOf = connOf[forces.FESubID(s.fe)]
				for i := range fs.InterFELinks {
					fs.InterFELinks[i].PeerAssociated = fes[forces.FEID(fs.InterFELinks[i].PeerFE)] != nil
				}
				st.FEs = append(st.FEs, fs)
			}
			sort.Slice(st.FEs, func(i, j int) bool { return st.FEs[i].ID < st.FEs[j].ID })
			q <- st
		}
	}
}

// coalesceMax bounds the changes the loop gathers from a burst of BGP
// updates before handing them to the sessions, which merge them into what
// they have pending anyway. Unbounded, a full table's burst grew one slice of
// a million changes: over 100 MB kept for good, and each doubling a copy the
// Go scheduler cannot preempt, which stalled every goroutine of the CE
// (heartbeats included) for up to a second on two cores.
const coalesceMax = 1 << 16

// sameFamily reports whether nh can be a next hop of p.
func sameFamily(p netip.Prefix, nh netip.Addr) bool {
	return nh.Is4() == p.Addr().Is4() && !nh.Is4In6()
}

// apply feeds BGP's updates to the RIB.
func (c *CE) apply(rib *RIB, us []bgp.Update, out []Change) []Change {
	var one [1]netip.Addr
	for i, u := range us {
		if i+prefetch.Ahead < len(us) {
			rib.prefetch(srcBGP, us[i+prefetch.Ahead].Prefix)
		}
		if u.Withdraw {
			out = rib.DeleteBGP(u.Prefix, out)
			continue
		}
		if !sameFamily(u.Prefix, u.NextHop) {
			// IPv4 over an IPv6 next hop (RFC 8950) is not supported yet.
			c.log.Warn("rib: next hop of another address family, route not installed", "prefix", u.Prefix, "nexthop", u.NextHop)
			out = rib.DeleteBGP(u.Prefix, out)
			continue
		}
		one[0] = u.NextHop
		hops := one[:]
		if len(u.NextHops) > 1 {
			hops = slices.DeleteFunc(slices.Clone(u.NextHops), func(a netip.Addr) bool { return !sameFamily(u.Prefix, a) })
		}
		var ok bool
		if out, ok = rib.SetBGP(u.Prefix, hops, u.IBGP, out); !ok {
			c.log.Error("rib: nexthop, ECMP group or next-hop set table full, route not installed", "prefix", u.Prefix, "nexthop", u.NextHop)
		}
	}
	return out
}

// configuredConnected is the RIB's name for the connected prefixes of the
// configuration (FE IDs start at 1).
const configuredConnected = forces.ID(0)

// setStatics makes the RIB's static routes those of the configuration,
// changing only the ones that differ.
func (c *CE) setStatics(rib *RIB, routes []StaticRoute, out []Change) []Change {
	want := map[netip.Prefix]StaticRoute{}
	var connected []netip.Prefix
	for _, r := range routes {
		p, _ := netip.ParsePrefix(r.Prefix) // validated with the configuration
		if r.Connected {
			connected = append(connected, p.Masked())
			continue
		}
		want[p.Masked()] = r
	}
	out = rib.SetConnected(configuredConnected, connected, out)
	have := rib.Statics()
	for p := range have {
		if _, ok := want[p]; !ok {
			out = rib.DeleteStatic(p, out)
		}
	}
	for p, r := range want {
		if old, ok := have[p]; ok && slices.Equal(old.NextHops, r.NextHops) && old.Distance == r.Distance {
			continue
		}
		hops := make([]netip.Addr, len(r.NextHops))
		for i, h := range r.NextHops {
			hops[i], _ = netip.ParseAddr(h)
		}
		var ok bool
		if out, ok = rib.SetStatic(p, hops, r.Distance, out); !ok {
			c.log.Error("rib: table full, static route not installed", "prefix", p)
		}
	}
	return out
}
