package fe

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/prefix"
)

// KernelRoutes says which of the CE's routes the FE copies into the kernel's
// FIB, the slow path for what XDP hands the kernel: packets whose TTL
// expires (the kernel answers ICMP Time Exceeded only for destinations it
// has a route to) and packets to unresolved neighbours.
const (
	KernelRoutesConnected = "connected" // only the ports' own subnets
	KernelRoutesDefault   = "default"   // plus the CE's default route, if it has one (the default)
	KernelRoutesAll       = "all"       // every CE route: for tables of up to some 100k routes
)

// kernelProto marks the routes the FE puts in the kernel, so it can find and
// remove its own (and those a crashed FE left) without touching others'.
const kernelProto = netlink.RouteProtocol(201)

// kernelFIB mirrors CE routes into the kernel's main table, both families.
// A netlink call takes some 13 µs, so a full table would hold up the FE's
// applier (and the heartbeats it answers) for seconds: sync only records
// what the kernel should have, and a goroutine of k's own writes it.
type kernelFIB struct {
	mode string
	h    routeWriter

	mu       sync.Mutex
	written  sync.Cond // signalled when the writer has finished a batch
	v4       kernelTable[prefix.V4, uint32]
	v6       kernelTable[netip.Prefix, netip.Addr]
	recorded uint64 // changes recorded, ever
	done     uint64 // the value of recorded when the writer took its last finished batch
	errors   uint64
	lastErr  string
	closed   bool

	wake    chan struct{} // a token: something is pending
	stop    chan struct{}
	started chan struct{} // closed once tid is set
	stopped chan struct{}
	tid     int // the writer's thread
}

// routeWriter is the part of a netlink handle the kernel copy uses;
// *netlink.Handle is the real one, tests use a fake that renders what it
// was asked as ip route text.
type routeWriter interface {
	RouteReplace(r *netlink.Route) error
	RouteDel(r *netlink.Route) error
	RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error)
	Close()
}

// kernelTable is one family's part of a kernelFIB, guarded by its mu. A
// prefix's zero gateway means no route.
type kernelTable[P, G comparable] struct {
	installed map[P]G // what the kernel has; only the writer changes it
	pending   map[P]G // what it should have instead, not yet taken by the writer
	inflight  map[P]G // the batch the writer is writing
	prefix    func(P) netip.Prefix
	addr      func(G) netip.Addr
}

// newKernelFIB returns a copy in mode of the CE's routes in the kernel of
// the calling thread's network namespace. It talks to the kernel over one
// netlink socket of its own: netlink's package functions open one per call,
// which took 30 µs a route here against 13. The socket, opened here, keeps
// the writer goroutine in this namespace whatever its thread.
func newKernelFIB(mode string) *kernelFIB {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		h = &netlink.Handle{} // a socket per call, as the package functions
	}
	return newKernelFIBOn(mode, h)
}

// newKernelFIBOn is newKernelFIB writing through h.
func newKernelFIBOn(mode string, h routeWriter) *kernelFIB {
	k := &kernelFIB{
		mode: mode, h: h,
		v4: kernelTable[prefix.V4, uint32]{installed: map[prefix.V4]uint32{}, prefix: prefix.V4.Prefix, addr: addr4},
		v6: kernelTable[netip.Prefix, netip.Addr]{installed: map[netip.Prefix]netip.Addr{},
			prefix: func(p netip.Prefix) netip.Prefix { return p }, addr: func(a netip.Addr) netip.Addr { return a }},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), started: make(chan struct{}), stopped: make(chan struct{}),
	}
	k.written.L = &k.mu
	go k.run()
	return k
}

// close writes what is pending, stops the writer and releases k's netlink
// socket (the routes stay: removeAll). Later syncs are ignored.
func (k *kernelFIB) close() {
	k.mu.Lock()
	closed := k.closed
	k.closed = true
	k.mu.Unlock()
	if closed {
		return
	}
	k.flush()
	close(k.stop)
	<-k.stopped
	k.h.Close()
}

func (k *kernelFIB) wants(p netip.Prefix) bool {
	switch k.mode {
	case KernelRoutesAll:
		return true
	case KernelRoutesDefault:
		return p.Bits() == 0
	}
	return false
}

// kernelStats is what the FE reports of its kernel copy.
type kernelStats struct {
	routes  int // in the kernel
	pending int // prefixes still to be written
	errors  uint64
	lastErr string
}

// stats returns a snapshot of k's counters; safe from any goroutine.
func (k *kernelFIB) stats() kernelStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return kernelStats{
		routes:  len(k.v4.installed) + len(k.v6.installed),
		pending: len(k.v4.pending) + len(k.v4.inflight) + len(k.v6.pending) + len(k.v6.inflight),
		errors:  k.errors, lastErr: k.lastErr,
	}
}

// sweep removes routes an earlier FE left in the kernel. It runs before any
// sync, so it needs no writer.
func (k *kernelFIB) sweep() error {
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		routes, err := k.h.RouteListFiltered(family, &netlink.Route{Protocol: kernelProto}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return fmt.Errorf("list kernel routes: %w", err)
		}
		for i := range routes {
			_ = k.h.RouteDel(&routes[i])
		}
	}
	return nil
}

// sync makes the kernel's copy of IPv4 prefix p match gw (0: no route), soon:
// it does not wait for the kernel (flush does).
func (k *kernelFIB) sync(p prefix.V4, gw uint32) {
	if k.wants(p.Prefix()) {
		k.record(func() bool { return k.v4.record(p, gw) })
	}
}

// sync6 makes the kernel's copy of IPv6 prefix p match gw (invalid: no
// route), soon, as sync.
func (k *kernelFIB) sync6(p netip.Prefix, gw netip.Addr) {
	if k.wants(p) {
		k.record(func() bool { return k.v6.record(p, gw) })
	}
}

// record runs rec under k's lock and, if it recorded a change, wakes the
// writer.
func (k *kernelFIB) record(rec func() bool) {
	k.mu.Lock()
	changed := !k.closed && rec()
	if changed {
		k.recorded++
	}
	k.mu.Unlock()
	if changed {
		k.poke()
	}
}

func (k *kernelFIB) poke() {
	select {
	case k.wake <- struct{}{}:
	default: // a token is there already
	}
}

// record notes that p should have gw, unless that is what the kernel has
// or will have; a later change of p replaces an earlier one not yet taken,
// so a flapping route costs the writer one call at most.
func (t *kernelTable[P, G]) record(p P, gw G) bool {
	if t.desired(p) == gw {
		return false
	}
	if t.pending == nil {
		t.pending = map[P]G{}
	}
	t.pending[p] = gw
	return true
}

// desired is what the kernel will have for p once the writer is done.
func (t *kernelTable[P, G]) desired(p P) G {
	if gw, ok := t.pending[p]; ok {
		return gw
	}
	if gw, ok := t.inflight[p]; ok {
		return gw
	}
	return t.installed[p]
}

// flush returns once what was recorded before the call is in the kernel (or
// failed, and was counted).
func (k *kernelFIB) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for upTo := k.recorded; k.done < upTo; {
		k.written.Wait()
	}
}

// writerNice is the scheduling priority of the writer's thread: the kernel
// does the work of a route change in the thread that asks for it (~13 µs of
// CPU a route), and a full table's copy must not take the cores from the
// datapath's programming or from the CE beside it.
const writerNice = 19

// run is the writer: it takes all that is pending at once and writes it,
// without k's lock, until close. It runs on a thread of its own at
// writerNice, which ends with it.
func (k *kernelFIB) run() {
	defer close(k.stopped)
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	k.tid = unix.Gettid()
	_ = unix.Setpriority(unix.PRIO_PROCESS, k.tid, writerNice) // lowering one's own priority needs no privilege
	close(k.started)
	for {
		select {
		case <-k.wake:
		case <-k.stop:
			return
		}
		k.mu.Lock()
		upTo := k.recorded
		b4, b6 := k.v4.take(), k.v6.take()
		k.mu.Unlock()
		// Deletions first: they can only make room.
		k.v4.write(k, b4, true)
		k.v6.write(k, b6, true)
		k.v4.write(k, b4, false)
		k.v6.write(k, b6, false)
		k.mu.Lock()
		k.v4.inflight, k.v6.inflight = nil, nil
		k.done = upTo
		k.written.Broadcast()
		k.mu.Unlock()
	}
}

// take moves what is pending in flight and returns it.
func (t *kernelTable[P, G]) take() map[P]G {
	t.inflight, t.pending = t.pending, nil
	return t.inflight
}

// write puts the batch's deletions (dels) or its routes in the kernel,
// skipping what the kernel has already.
func (t *kernelTable[P, G]) write(k *kernelFIB, batch map[P]G, dels bool) {
	var none G
	for p, gw := range batch {
		if (gw == none) != dels {
			continue
		}
		have, had := t.installed[p] // unlocked: only this goroutine changes it
		if had && have == gw || !had && gw == none {
			continue
		}
		pfx := t.prefix(p)
		var err error
		if gw == none {
			err = k.del(pfx)
		} else {
			err = k.replace(pfx, t.addr(gw))
		}
		k.mu.Lock()
		switch {
		case gw == none:
			delete(t.installed, p)
		case err == nil:
			t.installed[p] = gw
		}
		if err != nil {
			k.fail(pfx, t.addr(gw), err)
		}
		k.mu.Unlock()
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (k *kernelFIB) replace(p netip.Prefix, gw netip.Addr) error {
	return k.h.RouteReplace(&netlink.Route{Dst: ipNet(p), Gw: gw.AsSlice(), Protocol: kernelProto})
}

func (k *kernelFIB) del(p netip.Prefix) error {
	return k.h.RouteDel(&netlink.Route{Dst: ipNet(p), Protocol: kernelProto})
}

// fail counts a route the kernel refused; k.mu held.
func (k *kernelFIB) fail(p netip.Prefix, gw netip.Addr, err error) {
	k.errors++
	k.lastErr = fmt.Sprintf("%s via %s: %v", p, gw, err)
}

// removeAll takes the FE's routes out of the kernel, including those still
// pending, and returns once they are out: the FE stops right after.
func (k *kernelFIB) removeAll() {
	k.record(func() bool {
		r4, r6 := k.v4.removeAll(), k.v6.removeAll()
		return r4 || r6
	})
	k.flush()
}

// removeAll records the removal of every prefix the kernel has, is being
// given or is to be given, and says whether there was any.
func (t *kernelTable[P, G]) removeAll() bool {
	var none G
	changed := false
	for _, m := range []map[P]G{t.installed, t.inflight, t.pending} {
		for p := range m {
			changed = t.record(p, none) || changed
		}
	}
	return changed
}
