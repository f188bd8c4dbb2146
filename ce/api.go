package ce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefetch"
)

// The CE's side of the route-programming API: operations on the API's own
// routes, applied by the loop as a whole batch or not at all, listings of
// every origin's routes, and a feed of the FIB's changes. The gRPC server
// (api/server) maps them onto the wire.

// RouteOpKind is what a RouteOp does to the API's route for its prefix.
type RouteOpKind uint8

const (
	OpAdd     RouteOpKind = iota + 1 // add; the prefix must have no API route
	OpReplace                        // add or replace
	OpDelete                         // remove; the prefix must have an API route
)

// RouteOp is one operation on the API's routes.
type RouteOp struct {
	Kind     RouteOpKind
	Prefix   netip.Prefix
	NextHops []netip.Addr // OpAdd, OpReplace: 1 to 16, the prefix's family
	Distance uint8        // 0: the API's default
}

// Errors of API operations; a RouteError wraps one of them.
var (
	ErrInvalidRoute  = errors.New("invalid route")
	ErrRouteExists   = errors.New("the API already has a route for this prefix")
	ErrRouteNotFound = errors.New("the API has no route for this prefix")
	ErrTableFull     = errors.New("table full")
	ErrTxnAborted    = errors.New("transaction aborted")
)

// RouteError says which operation of a batch was refused and why; nothing of
// the batch was applied.
type RouteError struct {
	Index int    // the operation's index in the batch
	Field string // e.g. "route.next_hops[1]"
	Value string
	Err   error // ErrInvalidRoute, ErrRouteExists, ErrRouteNotFound, ErrTableFull
}

func (e *RouteError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("ops[%d] %s: %v", e.Index, e.Value, e.Err)
	}
	return fmt.Sprintf("ops[%d] %s %q: %v", e.Index, e.Field, e.Value, e.Err)
}

func (e *RouteError) Unwrap() error { return e.Err }

// CheckRouteOp validates an operation on its own (the loop checks it
// against the table).
func CheckRouteOp(i int, op RouteOp) error {
	bad := func(field, value, why string) error {
		return &RouteError{Index: i, Field: field, Value: value, Err: fmt.Errorf("%w: %s", ErrInvalidRoute, why)}
	}
	if op.Kind < OpAdd || op.Kind > OpDelete {
		return bad("kind", fmt.Sprint(op.Kind), "want add, replace or delete")
	}
	if !op.Prefix.IsValid() || op.Prefix.Addr().Zone() != "" {
		return bad("route.prefix", op.Prefix.String(), "not a prefix")
	}
	if op.Prefix.Masked() != op.Prefix {
		return bad("route.prefix", op.Prefix.String(), "host bits set (want "+op.Prefix.Masked().String()+")")
	}
	if op.Prefix.Addr().Is4In6() {
		return bad("route.prefix", op.Prefix.String(), "an IPv4-mapped IPv6 prefix")
	}
	if op.Kind == OpDelete {
		return nil
	}
	if len(op.NextHops) == 0 || len(op.NextHops) > forces.MaxECMPMembers {
		return bad("route.next_hops", fmt.Sprint(len(op.NextHops)), fmt.Sprintf("want 1 to %d next hops", forces.MaxECMPMembers))
	}
	for j, h := range op.NextHops {
		if !h.IsValid() || !sameFamily(op.Prefix, h) || h.Zone() != "" || h.IsUnspecified() || h.IsMulticast() {
			return bad(fmt.Sprintf("route.next_hops[%d]", j), h.String(), "not a usable next hop for "+op.Prefix.String())
		}
	}
	return nil
}

// checkOps validates a batch's operations on their own: each by
// CheckRouteOp, and none for a martian prefix unless api_allow_martians.
func (c *CE) checkOps(ops []RouteOp) error {
	for i, op := range ops {
		if err := CheckRouteOp(i, op); err != nil {
			return err
		}
	}
	if !c.cfg.APIAllowMartians {
		return checkMartians(ops)
	}
	return nil
}

// ApplyRoutes applies ops to the API's routes as one batch: all of them, or,
// if one is refused (a *RouteError), none. It returns how many FIB changes
// they made.
func (c *CE) ApplyRoutes(ctx context.Context, ops []RouteOp) (fibChanges int, err error) {
	if err := c.checkOps(ops); err != nil {
		return 0, err
	}
	done := make(chan apiResult, 1)
	if err := c.toLoop(ctx, apiOps{ops: ops, done: done}); err != nil {
		return 0, err
	}
	select {
	case r := <-done:
		return r.fibChanges, r.err
	case <-ctx.Done():
		// The loop applies the batch anyway; only the answer is lost.
		return 0, ctx.Err()
	}
}

type apiOps struct {
	ops     []RouteOp
	txn     bool // towards the FEs as one ForCES transaction
	done    chan apiResult
	started chan *txnRun // txn: the transaction the loop started
}

type apiResult struct {
	fibChanges int
	err        error
}

func (c *CE) toLoop(ctx context.Context, m any) error {
	select {
	case c.api <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// applyAPI runs on the loop: it checks every operation against the API's
// table, then applies them all.
func (c *CE) applyAPI(rib *RIB, ops []RouteOp, out []Change) ([]Change, error) {
	// Adds and deletes need the prefix absent or present; within a batch an
	// operation sees the ones before it. A batch of replaces (a bulk load)
	// needs no check.
	if slices.ContainsFunc(ops, func(op RouteOp) bool { return op.Kind != OpReplace }) {
		if err := checkExists(rib, ops); err != nil {
			return out, err
		}
	}
	if free := maxSets - len(rib.sets) + len(rib.freeSets); free < len(ops) {
		return out, &RouteError{Index: 0, Err: fmt.Errorf("%w: %d next-hop sets free for %d operations", ErrTableFull, free, len(ops))}
	}
	// Each operation's prefix as it was before, to put back if a later one
	// does not fit the FIB; its set is held meanwhile.
	prior := make([]priorRoute, 0, len(ops))
	defer func() {
		for _, pr := range prior {
			if pr.had {
				rib.release(pr.v.set())
			}
		}
	}()
	for i, op := range ops {
		if i+prefetch.Ahead < len(ops) {
			rib.prefetch(srcAPI, ops[i+prefetch.Ahead].Prefix)
		}
		var pr priorRoute
		var ok bool
		if op.Kind == OpDelete {
			out, pr, ok = rib.delAPI(op.Prefix, out)
			prior = append(prior, pr)
			if !ok {
				// What the prefix falls back to (another origin's route)
				// does not fit: the deleted route must not stay.
				out = rib.fibs.of(op.Prefix).Delete(op.Prefix, out)
				c.log.Error("rib: table full, the route the API's route for the prefix gave way to is not installed",
					"prefix", op.Prefix, "why", rib.fibs.of(op.Prefix).full)
			}
			continue
		}
		d := op.Distance
		if d == 0 {
			d = rib.distances[srcAPI]
		}
		out, pr, ok = rib.setAPI(op.Prefix, op.NextHops, d, out)
		prior = append(prior, pr)
		if !ok {
			why := "the next-hop set table is full"
			if f := rib.fibs.of(op.Prefix); f.full != "" {
				why, f.full = f.full, ""
			}
			out = rib.undoAPI(prior, out)
			return out, &RouteError{Index: i, Field: "route.prefix", Value: op.Prefix.String(),
				Err: fmt.Errorf("%w: %s: the route cannot be installed, so none of the batch was applied", ErrTableFull, why)}
		}
	}
	return out, nil
}

// priorRoute is the API's route for a prefix before an operation: v, if
// had.
type priorRoute struct {
	p   netip.Prefix
	v   srcRoute
	had bool
}

// setAPI is set for the API's route for p, keeping the route it replaces in
// prior with its set's reference (released by the caller), for undoAPI;
// ok is false when the route does not fit the FIB.
func (r *RIB) setAPI(p netip.Prefix, hops []netip.Addr, distance uint8, out []Change) (_ []Change, prior priorRoute, ok bool) {
	prior.p = p
	id, ok := r.intern(hops)
	if !ok {
		if prior.v, prior.had = r.tables[srcAPI].del(p); prior.had {
			out, _ = r.install(p, out)
		}
		return out, prior, false
	}
	v := mkRoute(distance, id)
	if prior.v, prior.had = r.tables[srcAPI].put(p, v); prior.had && prior.v == v {
		return out, prior, true // the same route again: prior holds the old reference
	}
	out, ok = r.installKnown(p, srcAPI, v, out)
	return out, prior, ok
}

// delAPI removes the API's route for p, installing what p falls back to,
// keeping the route in prior as setAPI does; ok is false when what p falls
// back to does not fit the FIB.
func (r *RIB) delAPI(p netip.Prefix, out []Change) (_ []Change, prior priorRoute, ok bool) {
	prior.p = p
	if prior.v, prior.had = r.tables[srcAPI].del(p); !prior.had {
		return out, prior, true
	}
	out, ok = r.install(p, out)
	return out, prior, ok
}

// undoAPI puts the API's routes of prior back as they were, last first:
// the FIB then holds what it held before the batch. A prefix whose route
// does not fit again in place is taken out of the FIB first, freeing its
// next hops. The sets prior holds stay held.
func (r *RIB) undoAPI(prior []priorRoute, out []Change) []Change {
	for i := len(prior) - 1; i >= 0; i-- {
		pr := prior[i]
		if cur, had := r.tables[srcAPI].del(pr.p); had {
			r.release(cur.set())
		}
		if pr.had {
			r.sets[pr.v.set()].refs++
			r.tables[srcAPI].put(pr.p, pr.v)
		}
		var ok bool
		if out, ok = r.install(pr.p, out); !ok {
			out = r.fibs.of(pr.p).Delete(pr.p, out)
			out, _ = r.install(pr.p, out)
		}
	}
	return out
}

// holds reports whether the FIB forwards p through exactly hops (a set's
// resolution: sorted, at most forces.MaxECMPMembers).
func (f *FIB) holds(p netip.Prefix, hops []netip.Addr) bool {
	r, ok := f.routes.get(p)
	switch {
	case !ok:
		return false
	case r.ecmp:
		return slices.Equal(f.groupByID[r.id].members, hops)
	}
	return len(hops) == 1 && f.addrOf[r.id] == hops[0]
}

// checkExists refuses an add of a prefix that has an API route, or a delete
// of one that has none, counting the batch's operations before it.
func checkExists(rib *RIB, ops []RouteOp) error {
	has := map[netip.Prefix]bool{}
	exists := func(p netip.Prefix) bool {
		if v, ok := has[p]; ok {
			return v
		}
		_, ok := rib.tables[srcAPI].get(p)
		return ok
	}
	for i, op := range ops {
		switch {
		case op.Kind == OpAdd && exists(op.Prefix):
			return &RouteError{Index: i, Field: "route.prefix", Value: op.Prefix.String(), Err: ErrRouteExists}
		case op.Kind == OpDelete && !exists(op.Prefix):
			return &RouteError{Index: i, Field: "prefix", Value: op.Prefix.String(), Err: ErrRouteNotFound}
		}
		has[op.Prefix] = op.Kind != OpDelete
	}
	return nil
}

// FIBEvent is a change of the FIB: a prefix installed (new next hops) or
// removed.
type FIBEvent struct {
	Prefix   netip.Prefix
	NextHops []netip.Addr // nil: removed
}

// watchBuffer bounds the events a watcher may fall behind by; a watcher
// further behind is cut off (its channel closed with ErrWatcherBehind).
const watchBuffer = 1 << 16

// ErrWatcherBehind ends a watch that could not keep up.
var ErrWatcherBehind = errors.New("watcher fell behind the FIB's changes")

// Watcher receives the FIB's changes. Current is the FIB when the watch
// began (if asked for); C brings every change after it.
type Watcher struct {
	Current []FIBEvent
	C       <-chan FIBEvent
	c       chan FIBEvent
	err     error // why C was closed, if the CE closed it
	done    chan struct{}
	snap    *Snapshot // the FIB when the watch began, until WatchFIB made Current of it
}

// Err says why C was closed: ErrWatcherBehind, or nil (Stop, or the CE
// stopped).
func (w *Watcher) Err() error {
	<-w.done
	return w.err
}

// WatchFIB starts a watch of the FIB; with current, Watcher.Current holds
// the whole FIB as it was when the watch began. Stop it with Unwatch.
func (c *CE) WatchFIB(ctx context.Context, current bool) (*Watcher, error) {
	ch := make(chan FIBEvent, watchBuffer)
	w := &Watcher{C: ch, c: ch, done: make(chan struct{})}
	ack := make(chan struct{})
	if err := c.toLoop(ctx, apiWatch{w: w, current: current, ack: ack}); err != nil {
		return nil, err
	}
	select {
	case <-ack:
	case <-ctx.Done():
		c.Unwatch(w)
		return nil, ctx.Err()
	}
	if w.snap != nil {
		// The loop only took the snapshot (copy on write, no route
		// copied); the copy is made here, off the loop.
		w.Current, w.snap = w.snap.events(), nil
	}
	return w, nil
}

// events lists the snapshot's routes with their next hops.
func (s *Snapshot) events() []FIBEvent {
	out := make([]FIBEvent, 0, s.Len())
	hops := map[[2]uint32][]netip.Addr{} // by family (0: IPv4) and nexthop or group ID; a group's key has bit 31
	const group = 1 << 31
	for i, p := range s.parts {
		fam := uint32(i) // one part per family
		for _, ch := range p.head {
			switch ch.Kind {
			case NexthopSet:
				hops[[2]uint32{fam, ch.ID}] = []netip.Addr{ch.NextHop}
			case GroupSet:
				members := make([]netip.Addr, len(ch.Members))
				for j, id := range ch.Members {
					members[j] = hops[[2]uint32{fam, id}][0]
				}
				hops[[2]uint32{fam, group | ch.ID}] = members
			}
		}
		for e := range p.all() {
			k := [2]uint32{fam, e.id}
			if e.ecmp {
				k[1] |= group
			}
			out = append(out, FIBEvent{Prefix: e.key.prefix(e.is4), NextHops: hops[k]})
		}
	}
	return out
}

// Unwatch stops a watch; its channel is closed.
func (c *CE) Unwatch(w *Watcher) {
	select {
	case c.api <- apiUnwatch{w: w}:
	case <-w.done:
	}
}

type apiWatch struct {
	w       *Watcher
	current bool
	ack     chan struct{}
}

type apiUnwatch struct{ w *Watcher }

// watchers is the loop's set of watches.
type watchers map[*Watcher]bool

func (ws watchers) add(m apiWatch, fib fibs) {
	if m.current {
		m.w.snap = fib.Snapshot() // WatchFIB makes Current of it
	}
	ws[m.w] = true
	close(m.ack)
}

func (ws watchers) remove(w *Watcher) {
	if ws[w] {
		delete(ws, w)
		close(w.c)
		close(w.done)
	}
}

// send queues an event without blocking; a full queue ends the watch.
func (w *Watcher) send(e FIBEvent) bool {
	select {
	case w.c <- e:
		return true
	default:
		w.err = ErrWatcherBehind
		close(w.c)
		close(w.done)
		return false
	}
}

// publish sends the FIB changes of one batch to every watcher.
func (ws watchers) publish(changes []Change, fib fibs) {
	if len(ws) == 0 {
		return
	}
	for _, ch := range changes {
		var e FIBEvent
		switch ch.Kind {
		case RouteSet:
			e = FIBEvent{Prefix: ch.Prefix, NextHops: fib.of(ch.Prefix).LookupAll(ch.Prefix)}
		case RouteDel:
			e = FIBEvent{Prefix: ch.Prefix}
		default:
			continue
		}
		for w := range ws {
			if !w.send(e) {
				delete(ws, w)
			}
		}
	}
}

func (ws watchers) closeAll() {
	for w := range ws {
		ws.remove(w)
	}
}

// Transaction applies ops like ApplyRoutes, and sends the FIB changes they
// make to every synced FE as one ForCES transaction (RFC 5810 two-phase
// commit): each FE stages them and answers the COMMIT; only when every FE
// committed is the transaction completed (TRCOMP) on all of them. If one
// refuses or does not answer, every FE aborts, the API's routes are put back
// as they were, and the error wraps ErrTxnAborted. With no FE associated the
// error wraps ErrNoFE. It returns the FIB changes and the FEs that committed.
func (c *CE) Transaction(ctx context.Context, ops []RouteOp) (fibChanges, fes int, err error) {
	if err := c.checkOps(ops); err != nil {
		return 0, 0, err
	}
	done := make(chan apiResult, 1)
	started := make(chan *txnRun, 1)
	if err := c.toLoop(ctx, apiOps{ops: ops, txn: true, done: done, started: started}); err != nil {
		return 0, 0, err
	}
	var run *txnRun
	select {
	case r := <-done: // refused before anything was applied
		return 0, 0, r.err
	case run = <-started:
	}
	// Phase one: every FE stages the changes and answers the COMMIT.
	var failure error
	timeout := time.NewTimer(commitTimeout)
	defer timeout.Stop()
	for _, t := range run.fes {
		select {
		case err := <-t.staged:
			if err != nil && failure == nil {
				failure = fmt.Errorf("FE %s: %w", t.fe, err)
			}
		case <-timeout.C:
			if failure == nil {
				failure = fmt.Errorf("FE %s: no answer to COMMIT within %s", t.fe, commitTimeout)
			}
		}
	}
	// Phase two: complete everywhere, or abort everywhere.
	for _, t := range run.fes {
		t.decide <- failure == nil
	}
	if failure == nil {
		return run.fibChanges, len(run.fes), nil
	}
	// Put the API's routes back (the loop applies this even if ctx ends).
	undone := make(chan apiResult, 1)
	c.api <- apiOps{ops: run.undo, done: undone}
	<-undone
	return 0, 0, fmt.Errorf("%w: %v", ErrTxnAborted, failure)
}

// txnRun is a transaction the loop applied and handed to the FEs.
type txnRun struct {
	fes        []*feTxn
	undo       []RouteOp // puts the API's routes back as before
	fibChanges int
}

// feTxn is one FE's part of a transaction.
type feTxn struct {
	fe      forces.ID
	changes []Change
	staged  chan error // the FE's answer to the COMMIT
	decide  chan bool  // true: complete (TRCOMP), false: abort
}

// startTxn runs on the loop: it applies a transaction's operations and hands
// the changes to the synced FEs; the others get them the usual way.
func (c *CE) startTxn(rib *RIB, m apiOps, fes map[forces.ID]*session, out []Change) []Change {
	var synced []*session
	for _, s := range fes {
		if s.synced.Load() {
			synced = append(synced, s)
		}
	}
	if len(synced) == 0 {
		m.done <- apiResult{err: fmt.Errorf("%w: a transaction needs an associated, synced FE", ErrNoFE)}
		return out
	}
	for _, s := range synced {
		if len(s.txns) == cap(s.txns) {
			m.done <- apiResult{err: fmt.Errorf("%w: FE %s has %d transactions waiting", ErrTxnBusy, s.fe, cap(s.txns))}
			return out
		}
	}
	// What to put back on abort: each prefix's API route as it is now.
	var undo []RouteOp
	seen := map[netip.Prefix]bool{}
	for _, op := range m.ops {
		if seen[op.Prefix] {
			continue
		}
		seen[op.Prefix] = true
		if v, ok := rib.tables[srcAPI].get(op.Prefix); ok {
			undo = append(undo, RouteOp{Kind: OpReplace, Prefix: op.Prefix, NextHops: slices.Clone(rib.sets[v.set()].hops), Distance: v.distance()})
		} else {
			undo = append(undo, RouteOp{Kind: OpDelete, Prefix: op.Prefix})
		}
	}
	out, err := c.applyAPI(rib, m.ops, out)
	if err != nil {
		// A batch that did not fit was undone, but the FIB's numbering may
		// have moved: every FE gets the changes the usual way.
		for _, s := range fes {
			s.enqueue(out)
		}
		m.done <- apiResult{err: err}
		return out
	}
	// Deleting what did not exist before is no operation to undo.
	undo = slices.DeleteFunc(undo, func(op RouteOp) bool {
		_, now := rib.tables[srcAPI].get(op.Prefix)
		return op.Kind == OpDelete && !now
	})
	run := &txnRun{undo: undo, fibChanges: len(out)}
	for _, s := range synced {
		t := &feTxn{fe: s.fe, changes: slices.Clone(out), staged: make(chan error, 1), decide: make(chan bool, 1)}
		s.txns <- t
		run.fes = append(run.fes, t)
	}
	for _, s := range fes {
		if !s.synced.Load() {
			s.enqueue(out)
		}
	}
	m.started <- run
	return out
}

// ErrTxnBusy refuses a transaction while an FE still has others waiting.
var ErrTxnBusy = errors.New("too many transactions in flight")
