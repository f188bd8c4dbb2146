//go:build linux

package fibbench

import (
	"math/rand/v2"
	"net/netip"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/internal/prefix"
	"github.com/splitplane/splitplane/internal/routegen"
)

// Full6Routes is the size of today's full IPv6 table, the default of
// Routes6Full.
const Full6Routes = 220_000

// rirBlocks6 are the blocks the IPv6 table clusters in, with the share of
// its allocations each holds (in percent).
var rirBlocks6 = []struct {
	base   uint64 // the block's first 64 bits
	bits   int
	weight int
}{
	{0x2001_0000_0000_0000, 16, 10}, // early allocations of all RIRs
	{0x2400_0000_0000_0000, 12, 25}, // APNIC
	{0x2600_0000_0000_0000, 12, 25}, // ARIN
	{0x2800_0000_0000_0000, 12, 8},  // LACNIC
	{0x2a00_0000_0000_0000, 12, 28}, // RIPE NCC
	{0x2c00_0000_0000_0000, 12, 4},  // AFRINIC
}

// Routes6Full returns n distinct IPv6 routes (seeded) shaped as a full
// table seen by an edge router with EdgeUpstreams providers: LIR
// allocations (/19 to /32, mostly /29 and /32, 15% of the routes) inside
// the RIRs' blocks, and more-specifics nested inside them (/33 to /47 38%,
// /48 45%, /56 and /64 2%). An allocation's more-specifics mostly share its
// upstream, nexthop 1 + that upstream, as routegen.EdgeUpstreams does for
// IPv4.
func Routes6Full(n int, seed int64) []datapath.Route {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x66756c6c)) // "full"
	seen := make(map[netip.Prefix]bool, n)
	rs := make([]datapath.Route, 0, n)
	add := func(a prefix.U128, bits int, nh uint32) bool {
		p := netip.PrefixFrom(netip.AddrFrom16(a.And(prefix.Mask128(bits)).Bytes()), bits)
		if seen[p] {
			return false
		}
		seen[p] = true
		rs = append(rs, datapath.Route{Prefix: p, Nexthop: nh})
		return true
	}
	type alloc struct {
		a    prefix.U128
		bits int
		up   uint32
	}
	// Upstreams are not equal: the first carries most of the table.
	upstream := func() uint32 {
		switch r := rng.IntN(100); {
		case r < 55:
			return 0
		case r < 80:
			return 1
		case r < 93:
			return 2
		}
		return 3 % EdgeUpstreams
	}
	nAlloc := max(1, n*15/100)
	allocs := make([]alloc, 0, nAlloc)
	for len(allocs) < nAlloc && len(rs) < n {
		r := rng.IntN(100)
		b := rirBlocks6[0]
		for _, c := range rirBlocks6 {
			if r < c.weight {
				b = c
				break
			}
			r -= c.weight
		}
		var bits int
		switch r := rng.IntN(100); {
		case r < 55:
			bits = 32
		case r < 85:
			bits = 29
		case r < 95:
			bits = 19 + rng.IntN(10)
		default:
			bits = 30 + rng.IntN(2)
		}
		a := prefix.U128{Hi: b.base | rng.Uint64()&^(^uint64(0)<<(64-b.bits))}
		up := upstream()
		if add(a, bits, 1+up) {
			allocs = append(allocs, alloc{a: a.And(prefix.Mask128(bits)), bits: bits, up: up})
		}
	}
	for len(rs) < n {
		// Allocations differ in how much they deaggregate: the square
		// skews the picks towards the first ones.
		f := rng.Float64()
		al := allocs[int(f*f*float64(len(allocs)))]
		var bits int
		switch r := rng.IntN(85); {
		case r < 38:
			bits = 33 + rng.IntN(15)
		case r < 83:
			bits = 48
		case r < 84:
			bits = 56
		default:
			bits = 64
		}
		bits = max(bits, al.bits+1)
		host := prefix.U128{Hi: rng.Uint64(), Lo: rng.Uint64()}.And(prefix.Mask128(al.bits).Not())
		up := al.up
		if rng.IntN(100) < 15 { // traffic-engineered or multihomed elsewhere
			up = upstream()
		}
		add(al.a.Or(host), bits, 1+up)
	}
	return rs
}

// InsideDestinations6 returns n addresses (seeded), each a random address
// of one of the routes' prefixes: every prefix equally likely, or with
// zipf ranked by a Zipf distribution of exponent ZipfExponent.
func InsideDestinations6(routes []datapath.Route, n int, zipf bool, seed int64) ([][16]byte, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 99))
	var picks []int
	if zipf {
		var err error
		if picks, err = routegen.Zipf(len(routes), n, ZipfExponent, seed); err != nil {
			return nil, err
		}
	}
	dsts := make([][16]byte, n)
	for i := range dsts {
		var j int
		if zipf {
			j = picks[i]
		} else {
			j = rng.IntN(len(routes))
		}
		p := routes[j].Prefix
		a := prefix.U128Of(p.Addr().As16())
		host := prefix.U128{Hi: rng.Uint64(), Lo: rng.Uint64()}.And(prefix.Mask128(p.Bits()).Not())
		dsts[i] = a.Or(host).Bytes()
	}
	return dsts, nil
}
