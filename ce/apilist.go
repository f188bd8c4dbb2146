package ce

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Listings of the routes of every origin, for the API's Routes.List.

// RouteInfo is a route of one origin, as listed.
type RouteInfo struct {
	Prefix    netip.Prefix
	NextHops  []netip.Addr // as the origin gave them
	Origin    string       // "api", "static", "bgp"
	Resolved  []netip.Addr // the directly connected next hops it resolves to
	Distance  uint8
	Installed bool // the route the FIB forwards with for its prefix
	// why is why Resolved is empty; in the padding after Installed, so a
	// listing of a million routes costs no more memory for it.
	why unresolved
}

// Unresolved says why the route's next hops resolve to no directly
// connected one (so it is not forwarded with): "no_route", "loop", "depth"
// or "work", as in Status's UnresolvedRoutes; "" for a route that resolves.
func (ri RouteInfo) Unresolved() string { return ri.why.String() }

// RouteFilter selects routes to list.
type RouteFilter struct {
	Prefix netip.Prefix // valid: only it, or with Longer it and more specific ones
	Longer bool
	Family int    // 4 or 6; 0: both
	Origin string // "api", "static", "bgp"; "": all
	// Unresolved: only the routes whose next hops resolve to no directly
	// connected one.
	Unresolved bool
}

func (f RouteFilter) match(p netip.Prefix, origin string) bool {
	switch {
	case f.Family == 4 && !p.Addr().Is4(), f.Family == 6 && p.Addr().Is4():
		return false
	case f.Origin != "" && f.Origin != origin:
		return false
	case !f.Prefix.IsValid():
		return true
	case f.Longer:
		return f.Prefix.Bits() <= p.Bits() && f.Prefix.Contains(p.Addr())
	}
	return p == f.Prefix
}

var originNames = [numSources]string{srcStatic: "static", srcAPI: "api", srcBGP: "bgp"}

// ListRoutes returns the routes matching f, of every origin, sorted by
// prefix and origin. A listing that scans the whole RIB on the loop waits
// its turn (listPacer); one of a single prefix does not.
func (c *CE) ListRoutes(ctx context.Context, f RouteFilter) ([]RouteInfo, error) {
	if f.scans() {
		if err := c.listPace.wait(ctx); err != nil {
			return nil, err
		}
	}
	reply := make(chan []RouteInfo, 1)
	if err := c.toLoop(ctx, apiList{filter: f, reply: reply}); err != nil {
		return nil, err
	}
	select {
	case l := <-reply:
		sortRoutes(l) // here, not on the loop
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type apiList struct {
	filter RouteFilter
	reply  chan []RouteInfo
}

// scans reports whether listing f walks every route (not one prefix).
func (f RouteFilter) scans() bool { return !f.Prefix.IsValid() || f.Longer }

// listPacer spaces out the listings that scan the whole RIB on the loop
// (a million routes take a good part of a second there), so that however
// many clients list, in turn or at once, listings take at most about
// 1/(listCostFactor+1) of the loop: after a scan that cost d, the next
// starts no sooner than listCostFactor*d later.
type listPacer struct {
	mu   sync.Mutex
	next time.Time    // when the next scan may start
	cost atomic.Int64 // of the last scan on the loop, in nanoseconds
}

const listCostFactor = 4

// wait reserves the next turn to scan and waits for it, or for ctx.
func (p *listPacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	start := now
	if p.next.After(now) {
		start = p.next
	}
	p.next = start.Add(listCostFactor * time.Duration(p.cost.Load()))
	p.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// listOnLoop answers a listing on the loop, timing a scan for the pacer.
func (c *CE) listOnLoop(rib *RIB, m apiList) {
	if !m.filter.scans() {
		m.reply <- rib.scan(m.filter)
		return
	}
	start := time.Now()
	l := rib.scan(m.filter)
	c.listPace.cost.Store(int64(time.Since(start)))
	m.reply <- l
}

// list is scan, sorted.
func (r *RIB) list(f RouteFilter) []RouteInfo {
	out := r.scan(f)
	sortRoutes(out)
	return out
}

// scan runs on the loop: the routes matching f, in no order.
func (r *RIB) scan(f RouteFilter) []RouteInfo {
	var out []RouteInfo
	add := func(src source, p netip.Prefix, v srcRoute) {
		if !f.match(p, originNames[src]) {
			return
		}
		s := &r.sets[v.set()]
		if f.Unresolved && s.resolved != nil {
			return
		}
		_, chosen, _ := r.choose(p)
		out = append(out, RouteInfo{Prefix: p, NextHops: slices.Clone(s.hops), Distance: v.distance(), Origin: originNames[src],
			Resolved: slices.Clone(s.resolved), Installed: chosen == src && len(s.resolved) > 0 && r.fibs.of(p).holds(p, s.resolved),
			why: s.unresolvedWhy()})
	}
	if !f.scans() {
		for src := range numSources {
			if v, ok := r.tables[src].get(f.Prefix); ok {
				add(src, f.Prefix, v)
			}
		}
		return out
	}
	for src := range numSources {
		for k, v := range r.tables[src].v4.All() {
			add(src, k.Prefix(), v)
		}
		for p, v := range r.tables[src].v6 {
			add(src, p, v)
		}
	}
	return out
}

// sortRoutes sorts a listing by prefix and origin.
func sortRoutes(out []RouteInfo) {
	slices.SortFunc(out, func(a, b RouteInfo) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
			return c
		}
		return strings.Compare(a.Origin, b.Origin)
	})
}
