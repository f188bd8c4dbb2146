//go:build linux

// Package fibbench measures the XDP datapath's FIBs (`splitplane bench fib`,
// and the lookup section of `bench all`): the lookup cost of the DIR-24-8
// IPv4 table and the IPv6 stride table against the kernel's LPM tries, at
// several table sizes, by BPF_PROG_TEST_RUN, and the install rate of a
// full table. It holds the benchmarks' route and destination generators;
// Its BPF object, fibbench.c, runs a copy of the FE's router built from
// the same pipeline, and the baselines (Load).
package fibbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/internal/prefix"
	"github.com/splitplane/splitplane/internal/routegen"
)

// Figure is one figure of FIB or FIB6, in the shape of the project's
// benchmark output convention: Baseline names a reference measured in the
// same run, in the same unit, with BaselineValue its value.
type Figure struct {
	Metric        string  `json:"metric"`
	Value         float64 `json:"value"`
	Unit          string  `json:"unit"`
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
}

// benchRepeat is the number of runs per BPF_PROG_TEST_RUN call: each call
// costs a fixed ~24 ms, which the kernel's per-run time leaves out anyway,
// but a long call also averages out the rotation over the destinations.
const benchRepeat = 1 << 21

// FIB measures the IPv4 FIB of the XDP program (needs root) and returns
// its figures, each the median of rounds. Every lookup table is SIZE
// routegen routes plus a default route, so that every packet forwards.
//   - fib_lookup_ns_SIZE for every size: ns per packet of xdp_router
//     (BPF_PROG_TEST_RUN, kernel-timed), every run to another of the same
//     65,536 destinations at every size, uniformly random over public
//     unicast space (Destinations): only the table changes from one
//     size to the next, so the figures show how the lookup's cost grows
//     with the number of routes;
//   - lpm_trie_lookup_ns_SIZE: the same with the kernel LPM trie
//     (xdp_router_trie), the baseline of fib_lookup_ns_MAX;
//   - fib_lookup_inside_ns_SIZE, lpm_trie_lookup_inside_ns_SIZE: the same
//     with 65,536 random destinations inside the table's own routegen
//     prefixes instead, so that a small table's traffic touches only a
//     small part of the FIB (what the caches then hide);
//   - fib_install_routes_per_s: routes per second of one SetRoutes call
//     installing the largest table into an empty FIB.
func FIB(ctx context.Context, sizes []int, rounds int) ([]Figure, error) {
	if len(sizes) == 0 || rounds < 1 {
		return nil, fmt.Errorf("bench fib: sizes %v, rounds %d: %w", sizes, rounds, datapath.ErrInvalid)
	}
	sizes = slices.Clone(sizes)
	slices.Sort(sizes)
	largest := sizes[len(sizes)-1]
	public := be32s(Destinations(BenchDsts, 1))
	var lookups, tries, inside []Figure
	for _, n := range sizes {
		lb, err := newLookupBench(n, 1)
		if err != nil {
			return nil, err
		}
		label := SizeLabel(n)
		measure := func(dsts []uint32, metric string, prog *ebpf.Program) (Figure, error) {
			if err := lb.setDsts(dsts); err != nil {
				return Figure{}, err
			}
			ns, err := medianOf(ctx, rounds, func() (float64, error) { return lb.nsPerPacket(prog) })
			return Figure{Metric: metric + label, Value: ns, Unit: "ns"}, err
		}
		var figs [4]Figure
		for i, m := range []struct {
			dsts   []uint32
			metric string
			prog   *ebpf.Program
		}{
			{public, MetricFIBLookupPrefix, lb.d.Program()},
			{public, MetricTrieLookupPrefix, lb.d.TrieProgram()},
			{lb.inside, MetricFIBLookupInsidePrefix, lb.d.Program()},
			{lb.inside, MetricTrieLookupInsidePrefix, lb.d.TrieProgram()},
		} {
			if figs[i], err = measure(m.dsts, m.metric, m.prog); err != nil {
				break
			}
		}
		if cerr := lb.d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("bench fib lookup, %d routes: %w", n, err)
		}
		if n == largest {
			figs[0].Baseline, figs[0].BaselineValue = "lpm_trie", figs[1].Value
		}
		lookups = append(lookups, figs[0])
		tries = append(tries, figs[1])
		inside = append(inside, figs[2], figs[3])
	}
	figs := slices.Concat(lookups, tries, inside)

	routes := Routes(largest, 1)
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
		return nil, fmt.Errorf("bench fib install: %w", err)
	}
	figs = append(figs, Figure{Metric: MetricFIBInstallPerSecond, Value: rate, Unit: "routes/s"})
	return figs, nil
}

// Destinations returns n IPv4 addresses (seeded), uniformly random
// over public unicast space: never in routegen.Excluded, the ranges the
// generated tables leave out.
func Destinations(n int, seed int64) []netip.Addr {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x64737473)) // "dsts"
	excluded := routegen.Excluded()
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		a := addrFromUint(rng.Uint32())
		if !slices.ContainsFunc(excluded, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	return out
}

func be32s(as []netip.Addr) []uint32 {
	out := make([]uint32, len(as))
	for i, a := range as {
		out[i] = be32(a)
	}
	return out
}

// FIB6 measures the IPv6 FIB of the XDP program (needs root) and
// returns its figures, each the median of rounds:
//   - fib6_lookup_ns_SIZE for every size: ns per packet of xdp_router with
//     SIZE Routes6 routes in the stride table, every run to another of
//     65,536 random destinations inside them;
//   - lpm_trie6_lookup_ns_MAX: the same with the kernel LPM trie
//     (xdp_router_trie) at the largest size, also given as the baseline of
//     fib6_lookup_ns_MAX.
//
// Routes6 places prefixes at random, so the tables are much larger
// than the Internet's: 1M routes take about 2.3M groups (2.4 GB).
func FIB6(ctx context.Context, sizes []int, rounds int) ([]Figure, error) {
	if len(sizes) == 0 || rounds < 1 {
		return nil, fmt.Errorf("bench fib6: sizes %v, rounds %d: %w", sizes, rounds, datapath.ErrInvalid)
	}
	sizes = slices.Clone(sizes)
	slices.Sort(sizes)
	largest := sizes[len(sizes)-1]
	var figs []Figure
	var trie float64
	for _, n := range sizes {
		lb, err := newLookupBench6(n, 1)
		if err != nil {
			return nil, fmt.Errorf("bench fib6 lookup, %d routes: %w", n, err)
		}
		ns, err := medianOf(ctx, rounds, func() (float64, error) { return lb.nsPerPacket(lb.d.Program()) })
		if err == nil && n == largest {
			trie, err = medianOf(ctx, rounds, func() (float64, error) { return lb.nsPerPacket(lb.d.TrieProgram()) })
		}
		if cerr := lb.d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("bench fib6 lookup, %d routes: %w", n, err)
		}
		fig := Figure{Metric: MetricFIB6LookupPrefix + SizeLabel(n), Value: ns, Unit: "ns"}
		if n == largest {
			fig.Baseline, fig.BaselineValue = "lpm_trie6", trie
		}
		figs = append(figs, fig)
	}
	figs = append(figs, Figure{Metric: MetricTrie6LookupPrefix + SizeLabel(largest), Value: trie, Unit: "ns"})
	return figs, nil
}

// FIB6Full measures the stride table with a full-table-shaped set of n
// Routes6Full routes (needs root), each figure the median of rounds:
//   - fib6_lookup_ns_full and _full_zipf: ns per packet of xdp_router,
//     destinations uniform over the table's prefixes or Zipf-ranked,
//     against xdp_router_trie's (lpm_trie6_lookup_ns_full and _full_zipf);
//   - fib6_bytes_full: the bytes a lookup can read (FIB6Stats.LookupBytes:
//     the range table, and the stride table where it leaves a /16 or /24
//     to it), against fib6_stride_bytes_full, what the stride table alone
//     would read (tbl16 and its fib6_groups_full groups);
//   - fib6_stride_chunks_full: the /16s and /24s left to the stride table;
//   - fib6_install_routes_per_s_full: the table into the emptied FIB.
func FIB6Full(ctx context.Context, n, rounds int) ([]Figure, error) {
	if n < 1 || rounds < 1 {
		return nil, fmt.Errorf("bench fib6 full: %d routes, rounds %d: %w", n, rounds, datapath.ErrInvalid)
	}
	routes := Routes6Full(n, 1)
	d, err := loadLookupBench(datapath.Sizes{FIB6Groups: fib6GroupsFor(n)}, netip.MustParseAddr("fe80::1"), routes)
	if err != nil {
		return nil, fmt.Errorf("bench fib6 full: %w", err)
	}
	defer d.Close()
	// The install rate: the table again into the emptied FIB, stride and
	// range table both.
	prefixes := make([]netip.Prefix, len(routes))
	for i, r := range routes {
		prefixes[i] = r.Prefix
	}
	if err := d.DeleteRoutes(prefixes); err != nil {
		return nil, fmt.Errorf("bench fib6 full: %w", err)
	}
	start := time.Now()
	if err := d.SetRoutes(routes); err != nil {
		return nil, fmt.Errorf("bench fib6 full: %w", err)
	}
	install := float64(len(routes)) / time.Since(start).Seconds()
	st, err := d.FIB6Stats()
	if err != nil {
		return nil, err
	}
	lb := &lookupBench{d: d, frame: benchFrame6()}
	var figs []Figure
	for _, zipf := range []bool{false, true} {
		dsts, err := InsideDestinations6(routes, BenchDsts, zipf, 1)
		if err != nil {
			return nil, err
		}
		if err := d.SetDestinations6(dsts); err != nil {
			return nil, err
		}
		ns, err := medianOf(ctx, rounds, func() (float64, error) { return lb.nsPerPacket(d.Program()) })
		if err != nil {
			return nil, fmt.Errorf("bench fib6 full: %w", err)
		}
		trie, err := medianOf(ctx, rounds, func() (float64, error) { return lb.nsPerPacket(d.TrieProgram()) })
		if err != nil {
			return nil, fmt.Errorf("bench fib6 full: %w", err)
		}
		suffix := "full"
		if zipf {
			suffix = "full_zipf"
		}
		figs = append(figs,
			Figure{Metric: MetricFIB6LookupPrefix + suffix, Value: ns, Unit: "ns", Baseline: MetricTrie6LookupPrefix + suffix, BaselineValue: trie},
			Figure{Metric: MetricTrie6LookupPrefix + suffix, Value: trie, Unit: "ns"})
	}
	return append(figs,
		Figure{Metric: "fib6_bytes_full", Value: float64(st.LookupBytes), Unit: "bytes", Baseline: "fib6_stride_bytes_full", BaselineValue: float64(st.StrideBytes)},
		Figure{Metric: "fib6_stride_bytes_full", Value: float64(st.StrideBytes), Unit: "bytes"},
		Figure{Metric: "fib6_groups_full", Value: float64(st.StrideGroups), Unit: "groups"},
		Figure{Metric: "fib6_stride_chunks_full", Value: float64(st.StrideChunks), Unit: "chunks"},
		Figure{Metric: "fib6_install_routes_per_s_full", Value: install, Unit: "routes/s"}), nil
}

func medianOf(ctx context.Context, rounds int, f func() (float64, error)) (float64, error) {
	vs := make([]float64, 0, rounds)
	for range rounds {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		v, err := f()
		if err != nil {
			return 0, err
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs[len(vs)/2], nil
}

// Routes returns n routegen prefixes (seeded) as routes over 16
// nexthops, 1..16.
func Routes(n int, seed int64) []datapath.Route {
	ps := routegen.Generate(n, seed)
	rs := make([]datapath.Route, len(ps))
	for i, p := range ps {
		rs[i] = datapath.Route{Prefix: p, Nexthop: 1 + uint32(i%16)}
	}
	return rs
}

func timeInstall(d *datapath.Datapath, routes []datapath.Route) (time.Duration, error) {
	start := time.Now()
	if err := d.SetRoutes(routes); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// lookupBench is a datapath loaded for lookup benchmarks: both programs,
// the same routes in the FIB and in the LPM trie, nexthops 1..16 that
// forward via lo, and bench_dsts filled with addresses inside the routes.
type lookupBench struct {
	d     *Object
	frame []byte
	// inside are random destinations inside the table's routegen
	// prefixes, as bench_dsts holds them.
	inside []uint32
}

// newLookupBench loads a lookup benchmark of n Routes and a default
// route (nexthop 1), with bench_dsts set to lb.inside.
func newLookupBench(n int, seed int64) (lb *lookupBench, err error) {
	routes := Routes(n, seed)
	all := append(slices.Clip(routes), datapath.Route{Prefix: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Nexthop: 1})
	d, err := loadLookupBench(datapath.Sizes{}, netip.MustParseAddr("10.0.0.1"), all)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(seed), 99))
	lb = &lookupBench{d: d, frame: benchFrame(), inside: make([]uint32, BenchDsts)}
	for i := range lb.inside {
		p := routes[rng.IntN(len(routes))].Prefix
		a := uintOf(p.Addr()) | rng.Uint32()&^mask(p.Bits())
		lb.inside[i] = be32(addrFromUint(a))
	}
	if err := lb.setDsts(lb.inside); err != nil {
		return nil, err
	}
	return lb, nil
}

// setDsts sets the destinations the benchmark runs rotate over.
func (lb *lookupBench) setDsts(dsts []uint32) error {
	return lb.d.SetDestinations(dsts)
}

// loadLookupBench loads the datapath for a lookup benchmark: nexthops 1..16
// forwarding via lo to gw, and routes in the FIB and in the LPM trie.
func loadLookupBench(sizes datapath.Sizes, gw netip.Addr, routes []datapath.Route) (d *Object, err error) {
	if d, err = Load(Options{Rotate: true, Sizes: sizes}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return nil, err
	}
	if err := d.AddTxPort(lo.Index); err != nil {
		return nil, err
	}
	if err := d.SetNeighbor(lo.Index, gw, net.HardwareAddr{2, 0, 0, 0, 1, 2}); err != nil {
		return nil, err
	}
	for id := uint32(1); id <= 16; id++ {
		if err := d.SetNexthop(id, datapath.Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 1, byte(id)}}); err != nil {
			return nil, err
		}
	}
	if err := d.SetRoutes(routes); err != nil {
		return nil, err
	}
	if err := d.SetTrieRoutes(routes); err != nil {
		return nil, err
	}
	return d, nil
}

// nsPerPacket runs prog benchRepeat times and returns the kernel-measured
// time per run; every run must forward.
func (lb *lookupBench) nsPerPacket(prog *ebpf.Program) (float64, error) {
	ret, perRun, err := prog.Benchmark(lb.frame, benchRepeat, nil)
	if err != nil {
		return 0, err
	}
	if ret != 4 { // XDP_REDIRECT
		return 0, fmt.Errorf("%v returned %d, want XDP_REDIRECT", prog, ret)
	}
	return float64(perRun.Nanoseconds()), nil
}

// Routes6 returns n distinct IPv6 routes (seeded) over nexthops
// 1..16, with the prefix lengths of today's Internet table, nearly all /48
// and shorter (45% /48, 10% /32, 38% /33 to /47, 5% /19 to /31, 2% /56 or
// /64), but placed uniformly at random in 2000::/3, where the real ones
// cluster inside the RIRs' blocks. Random placement is the worst case for
// the stride table: few prefixes share a group, so it needs about 2.5
// groups per route (fib6GroupsFor).
func Routes6(n int, seed int64) []datapath.Route {
	rng := rand.New(rand.NewPCG(uint64(seed), 48))
	seen := make(map[netip.Prefix]bool, n)
	rs := make([]datapath.Route, 0, n)
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
		a := prefix.U128{Hi: 0x2000_0000_0000_0000 | rng.Uint64()&0x1fff_ffff_ffff_ffff, Lo: rng.Uint64()}
		p := netip.PrefixFrom(netip.AddrFrom16(a.And(prefix.Mask128(bits)).Bytes()), bits)
		if seen[p] {
			continue
		}
		seen[p] = true
		rs = append(rs, datapath.Route{Prefix: p, Nexthop: 1 + uint32(len(rs)%16)})
	}
	return rs
}

// fib6GroupsFor returns a group pool large enough for n Routes6
// routes, at least datapath.FIB6Groups.
func fib6GroupsFor(n int) int {
	return max(datapath.FIB6Groups, 5*n/2+n/10+4096)
}

// newLookupBench6 is newLookupBench for IPv6: n Routes6 routes in the
// stride table and in the LPM trie, nexthops 1..16 that forward via lo to
// fe80::1, and bench_dsts6 filled with random addresses inside the routes.
func newLookupBench6(n int, seed int64) (lb *lookupBench, err error) {
	routes := Routes6(n, seed)
	d, err := loadLookupBench(datapath.Sizes{FIB6Groups: fib6GroupsFor(n)},
		netip.MustParseAddr("fe80::1"), routes)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(seed), 99))
	dsts := make([][16]byte, BenchDsts)
	for i := range dsts {
		p := routes[rng.IntN(len(routes))].Prefix
		a := prefix.U128Of(p.Addr().As16())
		host := prefix.U128{Hi: rng.Uint64(), Lo: rng.Uint64()}.And(prefix.Mask128(p.Bits()).Not())
		dsts[i] = a.Or(host).Bytes()
	}
	if err := d.SetDestinations6(dsts); err != nil {
		return nil, err
	}
	return &lookupBench{d: d, frame: benchFrame6()}, nil
}

func addrFromUint(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// benchFrame6 is a 62-byte IPv6 UDP frame; bench_rotate replaces its
// destination.
func benchFrame6() []byte {
	f := make([]byte, 14+40+8)
	copy(f[0:6], []byte{2, 0, 0, 0, 0xaa, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0xaa, 1})
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], 8)
	ip[6] = 17
	ip[7] = 64
	src := netip.MustParseAddr("2001:db8:aaaa::100").As16()
	copy(ip[8:24], src[:])
	binary.BigEndian.PutUint16(ip[40:], 40000)
	binary.BigEndian.PutUint16(ip[42:], 53)
	binary.BigEndian.PutUint16(ip[44:], 8)
	return f
}

// benchFrame is a 60-byte UDP frame; bench_rotate replaces its destination.
func benchFrame() []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{2, 0, 0, 0, 0xaa, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0xaa, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 46)
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{192, 0, 2, 100})
	copy(ip[16:20], []byte{192, 0, 2, 1})
	binary.BigEndian.PutUint16(ip[20:], 40000)
	binary.BigEndian.PutUint16(ip[22:], 53)
	binary.BigEndian.PutUint16(ip[24:], 26)
	SetIPv4Checksum(ip[:20])
	return f
}

// SetIPv4Checksum fills in the checksum of the IPv4 header hdr (without
// options), which the router verifies.
func SetIPv4Checksum(hdr []byte) {
	hdr[10], hdr[11] = 0, 0
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(hdr[10:], ^uint16(sum))
}

// be32 returns an IPv4 address as the uint32 whose memory holds it in
// network order: the BPF maps' view of a __be32.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// uintOf returns an IPv4 address as a number (host order).
func uintOf(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// mask returns the IPv4 netmask of a /bits (host order).
func mask(bits int) uint32 {
	return uint32(^uint64(0) << (32 - bits))
}
