//go:build linux

package datapath

import (
	"fmt"
	"strconv"

	"github.com/cilium/ebpf"
)

// The hooks below are what the FIB benchmarks (integration/bench/fibbench)
// need of a Datapath and nothing else: the benchmark code itself, its
// route and destination generators and its figures live there, so that
// the FE's package carries none of it. The FE never calls them.

// Metric names of the FIB benchmarks (integration/bench/fibbench). Lookup
// figures are named by table size with SizeLabel (fib_lookup_ns_1k,
// lpm_trie_lookup_ns_1m, fib_lookup_inside_ns_1k, fib6_lookup_ns_100k, ...).
const (
	MetricFIBLookupPrefix        = "fib_lookup_ns_"
	MetricTrieLookupPrefix       = "lpm_trie_lookup_ns_"
	MetricFIBLookupInsidePrefix  = "fib_lookup_inside_ns_"
	MetricTrieLookupInsidePrefix = "lpm_trie_lookup_inside_ns_"
	MetricFIBInstallPerSecond    = "fib_install_routes_per_s"
	MetricFIB6LookupPrefix       = "fib6_lookup_ns_"
	MetricTrie6LookupPrefix      = "lpm_trie6_lookup_ns_"
)

// SizeLabel names a table size in metric names: 1000 is "1k", 100000
// "100k", 1000000 "1m"; other sizes are written out.
func SizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "m"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// BenchDsts is the number of destinations a lookup benchmark rotates over
// (bench_dsts and bench_dsts6 in xdp.c).
const BenchDsts = 65536

// BenchLoadOptions are the benchmark settings of LoadForBenchmark.
type BenchLoadOptions struct {
	// FIB6Groups, if not 0, replaces FIB6Groups (large random IPv6 tables).
	FIB6Groups int
}

// LoadForBenchmark loads the datapath for BPF_PROG_TEST_RUN lookup
// benchmarks: the TTL check off (every repetition sees the frame as the
// previous one left it), every run's destination the next one of
// SetBenchDestinations, and the LPM trie baseline (TrieProgram) loaded
// beside the FIB.
func LoadForBenchmark(o BenchLoadOptions) (*Datapath, error) {
	return load(loadOptions{benchIgnoreTTL: true, benchRotate: true, trie: true, fib6Groups: o.FIB6Groups})
}

// TrieProgram returns xdp_router_trie, the router with the kernel's LPM
// tries in place of the FIBs (LoadForBenchmark or LoadWithBaselines), or nil.
func (d *Datapath) TrieProgram() *ebpf.Program {
	if d.trie == nil {
		return nil
	}
	return d.trie.XdpRouterTrie
}

// AddTxPort makes ifindex a redirect target, as Attach does for a port, for
// a benchmark's next hops on a device it does not attach to (lo).
func (d *Datapath) AddTxPort(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addTxPort(ifindex)
}

// SetBenchDestinations sets the IPv4 destinations (network byte order, at
// most BenchDsts) a LoadForBenchmark datapath's runs rotate over.
func (d *Datapath) SetBenchDestinations(dsts []uint32) error {
	if len(dsts) > BenchDsts {
		return fmt.Errorf("bench_dsts: %d destinations: %w", len(dsts), ErrInvalid)
	}
	var a [BenchDsts]uint32
	copy(a[:], dsts)
	if err := d.objs.BenchDsts.Set(a); err != nil {
		return fmt.Errorf("set bench_dsts: %w", err)
	}
	return nil
}

// SetBenchDestinations6 is SetBenchDestinations for IPv6 frames.
func (d *Datapath) SetBenchDestinations6(dsts [][16]byte) error {
	if len(dsts) > BenchDsts {
		return fmt.Errorf("bench_dsts6: %d destinations: %w", len(dsts), ErrInvalid)
	}
	a := make([][16]byte, BenchDsts)
	copy(a, dsts)
	if err := d.objs.BenchDsts6.Set(a); err != nil {
		return fmt.Errorf("set bench_dsts6: %w", err)
	}
	return nil
}

// SetTrieRoutes loads routes of either family into the LPM tries of
// TrieProgram.
func (d *Datapath) SetTrieRoutes(routes []Route) error {
	if d.trie == nil {
		return fmt.Errorf("LPM trie not loaded: %w", ErrInvalid)
	}
	const chunk = 10_000
	var (
		keys  []xdpLpmKey
		keys6 []xdpLpmKey6
		vals  []uint32
		vals6 []uint32
	)
	flush := func(force bool) error {
		if len(keys) > 0 && (force || len(keys) == chunk) {
			if _, err := d.trie.Routes.BatchUpdate(keys, vals, nil); err != nil {
				return fmt.Errorf("LPM trie batch update: %w", err)
			}
			keys, vals = keys[:0], vals[:0]
		}
		if len(keys6) > 0 && (force || len(keys6) == chunk) {
			if _, err := d.trie.Routes6.BatchUpdate(keys6, vals6, nil); err != nil {
				return fmt.Errorf("IPv6 LPM trie batch update: %w", err)
			}
			keys6, vals6 = keys6[:0], vals6[:0]
		}
		return nil
	}
	for _, r := range routes {
		p := r.Prefix.Masked()
		if p.Addr().Is4() {
			keys = append(keys, xdpLpmKey{Prefixlen: uint32(p.Bits()), Addr: be32(p.Addr())})
			vals = append(vals, r.Nexthop)
		} else {
			keys6 = append(keys6, xdpLpmKey6{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()})
			vals6 = append(vals6, r.Nexthop)
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}
