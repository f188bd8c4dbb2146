//go:build linux

package fibbench

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/splitplane/splitplane/fe/datapath"
)

// Metric names of the FIB benchmarks. Lookup figures are named by table
// size with SizeLabel (fib_lookup_ns_1k, lpm_trie_lookup_ns_1m,
// fib_lookup_inside_ns_1k, fib6_lookup_ns_100k, ...).
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
// (BENCH_DSTS in fibbench.c).
const BenchDsts = 65536

// Options are the settings of Load.
type Options struct {
	// Rotate makes every run of the router programs take its destination
	// from SetDestinations (SetDestinations6 for IPv6 frames) and skip the
	// TTL check, for BPF_PROG_TEST_RUN: every repetition sees the frame as
	// the previous one left it. Without it they do what the FE's do.
	Rotate bool
	// Sizes are the FIB's group pools, as for datapath.LoadSized.
	Sizes datapath.Sizes
}

// Object is the benchmarks' BPF object (fibbench.c) loaded: a Datapath
// running its copy of the FE's router, programmed by the FE's own control
// code, and the baselines beside it, which share its maps.
type Object struct {
	*datapath.Datapath
	objs extraObjects
}

// extraObjects are what fibbench.c holds beyond the FE's programs and maps.
type extraObjects struct {
	XdpRouterTrie     *ebpf.Program  `ebpf:"xdp_router_trie"`
	XdpRouterTbl24    *ebpf.Program  `ebpf:"xdp_router_tbl24"`
	XdpRedirectLookup *ebpf.Program  `ebpf:"xdp_redirect_lookup"`
	Routes            *ebpf.Map      `ebpf:"routes"`
	Routes6           *ebpf.Map      `ebpf:"routes6"`
	TxPorts           *ebpf.Map      `ebpf:"tx_ports"` // a handle of the Datapath's
	BenchDsts         *ebpf.Variable `ebpf:"bench_dsts"`
	BenchDsts6        *ebpf.Variable `ebpf:"bench_dsts6"`
	BenchRedirectPort *ebpf.Variable `ebpf:"bench_redirect_port"`
}

func (o *extraObjects) close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.XdpRouterTrie, o.XdpRouterTbl24, o.XdpRedirectLookup, o.Routes, o.Routes6, o.TxPorts} {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Load loads fibbench.c (needs root).
func Load(opts Options) (*Object, error) {
	spec, err := loadFibbench()
	if err != nil {
		return nil, err
	}
	if opts.Rotate {
		if err := spec.Variables[fibbenchVarBenchRotate].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("set bench_rotate: %w", err)
		}
	}
	o := &Object{}
	if o.Datapath, err = datapath.LoadSpec(spec, opts.Sizes, &o.objs); err != nil {
		return nil, errors.Join(err, o.objs.close())
	}
	return o, nil
}

// Close closes the Datapath and the baselines.
func (o *Object) Close() error {
	return errors.Join(o.Datapath.Close(), o.objs.close())
}

// TrieProgram returns xdp_router_trie, the router with the kernel's LPM
// tries (SetTrieRoutes) in place of the FIBs.
func (o *Object) TrieProgram() *ebpf.Program {
	return o.objs.XdpRouterTrie
}

// TBL24Program returns xdp_router_tbl24, the router reading DIR-24-8 alone.
func (o *Object) TBL24Program() *ebpf.Program {
	return o.objs.XdpRouterTbl24
}

// AddTxPort makes ifindex a redirect target, as Attach does for a port, for
// a benchmark's next hops on a device it does not attach to (lo).
func (o *Object) AddTxPort(ifindex int) error {
	if err := o.objs.TxPorts.Put(uint32(ifindex), uint32(ifindex)); err != nil {
		return fmt.Errorf("add tx port %d: %w", ifindex, err)
	}
	return nil
}

// SetDestinations sets the IPv4 destinations (network byte order, at most
// BenchDsts) that the runs of an Options.Rotate object rotate over.
func (o *Object) SetDestinations(dsts []uint32) error {
	if len(dsts) > BenchDsts {
		return fmt.Errorf("bench_dsts: %d destinations: %w", len(dsts), datapath.ErrInvalid)
	}
	var a [BenchDsts]uint32
	copy(a[:], dsts)
	if err := o.objs.BenchDsts.Set(a); err != nil {
		return fmt.Errorf("set bench_dsts: %w", err)
	}
	return nil
}

// SetDestinations6 is SetDestinations for IPv6 frames.
func (o *Object) SetDestinations6(dsts [][16]byte) error {
	if len(dsts) > BenchDsts {
		return fmt.Errorf("bench_dsts6: %d destinations: %w", len(dsts), datapath.ErrInvalid)
	}
	a := make([][16]byte, BenchDsts)
	copy(a, dsts)
	if err := o.objs.BenchDsts6.Set(a); err != nil {
		return fmt.Errorf("set bench_dsts6: %w", err)
	}
	return nil
}

// SetTrieRoutes loads routes of either family into the LPM tries of
// TrieProgram.
func (o *Object) SetTrieRoutes(routes []datapath.Route) error {
	const chunk = 10_000
	var (
		keys  []fibbenchLpmKey
		keys6 []fibbenchLpmKey6
		vals  []uint32
		vals6 []uint32
	)
	flush := func(force bool) error {
		if len(keys) > 0 && (force || len(keys) == chunk) {
			if _, err := o.objs.Routes.BatchUpdate(keys, vals, nil); err != nil {
				return fmt.Errorf("LPM trie batch update: %w", err)
			}
			keys, vals = keys[:0], vals[:0]
		}
		if len(keys6) > 0 && (force || len(keys6) == chunk) {
			if _, err := o.objs.Routes6.BatchUpdate(keys6, vals6, nil); err != nil {
				return fmt.Errorf("IPv6 LPM trie batch update: %w", err)
			}
			keys6, vals6 = keys6[:0], vals6[:0]
		}
		return nil
	}
	for _, r := range routes {
		p := r.Prefix.Masked()
		if p.Addr().Is4() {
			keys = append(keys, fibbenchLpmKey{Prefixlen: uint32(p.Bits()), Addr: be32(p.Addr())})
			vals = append(vals, r.Nexthop)
		} else {
			keys6 = append(keys6, fibbenchLpmKey6{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()})
			vals6 = append(vals6, r.Nexthop)
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

// AttachRedirectLookup attaches xdp_redirect_lookup, the baseline of `bench
// forward`, to port in, natively: it sends every IPv4 frame whose
// destination has a route out of port out unchanged, after one FIB lookup
// and nothing else. Closing the link detaches it (out stays a tx port).
func (o *Object) AttachRedirectLookup(in, out int) (link.Link, error) {
	if err := o.objs.BenchRedirectPort.Set(uint32(out)); err != nil {
		return nil, fmt.Errorf("redirect lookup to ifindex %d: %w", out, err)
	}
	if err := o.AddTxPort(out); err != nil {
		return nil, fmt.Errorf("redirect lookup: %w", err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: o.objs.XdpRedirectLookup, Interface: in, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach redirect lookup to ifindex %d: %w", in, err)
	}
	return l, nil
}
