//go:build linux

package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Table sizes of the BPF maps; they match the defines in xdp.c.
const (
	MaxRoutes     = 2_000_000 // IPv4 routes in the FIB
	MaxNexthops   = 65536     // nexthop ids are 0 .. MaxNexthops-1
	MaxNeighbors  = 65536     // (ifindex, address) entries
	MaxLocalAddrs = 4096      // addresses of the router itself
	MaxPorts      = 1024      // ports that can be attached at once
)

// Errors returned (wrapped) by Datapath methods.
var (
	// ErrNotFound means the route, nexthop, neighbour or address to delete
	// is not in the datapath.
	ErrNotFound = errors.New("not found")
	// ErrInvalid means an argument was rejected before touching the kernel.
	ErrInvalid = errors.New("invalid argument")
	// ErrAlreadyAttached means the program is already attached to the port.
	ErrAlreadyAttached = errors.New("already attached")
	// ErrNotAttached means Detach was called for a port without the program.
	ErrNotAttached = errors.New("not attached")
	// ErrClosed means the Datapath has been closed.
	ErrClosed = errors.New("datapath closed")
)

// Mode selects how the XDP program is attached to a port.
type Mode int

const (
	// ModeNative runs the program in the driver (XDP_FLAGS_DRV_MODE).
	ModeNative Mode = iota
	// ModeGeneric runs the program on skbs (XDP_FLAGS_SKB_MODE); it works
	// on every device but is several times slower.
	ModeGeneric
)

// String returns "native" or "generic".
func (m Mode) String() string {
	switch m {
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) flags() (link.XDPAttachFlags, error) {
	switch m {
	case ModeNative:
		return link.XDPDriverMode, nil
	case ModeGeneric:
		return link.XDPGenericMode, nil
	}
	return 0, fmt.Errorf("mode %s: %w", m, ErrInvalid)
}

// Nexthop is where a route sends packets: out of Ifindex, to the neighbour
// Gateway (or, for a connected route, to the destination itself), with
// SrcMAC as the Ethernet source.
type Nexthop struct {
	Ifindex int
	// Gateway is the IPv4 address of the next router; the zero Addr or
	// 0.0.0.0 marks a connected route.
	Gateway netip.Addr
	SrcMAC  net.HardwareAddr
}

// counterNames names the stats map entries; the index type is the C enum, so
// the compiler rejects a reason that no longer exists.
var counterNames = [xdpStatReasonSTAT_MAX]string{
	xdpStatReasonSTAT_RX:               "rx",
	xdpStatReasonSTAT_FORWARDED:        "forwarded",
	xdpStatReasonSTAT_FORWARDED_BYTES:  "forwarded_bytes",
	xdpStatReasonSTAT_PASS_TRUNCATED:   "pass_truncated",
	xdpStatReasonSTAT_PASS_NOT_IPV4:    "pass_not_ipv4",
	xdpStatReasonSTAT_PASS_VLAN:        "pass_vlan",
	xdpStatReasonSTAT_PASS_NOT_UNICAST: "pass_not_unicast",
	xdpStatReasonSTAT_PASS_BAD_HEADER:  "pass_bad_header",
	xdpStatReasonSTAT_PASS_OPTIONS:     "pass_options",
	xdpStatReasonSTAT_PASS_LOCAL:       "pass_local",
	xdpStatReasonSTAT_PASS_TTL:         "pass_ttl",
	xdpStatReasonSTAT_PASS_NO_ROUTE:    "pass_no_route",
	xdpStatReasonSTAT_PASS_NO_NEXTHOP:  "pass_no_nexthop",
	xdpStatReasonSTAT_PASS_NO_NEIGH:    "pass_no_neigh",
	xdpStatReasonSTAT_PASS_NO_TX_PORT:  "pass_no_tx_port",
}

// CounterNames returns the names of all counters in the order of the C enum,
// for stable printing. The names never change meaning.
func CounterNames() []string {
	return append([]string(nil), counterNames[:]...)
}

// Counters holds the datapath counters summed over all CPUs, keyed by the
// names of CounterNames. Every packet counts once as "rx" and once under
// "forwarded" or one "pass_*" reason; "forwarded_bytes" counts frame bytes.
type Counters map[string]uint64

// Datapath is the loaded XDP program and its maps for one FE. Its methods are
// safe for concurrent use.
type Datapath struct {
	objs routerObjects
	// trie is the LPM trie baseline, loaded for benchmarks only.
	trie *trieObjects

	mu     sync.Mutex
	links  map[int]link.Link // by ifindex
	closed bool

	// fibMu serialises FIB changes; fib is nil once closed.
	fibMu  sync.Mutex
	fib    *fib
	unmaps []func() error
	rcu    *rcuBarrier
}

// routerObjects are the objects of xdp_router, which the FE runs.
type routerObjects struct {
	XdpRouter  *ebpf.Program `ebpf:"xdp_router"`
	FibTbl24   *ebpf.Map     `ebpf:"fib_tbl24"`
	FibTbl8    *ebpf.Map     `ebpf:"fib_tbl8"`
	Nexthops   *ebpf.Map     `ebpf:"nexthops"`
	Neighbors  *ebpf.Map     `ebpf:"neighbors"`
	LocalAddrs *ebpf.Map     `ebpf:"local_addrs"`
	TxPorts    *ebpf.Map     `ebpf:"tx_ports"`
	Stats      *ebpf.Map     `ebpf:"stats"`
	// BenchDsts is the address array of bench_rotate.
	BenchDsts *ebpf.Variable `ebpf:"bench_dsts"`
}

func (o *routerObjects) Close() error {
	return closeAll(o.XdpRouter, o.FibTbl24, o.FibTbl8, o.Nexthops, o.Neighbors, o.LocalAddrs, o.TxPorts, o.Stats)
}

// trieObjects are the extra objects of the baseline xdp_router_trie.
type trieObjects struct {
	XdpRouterTrie *ebpf.Program `ebpf:"xdp_router_trie"`
	Routes        *ebpf.Map     `ebpf:"routes"`
}

func (o *trieObjects) Close() error {
	return closeAll(o.XdpRouterTrie, o.Routes)
}

func closeAll(cs ...interface{ Close() error }) error {
	var errs []error
	for _, c := range cs {
		if c == nil || (c == (*ebpf.Map)(nil)) || (c == (*ebpf.Program)(nil)) {
			continue
		}
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Load loads the XDP program and creates its (empty) maps. It removes the
// memlock rlimit, which kernels before 5.11 charge BPF maps against.
func Load() (*Datapath, error) {
	return load(loadOptions{})
}

type loadOptions struct {
	// benchIgnoreTTL makes the program forward packets whatever their
	// TTL; see bench_ignore_ttl in xdp.c.
	benchIgnoreTTL bool
	// benchRotate makes every run take its destination from bench_dsts;
	// see bench_rotate in xdp.c.
	benchRotate bool
	// trie also loads xdp_router_trie and its LPM trie (baseline).
	trie bool
	// tbl8Groups, if not 0, replaces FIBGroups (tests of exhaustion).
	tbl8Groups int
}

func load(opts loadOptions) (*Datapath, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock rlimit: %w", err)
	}
	spec, err := loadXdp()
	if err != nil {
		return nil, err
	}
	set := func(name string, v uint32) error {
		sv, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("variable %s missing from the BPF object", name)
		}
		if err := sv.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	if opts.benchIgnoreTTL {
		if err := set(xdpVarBenchIgnoreTtl, 1); err != nil {
			return nil, err
		}
	}
	if opts.benchRotate {
		if err := set(xdpVarBenchRotate, 1); err != nil {
			return nil, err
		}
	}
	if opts.tbl8Groups > 0 {
		spec.Maps[xdpMapFibTbl8].MaxEntries = uint32(opts.tbl8Groups)
	}
	d := &Datapath{links: make(map[int]link.Link)}
	var err2 error
	if opts.trie {
		var all struct {
			routerObjects
			trieObjects
		}
		err2 = spec.LoadAndAssign(&all, nil)
		d.objs, d.trie = all.routerObjects, &all.trieObjects
	} else {
		err2 = spec.LoadAndAssign(&d.objs, nil)
	}
	if err2 != nil {
		var ve *ebpf.VerifierError
		if errors.As(err2, &ve) {
			// The last lines of the log say why; %+v keeps them all.
			return nil, fmt.Errorf("load xdp_router: %+v", ve)
		}
		return nil, fmt.Errorf("load xdp_router: %w", err2)
	}
	if err := d.initFIB(); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

// initFIB maps the FIB arrays into the process and sets up the control
// structure over them.
func (d *Datapath) initFIB() error {
	tbl24, unmap24, err := mmapU32Array(d.objs.FibTbl24)
	if err != nil {
		return fmt.Errorf("FIB: %w", err)
	}
	d.unmaps = append(d.unmaps, unmap24)
	tbl8, unmap8, err := mmapU32Array(d.objs.FibTbl8)
	if err != nil {
		return fmt.Errorf("FIB: %w", err)
	}
	d.unmaps = append(d.unmaps, unmap8)
	if len(tbl24) != fibTbl24Entries || len(tbl8)%fibGroupEntries != 0 {
		return fmt.Errorf("FIB: tables of %d and %d entries do not match fib.go", len(tbl24), len(tbl8))
	}
	if d.rcu, err = newRCUBarrier(); err != nil {
		return fmt.Errorf("FIB: %w", err)
	}
	d.fib = newFIB(tbl24, tbl8, d.rcu.wait)
	return nil
}

// Program returns the loaded xdp_router program, for tests and benchmarks.
// It stays owned by the Datapath.
func (d *Datapath) Program() *ebpf.Program {
	return d.objs.XdpRouter
}

// Attach attaches the program to the port ifindex in the given mode and adds
// the port to the egress ports. Attaching to a port twice is an error.
func (d *Datapath) Attach(ifindex int, mode Mode) error {
	flags, err := mode.flags()
	if err != nil {
		return fmt.Errorf("attach %s: %w", ifName(ifindex), err)
	}
	if err := checkIfindex(ifindex); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("attach %s: %w", ifName(ifindex), ErrClosed)
	}
	if _, ok := d.links[ifindex]; ok {
		return fmt.Errorf("attach %s: %w", ifName(ifindex), ErrAlreadyAttached)
	}
	// The port must be a redirect target before packets can arrive on it
	// for it, and devmap insertion also proves the ifindex exists.
	if err := d.addTxPort(ifindex); err != nil {
		return fmt.Errorf("attach %s: %w", ifName(ifindex), err)
	}
	l, err := link.AttachXDP(link.XDPOptions{
		Program:   d.objs.XdpRouter,
		Interface: ifindex,
		Flags:     flags,
	})
	if err != nil {
		_ = d.deleteTxPort(ifindex)
		return fmt.Errorf("attach %s in %s mode: %w", ifName(ifindex), mode, err)
	}
	d.links[ifindex] = l
	return nil
}

// Detach removes the program from the port ifindex and the port from the
// egress ports.
func (d *Datapath) Detach(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.links[ifindex]
	if !ok {
		return fmt.Errorf("detach %s: %w", ifName(ifindex), ErrNotAttached)
	}
	delete(d.links, ifindex)
	return d.detach(ifindex, l)
}

func (d *Datapath) detach(ifindex int, l link.Link) error {
	err := l.Close()
	// The kernel drops devmap entries of deleted devices by itself.
	if terr := d.deleteTxPort(ifindex); terr != nil && !errors.Is(terr, ebpf.ErrKeyNotExist) {
		err = errors.Join(err, terr)
	}
	if err != nil {
		return fmt.Errorf("detach %s: %w", ifName(ifindex), err)
	}
	return nil
}

func (d *Datapath) addTxPort(ifindex int) error {
	if err := d.objs.TxPorts.Put(uint32(ifindex), uint32(ifindex)); err != nil {
		return fmt.Errorf("add tx port %d: %w", ifindex, err)
	}
	return nil
}

func (d *Datapath) deleteTxPort(ifindex int) error {
	return d.objs.TxPorts.Delete(uint32(ifindex))
}

// Close detaches the program from every port and releases the program and
// its maps. Calling it again does nothing.
func (d *Datapath) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for ifindex, l := range d.links {
		if err := d.detach(ifindex, l); err != nil {
			errs = append(errs, err)
		}
	}
	d.links = nil
	d.fibMu.Lock()
	d.fib = nil
	for _, unmap := range d.unmaps {
		if err := unmap(); err != nil {
			errs = append(errs, fmt.Errorf("unmap FIB: %w", err))
		}
	}
	d.unmaps = nil
	if d.rcu != nil {
		if err := d.rcu.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	d.fibMu.Unlock()
	if err := d.objs.Close(); err != nil {
		errs = append(errs, err)
	}
	if d.trie != nil {
		if err := d.trie.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetRoute makes packets to p (masked to its prefix length) use nexthop
// nexthopID, replacing any previous route for p. Only IPv4 is supported.
// Setting a route it already has changes nothing.
func (d *Datapath) SetRoute(p netip.Prefix, nexthopID uint32) error {
	if err := d.SetRoutes([]Route{{Prefix: p, Nexthop: nexthopID}}); err != nil {
		return fmt.Errorf("set route: %w", err)
	}
	return nil
}

// SetRoutes sets all routes as SetRoute does, as one batch: either all are
// applied, or none is and the error says why (ErrInvalid for a bad route,
// ErrFIBFull when the tbl8 groups or MaxRoutes would be exceeded). Packets
// forwarded meanwhile use, for each address, its old or its new route;
// longer prefixes are installed first so that no address passes through a
// shorter prefix of the batch that does not apply to it. A prefix given
// twice ends with the last nexthop.
func (d *Datapath) SetRoutes(routes []Route) error {
	ps := make([]prefix, len(routes))
	nhs := make([]uint32, len(routes))
	for i, r := range routes {
		p, err := toPrefix(r.Prefix)
		if err != nil {
			return err
		}
		if err := checkNexthopID(r.Nexthop); err != nil {
			return fmt.Errorf("route %s: %w", p, err)
		}
		ps[i], nhs[i] = p, r.Nexthop
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	return d.fib.set(ps, nhs)
}

// DeleteRoute removes the route for p (masked to its prefix length); a
// missing route gives an error wrapping ErrNotFound. Addresses it covered
// fall back to the next shorter prefix that covers them.
func (d *Datapath) DeleteRoute(p netip.Prefix) error {
	if err := d.DeleteRoutes([]netip.Prefix{p}); err != nil {
		return fmt.Errorf("delete route: %w", err)
	}
	return nil
}

// DeleteRoutes removes the routes for all prefixes as one batch: if one is
// not present (ErrNotFound) or not IPv4 (ErrInvalid), none is removed.
// Shorter prefixes are removed first, so that no address passes through a
// prefix of the batch that does not apply to it. A prefix given twice is
// removed once.
func (d *Datapath) DeleteRoutes(prefixes []netip.Prefix) error {
	ps := make([]prefix, len(prefixes))
	for i, p := range prefixes {
		var err error
		if ps[i], err = toPrefix(p); err != nil {
			return err
		}
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	return d.fib.delete(ps)
}

// RouteCount returns the number of routes.
func (d *Datapath) RouteCount() (int, error) {
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return 0, ErrClosed
	}
	return d.fib.count, nil
}

// SetNexthop stores nexthop id, replacing what was there.
func (d *Datapath) SetNexthop(id uint32, nh Nexthop) error {
	if err := checkNexthopID(id); err != nil {
		return fmt.Errorf("set nexthop: %w", err)
	}
	if err := checkIfindex(nh.Ifindex); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	if err := checkMAC("source MAC", nh.SrcMAC); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	v := xdpNexthop{Ifindex: uint32(nh.Ifindex)}
	if nh.Gateway.IsValid() {
		if !nh.Gateway.Is4() {
			return fmt.Errorf("set nexthop %d: gateway %s is not IPv4: %w", id, nh.Gateway, ErrInvalid)
		}
		v.Gateway = be32(nh.Gateway) // 0.0.0.0 stays 0: connected
	}
	copy(v.Smac[:], nh.SrcMAC)
	if err := d.objs.Nexthops.Put(id, &v); err != nil {
		return fmt.Errorf("set nexthop %d: %w", id, err)
	}
	return nil
}

// DeleteNexthop empties slot id; routes still pointing at it then send their
// packets to the kernel. An empty slot gives an error wrapping ErrNotFound.
func (d *Datapath) DeleteNexthop(id uint32) error {
	if err := checkNexthopID(id); err != nil {
		return fmt.Errorf("delete nexthop: %w", err)
	}
	var v xdpNexthop
	if err := d.objs.Nexthops.Lookup(id, &v); err != nil {
		return fmt.Errorf("delete nexthop %d: %w", id, err)
	}
	if v.Ifindex == 0 {
		return fmt.Errorf("delete nexthop %d: %w", id, ErrNotFound)
	}
	// Array slots cannot be deleted; ifindex 0 marks them empty.
	if err := d.objs.Nexthops.Put(id, &xdpNexthop{}); err != nil {
		return fmt.Errorf("delete nexthop %d: %w", id, err)
	}
	return nil
}

// SetNeighbor records that ip is reachable at mac through port ifindex.
func (d *Datapath) SetNeighbor(ifindex int, ip netip.Addr, mac net.HardwareAddr) error {
	key, err := neighKey(ifindex, ip)
	if err != nil {
		return fmt.Errorf("set neighbor: %w", err)
	}
	if err := checkMAC("neighbor MAC", mac); err != nil {
		return fmt.Errorf("set neighbor %s on %s: %w", ip, ifName(ifindex), err)
	}
	var v xdpNeigh
	copy(v.Mac[:], mac)
	if err := d.objs.Neighbors.Put(key, &v); err != nil {
		return fmt.Errorf("set neighbor %s on %s: %w", ip, ifName(ifindex), err)
	}
	return nil
}

// DeleteNeighbor forgets the neighbour ip on port ifindex; a missing entry
// gives an error wrapping ErrNotFound.
func (d *Datapath) DeleteNeighbor(ifindex int, ip netip.Addr) error {
	key, err := neighKey(ifindex, ip)
	if err != nil {
		return fmt.Errorf("delete neighbor: %w", err)
	}
	return deleteKey(d.objs.Neighbors, key, fmt.Sprintf("delete neighbor %s on %s", ip, ifName(ifindex)))
}

// SetLocalAddr marks ip as an address of the router: packets to it go to the
// kernel.
func (d *Datapath) SetLocalAddr(ip netip.Addr) error {
	if err := checkIPv4("local address", ip); err != nil {
		return fmt.Errorf("set local address: %w", err)
	}
	if err := d.objs.LocalAddrs.Put(be32(ip), uint8(1)); err != nil {
		return fmt.Errorf("set local address %s: %w", ip, err)
	}
	return nil
}

// DeleteLocalAddr unmarks ip; a missing address gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteLocalAddr(ip netip.Addr) error {
	if err := checkIPv4("local address", ip); err != nil {
		return fmt.Errorf("delete local address: %w", err)
	}
	return deleteKey(d.objs.LocalAddrs, be32(ip), "delete local address "+ip.String())
}

// Counters returns all counters summed over the CPUs.
func (d *Datapath) Counters() (Counters, error) {
	c := make(Counters, len(counterNames))
	var perCPU []uint64
	for i, name := range counterNames {
		if err := d.objs.Stats.Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("read counter %s: %w", name, err)
		}
		var sum uint64
		for _, v := range perCPU {
			sum += v
		}
		c[name] = sum
	}
	return c, nil
}

func deleteKey(m *ebpf.Map, key any, what string) error {
	err := m.Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func neighKey(ifindex int, ip netip.Addr) (xdpNeighKey, error) {
	if err := checkIfindex(ifindex); err != nil {
		return xdpNeighKey{}, err
	}
	if err := checkIPv4("neighbor address", ip); err != nil {
		return xdpNeighKey{}, err
	}
	return xdpNeighKey{Ifindex: uint32(ifindex), Addr: be32(ip)}, nil
}

func checkNexthopID(id uint32) error {
	if id >= MaxNexthops {
		return fmt.Errorf("nexthop id %d out of range [0, %d): %w", id, MaxNexthops, ErrInvalid)
	}
	return nil
}

func checkIfindex(ifindex int) error {
	if ifindex <= 0 || ifindex > 1<<31-1 {
		return fmt.Errorf("ifindex %d out of range: %w", ifindex, ErrInvalid)
	}
	return nil
}

func checkMAC(field string, mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("%s %q is %d bytes, want 6: %w", field, mac.String(), len(mac), ErrInvalid)
	}
	return nil
}

func checkIPv4(field string, ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("%s %s is not IPv4: %w", field, ip, ErrInvalid)
	}
	return nil
}

// be32 returns the IPv4 address as the uint32 whose in-memory bytes are in
// network order, as the BPF program keeps addresses.
func be32(ip netip.Addr) uint32 {
	a := ip.As4()
	return binary.NativeEndian.Uint32(a[:])
}

// ifName names a port in error messages.
func ifName(ifindex int) string {
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		return fmt.Sprintf("%s (ifindex %d)", ifi.Name, ifindex)
	}
	return fmt.Sprintf("ifindex %d", ifindex)
}
