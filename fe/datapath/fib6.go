//go:build linux

package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
)

// MaxRoutes6 is the number of IPv6 routes the FIB holds (fib6 in xdp.c).
const MaxRoutes6 = 1_000_000

// prefix6 is a masked IPv6 prefix.
type prefix6 struct {
	addr [16]byte
	bits uint8
}

func (p prefix6) String() string {
	return netip.PrefixFrom(netip.AddrFrom16(p.addr), int(p.bits)).String()
}

func (p prefix6) key() xdpLpmKey6 {
	return xdpLpmKey6{Prefixlen: uint32(p.bits), Addr: p.addr}
}

// routePrefix checks p and returns it masked, as an IPv4 prefix (is6 false)
// or an IPv6 one (is6 true). IPv4-mapped IPv6 prefixes are rejected: they
// would be a second spelling of an IPv4 route that the IPv4 path never
// looks up.
func routePrefix(p netip.Prefix) (v4 prefix, v6 prefix6, is6 bool, err error) {
	switch a := p.Addr(); {
	case !p.IsValid():
		return prefix{}, prefix6{}, false, fmt.Errorf("prefix %s is not a valid IPv4 or IPv6 prefix: %w", p, ErrInvalid)
	case a.Is4():
		v4, err = toPrefix(p)
		return v4, prefix6{}, false, err
	case a.Is4In6():
		return prefix{}, prefix6{}, false, fmt.Errorf("prefix %s is IPv4-mapped IPv6, give the IPv4 prefix: %w", p, ErrInvalid)
	}
	m := p.Masked()
	return prefix{}, prefix6{addr: m.Addr().As16(), bits: uint8(m.Bits())}, true, nil
}

// fib6 is the IPv6 FIB: the kernel LPM trie fib6 of xdp.c and a copy of its
// contents, which makes batches all or nothing (the kernel applies a batch
// element by element) and answers RouteCount without a map walk.
//
// The trie is the IPv6 baseline: its lookup walks a binary trie whose depth
// grows with the table, which the IPv4 side replaced by DIR-24-8. A stride
// table keyed by the first 48 bits (nearly all IPv6 routes are /48 or
// shorter) is the planned replacement; the API above this type stays.
//
// fib6 is not safe for concurrent use; Datapath serialises the calls.
type fib6 struct {
	m      *ebpf.Map
	routes map[prefix6]uint32
	// max is the route limit checked before touching the kernel.
	max int
}

func newFIB6(m *ebpf.Map) *fib6 {
	return &fib6{m: m, routes: make(map[prefix6]uint32), max: MaxRoutes6}
}

// batchSize bounds the keys of one BPF_MAP_*_BATCH call.
const batchSize6 = 10_000

// set applies routes, longest prefixes first, so that no address passes
// through a shorter prefix of the batch that does not apply to it. It either
// applies all of them and returns a function that puts the previous routes
// back, or returns an error after putting them back itself. A prefix given
// twice ends with the last nexthop.
func (f *fib6) set(routes []prefix6, nexthops []uint32) (undo func() error, err error) {
	if len(routes) == 0 {
		return func() error { return nil }, nil
	}
	prev := f.snapshot(routes)
	added := 0
	for _, old := range prev {
		if !old.ok {
			added++
		}
	}
	if len(f.routes)+added > f.max {
		return nil, fmt.Errorf("%d IPv6 routes more than the %d present exceed %d: %w", added, len(f.routes), f.max, ErrFIBFull)
	}

	order := make([]int, len(routes))
	for i := range order {
		order[i] = i
	}
	// Stable: of a prefix given twice, the later one is written last.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(routes[b].bits, routes[a].bits) })
	keys := make([]xdpLpmKey6, 0, min(len(order), batchSize6))
	vals := make([]uint32, 0, min(len(order), batchSize6))
	for start := 0; start < len(order); start += batchSize6 {
		keys, vals = keys[:0], vals[:0]
		for _, i := range order[start:min(start+batchSize6, len(order))] {
			keys = append(keys, routes[i].key())
			vals = append(vals, nexthops[i])
		}
		if _, err := f.m.BatchUpdate(keys, vals, nil); err != nil {
			return nil, errors.Join(fmt.Errorf("IPv6 FIB update: %w", err), f.restore(prev))
		}
	}
	for i, p := range routes {
		f.routes[p] = nexthops[i]
	}
	return func() error { return f.restore(prev) }, nil
}

// oldRoute is the nexthop of a prefix before a change, ok false if it had
// no route.
type oldRoute struct {
	nh uint32
	ok bool
}

// snapshot returns the current route of every prefix of routes.
func (f *fib6) snapshot(routes []prefix6) map[prefix6]oldRoute {
	prev := make(map[prefix6]oldRoute, len(routes))
	for _, p := range routes {
		nh, ok := f.routes[p]
		prev[p] = oldRoute{nh, ok}
	}
	return prev
}

// restore makes the trie and f.routes hold prev again.
func (f *fib6) restore(prev map[prefix6]oldRoute) error {
	var errs []error
	for p, old := range prev {
		k := p.key()
		if old.ok {
			if err := f.m.Put(&k, old.nh); err != nil {
				errs = append(errs, fmt.Errorf("restore IPv6 route %s: %w", p, err))
				continue
			}
			f.routes[p] = old.nh
		} else {
			if err := f.m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("restore IPv6 route %s: %w", p, err))
				continue
			}
			delete(f.routes, p)
		}
	}
	return errors.Join(errs...)
}

// check returns an error wrapping ErrNotFound unless every prefix has a
// route.
func (f *fib6) check(prefixes []prefix6) error {
	for _, p := range prefixes {
		if _, ok := f.routes[p]; !ok {
			return fmt.Errorf("route %s: %w", p, ErrNotFound)
		}
	}
	return nil
}

// delete removes the routes for prefixes, shortest first, which must all
// exist (see check); duplicates are removed once. If the kernel fails, the
// routes removed so far are put back.
func (f *fib6) delete(prefixes []prefix6) error {
	if err := f.check(prefixes); err != nil {
		return err
	}
	uniq := make([]prefix6, 0, len(prefixes))
	seen := make(map[prefix6]struct{}, len(prefixes))
	for _, p := range prefixes {
		if _, ok := seen[p]; !ok {
			seen[p] = struct{}{}
			uniq = append(uniq, p)
		}
	}
	slices.SortStableFunc(uniq, func(a, b prefix6) int { return cmp.Compare(a.bits, b.bits) })
	prev := f.snapshot(uniq)
	for _, p := range uniq {
		k := p.key()
		if err := f.m.Delete(&k); err != nil {
			return errors.Join(fmt.Errorf("IPv6 FIB delete %s: %w", p, err), f.restore(prev))
		}
	}
	for _, p := range uniq {
		delete(f.routes, p)
	}
	return nil
}

func (f *fib6) count() int {
	return len(f.routes)
}
