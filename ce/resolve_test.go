package ce

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// stepsOf is the resolution work f made r do: next hops examined.
func stepsOf(r *RIB, f func()) uint64 {
	before := r.resolveSteps
	f()
	return r.resolveSteps - before
}

// unresolvedOf is r's unresolved route counts by reason, without zeros, and
// its unresolved static routes, as text.
func unresolvedOf(r *RIB) string {
	counts, static := r.unresolvedRoutes()
	var reasons []string
	for why, n := range counts {
		if n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s=%d", why, n))
		}
	}
	slices.Sort(reasons)
	return fmt.Sprint(reasons, static)
}

// The case: a static default via every uplink, whose uplinks' subnets
// go away, so each next hop resolves only through the default itself. With
// 16 next hops (the most a route may have) unbounded resolution examines
// 16^9 next hops per set; bounded, a few dozen.
func TestRIBResolveStaticDefaultLoop(t *testing.T) {
	for _, n := range []int{2, forces.MaxECMPMembers} {
		t.Run(fmt.Sprint(n, "_uplinks"), func(t *testing.T) {
			r, f := newTestRIB()
			fe := forces.FEID(1)
			lan := netip.MustParsePrefix("10.0.1.1/24")
			var uplinks []netip.Prefix
			var hops []netip.Addr
			for i := range n {
				uplinks = append(uplinks, netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, byte(i), 2}), 30))
				hops = append(hops, netip.AddrFrom4([4]byte{100, 64, byte(i), 1}))
			}
			r.SetConnected(fe, append([]netip.Prefix{lan}, uplinks...), nil)
			r.SetStatic(netip.MustParsePrefix("0.0.0.0/0"), hops, 0, nil)
			// iBGP routes via a loopback reached through the default, and a
			// LAN route that never depends on it.
			for i := range 100 {
				r.SetBGP(netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24), addrs("172.16.0.1"), true, nil)
			}
			r.SetBGP(netip.MustParsePrefix("192.0.2.0/24"), addrs("10.0.1.9"), false, nil)
			all := fmt.Sprint(hops)
			if got := fibHops(f, "0.0.0.0/0") + fibHops(f, "198.18.7.0/24"); got != all+all {
				t.Fatalf("with every uplink up: %q", got)
			}

			// One uplink goes: its next hop resolves through the default,
			// that is through the others.
			steps := stepsOf(r, func() { r.SetConnected(fe, append([]netip.Prefix{lan}, uplinks[1:]...), nil) })
			if rest := fmt.Sprint(hops[1:]); fibHops(f, "0.0.0.0/0") != rest || fibHops(f, "198.18.7.0/24") != rest {
				t.Fatalf("one uplink down: default %q, BGP %q; want %s", fibHops(f, "0.0.0.0/0"), fibHops(f, "198.18.7.0/24"), rest)
			}
			if limit := uint64(4 * (n + 2)); steps > limit {
				t.Fatalf("one uplink down: %d resolution steps, want at most %d", steps, limit)
			}

			// Every uplink goes: nothing but the LAN resolves, found with
			// little work, and reported as a loop.
			steps = stepsOf(r, func() { r.SetConnected(fe, []netip.Prefix{lan}, nil) })
			if limit := uint64(4 * (n + 2)); steps > limit {
				t.Fatalf("every uplink down: %d resolution steps, want at most %d", steps, limit)
			}
			if got := fibHops(f, "0.0.0.0/0") + fibHops(f, "198.18.7.0/24"); got != "" {
				t.Fatalf("every uplink down, routes stayed: %q", got)
			}
			if got := fibHops(f, "192.0.2.0/24"); got != "[10.0.1.9]" || f.Len() != 1 {
				t.Fatalf("the LAN route: %q; FIB holds %d routes", got, f.Len())
			}
			if got, want := unresolvedOf(r), "[loop=101] [{0.0.0.0/0 loop}]"; got != want {
				t.Fatalf("unresolved: %s, want %s", got, want)
			}

			// They come back: everything resolves again.
			r.SetConnected(fe, append([]netip.Prefix{lan}, uplinks...), nil)
			if got := fibHops(f, "0.0.0.0/0") + fibHops(f, "198.18.7.0/24"); got != all+all || f.Len() != 102 {
				t.Fatalf("uplinks back: %q, FIB holds %d routes", got, f.Len())
			}
			if got := unresolvedOf(r); got != "[] []" {
				t.Fatalf("unresolved after the uplinks came back: %s", got)
			}
		})
	}
}

// Two static routes via each other's prefix: neither resolves, found with
// little work; a connected subnet under one of them resolves both, one
// through the other.
func TestRIBResolveTwoRouteCycle(t *testing.T) {
	r, f := newTestRIB()
	fe := forces.FEID(1)
	a, b := netip.MustParsePrefix("10.10.0.0/16"), netip.MustParsePrefix("10.20.0.0/16")
	var viaB, viaA []netip.Addr
	for i := range forces.MaxECMPMembers {
		viaB = append(viaB, netip.AddrFrom4([4]byte{10, 20, 0, byte(i + 1)}))
		viaA = append(viaA, netip.AddrFrom4([4]byte{10, 10, 0, byte(i + 1)}))
	}
	r.SetConnected(fe, prefixes("10.0.1.1/24"), nil)
	r.SetBGP(netip.MustParsePrefix("198.51.100.0/24"), addrs("10.20.9.9"), false, nil)
	steps := stepsOf(r, func() {
		r.SetStatic(a, viaB, 0, nil)
		r.SetStatic(b, viaA, 0, nil)
	})
	if limit := uint64(20 * forces.MaxECMPMembers); steps > limit {
		t.Fatalf("setting the cycle: %d resolution steps, want at most %d", steps, limit)
	}
	if f.Len() != 0 {
		t.Fatalf("a cycle resolved: FIB holds %d routes", f.Len())
	}
	if got, want := unresolvedOf(r), "[loop=3] [{10.10.0.0/16 loop} {10.20.0.0/16 loop}]"; got != want {
		t.Fatalf("unresolved: %s, want %s", got, want)
	}

	// A's next hops' subnet appears: B resolves to them, and A through B
	// (back to its own next hops, as its longest match says).
	steps = stepsOf(r, func() { r.SetConnected(fe, prefixes("10.0.1.1/24", "10.10.0.254/24"), nil) })
	if limit := uint64(20 * forces.MaxECMPMembers); steps > limit {
		t.Fatalf("resolving the cycle: %d resolution steps, want at most %d", steps, limit)
	}
	want := fmt.Sprint(viaA)
	if got := fibHops(f, b.String()) + " " + fibHops(f, a.String()) + " " + fibHops(f, "198.51.100.0/24"); got != want+" "+want+" "+want {
		t.Fatalf("B, A and the BGP route via B: %q; want %s each", got, want)
	}
	if got := unresolvedOf(r); got != "[] []" {
		t.Fatalf("unresolved: %s", got)
	}
}

// A chain of static routes, each via the next one's prefix, resolves
// through at most maxResolveDepth of them; a longer one is reported as too
// deep. Each link has many next hops into the next: unbounded, the work
// multiplies at every link.
func TestRIBResolveDeepChain(t *testing.T) {
	r, f := newTestRIB()
	fe := forces.FEID(1)
	r.SetConnected(fe, prefixes("10.0.1.1/24"), nil)
	link := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i), 0, 0}), 16)
	}
	into := func(i int) []netip.Addr { // next hops inside link i
		var hops []netip.Addr
		for j := range forces.MaxECMPMembers {
			hops = append(hops, netip.AddrFrom4([4]byte{10, byte(100 + i), 0, byte(j + 1)}))
		}
		return hops
	}
	// A BGP route via link 1; links 1 to n, the last via the LAN.
	bgp := netip.MustParsePrefix("198.51.100.0/24")
	r.SetBGP(bgp, addrs("10.101.7.7"), false, nil)
	chain := func(n int) uint64 {
		return stepsOf(r, func() {
			for i := n; i >= 1; i-- {
				hops := into(i + 1)
				if i == n {
					hops = addrs("10.0.1.9")
				}
				r.SetStatic(link(i), hops, 0, nil)
			}
		})
	}

	// maxResolveDepth links: the BGP route resolves through all of them.
	steps := chain(maxResolveDepth)
	if got := fibHops(f, bgp.String()) + fibHops(f, link(1).String()); got != "[10.0.1.9][10.0.1.9]" {
		t.Fatalf("%d links: BGP route and link 1: %q", maxResolveDepth, got)
	}
	// Setting each of n static routes re-resolves every set: the work grows
	// with n², not 16^n.
	limit := func(n int) uint64 { return uint64(2 * (n + 1) * (n + 1) * forces.MaxECMPMembers) }
	if steps > limit(maxResolveDepth) {
		t.Fatalf("%d links: %d resolution steps, want at most %d", maxResolveDepth, steps, limit(maxResolveDepth))
	}

	// One more: too deep for the BGP route (9 static routes), not for link
	// 1 itself (8 after it).
	for p := range r.Statics() {
		r.DeleteStatic(p, nil)
	}
	if steps := chain(maxResolveDepth + 1); steps > limit(maxResolveDepth+1) {
		t.Fatalf("%d links: %d resolution steps, want at most %d", maxResolveDepth+1, steps, limit(maxResolveDepth+1))
	}
	if got := fibHops(f, bgp.String()) + "," + fibHops(f, link(1).String()); got != ",[10.0.1.9]" {
		t.Fatalf("%d links: BGP route and link 1: %q", maxResolveDepth+1, got)
	}
	if got, want := unresolvedOf(r), "[depth=1] []"; got != want {
		t.Fatalf("unresolved: %s, want %s", got, want)
	}
	// And one more: link 1 too.
	r.SetStatic(link(maxResolveDepth+1), into(maxResolveDepth+2), 0, nil)
	r.SetStatic(link(maxResolveDepth+2), addrs("10.0.1.9"), 0, nil)
	if got, want := unresolvedOf(r), fmt.Sprintf("[depth=2] [{%s depth}]", link(1)); got != want {
		t.Fatalf("unresolved: %s, want %s", got, want)
	}
	if got := fibHops(f, link(2).String()); got != "[10.0.1.9]" {
		t.Fatalf("link 2: %q", got)
	}
}

// A diamond (two routes into the same one) that leads nowhere is no loop.
func TestRIBResolveDiamondNoRoute(t *testing.T) {
	r, _ := newTestRIB()
	r.SetStatic(netip.MustParsePrefix("10.1.0.0/16"), addrs("10.2.0.1", "10.3.0.1"), 0, nil)
	r.SetStatic(netip.MustParsePrefix("10.2.0.0/16"), addrs("10.4.0.1"), 0, nil)
	r.SetStatic(netip.MustParsePrefix("10.3.0.0/16"), addrs("10.4.0.2"), 0, nil)
	r.SetStatic(netip.MustParsePrefix("10.4.0.0/16"), addrs("192.0.2.1"), 0, nil)
	want := "[no_route=4] [{10.1.0.0/16 no_route} {10.2.0.0/16 no_route} {10.3.0.0/16 no_route} {10.4.0.0/16 no_route}]"
	if got := unresolvedOf(r); got != want {
		t.Fatalf("unresolved: %s, want %s", got, want)
	}
}

// A resolution that would examine more than maxResolveSteps next hops gives
// up: what resolves through a static route fanning out 16 ways three times
// (4096 routes at the bottom) does not resolve. The route itself resolves
// through the 16 below it, each within the bound.
func TestRIBResolveWorkBound(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("192.0.2.1/24"), nil)
	static := func(p netip.Prefix, hops []netip.Addr) {
		if _, ok := r.set(srcStatic, p, hops, DefaultDistanceStatic, nil); !ok {
			t.Fatalf("static %s refused", p)
		}
	}
	const fan = forces.MaxECMPMembers
	var top []netip.Addr
	for i := range fan {
		var mid []netip.Addr
		for j := range fan {
			var low []netip.Addr
			for k := range fan {
				a := netip.AddrFrom4([4]byte{11, byte(i), byte(j + 1), byte(k + 1)})
				static(netip.PrefixFrom(a, 32), addrs("198.51.100.1")) // no route
				low = append(low, a)
			}
			static(netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(i), byte(j + 1), 0}), 24), low)
			mid = append(mid, netip.AddrFrom4([4]byte{11, byte(i), byte(j + 1), 200}))
		}
		static(netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(i), 0, 0}), 16), mid)
		top = append(top, netip.AddrFrom4([4]byte{11, byte(i), 200, 1}))
	}
	root := netip.MustParsePrefix("10.0.0.0/8")
	static(root, top)
	r.SetBGP(netip.MustParsePrefix("203.0.113.0/24"), addrs("10.1.1.1"), false, nil)
	steps := stepsOf(r, func() { r.reresolve(nil) })
	if limit := uint64(16 * maxResolveSteps); steps > limit {
		t.Fatalf("%d resolution steps, want at most %d", steps, limit)
	}
	counts, _ := r.unresolvedRoutes()
	if counts["work"] != 1 || counts["no_route"] != 1+fan+fan*fan+fan*fan*fan || f.Len() != 0 {
		t.Fatalf("unresolved %v, FIB holds %d routes; want the BGP route for work, the static routes for no route", counts, f.Len())
	}
	// A connected next hop at the bottom: every static route resolves, the
	// BGP route still not.
	r.SetConnected(forces.FEID(1), prefixes("192.0.2.1/24", "198.51.100.2/24"), nil)
	if got := fibHops(f, "11.3.0.0/16") + fibHops(f, root.String()); got != "[198.51.100.1][198.51.100.1]" {
		t.Fatalf("a middle route and the root: %q", got)
	}
	if counts, _ := r.unresolvedRoutes(); counts["work"] != 1 || counts["no_route"] != 0 || fibHops(f, "203.0.113.0/24") != "" {
		t.Fatalf("unresolved %v; want the BGP route for work", counts)
	}
}

// refResolve is resolution as it was, unbounded but for the depth: every
// path through the static routes, to maxResolveDepth of them. On small
// graphs it is the definition bounded resolution must agree with.
func refResolve(r *RIB, h netip.Addr, out []netip.Addr, depth int) []netip.Addr {
	if !h.IsValid() || depth > maxResolveDepth || r.local[h] > 0 {
		return out
	}
	if r.coveredBy(h, func(p netip.Prefix) bool { return r.connected[p] > 0 }) {
		return append(out, h)
	}
	var via netip.Prefix
	if !r.coveredBy(h, func(p netip.Prefix) bool {
		_, ok := r.tables[srcStatic].get(p)
		via = p
		return ok
	}) {
		return out
	}
	v, _ := r.tables[srcStatic].get(via)
	for _, n := range r.sets[v.set()].hops {
		out = refResolve(r, n, out, depth+1)
	}
	return out
}

// On random static routes (loops, chains, shared routes, defaults) bounded
// resolution gives what resolving every path does.
func TestRIBResolveMatchesEveryPath(t *testing.T) {
	rnd := rand.New(rand.NewPCG(22, 1))
	addr := func() netip.Addr { // in 10.0-7.0-3.0-3, with a few elsewhere
		if rnd.IntN(10) == 0 {
			return netip.AddrFrom4([4]byte{192, 0, 2, byte(rnd.IntN(4))})
		}
		return netip.AddrFrom4([4]byte{10, byte(rnd.IntN(8)), byte(rnd.IntN(4)), byte(rnd.IntN(4))})
	}
	pfx := func() netip.Prefix {
		bits := []int{0, 8, 16, 24, 32}[rnd.IntN(5)]
		return netip.PrefixFrom(addr(), bits).Masked()
	}
	seen := map[unresolved]int{}
	for round := range 300 {
		r, _ := newTestRIB()
		var connected []netip.Prefix
		for range rnd.IntN(4) {
			connected = append(connected, netip.PrefixFrom(addr(), 24+rnd.IntN(9)))
		}
		r.SetConnected(forces.FEID(1), connected, nil)
		for range 1 + rnd.IntN(12) {
			hops := make([]netip.Addr, 1+rnd.IntN(2))
			for i := range hops {
				hops[i] = addr()
			}
			r.SetStatic(pfx(), hops, 0, nil)
		}
		for i := range 20 {
			r.SetBGP(netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24), []netip.Addr{addr(), addr()}, false, nil)
		}
		for id := 1; id < len(r.sets); id++ {
			s := &r.sets[id]
			if s.refs == 0 {
				continue
			}
			var want []netip.Addr
			for _, h := range s.hops {
				want = refResolve(r, h, want, 0)
			}
			slices.SortFunc(want, netip.Addr.Compare)
			want = slices.Compact(want)
			if len(want) == 0 {
				want = nil
			}
			seen[s.why]++
			if !slices.Equal(s.resolved, want) || (s.resolved == nil) != (s.why != resolvedOK) {
				t.Fatalf("round %d: set %v resolves to %v (%s), every path to %v; connected %v, statics %v",
					round, s.hops, s.resolved, s.why, want, connected, r.Statics())
			}
		}
	}
	t.Logf("sets by outcome: %v", seen)
}
