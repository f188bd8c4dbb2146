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
	MaxRoutes     = 2_000_000 // IPv4 routes in the FIB; MaxRoutes6 is for IPv6
	MaxNexthops   = 65536     // nexthop ids are 0 .. MaxNexthops-1
	MaxNeighbors  = 65536     // (ifindex, address) entries per address family
	MaxLocalAddrs = 4096      // addresses of the router itself, per address family
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
// SrcMAC as the Ethernet source. Routes of both families share nexthops,
// and the gateway's family need not be the route's: an IPv4 route via an
// IPv6 gateway (RFC 8950) resolves the gateway among the IPv6 neighbours.
type Nexthop struct {
	Ifindex int
	// Gateway is the IPv4 or IPv6 address of the next router (IPv6
	// link-local addresses are the usual ones, without a zone: Ifindex is
	// the link); the zero Addr, 0.0.0.0 or :: marks a connected route.
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
	// Added with IPv6, so after the older names.
	xdpStatReasonSTAT_FORWARDED_IPV6:    "forwarded_ipv6",
	xdpStatReasonSTAT_PASS_NOT_ROUTABLE: "pass_not_routable",
}

// CounterNames returns the names of all counters in the order of the C enum,
// for stable printing. The names never change meaning.
func CounterNames() []string {
	return append([]string(nil), counterNames[:]...)
}

// Counters holds the datapath counters summed over all CPUs, keyed by the
// names of CounterNames. Every packet counts once as "rx" and once under
// "forwarded" or one "pass_*" reason; "forwarded_bytes" counts frame bytes
// and "forwarded_ipv6" the IPv6 packets among "forwarded". "pass_not_ipv4"
// counts frames that are neither IPv4 nor IPv6 (ARP, LLDP, ...).
type Counters map[string]uint64

// Datapath is the loaded XDP program and its maps for one FE. Its methods are
// safe for concurrent use.
type Datapath struct {
	objs routerObjects
	// trie is the LPM trie baseline, loaded for benchmarks only.
	trie *trieObjects

	mu    sync.Mutex
	links map[int]link.Link // by ifindex
	// slots holds the port_stats slot of each tx port, by ifindex.
	slots  map[int]uint32
	closed bool

	// fibMu serialises FIB changes; fib and fib6 are nil once closed.
	fibMu  sync.Mutex
	fib    *fib
	fib6   *fib6
	unmaps []func() error
	rcu    *rcuBarrier
}

// routerObjects are the objects of xdp_router, which the FE runs.
type routerObjects struct {
	XdpRouter   *ebpf.Program `ebpf:"xdp_router"`
	FibTbl24    *ebpf.Map     `ebpf:"fib_tbl24"`
	FibTbl8     *ebpf.Map     `ebpf:"fib_tbl8"`
	Fib6        *ebpf.Map     `ebpf:"fib6"`
	Nexthops    *ebpf.Map     `ebpf:"nexthops"`
	Neighbors   *ebpf.Map     `ebpf:"neighbors"`
	Neighbors6  *ebpf.Map     `ebpf:"neighbors6"`
	LocalAddrs  *ebpf.Map     `ebpf:"local_addrs"`
	LocalAddrs6 *ebpf.Map     `ebpf:"local_addrs6"`
	TxPorts     *ebpf.Map     `ebpf:"tx_ports"`
	Stats       *ebpf.Map     `ebpf:"stats"`
	PortStats   *ebpf.Map     `ebpf:"port_stats"`
	// PortSlots and PortSlotsHash map an ifindex to its PortStats slot.
	PortSlots     *ebpf.Map `ebpf:"port_slots"`
	PortSlotsHash *ebpf.Map `ebpf:"port_slots_hash"`
	// BenchDsts and BenchDsts6 are the address arrays of bench_rotate.
	BenchDsts  *ebpf.Variable `ebpf:"bench_dsts"`
	BenchDsts6 *ebpf.Variable `ebpf:"bench_dsts6"`
}

func (o *routerObjects) Close() error {
	return closeAll(o.XdpRouter, o.FibTbl24, o.FibTbl8, o.Fib6, o.Nexthops, o.Neighbors, o.Neighbors6,
		o.LocalAddrs, o.LocalAddrs6, o.TxPorts, o.Stats, o.PortStats,
		o.PortSlots, o.PortSlotsHash)
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
	// fib6Entries, if not 0, replaces the kernel's limit of IPv6 routes
	// but not the one fib6 checks (tests of failed batches).
	fib6Entries int
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
	if opts.fib6Entries > 0 {
		spec.Maps[xdpMapFib6].MaxEntries = uint32(opts.fib6Entries)
	}
	d := &Datapath{links: make(map[int]link.Link), slots: make(map[int]uint32)}
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
	d.fib6 = newFIB6(d.objs.Fib6)
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

// portSlotsDirect is PORT_SLOTS_DIRECT of xdp.c: ifindexes below it have
// their slot in port_slots, the others in port_slots_hash.
const portSlotsDirect = 65536

// addTxPort makes ifindex a redirect target and gives it a port_stats slot
// whose counters start from zero. d.mu is held, or the Datapath is not yet
// shared.
func (d *Datapath) addTxPort(ifindex int) error {
	if err := d.addPortSlot(ifindex); err != nil {
		return fmt.Errorf("add port counters %d: %w", ifindex, err)
	}
	if err := d.objs.TxPorts.Put(uint32(ifindex), uint32(ifindex)); err != nil {
		_ = d.deletePortSlot(ifindex)
		return fmt.Errorf("add tx port %d: %w", ifindex, err)
	}
	return nil
}

// deleteTxPort undoes addTxPort; its error wraps ebpf.ErrKeyNotExist if
// the kernel already dropped the tx port with its device.
func (d *Datapath) deleteTxPort(ifindex int) error {
	err := d.objs.TxPorts.Delete(uint32(ifindex))
	if serr := d.deletePortSlot(ifindex); serr != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			err = nil // only the counters' error matters then
		}
		return errors.Join(err, fmt.Errorf("delete port counters %d: %w", ifindex, serr))
	}
	return err
}

// addPortSlot gives ifindex the lowest free slot, zeroes its counters and
// then publishes it to the program, so that the port's first packet counts.
func (d *Datapath) addPortSlot(ifindex int) error {
	used := make([]bool, MaxPorts+1)
	for _, s := range d.slots {
		used[s] = true
	}
	slot := uint32(1) // 0 collects unknown ports
	for ; slot <= MaxPorts && used[slot]; slot++ {
	}
	if slot > MaxPorts {
		return fmt.Errorf("all %d port slots in use: %w", MaxPorts, ErrInvalid)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	if err := d.objs.PortStats.Put(slot, make([]xdpPortCounters, ncpu)); err != nil {
		return err
	}
	if ifindex < portSlotsDirect {
		err = d.objs.PortSlots.Put(uint32(ifindex), slot)
	} else {
		err = d.objs.PortSlotsHash.Put(uint32(ifindex), slot)
	}
	if err != nil {
		return err
	}
	d.slots[ifindex] = slot
	return nil
}

// deletePortSlot frees the slot of ifindex; packets in flight may still add
// to it, and the next port to take the slot starts from zero anyway.
func (d *Datapath) deletePortSlot(ifindex int) error {
	if _, ok := d.slots[ifindex]; !ok {
		return nil
	}
	var err error
	if ifindex < portSlotsDirect {
		err = d.objs.PortSlots.Put(uint32(ifindex), uint32(0))
	} else {
		err = d.objs.PortSlotsHash.Delete(uint32(ifindex))
	}
	if err != nil {
		return err
	}
	delete(d.slots, ifindex)
	return nil
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
	d.fib, d.fib6 = nil, nil
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
// nexthopID, replacing any previous route for p. p is IPv4 or IPv6 (not
// IPv4-mapped IPv6). Setting a route it already has changes nothing.
func (d *Datapath) SetRoute(p netip.Prefix, nexthopID uint32) error {
	if err := d.SetRoutes([]Route{{Prefix: p, Nexthop: nexthopID}}); err != nil {
		return fmt.Errorf("set route: %w", err)
	}
	return nil
}

// SetRoutes sets all routes as SetRoute does, as one batch: either all are
// applied, or none is and the error says why (ErrInvalid for a bad route,
// ErrFIBFull when the tbl8 groups, MaxRoutes or MaxRoutes6 would be
// exceeded). Packets forwarded meanwhile use, for each address, its old or
// its new route; longer prefixes are installed first so that no address
// passes through a shorter prefix of the batch that does not apply to it. A
// prefix given twice ends with the last nexthop.
func (d *Datapath) SetRoutes(routes []Route) error {
	var ps []prefix
	var nhs []uint32
	var ps6 []prefix6
	var nhs6 []uint32
	for _, r := range routes {
		p, p6, is6, err := routePrefix(r.Prefix)
		if err != nil {
			return err
		}
		if err := checkNexthopID(r.Nexthop); err != nil {
			return fmt.Errorf("route %s: %w", r.Prefix.Masked(), err)
		}
		if is6 {
			ps6, nhs6 = append(ps6, p6), append(nhs6, r.Nexthop)
		} else {
			ps, nhs = append(ps, p), append(nhs, r.Nexthop)
		}
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	// IPv6 first: fib6 can undo its part if the IPv4 part is refused,
	// while fib.set either applies everything or nothing.
	undo6, err := d.fib6.set(ps6, nhs6)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	if err := d.fib.set(ps, nhs); err != nil {
		return errors.Join(err, undo6())
	}
	return nil
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
// not present (ErrNotFound) or invalid (ErrInvalid), none is removed.
// Shorter prefixes are removed first, so that no address passes through a
// prefix of the batch that does not apply to it. A prefix given twice is
// removed once.
func (d *Datapath) DeleteRoutes(prefixes []netip.Prefix) error {
	var ps []prefix
	var ps6 []prefix6
	for _, p := range prefixes {
		p4, p6, is6, err := routePrefix(p)
		if err != nil {
			return err
		}
		if is6 {
			ps6 = append(ps6, p6)
		} else {
			ps = append(ps, p4)
		}
	}
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return ErrClosed
	}
	// Check both families before changing either; after that, only the
	// kernel can fail, and only fib6 talks to it.
	if err := d.fib.check(ps); err != nil {
		return err
	}
	if err := d.fib6.delete(ps6); err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	return d.fib.delete(ps)
}

// RouteCount returns the number of routes of both address families.
func (d *Datapath) RouteCount() (int, error) {
	d.fibMu.Lock()
	defer d.fibMu.Unlock()
	if d.fib == nil {
		return 0, ErrClosed
	}
	return d.fib.count + d.fib6.count(), nil
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
	if gw := nh.Gateway; gw.IsValid() && !gw.IsUnspecified() {
		is6, err := checkAddr("gateway", gw)
		if err != nil {
			return fmt.Errorf("set nexthop %d: %w", id, err)
		}
		if is6 {
			v.GwFamily, v.Gateway6 = gwIPv6, gw.As16()
		} else {
			v.GwFamily, v.Gateway = gwIPv4, be32(gw)
		}
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
	if err := d.neighMap(ip).Put(key, &v); err != nil {
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
	return deleteKey(d.neighMap(ip), key, fmt.Sprintf("delete neighbor %s on %s", ip, ifName(ifindex)))
}

// SetLocalAddr marks ip (IPv4 or IPv6) as an address of the router: packets
// to it go to the kernel. IPv6 link-local and multicast destinations go to
// the kernel anyway.
func (d *Datapath) SetLocalAddr(ip netip.Addr) error {
	m, key, err := d.localKey(ip)
	if err != nil {
		return fmt.Errorf("set local address: %w", err)
	}
	if err := m.Put(key, uint8(1)); err != nil {
		return fmt.Errorf("set local address %s: %w", ip, err)
	}
	return nil
}

// DeleteLocalAddr unmarks ip; a missing address gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteLocalAddr(ip netip.Addr) error {
	m, key, err := d.localKey(ip)
	if err != nil {
		return fmt.Errorf("delete local address: %w", err)
	}
	return deleteKey(m, key, "delete local address "+ip.String())
}

func (d *Datapath) localKey(ip netip.Addr) (*ebpf.Map, any, error) {
	is6, err := checkAddr("local address", ip)
	if err != nil {
		return nil, nil, err
	}
	if is6 {
		return d.objs.LocalAddrs6, ip.As16(), nil
	}
	return d.objs.LocalAddrs, be32(ip), nil
}

// Counters returns all counters summed over the CPUs.
func (d *Datapath) Counters() (Counters, error) {
	c := make(Counters, len(counterNames))
	err := d.readCounters(func(name string, perCPU []uint64) {
		var sum uint64
		for _, v := range perCPU {
			sum += v
		}
		c[name] = sum
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// CPUCounters returns the counters of Counters for each possible CPU,
// indexed by CPU number, so that an operator can see which cores did the
// work. Each counter summed over the CPUs gives Counters, up to the packets
// counted between the two reads.
func (d *Datapath) CPUCounters() ([]Counters, error) {
	var cs []Counters
	err := d.readCounters(func(name string, perCPU []uint64) {
		for len(cs) < len(perCPU) {
			cs = append(cs, make(Counters, len(counterNames)))
		}
		for cpu, v := range perCPU {
			cs[cpu][name] = v
		}
	})
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// readCounters calls f with the per-CPU values of each counter.
func (d *Datapath) readCounters(f func(name string, perCPU []uint64)) error {
	var perCPU []uint64
	for i, name := range counterNames {
		if err := d.objs.Stats.Lookup(uint32(i), &perCPU); err != nil {
			return fmt.Errorf("read counter %s: %w", name, err)
		}
		f(name, perCPU)
	}
	return nil
}

// PortCounters counts the packets of one port, summed over the CPUs, since
// the port was attached. Every packet received on the port counts in
// RxPackets and RxBytes, and those handed to the kernel (XDP_PASS) also in
// Passed; every packet the fast path forwards out of the port counts in
// TxPackets and TxBytes. Bytes are Ethernet frame bytes without the FCS.
// The fast path drops nothing itself, so there is no drop counter.
type PortCounters struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	Passed    uint64 `json:"passed"`
}

// PortCounters returns the counters of every attached port, keyed by
// ifindex. A port's counters start from zero when it is attached.
func (d *Datapath) PortCounters() (map[int]PortCounters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	pcs := make(map[int]PortCounters, len(d.slots))
	var perCPU []xdpPortCounters
	for ifindex, slot := range d.slots {
		if err := d.objs.PortStats.Lookup(slot, &perCPU); err != nil {
			return nil, fmt.Errorf("read counters of %s: %w", ifName(ifindex), err)
		}
		var pc PortCounters
		for _, c := range perCPU {
			pc.RxPackets += c.RxPackets
			pc.RxBytes += c.RxBytes
			pc.TxPackets += c.TxPackets
			pc.TxBytes += c.TxBytes
			pc.Passed += c.Passed
		}
		pcs[ifindex] = pc
	}
	return pcs, nil
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

// neighKey returns the key of neighbour ip on ifindex in the map of its
// family (see neighMap).
func neighKey(ifindex int, ip netip.Addr) (any, error) {
	if err := checkIfindex(ifindex); err != nil {
		return nil, err
	}
	is6, err := checkAddr("neighbor address", ip)
	if err != nil {
		return nil, err
	}
	if is6 {
		return &xdpNeighKey6{Ifindex: uint32(ifindex), Addr: ip.As16()}, nil
	}
	return &xdpNeighKey{Ifindex: uint32(ifindex), Addr: be32(ip)}, nil
}

// neighMap returns the neighbour map of ip's family; ip has passed checkAddr.
func (d *Datapath) neighMap(ip netip.Addr) *ebpf.Map {
	if ip.Is4() {
		return d.objs.Neighbors
	}
	return d.objs.Neighbors6
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

// Values of nexthop.gw_family (GW_* in xdp.c).
const (
	gwIPv4 = 4
	gwIPv6 = 6
)

// checkAddr accepts IPv4 and IPv6 addresses and says which ip is. IPv4-mapped
// IPv6 addresses are refused (the IPv4 path never looks them up), and so are
// zones (the ifindex names the link).
func checkAddr(field string, ip netip.Addr) (is6 bool, err error) {
	switch {
	case ip.Is4():
		return false, nil
	case !ip.IsValid():
		return false, fmt.Errorf("%s %s is not IPv4 or IPv6: %w", field, ip, ErrInvalid)
	case ip.Is4In6():
		return false, fmt.Errorf("%s %s is IPv4-mapped IPv6, give the IPv4 address: %w", field, ip, ErrInvalid)
	case ip.Zone() != "":
		return false, fmt.Errorf("%s %s has a zone: %w", field, ip, ErrInvalid)
	}
	return true, nil
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
