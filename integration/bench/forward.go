package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/nsthread"
	"github.com/splitplane/splitplane/internal/routegen"
)

// ForwardOptions configures Forward. Zero values take the defaults.
type ForwardOptions struct {
	// Routes is the size of the routing table (default 1,000,000).
	Routes int
	// Duration is how long the generator runs for each measurement; the
	// rate is taken over its middle half (default 4s, at least 1s).
	Duration time.Duration
	// Rounds is how many times every mode is measured, the modes taking
	// turns; the median is reported (default 3).
	Rounds int
	// Seed seeds the route generator and the destinations (default 1).
	Seed int64
	// Progress, if set, receives a line per setup step and per round.
	Progress io.Writer
}

func (o *ForwardOptions) defaults() error {
	if o.Routes == 0 {
		o.Routes = 1_000_000
	}
	if o.Duration == 0 {
		o.Duration = 4 * time.Second
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	switch {
	case o.Routes < 1 || o.Routes > datapath.MaxRoutes:
		return fmt.Errorf("bench forward: routes %d: must be 1 to %d", o.Routes, datapath.MaxRoutes)
	case o.Duration < time.Second:
		return fmt.Errorf("bench forward: duration %s: need at least 1s", o.Duration)
	case o.Rounds < 1:
		return fmt.Errorf("bench forward: rounds %d: need at least 1", o.Rounds)
	}
	return nil
}

// Metric names of the forwarding benchmark. The table size is part of the
// names (as fibbench.SizeLabel writes it); these are the ones for the
// default of 1M routes, ForwardMetrics gives them for any size.
const (
	MetricForwardPPS1M        = "forward_pps_1m"
	MetricKernelForwardPPS1M  = "kernel_forward_pps_1m"
	MetricForwardVsLimit1M    = "forward_pps_1m_vs_limit"
	MetricRedirectLimitPPS    = "redirect_limit_pps"
	metricForwardPrefix       = "forward_pps_"
	metricKernelForwardPrefix = "kernel_forward_pps_"
)

// LookupRedirectMetrics returns the names of Forward's lookup-only baseline
// for a table of routes entries: its rate and its share of the
// bare-redirect limit.
func LookupRedirectMetrics(routes int) (pps, vsLimit string) {
	l := fibbench.SizeLabel(routes)
	return "lookup_redirect_pps_" + l, "lookup_redirect_pps_" + l + "_vs_limit"
}

// ForwardMetrics returns the metric names Forward uses for a table of routes
// entries: the XDP router's rate, the kernel's rate and the router's share
// of the bare-redirect limit (the limit itself is MetricRedirectLimitPPS).
func ForwardMetrics(routes int) (forward, kernel, vsLimit string) {
	l := fibbench.SizeLabel(routes)
	return metricForwardPrefix + l, metricKernelForwardPrefix + l, metricForwardPrefix + l + "_vs_limit"
}

// Forward measures how many packets per second the router forwards through
// veth ports, each figure the median over the rounds (needs root):
//   - forward_pps_SIZE: the FE's XDP datapath (fe/datapath) attached natively
//     to both router ports with SIZE routegen routes, the kernel not
//     forwarding (ip_forward=0), against kernel_forward_pps_SIZE;
//   - kernel_forward_pps_SIZE: no XDP on the router, the kernel forwarding
//     with the same routes in its FIB;
//   - redirect_limit_pps: a bare XDP redirect from port to port, no lookup
//     and no rewrite, the most any forwarder reaches on these ports;
//   - forward_pps_SIZE_vs_limit: forward_pps_SIZE divided by
//     redirect_limit_pps (a ratio), with the limit as the baseline value;
//   - lookup_redirect_pps_SIZE and lookup_redirect_pps_SIZE_vs_limit: the
//     bare redirect with one lookup of the destination in the same FIB
//     before it and no other work (fibbench.Object.AttachRedirectLookup): what the
//     lookup's memory access alone costs, so the most a forwarder doing
//     one such lookup per packet can reach; router_vs_lookup_SIZE is
//     forward_pps_SIZE against it;
//   - forward_pps_SIZE_edge and forward_pps_SIZE_edge_zipf: the datapath
//     with the edge-shaped table (fibbench.EdgeRoutes: the same prefixes
//     over four upstreams), destinations uniform over the prefixes and
//     Zipf over them (fibbench.InsideDestinations), against
//     redirect_limit_pps;
//   - forward6_pps_full: the datapath with a full-shaped IPv6 table
//     (fibbench.Routes6Full, 220k routes), IPv6/UDP frames of
//     gen.FrameLen6 bytes uniform over its prefixes, against
//     redirect6_limit_pps, the bare redirect of the same IPv6 frames (itself
//     against redirect_limit_pps).
//
// The topology is three namespaces, gen -- router -- sink, joined by veth
// pairs, created for the run and deleted at its end (also on error or
// cancellation). The generator sends 60-byte UDP frames with BPF_PROG_RUN in
// live-frames mode, to 65,536 random destinations inside the routes; an XDP
// program on the sink's port counts and drops what arrives, and that count
// over the middle half of each run is the figure. The modes take turns
// within each round so that drift in the machine spreads over all of them.
// A mode that forwards nothing is an error wrapping ErrIncomplete, not a
// figure of 0.
func Forward(ctx context.Context, opts ForwardOptions) (_ []Result, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "bench forward: "+format+"\n", args...)
		}
	}
	prefixes := routegen.Generate(opts.Routes, opts.Seed)
	if len(prefixes) != opts.Routes {
		return nil, fmt.Errorf("bench forward: route generator returned %d of %d prefixes", len(prefixes), opts.Routes)
	}

	t := newFwdTopo("spb")
	defer func() {
		if cerr := t.down(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	progress("topology %s, %s, %s", t.ns[roleGen], t.ns[roleRtr], t.ns[roleSink])
	if err := t.up(ctx); err != nil {
		return nil, fmt.Errorf("bench forward: topology: %w", err)
	}

	g, err := gen.Load()
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}
	defer g.Close()
	err = g.SetTraffic(gen.Header{
		SrcMAC: fwdMAC(roleGen), DstMAC: fwdMAC(roleRtrIn), Src: fwdAddr(roleGen),
		SrcPort: 40000, DstPort: 9, TTL: 64,
	}, destinations(prefixes, opts.Seed))
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}
	err = t.in(roleSink, func() error {
		l, err := g.AttachSink(t.ifindex[roleSink])
		if err == nil {
			t.closers = append(t.closers, l.Close)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}

	start := time.Now()
	if err := t.installKernelRoutes(ctx, prefixes); err != nil {
		return nil, fmt.Errorf("bench forward: kernel FIB: %w", err)
	}
	progress("%d routes into the kernel FIB in %.1fs", len(prefixes), time.Since(start).Seconds())

	d, b, err := t.loadDatapath(prefixes, true)
	if err != nil {
		return nil, fmt.Errorf("bench forward: datapath: %w", err)
	}
	defer b.Close()
	// The edge-shaped table: the same prefixes over four upstreams, in a
	// datapath of its own; its traffic uniform over the prefixes, as
	// above, or Zipf.
	edge, err := fibbench.EdgeRoutes(opts.Routes, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}
	de, be, err := t.loadDatapathRoutes(edge, true)
	if err != nil {
		return nil, fmt.Errorf("bench forward: edge datapath: %w", err)
	}
	defer be.Close()
	zipf, err := zipfDestinations(edge, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}
	if st, err := de.FIBStats(); err == nil {
		progress("edge table: %d routes over %d upstreams, FIB lookups read %.2f MB (DIR-24-8 alone: %.1f MB)",
			len(edge), fibbench.EdgeUpstreams, float64(st.LookupBytes)/1e6, float64(st.DIR24_8Bytes)/1e6)
	}
	// The IPv6 table, full-shaped, in a datapath of its own; its traffic
	// uniform over its prefixes.
	routes6 := forward6Routes(opts.Seed)
	start = time.Now()
	d6, err := t.loadDatapath6(routes6)
	if err != nil {
		return nil, fmt.Errorf("bench forward: IPv6 datapath: %w", err)
	}
	defer d6.Close()
	progress("IPv6 table: %d routes into the datapath in %.1fs", len(routes6), time.Since(start).Seconds())
	dsts6, err := destinations6(routes6, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("bench forward: %w", err)
	}
	uniform := destinations(prefixes, opts.Seed)
	traffic := func(dsts []netip.Addr) error {
		return g.SetTraffic(gen.Header{
			SrcMAC: fwdMAC(roleGen), DstMAC: fwdMAC(roleRtrIn), Src: fwdAddr(roleGen),
			SrcPort: 40000, DstPort: 9, TTL: 64,
		}, dsts)
	}
	with := func(dsts []netip.Addr, run func() (float64, error)) func() (float64, error) {
		return func() (float64, error) {
			if err := traffic(dsts); err != nil {
				return 0, err
			}
			return run()
		}
	}

	modes := []fwdMode{
		{name: "xdp router", run: with(uniform, func() (float64, error) { return t.measureDatapath(ctx, g, d, opts.Duration) })},
		{name: "kernel", run: with(uniform, func() (float64, error) { return t.measureKernel(ctx, g, opts.Duration) })},
		{name: "bare redirect", run: with(uniform, func() (float64, error) { return t.measureBare(ctx, g, opts.Duration) })},
		{name: "lookup + redirect", run: with(uniform, func() (float64, error) { return t.measureLookupRedirect(ctx, g, b, opts.Duration) })},
		{name: "xdp router, edge table", run: with(uniform, func() (float64, error) { return t.measureDatapath(ctx, g, de, opts.Duration) })},
		{name: "xdp router, edge table, zipf", run: with(zipf, func() (float64, error) { return t.measureDatapath(ctx, g, de, opts.Duration) })},
		{name: "xdp router, IPv6 full table", run: func() (float64, error) {
			if err := g.SetTraffic6(gen6Header(), dsts6); err != nil {
				return 0, err
			}
			return t.measureDatapath(ctx, g, d6, opts.Duration)
		}},
		{name: "bare redirect, IPv6 frames", run: func() (float64, error) {
			if err := g.SetTraffic6(gen6Header(), dsts6); err != nil {
				return 0, err
			}
			return t.measureBare(ctx, g, opts.Duration)
		}},
	}
	rates := make([][]float64, len(modes))
	for r := range opts.Rounds {
		var line []string
		for i, m := range modes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			pps, err := m.run()
			if err != nil {
				return nil, fmt.Errorf("bench forward: %s, round %d: %w", m.name, r+1, err)
			}
			rates[i] = append(rates[i], pps)
			line = append(line, fmt.Sprintf("%s %.2f Mpps", m.name, pps/1e6))
		}
		progress("round %d/%d: %s", r+1, opts.Rounds, strings.Join(line, ", "))
	}
	fwd, kern, limit, lookup := median(rates[0]), median(rates[1]), median(rates[2]), median(rates[3])
	edgeUniform, edgeZipf, fwd6, limit6 := median(rates[4]), median(rates[5]), median(rates[6]), median(rates[7])
	fwdName, kernName, vsName := ForwardMetrics(opts.Routes)
	lookupName, lookupVs := LookupRedirectMetrics(opts.Routes)
	edgeName, zipfName, vsLookup := EdgeForwardMetrics(opts.Routes)
	return []Result{
		{Metric: fwdName, Value: fwd, Unit: "pps", Baseline: kernName, BaselineValue: kern},
		{Metric: kernName, Value: kern, Unit: "pps"},
		{Metric: MetricRedirectLimitPPS, Value: limit, Unit: "pps"},
		{Metric: vsName, Value: fwd / limit, Unit: "ratio", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		{Metric: lookupName, Value: lookup, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		{Metric: lookupVs, Value: lookup / limit, Unit: "ratio", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		{Metric: vsLookup, Value: fwd, Unit: "pps", Baseline: lookupName, BaselineValue: lookup},
		{Metric: edgeName, Value: edgeUniform, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		{Metric: zipfName, Value: edgeZipf, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		{Metric: MetricForward6PPSFull, Value: fwd6, Unit: "pps", Baseline: MetricRedirect6LimitPPS, BaselineValue: limit6},
		{Metric: MetricRedirect6LimitPPS, Value: limit6, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
	}, nil
}

// EdgeForwardMetrics returns the names of Forward's figures of the
// edge-shaped table, uniform and Zipf destinations, both against
// redirect_limit_pps, and of the router against the lookup-only redirect
// (forward_pps_1m_edge, forward_pps_1m_edge_zipf, router_vs_lookup_1m for
// 1M routes).
func EdgeForwardMetrics(routes int) (edge, zipf, routerVsLookup string) {
	l := fibbench.SizeLabel(routes)
	return "forward_pps_" + l + "_edge", "forward_pps_" + l + "_edge_zipf", "router_vs_lookup_" + l
}

// zipfDestinations returns one generator slot's worth of addresses inside
// the routes' prefixes, the prefixes drawn with Zipf popularity
// (fibbench.InsideDestinations).
func zipfDestinations(routes []datapath.Route, seed int64) ([]netip.Addr, error) {
	be, err := fibbench.InsideDestinations(routes, gen.MaxDsts, true, seed)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(be))
	for i, v := range be {
		var a [4]byte
		binary.NativeEndian.PutUint32(a[:], v) // as the BPF program reads it
		out[i] = netip.AddrFrom4(a)
	}
	return out, nil
}

type fwdMode struct {
	name string
	run  func() (float64, error)
}

// sendFrames is the number of frames per BPF_PROG_RUN call: each call costs a
// fixed ~24 ms, which a million frames or more make small.
const sendFrames = 1 << 20

// destinations returns random host addresses inside the prefixes, one per
// generator slot.
func destinations(prefixes []netip.Prefix, seed int64) []netip.Addr {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x666f7277)) // "forw"
	dsts := make([]netip.Addr, gen.MaxDsts)
	for i := range dsts {
		p := prefixes[rng.IntN(len(prefixes))]
		a := p.Addr().As4()
		base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		host := rng.Uint32() & (1<<(32-p.Bits()) - 1)
		v := base | host
		dsts[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return dsts
}

// Roles in the benchmark topology: the namespaces (gen, rtr, sink) and the
// ports (gen, rtrIn, rtrOut, sink).
const (
	roleGen = iota
	roleRtr
	roleSink
)

const (
	roleRtrIn  = 1
	roleRtrOut = 3
)

// nPorts is the number of port roles.
const nPorts = 4

// fwdPort is the name of the port of a port role; the ports live in the
// namespace of their role (rtrIn and rtrOut in rtr).
func fwdPort(role int) string {
	return [nPorts]string{roleGen: "gen0", roleRtrIn: "rtr0", roleSink: "sink0", roleRtrOut: "rtr1"}[role]
}

// fwdAddr is the address of the port of a port role.
func fwdAddr(role int) netip.Addr {
	return [nPorts]netip.Addr{
		roleGen:    netip.AddrFrom4([4]byte{10, 201, 1, 2}),
		roleRtrIn:  netip.AddrFrom4([4]byte{10, 201, 1, 1}),
		roleRtrOut: netip.AddrFrom4([4]byte{10, 201, 2, 1}),
		roleSink:   netip.AddrFrom4([4]byte{10, 201, 2, 2}),
	}[role]
}

// fwdMAC is the MAC address of the port of a port role.
func fwdMAC(role int) net.HardwareAddr {
	return [nPorts]net.HardwareAddr{
		roleGen:    {0x02, 0, 0, 0x5b, 1, 2},
		roleRtrIn:  {0x02, 0, 0, 0x5b, 1, 1},
		roleRtrOut: {0x02, 0, 0, 0x5b, 2, 1},
		roleSink:   {0x02, 0, 0, 0x5b, 2, 2},
	}[role]
}

// portNS is the namespace role of a port role.
func portNS(role int) int {
	return [nPorts]int{roleGen: roleGen, roleRtrIn: roleRtr, roleSink: roleSink, roleRtrOut: roleRtr}[role]
}

// fwdTopo is the gen -- rtr -- sink topology of one Forward call.
type fwdTopo struct {
	ns      [3]string // by namespace role
	created []string  // namespaces to delete
	ifindex [4]int    // by port role, in the port's namespace
	// closers run first in down, in reverse order (XDP links).
	closers []func() error
	// frames is the number of frames per generator call (0: sendFrames).
	frames uint32
	// queues, if more than 1, gives every veth that many RX and TX queues.
	queues int
	// genCPUs, if set, runs one generator thread on each of these CPUs
	// instead of one anywhere: each sends into the router's RX queue of its
	// CPU, which that CPU then serves (veth picks the queue by CPU).
	genCPUs []int
}

// newFwdTopo names the namespaces of a topology BASE-PID-N-{gen,rtr,sink}.
func newFwdTopo(base string) *fwdTopo {
	t := &fwdTopo{}
	prefix := harness.FreePrefix(base)
	for role, name := range []string{"gen", "rtr", "sink"} {
		t.ns[role] = prefix + "-" + name
	}
	return t
}

// up creates the namespaces, the veth pairs, addresses and static
// neighbours, turns GRO on at the router's ingress port (live frames only
// enter a veth whose NAPI is on, which an XDP program or GRO does) and
// resolves the ifindexes.
func (t *fwdTopo) up(ctx context.Context) error {
	for _, ns := range t.ns {
		if err := harness.AddNamespace(ctx, ns); err != nil {
			return err
		}
		t.created = append(t.created, ns)
	}
	pair := func(a, b int) error {
		return harness.AddVeth(ctx, harness.Veth{
			A:      harness.End{NS: t.ns[portNS(a)], Dev: fwdPort(a), MAC: fwdMAC(a)},
			B:      harness.End{NS: t.ns[portNS(b)], Dev: fwdPort(b), MAC: fwdMAC(b)},
			Queues: t.queues,
		})
	}
	if err := pair(roleGen, roleRtrIn); err != nil {
		return err
	}
	if err := pair(roleRtrOut, roleSink); err != nil {
		return err
	}
	// Each port's neighbour is the other end of its pair.
	peer := [4]int{roleGen: roleRtrIn, roleRtrIn: roleGen, roleRtrOut: roleSink, roleSink: roleRtrOut}
	var cmds [][]string
	for p := range nPorts {
		ns, dev := t.ns[portNS(p)], fwdPort(p)
		cmds = append(cmds,
			[]string{"-n", ns, "addr", "add", fwdAddr(p).String() + "/24", "dev", dev},
			[]string{"-n", ns, "link", "set", dev, "up"},
			[]string{"-n", ns, "neigh", "replace", fwdAddr(peer[p]).String(), "lladdr", fwdMAC(peer[p]).String(), "dev", dev, "nud", "permanent"})
	}
	for _, c := range cmds {
		if err := harness.Run(ctx, "ip", c...); err != nil {
			return err
		}
	}
	for _, ns := range t.ns {
		// No IPv6 chatter (DAD, router solicitations) on the measured ports.
		if err := harness.NoIPv6(ctx, ns); err != nil {
			return err
		}
	}
	if err := harness.Exec(ctx, t.ns[roleRtr], "ethtool", "-K", fwdPort(roleRtrIn), "gro", "on"); err != nil {
		return err
	}
	for p := range nPorts {
		err := t.in(portNS(p), func() error {
			ifi, err := net.InterfaceByName(fwdPort(p))
			if err != nil {
				return err
			}
			t.ifindex[p] = ifi.Index
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// down closes the links and deletes the namespaces, whatever the state up
// reached; the kernel removes the veths and routes with them.
func (t *fwdTopo) down() error {
	var errs []error
	for i := len(t.closers) - 1; i >= 0; i-- {
		if err := t.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.closers = nil
	for _, ns := range t.created {
		if err := harness.DelNamespace(context.Background(), ns); err != nil {
			errs = append(errs, err)
		}
	}
	t.created = nil
	return errors.Join(errs...)
}

// in runs f on an OS thread in the namespace of role. The thread stays
// locked and ends with its goroutine, so no other goroutine ever runs in the
// namespace.
func (t *fwdTopo) in(role int, f func() error) error {
	return nsthread.Run(t.ns[role], f)
}

func (t *fwdTopo) setIPForward(ctx context.Context, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return harness.Sysctl(ctx, t.ns[roleRtr], "net.ipv4.ip_forward="+v)
}

// installKernelRoutes puts the prefixes into the router namespace's kernel
// FIB via the sink, with one `ip -batch` (about 100k routes/s).
func (t *fwdTopo) installKernelRoutes(ctx context.Context, prefixes []netip.Prefix) error {
	return t.installKernelTable(ctx, prefixes, unix.RT_TABLE_MAIN)
}

// loadDatapath loads the FE datapath with the routes towards the sink, the
// sink as the resolved neighbour and the router's own addresses; it is
// attached only while its mode is measured. With baselines it is the
// benchmarks' BPF object instead (fibbench.Load: the same router, built
// from the same pipeline, and beside it the baselines), returned as b too.
func (t *fwdTopo) loadDatapath(prefixes []netip.Prefix, baselines bool) (*datapath.Datapath, *fibbench.Object, error) {
	routes := make([]datapath.Route, len(prefixes))
	for i, p := range prefixes {
		routes[i] = datapath.Route{Prefix: p, Nexthop: 1}
	}
	return t.loadDatapathRoutes(routes, baselines)
}

// loadDatapathRoutes is loadDatapath with the routes given: their nexthops
// 1 to fibbench.EdgeUpstreams all lead to the sink (through the same port,
// as upstreams behind one switch would).
func (t *fwdTopo) loadDatapathRoutes(routes []datapath.Route, baselines bool) (_ *datapath.Datapath, b *fibbench.Object, err error) {
	var d *datapath.Datapath
	if baselines {
		if b, err = fibbench.Load(fibbench.Options{}); err == nil {
			d = b.Datapath
		}
	} else {
		d, err = datapath.Load()
	}
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil && b != nil {
			b.Close()
		} else if err != nil {
			d.Close()
		}
	}()
	out := t.ifindex[roleRtrOut]
	for id := uint32(1); id <= fibbench.EdgeUpstreams; id++ {
		if err := d.SetNexthop(id, datapath.Nexthop{Ifindex: out, Gateway: fwdAddr(roleSink), SrcMAC: fwdMAC(roleRtrOut)}); err != nil {
			return nil, nil, err
		}
	}
	if err := d.SetNeighbor(out, fwdAddr(roleSink), fwdMAC(roleSink)); err != nil {
		return nil, nil, err
	}
	if err := d.SetNeighbor(t.ifindex[roleRtrIn], fwdAddr(roleGen), fwdMAC(roleGen)); err != nil {
		return nil, nil, err
	}
	for _, p := range []int{roleRtrIn, roleRtrOut} {
		if err := d.SetLocalAddr(fwdAddr(p)); err != nil {
			return nil, nil, err
		}
	}
	if err := d.SetRoutes(routes); err != nil {
		return nil, nil, err
	}
	return d, b, nil
}

// measureDatapath attaches the datapath to both router ports, measures, and
// detaches it again. The datapath's forwarded counter must grow.
func (t *fwdTopo) measureDatapath(ctx context.Context, g *gen.Gen, d *datapath.Datapath, dur time.Duration) (pps float64, err error) {
	if err := t.setIPForward(ctx, false); err != nil {
		return 0, err
	}
	ports := []int{t.ifindex[roleRtrIn], t.ifindex[roleRtrOut]}
	var attached []int
	defer func() {
		for _, ifindex := range attached {
			if derr := d.Detach(ifindex); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	err = t.in(roleRtr, func() error {
		for _, ifindex := range ports {
			if err := d.Attach(ifindex, datapath.ModeNative); err != nil {
				return err
			}
			attached = append(attached, ifindex)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	before, err := d.Counters()
	if err != nil {
		return 0, err
	}
	pps, err = t.measure(ctx, g, dur)
	if err != nil {
		return 0, err
	}
	after, err := d.Counters()
	if err != nil {
		return 0, err
	}
	if after["forwarded"] == before["forwarded"] {
		var why []string
		for _, name := range datapath.CounterNames() {
			if n := after[name] - before[name]; n > 0 {
				why = append(why, fmt.Sprintf("%s +%d", name, n))
			}
		}
		return 0, fmt.Errorf("datapath forwarded nothing (%s): %w", strings.Join(why, ", "), ErrIncomplete)
	}
	return pps, nil
}

// measureKernel measures with no XDP on the router and ip_forward on.
func (t *fwdTopo) measureKernel(ctx context.Context, g *gen.Gen, dur time.Duration) (float64, error) {
	if err := t.setIPForward(ctx, true); err != nil {
		return 0, err
	}
	pps, err := t.measure(ctx, g, dur)
	if ferr := t.setIPForward(context.Background(), false); err == nil {
		err = ferr
	}
	return pps, err
}

// measureLookupRedirect measures b's xdp_redirect_lookup on the router's
// ingress port.
func (t *fwdTopo) measureLookupRedirect(ctx context.Context, g *gen.Gen, b *fibbench.Object, dur time.Duration) (float64, error) {
	return t.measureProgram(ctx, g, dur, b.AttachRedirectLookup)
}

// measureBare measures xdp_redirect_bare on the router's ingress port.
func (t *fwdTopo) measureBare(ctx context.Context, g *gen.Gen, dur time.Duration) (float64, error) {
	return t.measureProgram(ctx, g, dur, g.AttachRedirectBare)
}

// measureProgram attaches a program that redirects from the router's
// ingress port to its egress port (attach(in, out)), the kernel not
// forwarding, measures, and detaches it.
func (t *fwdTopo) measureProgram(ctx context.Context, g *gen.Gen, dur time.Duration, attach func(in, out int) (link.Link, error)) (pps float64, err error) {
	if err := t.setIPForward(ctx, false); err != nil {
		return 0, err
	}
	var closeLink func() error
	err = t.in(roleRtr, func() error {
		l, err := attach(t.ifindex[roleRtrIn], t.ifindex[roleRtrOut])
		if err == nil {
			closeLink = l.Close
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := closeLink(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return t.measure(ctx, g, dur)
}

// measure runs the generator for dur and returns the sink's rate over the
// middle half of the run. The sink must have counted packets.
func (t *fwdTopo) measure(ctx context.Context, g *gen.Gen, dur time.Duration) (float64, error) {
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	frames := t.frames
	if frames == 0 {
		frames = sendFrames
	}
	deadline := time.Now().Add(dur)
	send := func(cpu int) error {
		return t.in(roleGen, func() error {
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					return fmt.Errorf("generator on CPU %d: %w", cpu, err)
				}
			}
			for time.Now().Before(deadline) && gctx.Err() == nil {
				if err := g.Send(t.ifindex[roleGen], frames); err != nil {
					return err
				}
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() {
		if len(t.genCPUs) == 0 {
			done <- send(-1)
			return
		}
		errs := make(chan error, len(t.genCPUs))
		for _, cpu := range t.genCPUs {
			go func() { errs <- send(cpu) }()
		}
		var all []error
		for range t.genCPUs {
			all = append(all, <-errs)
		}
		done <- errors.Join(all...)
	}()
	// wait sleeps for d unless the generator fails or ctx ends first.
	wait := func(d time.Duration) error {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case err := <-done:
			if err == nil {
				err = errors.New("generator stopped early")
			}
			return err
		case <-ctx.Done():
			<-done
			return ctx.Err()
		}
	}
	sample := func() (uint64, time.Time, error) {
		n, err := g.SinkPackets()
		return n, time.Now(), err
	}
	fail := func(err error) (float64, error) {
		stop()
		<-done
		return 0, err
	}
	if err := wait(dur / 4); err != nil {
		return 0, err
	}
	n0, t0, err := sample()
	if err != nil {
		return fail(err)
	}
	if err := wait(dur / 2); err != nil {
		return 0, err
	}
	n1, t1, err := sample()
	if err != nil {
		return fail(err)
	}
	if err := <-done; err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n1 == n0 {
		return 0, fmt.Errorf("the sink received nothing: %w", ErrIncomplete)
	}
	return float64(n1-n0) / t1.Sub(t0).Seconds(), nil
}
