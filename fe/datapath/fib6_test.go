//go:build linux

package datapath

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"testing"
)

// u128 is an IPv6 address as two halves, for address arithmetic in tests.
type u128 struct{ hi, lo uint64 }

func u128Of(a [16]byte) u128 {
	return u128{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

func (x u128) bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return b
}

// mask128 returns the netmask of a /bits.
func mask128(bits int) u128 {
	switch {
	case bits == 0:
		return u128{}
	case bits <= 64:
		return u128{^uint64(0) << (64 - bits), 0}
	}
	return u128{^uint64(0), ^uint64(0) << (128 - bits)}
}

func (x u128) and(m u128) u128 { return u128{x.hi & m.hi, x.lo & m.lo} }
func (x u128) or(m u128) u128  { return u128{x.hi | m.hi, x.lo | m.lo} }
func (x u128) not() u128       { return u128{^x.hi, ^x.lo} }

func (x u128) add(d int64) u128 {
	lo := x.lo + uint64(d)
	hi := x.hi
	switch {
	case d > 0 && lo < x.lo:
		hi++
	case d < 0 && lo > x.lo:
		hi--
	}
	return u128{hi, lo}
}

// refLPM6 is the obviously correct IPv6 reference: a map per prefix length,
// searched from /128 down.
type refLPM6 struct {
	m [129]map[[16]byte]uint32
}

func newRefLPM6() *refLPM6 {
	r := &refLPM6{}
	for i := range r.m {
		r.m[i] = map[[16]byte]uint32{}
	}
	return r
}

func (r *refLPM6) lookup(a [16]byte) (uint32, bool) {
	x := u128Of(a)
	for bits := 128; bits >= 0; bits-- {
		if nh, ok := r.m[bits][x.and(mask128(bits)).bytes()]; ok {
			return nh, true
		}
	}
	return 0, false
}

func (r *refLPM6) prefixes() []prefix6 {
	var ps []prefix6
	for bits, m := range r.m {
		for a := range m {
			ps = append(ps, prefix6{addr: a, bits: uint8(bits)})
		}
	}
	return ps
}

// routeGen6 draws nested IPv6 prefixes: mostly /29 to /48 inside a few
// hot /24s, with some longer ones (/49 to /128) and a few short ones down to
// ::/0 covering them.
type routeGen6 struct {
	rng *rand.Rand
	hot []u128
}

func newRouteGen6(seed uint64) *routeGen6 {
	g := &routeGen6{rng: rand.New(rand.NewPCG(seed, 6))}
	for range 4 {
		g.hot = append(g.hot, u128{0x2000_0000_0000_0000 | g.rng.Uint64()&0x1fff_ff00_0000_0000, 0})
	}
	return g
}

func (g *routeGen6) addr() u128 {
	a := u128{g.rng.Uint64(), g.rng.Uint64()}
	if g.rng.IntN(8) != 0 {
		h := g.hot[g.rng.IntN(len(g.hot))]
		a = h.or(a.and(mask128(24).not()))
		// Keep many long prefixes in a few /48s so that they nest.
		if g.rng.IntN(2) == 0 {
			a.hi = a.hi&^0xffff_ffff_0000 | uint64(g.rng.IntN(4))<<16
		}
	}
	return a
}

func (g *routeGen6) prefix() prefix6 {
	var bits int
	switch r := g.rng.IntN(100); {
	case r < 3:
		bits = g.rng.IntN(25) // /0 .. /24
	case r < 15:
		bits = 25 + g.rng.IntN(8)
	case r < 70:
		bits = 33 + g.rng.IntN(16) // /33 .. /48
	case r < 90:
		bits = 49 + g.rng.IntN(16)
	default:
		bits = 65 + g.rng.IntN(64) // up to /128
	}
	return prefix6{addr: g.addr().and(mask128(bits)).bytes(), bits: uint8(bits)}
}

// addrsToCheck returns every prefix's first and last address and the ones
// just outside, plus n random addresses.
func (g *routeGen6) addrsToCheck(ps []prefix6, n int) [][16]byte {
	out := make([][16]byte, 0, 4*len(ps)+n)
	for _, p := range ps {
		first := u128Of(p.addr)
		last := first.or(mask128(int(p.bits)).not())
		out = append(out, first.bytes(), last.bytes(), first.add(-1).bytes(), last.add(1).bytes())
	}
	for range n {
		out = append(out, g.addr().bytes())
	}
	return out
}

// TestFIB6Reference changes the IPv6 FIB in random batches through the
// Datapath API and compares the program's choice (by running it on frames)
// with the reference at every prefix boundary and random addresses.
func TestFIB6Reference(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 16)
	seed := uint64(os.Getpid())
	t.Logf("seed %d", seed)
	g := newRouteGen6(seed)
	ref := newRefLPM6()
	const rounds = 6
	for round := range rounds {
		// Add (and replace) a batch.
		batch := make([]Route, 300)
		for i := range batch {
			p := g.prefix()
			nh := uint32(g.rng.IntN(16))
			batch[i] = Route{Prefix: netip.PrefixFrom(netip.AddrFrom16(p.addr), int(p.bits)), Nexthop: nh}
			ref.m[p.bits][p.addr] = nh
		}
		if err := d.SetRoutes(batch); err != nil {
			t.Fatalf("round %d: set: %v", round, err)
		}
		checkFIB6(t, fmt.Sprintf("round %d after set", round), d, ref, g)

		// Delete a random third.
		var del []netip.Prefix
		for _, p := range ref.prefixes() {
			if g.rng.IntN(3) == 0 {
				del = append(del, netip.PrefixFrom(netip.AddrFrom16(p.addr), int(p.bits)))
				delete(ref.m[p.bits], p.addr)
			}
		}
		if err := d.DeleteRoutes(del); err != nil {
			t.Fatalf("round %d: delete: %v", round, err)
		}
		checkFIB6(t, fmt.Sprintf("round %d after delete", round), d, ref, g)
	}
}

func checkFIB6(t *testing.T, what string, d *Datapath, ref *refLPM6, g *routeGen6) {
	t.Helper()
	ps := ref.prefixes()
	if n, err := d.RouteCount(); err != nil || n != len(ps) {
		t.Fatalf("%s: RouteCount %d, %v; want %d", what, n, err, len(ps))
	}
	bad := 0
	addrs := g.addrsToCheck(ps, 2000)
	for _, a := range addrs {
		addr := netip.AddrFrom16(a)
		if addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsUnspecified() || addr.IsLoopback() {
			continue // never forwarded, whatever the routes
		}
		gotNH, gotOK := runLookupAddr(t, d, addr)
		wantNH, wantOK := ref.lookup(a)
		if gotOK != wantOK || gotNH != wantNH {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s -> nexthop %d (found %v), want %d (found %v)", what, addr, gotNH, gotOK, wantNH, wantOK)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d addresses wrong", what, bad, len(addrs))
	}
}

// --- benchmark ---------------------------------------------------------

// benchRoutes6 returns n distinct IPv6 routes (seeded) shaped like today's
// Internet table, nearly all /48 and shorter: 45% /48, 10% /32, 38% /33 to
// /47, 5% /19 to /31, 2% /56 or /64, all inside 2000::/3, over nexthops
// 1..16.
func benchRoutes6(n int, seed uint64) []Route {
	rng := rand.New(rand.NewPCG(seed, 48))
	seen := make(map[netip.Prefix]bool, n)
	rs := make([]Route, 0, n)
	for len(rs) < n {
		var bits int
		switch r := rng.IntN(100); {
		case r < 45:
			bits = 48
		case r < 55:
			bits = 32
		case r < 93:
			bits = 33 + rng.IntN(15)
		case r < 98:
			bits = 19 + rng.IntN(13)
		case r < 99:
			bits = 56
		default:
			bits = 64
		}
		a := u128{0x2000_0000_0000_0000 | rng.Uint64()&0x1fff_ffff_ffff_ffff, rng.Uint64()}
		p := netip.PrefixFrom(netip.AddrFrom16(a.and(mask128(bits)).bytes()), bits)
		if seen[p] {
			continue
		}
		seen[p] = true
		rs = append(rs, Route{Prefix: p, Nexthop: 1 + uint32(len(rs)%16)})
	}
	return rs
}

// newLookupBench6 loads a datapath for IPv6 lookup benchmarks: n
// benchRoutes6 routes, nexthops 1..16 that forward via lo to fe80::1, and
// bench_dsts6 filled with random addresses inside the routes.
func newLookupBench6(tb testing.TB, n int) *lookupBench {
	d := loadForTest(tb, loadOptions{benchIgnoreTTL: true, benchRotate: true})
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.addTxPort(lo.Index); err != nil {
		tb.Fatal(err)
	}
	gw := netip.MustParseAddr("fe80::1")
	if err := d.SetNeighbor(lo.Index, gw, net.HardwareAddr{2, 0, 0, 0, 1, 2}); err != nil {
		tb.Fatal(err)
	}
	for id := uint32(1); id <= 16; id++ {
		if err := d.SetNexthop(id, Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 1, byte(id)}}); err != nil {
			tb.Fatal(err)
		}
	}
	routes := benchRoutes6(n, 1)
	if err := d.SetRoutes(routes); err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 99))
	dsts := make([][16]byte, 65536)
	for i := range dsts {
		p := routes[rng.IntN(len(routes))].Prefix
		a := u128Of(p.Addr().As16())
		host := u128{rng.Uint64(), rng.Uint64()}.and(mask128(p.Bits()).not())
		dsts[i] = a.or(host).bytes()
	}
	if err := d.objs.BenchDsts6.Set(dsts); err != nil {
		tb.Fatalf("set bench_dsts6: %v", err)
	}
	frame := udp6Frame("2001:db8::2", 64)
	return &lookupBench{d: d, frame: frame}
}

// BenchmarkLookup6 reports ns per packet (kernel-timed, BPF_PROG_TEST_RUN)
// of IPv6 forwarding with every run sent to another of 65,536 random
// destinations inside the installed routes; the IPv6 FIB is the kernel LPM
// trie (the IPv6 baseline).
func BenchmarkLookup6(b *testing.B) {
	needRoot(b)
	for _, n := range []int{1000, 100_000} {
		b.Run(SizeLabel(n), func(b *testing.B) {
			lb := newLookupBench6(b, n)
			var total float64
			runs := 0
			for b.Loop() {
				ns, err := lb.nsPerPacket(lb.d.Program())
				if err != nil {
					b.Fatal(err)
				}
				total += ns
				runs++
			}
			b.ReportMetric(total/float64(runs), "ns/op")
			b.ReportMetric(1e3*float64(runs)/total, "Mpps")
		})
	}
}
