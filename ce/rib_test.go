package ce

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func newTestRIB() (*RIB, fibs) {
	f := fibs{v4: NewFIB(), v6: NewFIB()}
	return NewRIB(f, Distances{}), f
}

// fibHops is what the FIB forwards p to, "" if nothing.
func fibHops(f fibs, p string) string {
	hops := f.of(netip.MustParsePrefix(p)).LookupAll(netip.MustParsePrefix(p))
	if hops == nil {
		return ""
	}
	return fmt.Sprint(hops)
}

func TestRIBResolvesThroughConnected(t *testing.T) {
	r, f := newTestRIB()
	fe := forces.FEID(1)
	r.SetBGP(netip.MustParsePrefix("198.51.100.0/24"), addrs("10.0.1.2"), false, nil)
	if got := fibHops(f, "198.51.100.0/24"); got != "" {
		t.Fatalf("a next hop on no known subnet was installed: %s", got)
	}
	// The FE reports its port: the route resolves and is installed.
	out := r.SetConnected(fe, prefixes("10.0.1.1/24", "2001:db8:1::1/64"), nil)
	if got := fibHops(f, "198.51.100.0/24"); got != "[10.0.1.2]" || len(out) == 0 {
		t.Fatalf("after the port appeared: %q (%d changes)", got, len(out))
	}
	// The port's own address is never a next hop.
	r.SetBGP(netip.MustParsePrefix("203.0.113.0/24"), addrs("10.0.1.1"), false, nil)
	if got := fibHops(f, "203.0.113.0/24"); got != "" {
		t.Fatalf("a route via the router's own address: %s", got)
	}
	// IPv6 the same way.
	r.SetBGP(netip.MustParsePrefix("2001:db8:100::/48"), addrs("2001:db8:1::2"), false, nil)
	if got := fibHops(f, "2001:db8:100::/48"); got != "[2001:db8:1::2]" {
		t.Fatalf("IPv6: %q", got)
	}
	// The port goes (down, or the FE leaves): its routes leave the FIB.
	r.SetConnected(fe, nil, nil)
	if got := fibHops(f, "198.51.100.0/24") + fibHops(f, "2001:db8:100::/48"); got != "" {
		t.Fatalf("routes stayed after their subnet went: %s", got)
	}
	if f.Len() != 0 {
		t.Fatalf("FIB holds %d routes", f.Len())
	}
}

func TestRIBRecursiveStatic(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	// A multihop BGP next hop, resolved through a static route, itself via
	// another static route, to a connected next hop.
	r.SetBGP(netip.MustParsePrefix("198.51.100.0/24"), addrs("192.0.2.50"), false, nil)
	if fibHops(f, "198.51.100.0/24") != "" {
		t.Fatal("installed before any route to its next hop")
	}
	r.SetStatic(netip.MustParsePrefix("172.16.0.0/12"), addrs("10.0.1.9"), 0, nil)
	r.SetStatic(netip.MustParsePrefix("192.0.2.0/24"), addrs("172.16.0.1"), 0, nil)
	if got := fibHops(f, "198.51.100.0/24"); got != "[10.0.1.9]" {
		t.Fatalf("recursive resolution: %q", got)
	}
	if got := fibHops(f, "192.0.2.0/24"); got != "[10.0.1.9]" {
		t.Fatalf("the static route itself: %q", got)
	}
	// A more specific static route takes over the next hop's resolution.
	r.SetStatic(netip.MustParsePrefix("192.0.2.48/28"), addrs("10.0.1.7", "10.0.1.8"), 0, nil)
	if got := fibHops(f, "198.51.100.0/24"); got != "[10.0.1.7 10.0.1.8]" {
		t.Fatalf("through an ECMP static route: %q", got)
	}
	r.DeleteStatic(netip.MustParsePrefix("192.0.2.48/28"), nil)
	r.DeleteStatic(netip.MustParsePrefix("172.16.0.0/12"), nil)
	if got := fibHops(f, "198.51.100.0/24") + fibHops(f, "192.0.2.0/24"); got != "" {
		t.Fatalf("the chain broke but routes stayed: %q", got)
	}
	// A loop (a static route whose next hop it covers itself) resolves to
	// nothing rather than forever.
	r.SetStatic(netip.MustParsePrefix("172.16.0.0/12"), addrs("172.16.5.5"), 0, nil)
	if got := fibHops(f, "172.16.0.0/12") + fibHops(f, "198.51.100.0/24"); got != "" {
		t.Fatalf("a loop resolved: %q", got)
	}
}

func TestRIBDistances(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	p := netip.MustParsePrefix("198.51.100.0/24")
	r.SetBGP(p, addrs("10.0.1.2"), false, nil)
	// static (1) beats eBGP (20)
	r.SetStatic(p, addrs("10.0.1.3"), 0, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.3]" {
		t.Fatalf("static vs eBGP: %q", got)
	}
	// a floating static (250) loses to eBGP, and to iBGP (200)
	r.SetStatic(p, addrs("10.0.1.3"), 250, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.2]" {
		t.Fatalf("floating static vs eBGP: %q", got)
	}
	r.SetBGP(p, addrs("10.0.1.4"), true, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.4]" {
		t.Fatalf("floating static vs iBGP: %q", got)
	}
	// BGP withdraws: the floating static takes over; then it goes too.
	r.DeleteBGP(p, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.3]" {
		t.Fatalf("after the withdrawal: %q", got)
	}
	r.DeleteStatic(p, nil)
	if got := fibHops(f, p.String()); got != "" {
		t.Fatalf("after both went: %q", got)
	}
	// Configured distances.
	r2 := NewRIB(fibs{v4: NewFIB(), v6: NewFIB()}, Distances{EBGP: 2, Static: 3})
	r2.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	r2.SetBGP(p, addrs("10.0.1.2"), false, nil)
	r2.SetStatic(p, addrs("10.0.1.3"), 0, nil)
	if got := fibHops(r2.fibs, p.String()); got != "[10.0.1.2]" {
		t.Fatalf("eBGP distance 2 vs static 3: %q", got)
	}
}

func TestRIBECMP(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	p := netip.MustParsePrefix("198.51.100.0/24")
	r.SetBGP(p, addrs("10.0.1.3", "10.0.1.2", "10.0.9.9"), false, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.2 10.0.1.3]" {
		t.Fatalf("ECMP with one unresolvable member: %q", got)
	}
	// The third member's subnet appears: three next hops.
	r.SetConnected(forces.FEID(2), prefixes("10.0.9.1/24"), nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.2 10.0.1.3 10.0.9.9]" {
		t.Fatalf("after the third subnet appeared: %q", got)
	}
	// Its FE goes: back to two.
	r.SetConnected(forces.FEID(2), nil, nil)
	if got := fibHops(f, p.String()); got != "[10.0.1.2 10.0.1.3]" {
		t.Fatalf("after the FE left: %q", got)
	}
}

// A change of a connected prefix re-installs exactly the routes whose next
// hops it changes.
func TestRIBReresolvesOnlyDependents(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	r.SetConnected(forces.FEID(2), prefixes("10.0.2.1/24"), nil)
	for i := range 2000 {
		nh := "10.0.1.2"
		if i%2 == 1 {
			nh = "10.0.2.2"
		}
		r.SetBGP(netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), addrs(nh), false, nil)
	}
	if f.Len() != 2000 {
		t.Fatalf("FIB holds %d routes", f.Len())
	}
	out := r.SetConnected(forces.FEID(2), nil, nil)
	dels := 0
	for _, c := range out {
		switch c.Kind {
		case RouteDel:
			dels++
			if c.Prefix.Addr().As4()[2]%2 != 1 {
				t.Fatalf("a route via the other next hop changed: %+v", c)
			}
		case RouteSet:
			t.Fatalf("a route was set: %+v", c)
		}
	}
	if dels != 1000 || f.Len() != 1000 {
		t.Fatalf("%d deletions, FIB holds %d; want 1000 and 1000", dels, f.Len())
	}
	// Nothing changes: no work.
	if out := r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil); len(out) != 0 {
		t.Fatalf("the same connected prefixes again made %d changes", len(out))
	}
	if out, _ := r.SetBGP(netip.MustParsePrefix("100.0.0.0/24"), addrs("10.0.1.2"), false, nil); len(out) != 0 {
		t.Fatalf("the same route again made %d changes", len(out))
	}
}

// Sets are shared and released: a full table costs a set per distinct next
// hop, and withdrawing everything frees them all.
func TestRIBSets(t *testing.T) {
	r, f := newTestRIB()
	r.SetConnected(forces.FEID(1), prefixes("10.0.1.1/24"), nil)
	var ps []netip.Prefix
	for i := range 5000 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
		ps = append(ps, p)
		r.SetBGP(p, addrs(fmt.Sprintf("10.0.1.%d", 2+i%3)), false, nil)
		if i%10 == 0 {
			r.SetBGP(p, addrs("10.0.1.2", "10.0.1.3"), false, nil)
		}
	}
	live := 0
	for _, s := range r.sets[1:] {
		if s.refs > 0 {
			live++
		}
	}
	if live != 4 {
		t.Fatalf("%d live sets, want 4 (three next hops and one pair)", live)
	}
	for _, p := range ps {
		r.DeleteBGP(p, nil)
	}
	if f.Len() != 0 || len(r.byAddr)+len(r.byKey) != 0 || slices.ContainsFunc(r.sets, func(s nhSet) bool { return s.refs != 0 }) {
		t.Fatalf("after withdrawing all: FIB %d, sets by address %d, by key %d", f.Len(), len(r.byAddr), len(r.byKey))
	}
}
