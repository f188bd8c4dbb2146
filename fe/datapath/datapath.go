//go:build linux

package datapath

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Table sizes of the BPF maps; they match the defines in bpf/maps.h.
const (
	MaxRoutes     = 2_000_000 // IPv4 routes in the FIB; MaxRoutes6 is for IPv6
	MaxNexthops   = 65536     // nexthop ids are 0 .. MaxNexthops-1
	MaxNeighbors  = 65536     // (ifindex, address) entries per address family
	MaxLocalAddrs = 4096      // addresses of the router itself, per address family
	MaxPorts      = 1024      // ports that can be attached at once
	// MaxControlFlows and MaxGTSMPeers are per address family.
	MaxControlFlows = 8192
	MaxGTSMPeers    = 4096
)

// ECMP nexthop groups (NH_GROUP_* in xdp.c). Route targets share one id
// space: ids below MaxNexthops are nexthops, ids GroupIDBase ..
// GroupIDBase+MaxGroups-1 are nexthop groups, and every other id is
// rejected.
const (
	GroupIDBase     = 0x10000 // id of the first nexthop group; equals MaxNexthops
	MaxGroups       = 4096    // group ids are GroupIDBase .. GroupIDBase+MaxGroups-1
	MaxGroupMembers = 16      // nexthops per group
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

// Datapath is the loaded XDP program and its maps for one FE. Its methods are
// safe for concurrent use.
type Datapath struct {
	objs routerObjects

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

	// ctlMu serialises writes of fe_config_map, cpu_map, fwd_cpus and
	// fwd_steer; cfg is what fe_config_map holds, fwdCPUs the forward CPUs,
	// sorted.
	ctlMu   sync.Mutex
	cfg     xdpFeConfig
	fwdCPUs []int

	// nhMu serialises the writes of nexthops and neighbours, which keep
	// the gateways' MACs in the nexthops (nhmac.go).
	nhMu sync.Mutex
	nh   nhMACs

	// ifeMu serialises inter-FE forwarding's writes (ife.go); it is taken
	// before mu.
	ifeMu sync.Mutex
	ife   ifeState
}

// routerObjects are the objects of xdp_router, which the FE runs.
type routerObjects struct {
	XdpRouter  *ebpf.Program `ebpf:"xdp_router"`
	XdpControl *ebpf.Program `ebpf:"xdp_control"`
	// XdpForwardCPUMap runs on the forward CPUs (SetForwardCPUs).
	XdpForwardCPUMap *ebpf.Program `ebpf:"xdp_forward_cpumap"`
	FibTbl24         *ebpf.Map     `ebpf:"fib_tbl24"`
	FibTbl8          *ebpf.Map     `ebpf:"fib_tbl8"`
	Fib6Tbl16        *ebpf.Map     `ebpf:"fib6_tbl16"`
	Fib6Tbl8         *ebpf.Map     `ebpf:"fib6_tbl8"`
	DxrDirect        *ebpf.Map     `ebpf:"dxr_direct"`
	DxrRanges        *ebpf.Map     `ebpf:"dxr_ranges"`
	DxrValues        *ebpf.Map     `ebpf:"dxr_values"`
	Dxr6Direct       *ebpf.Map     `ebpf:"dxr6_direct"`
	Dxr6Sub          *ebpf.Map     `ebpf:"dxr6_sub"`
	Dxr6Ranges       *ebpf.Map     `ebpf:"dxr6_ranges"`
	Nexthops         *ebpf.Map     `ebpf:"nexthops"`
	NhGroups         *ebpf.Map     `ebpf:"nh_groups"`
	Neighbors        *ebpf.Map     `ebpf:"neighbors"`
	Neighbors6       *ebpf.Map     `ebpf:"neighbors6"`
	LocalAddrs       *ebpf.Map     `ebpf:"local_addrs"`
	LocalAddrs6      *ebpf.Map     `ebpf:"local_addrs6"`
	TxPorts          *ebpf.Map     `ebpf:"tx_ports"`
	Stats            *ebpf.Map     `ebpf:"stats"`
	PortStats        *ebpf.Map     `ebpf:"port_stats"`
	// PortSlots and PortSlotsHash map an ifindex to its PortStats slot.
	PortSlots     *ebpf.Map `ebpf:"port_slots"`
	PortSlotsHash *ebpf.Map `ebpf:"port_slots_hash"`
	// PortInfo holds each slot's MAC and MTU (SetPortLink).
	PortInfo *ebpf.Map `ebpf:"port_info_map"`
	// Control-plane protection (control.go).
	ControlFlows  *ebpf.Map `ebpf:"control_flows"`
	ControlFlows6 *ebpf.Map `ebpf:"control_flows6"`
	GtsmPeers     *ebpf.Map `ebpf:"gtsm_peers"`
	GtsmPeers6    *ebpf.Map `ebpf:"gtsm_peers6"`
	CPUMap        *ebpf.Map `ebpf:"cpu_map"`
	FeConfig      *ebpf.Map `ebpf:"fe_config_map"`
	Policer       *ebpf.Map `ebpf:"policer"`
	FwdCPUs       *ebpf.Map `ebpf:"fwd_cpus"`
	FwdSteer      *ebpf.Map `ebpf:"fwd_steer"`
	// Inter-FE forwarding (ife.go).
	MeshMap  *ebpf.Map `ebpf:"mesh_map"`
	FeLinks  *ebpf.Map `ebpf:"fe_links"`
	IfePorts *ebpf.Map `ebpf:"ife_ports"`
	NhKeys   *ebpf.Map `ebpf:"nh_keys"`
	FeDemand *ebpf.Map `ebpf:"fe_demand_map"`
}

func (o *routerObjects) Close() error {
	return closeAll(o.XdpRouter, o.XdpControl, o.XdpForwardCPUMap, o.FibTbl24, o.FibTbl8, o.Fib6Tbl16, o.Fib6Tbl8, o.DxrDirect, o.DxrRanges, o.DxrValues, o.Dxr6Direct, o.Dxr6Sub, o.Dxr6Ranges, o.Nexthops, o.NhGroups, o.Neighbors, o.Neighbors6,
		o.LocalAddrs, o.LocalAddrs6, o.TxPorts, o.Stats, o.PortStats,
		o.PortSlots, o.PortSlotsHash, o.PortInfo, o.ControlFlows, o.ControlFlows6, o.GtsmPeers, o.GtsmPeers6,
		o.CPUMap, o.FeConfig, o.Policer, o.FwdCPUs, o.FwdSteer, o.MeshMap, o.FeLinks, o.IfePorts, o.NhKeys, o.FeDemand)
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

// Sizes are the FIB's group pools (1 KiB of kernel memory per group); zero
// keeps the default (FIBGroups, FIB6Groups).
type Sizes struct {
	// FIBGroups bounds how many /24s can hold IPv4 prefixes longer than
	// /24 at the same time.
	FIBGroups int
	// FIB6Groups bounds the IPv6 table: see FIB6Groups.
	FIB6Groups int
}

// Limits of Sizes: a group pool between 1024 groups (1 MiB) and 4M (4 GiB).
const (
	MinPoolGroups = 1 << 10
	MaxPoolGroups = 1 << 22
)

// Check names a size out of bounds.
func (s Sizes) Check() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"fib_groups", s.FIBGroups}, {"ipv6_fib_groups", s.FIB6Groups}} {
		if f.n != 0 && (f.n < MinPoolGroups || f.n > MaxPoolGroups) {
			return fmt.Errorf("%s %d: want %d to %d groups (1 KiB each)", f.name, f.n, MinPoolGroups, MaxPoolGroups)
		}
	}
	return nil
}

// LoadSized is Load with FIB group pools of the given sizes.
func LoadSized(s Sizes) (*Datapath, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return load(loadOptions{tbl8Groups: s.FIBGroups, fib6Groups: s.FIB6Groups})
}

// LoadSpec is LoadSized for another BPF object than the FE's own: spec must
// hold xdp.c's programs and maps under their names (an object built from
// the same headers, bpf/router.h, with its own hooks), and extra, if not
// nil, is a struct of *ebpf.Program, *ebpf.Map and *ebpf.Variable fields
// tagged `ebpf:"name"`, as bpf2go writes them, that receives the object's
// other programs, maps and variables. It may name the Datapath's maps too and
// then gets its own handles of them. The Datapath programs the object as it
// does the FE's; the caller owns and closes what extra received, also when
// LoadSpec fails (fields it did not fill stay nil).
// Benchmarks use it to run their copy of the router, and their baselines,
// with the same control code.
func LoadSpec(spec *ebpf.CollectionSpec, s Sizes, extra any) (*Datapath, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return loadSpec(spec, loadOptions{tbl8Groups: s.FIBGroups, fib6Groups: s.FIB6Groups}, extra)
}

type loadOptions struct {
	// tbl8Groups, if not 0, replaces FIBGroups (tests of exhaustion).
	tbl8Groups int
	// fib6Groups, if not 0, replaces FIB6Groups (tests of exhaustion,
	// benchmarks with large random tables).
	fib6Groups int
}

func load(opts loadOptions) (*Datapath, error) {
	spec, err := loadXdp()
	if err != nil {
		return nil, err
	}
	return loadSpec(spec, opts, nil)
}

func loadSpec(spec *ebpf.CollectionSpec, opts loadOptions, extra any) (*Datapath, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock rlimit: %w", err)
	}
	for _, name := range []string{xdpMapFibTbl8, xdpMapFib6Tbl8, xdpMapCpuMap, xdpMapFwdCpus} {
		if spec.Maps[name] == nil {
			return nil, fmt.Errorf("load xdp_router: map %s missing from the BPF object: %w", name, ErrInvalid)
		}
	}
	if opts.tbl8Groups > 0 {
		spec.Maps[xdpMapFibTbl8].MaxEntries = uint32(opts.tbl8Groups)
	}
	if opts.fib6Groups > 0 {
		spec.Maps[xdpMapFib6Tbl8].MaxEntries = uint32(opts.fib6Groups)
	}
	// The CPUMAP is indexed by CPU number, so it needs an entry for each
	// possible CPU, whatever MAX_CPUS says.
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("possible CPUs: %w", err)
	}
	spec.Maps[xdpMapCpuMap].MaxEntries = uint32(ncpu)
	spec.Maps[xdpMapFwdCpus].MaxEntries = uint32(ncpu)
	d := &Datapath{links: make(map[int]link.Link), slots: make(map[int]uint32),
		ife: ifeState{links: make(map[uint32]*InterFELink)}}
	var err2 error
	if extra == nil {
		err2 = spec.LoadAndAssign(&d.objs, nil)
	} else {
		err2 = loadExtra(spec, &d.objs, extra)
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

// loadExtra loads all of spec, gives objs its objects and extra the others
// (and its own handles of objs' maps that it names too); see LoadSpec.
func loadExtra(spec *ebpf.CollectionSpec, objs *routerObjects, extra any) error {
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return err
	}
	// Close drops what neither took: the clones extra did not name, and
	// the objects' data sections, which the programs hold themselves.
	defer coll.Close()
	all := maps.Clone(coll.Maps)
	if err := coll.Assign(objs); err != nil {
		return err
	}
	for name, m := range all {
		if coll.Maps[name] != nil {
			continue
		}
		c, err := m.Clone()
		if err != nil {
			return errors.Join(fmt.Errorf("clone map %s: %w", name, err), objs.Close())
		}
		coll.Maps[name] = c
	}
	if err := coll.Assign(extra); err != nil {
		return errors.Join(err, objs.Close())
	}
	return nil
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
	tbl16, unmap16, err := mmapU32Array(d.objs.Fib6Tbl16)
	if err != nil {
		return fmt.Errorf("IPv6 FIB: %w", err)
	}
	d.unmaps = append(d.unmaps, unmap16)
	tbl8v6, unmap8v6, err := mmapU32Array(d.objs.Fib6Tbl8)
	if err != nil {
		return fmt.Errorf("IPv6 FIB: %w", err)
	}
	d.unmaps = append(d.unmaps, unmap8v6)
	if len(tbl16) != fib6Tbl16Entries || len(tbl8v6)%fibGroupEntries != 0 {
		return fmt.Errorf("IPv6 FIB: tables of %d and %d entries do not match fib6.go", len(tbl16), len(tbl8v6))
	}
	var dxrs [3][]uint32
	for i, m := range []*ebpf.Map{d.objs.DxrDirect, d.objs.DxrRanges, d.objs.DxrValues} {
		t, unmap, err := mmapU32Array(m)
		if err != nil {
			return fmt.Errorf("FIB range table: %w", err)
		}
		d.unmaps = append(d.unmaps, unmap)
		dxrs[i] = t
	}
	if len(dxrs[0]) != dxrChunks || len(dxrs[1])%dxrRowEntries != 0 || len(dxrs[2]) != dxrValueCount {
		return fmt.Errorf("FIB range table: tables of %d, %d and %d entries do not match dxr.go", len(dxrs[0]), len(dxrs[1]), len(dxrs[2]))
	}
	if d.rcu, err = newRCUBarrier(); err != nil {
		return fmt.Errorf("FIB: %w", err)
	}
	d.fib = newFIB(tbl24, tbl8, d.rcu.wait)
	newDXR(d.fib, dxrs[0], dxrs[1], dxrs[2], d.rcu.wait)
	d.fib6 = newFIB6(tbl16, tbl8v6, d.rcu.wait)
	var dxr6s [3][]uint32
	for i, m := range []*ebpf.Map{d.objs.Dxr6Direct, d.objs.Dxr6Sub, d.objs.Dxr6Ranges} {
		t, unmap, err := mmapU32Array(m)
		if err != nil {
			return fmt.Errorf("IPv6 FIB range table: %w", err)
		}
		d.unmaps = append(d.unmaps, unmap)
		dxr6s[i] = t
	}
	if len(dxr6s[0]) != dxr6DirectEntries || len(dxr6s[1]) != DXR6SubGroups*fibGroupEntries || len(dxr6s[2]) != 2*DXR6RangeRows*dxr6RowEntries {
		return fmt.Errorf("IPv6 FIB range table: tables of %d, %d and %d entries do not match dxr6.go", len(dxr6s[0]), len(dxr6s[1]), len(dxr6s[2]))
	}
	newDXR6(d.fib6, dxr6s[0], dxr6s[1], u64s(dxr6s[2]), d.rcu.wait)
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
	// The checks need the port's MAC and MTU from its first packet; the
	// FE updates them on link changes (SetPortLink). An MTU above
	// MaxMTU (loopback's 65536) limits nothing.
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		mtu := ifi.MTU
		if mtu > MaxMTU {
			mtu = 0
		}
		if err := d.setPortLink(ifindex, ifi.HardwareAddr, mtu); err != nil {
			_ = d.deleteTxPort(ifindex)
			return fmt.Errorf("attach %s: %w", ifName(ifindex), err)
		}
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

// MinMTU and MaxMTU bound the MTU of SetPortLink: IPv4's minimum (RFC 791)
// and the largest IP packet.
const (
	MinMTU = 68
	MaxMTU = 65535
)

// SetPortLink tells the program the MAC address and MTU of the port
// ifindex, which must be attached. Unicast frames for another MAC are then
// passed to the kernel instead of forwarded, and so are packets larger than
// mtu that would leave through the port, which the kernel answers with ICMP
// "fragmentation needed" or ICMPv6 "packet too big". A nil (or all-zero)
// mac or an mtu of 0 turns the respective check off. Attach sets both from
// the device.
func (d *Datapath) SetPortLink(ifindex int, mac net.HardwareAddr, mtu int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("set port link %s: %w", ifName(ifindex), ErrClosed)
	}
	if err := d.setPortLink(ifindex, mac, mtu); err != nil {
		return fmt.Errorf("set port link %s: %w", ifName(ifindex), err)
	}
	return nil
}

// setPortLink is SetPortLink with d.mu held.
func (d *Datapath) setPortLink(ifindex int, mac net.HardwareAddr, mtu int) error {
	var pi xdpPortInfo
	if len(mac) != 0 {
		if err := checkMAC("mac", mac); err != nil {
			return err
		}
		copy(pi.Mac[:], mac)
	}
	if mtu != 0 && (mtu < MinMTU || mtu > MaxMTU) {
		return fmt.Errorf("mtu %d: want 0 (unknown) or %d..%d: %w", mtu, MinMTU, MaxMTU, ErrInvalid)
	}
	pi.Mtu = uint16(mtu)
	slot, ok := d.slots[ifindex]
	if !ok {
		return ErrNotAttached
	}
	return d.objs.PortInfo.Put(slot, pi)
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
	// The slot's previous port may have left its MAC and MTU.
	if err := d.objs.PortInfo.Put(slot, xdpPortInfo{}); err != nil {
		return err
	}
	// And been an inter-FE link.
	if err := d.objs.IfePorts.Put(slot, uint32(0)); err != nil {
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
	return errors.Join(errs...)
}
