//go:build linux

package fibbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/internal/routegen"
)

// EdgeUpstreams is the upstream count of the edge-shaped tables.
const EdgeUpstreams = 4

// ZipfExponent is the skew of the Zipf destinations: measurements of
// Internet traffic find about 1.
const ZipfExponent = 1.0

// Metric names of the edge-shaped table's figures (SIZE as SizeLabel):
// fib_lookup_ns_SIZE_edge and _edge_zipf against dir24_8_lookup_ns_SIZE_edge
// and _edge_zipf, fib_bytes_SIZE_edge against dir24_8_bytes_SIZE_edge, and
// fib_install_routes_per_s_SIZE_edge.
func EdgeMetrics(n int) (lookup, lookupZipf, tbl24, tbl24Zipf, bytes, tbl24Bytes, install string) {
	l := SizeLabel(n)
	return MetricFIBLookupPrefix + l + "_edge", MetricFIBLookupPrefix + l + "_edge_zipf",
		"dir24_8_lookup_ns_" + l + "_edge", "dir24_8_lookup_ns_" + l + "_edge_zipf",
		"fib_bytes_" + l + "_edge", "dir24_8_bytes_" + l + "_edge",
		MetricFIBInstallPerSecond + "_" + l + "_edge"
}

// EdgeRoutes returns n routegen prefixes (seeded) as an edge router with
// EdgeUpstreams providers holds them: nexthop 1 + the upstream
// routegen.EdgeUpstreams picks for each.
func EdgeRoutes(n int, seed int64) ([]datapath.Route, error) {
	ps := routegen.Generate(n, seed)
	ups, err := routegen.EdgeUpstreams(ps, EdgeUpstreams, seed)
	if err != nil {
		return nil, err
	}
	rs := make([]datapath.Route, len(ps))
	for i, p := range ps {
		rs[i] = datapath.Route{Prefix: p, Nexthop: 1 + uint32(ups[i])}
	}
	return rs, nil
}

// InsideDestinations returns n addresses (seeded, network order as
// SetDestinations takes them), each a random address of one of the
// routes' prefixes: every prefix equally likely, or with zipf the prefixes
// ranked by a Zipf distribution of exponent ZipfExponent (a few thousand
// prefixes get most of the traffic, as on real links).
func InsideDestinations(routes []datapath.Route, n int, zipf bool, seed int64) ([]uint32, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x696e73)) // "ins"
	var picks []int
	if zipf {
		var err error
		if picks, err = routegen.Zipf(len(routes), n, ZipfExponent, seed); err != nil {
			return nil, err
		}
	}
	out := make([]uint32, n)
	for i := range out {
		j := 0
		if zipf {
			j = picks[i]
		} else {
			j = rng.IntN(len(routes))
		}
		p := routes[j].Prefix
		a := uintOf(p.Addr()) | rng.Uint32()&^mask(p.Bits())
		out[i] = be32(addrFromUint(a))
	}
	return out, nil
}

// FIBEdge measures the range table with an edge-shaped table of n routes
// (needs root), each figure the median of rounds, the range table and
// DIR-24-8 alone alternating in every round:
//   - fib_lookup_ns_SIZE_edge: ns per packet of xdp_router, destinations
//     uniform over the table's prefixes, against xdp_router_tbl24's;
//   - fib_lookup_ns_SIZE_edge_zipf: the same with Zipf destinations;
//   - fib_bytes_SIZE_edge: the bytes a lookup can read (FIBStats), against
//     DIR-24-8's (tbl24 and its groups in use);
//   - fib_install_routes_per_s_SIZE_edge: one SetRoutes of the table into
//     an empty FIB, range table included.
func FIBEdge(ctx context.Context, n, rounds int) ([]Figure, error) {
	if n < 1 || rounds < 1 {
		return nil, fmt.Errorf("bench fib edge: %d routes, rounds %d: %w", n, rounds, datapath.ErrInvalid)
	}
	routes, err := EdgeRoutes(n, 1)
	if err != nil {
		return nil, err
	}
	uniform, err := InsideDestinations(routes, BenchDsts, false, 1)
	if err != nil {
		return nil, err
	}
	zipf, err := InsideDestinations(routes, BenchDsts, true, 1)
	if err != nil {
		return nil, err
	}
	d, err := loadLookupBench(datapath.Sizes{}, netip.MustParseAddr("10.0.0.1"), routes)
	if err != nil {
		return nil, fmt.Errorf("bench fib edge: %w", err)
	}
	lb := &lookupBench{d: d, frame: benchFrame()}
	type mode struct {
		dsts []uint32
		tbl  bool
	}
	modes := []mode{{uniform, false}, {uniform, true}, {zipf, false}, {zipf, true}}
	ns := make([][]float64, len(modes))
	for r := 0; r < rounds && err == nil; r++ {
		for i, m := range modes {
			if err = ctx.Err(); err != nil {
				break
			}
			if err = lb.setDsts(m.dsts); err != nil {
				break
			}
			prog := d.Program()
			if m.tbl {
				prog = d.TBL24Program()
			}
			var v float64
			if v, err = lb.nsPerPacket(prog); err != nil {
				break
			}
			ns[i] = append(ns[i], v)
		}
	}
	st, serr := d.FIBStats()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("bench fib edge, %d routes: %w", n, err)
	}
	rate, err := medianOf(ctx, rounds, func() (float64, error) {
		d, err := datapath.Load()
		if err != nil {
			return 0, err
		}
		defer d.Close()
		elapsed, err := timeInstall(d, routes)
		return float64(len(routes)) / elapsed.Seconds(), err
	})
	if err != nil {
		return nil, fmt.Errorf("bench fib edge install: %w", err)
	}
	lookup, lookupZipf, tbl, tblZipf, bytes, tblBytes, install := EdgeMetrics(n)
	med := func(i int) float64 { return medianFloats(ns[i]) }
	return []Figure{
		{Metric: lookup, Value: med(0), Unit: "ns", Baseline: tbl, BaselineValue: med(1)},
		{Metric: tbl, Value: med(1), Unit: "ns"},
		{Metric: lookupZipf, Value: med(2), Unit: "ns", Baseline: tblZipf, BaselineValue: med(3)},
		{Metric: tblZipf, Value: med(3), Unit: "ns"},
		{Metric: bytes, Value: float64(st.LookupBytes), Unit: "bytes", Baseline: tblBytes, BaselineValue: float64(st.DIR24_8Bytes)},
		{Metric: install, Value: rate, Unit: "routes/s"},
	}, nil
}

// medianFloats returns the median of vs (sorted in place).
func medianFloats(vs []float64) float64 {
	slices.Sort(vs)
	return vs[len(vs)/2]
}
