//go:build linux

package datapath

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
)

// Protection of the router's own traffic (for_us4 and for_us6 in xdp.c).
// Packets to one of the router's local addresses are, in this order:
// dropped by GTSM when they are BGP from a GTSM peer with a TTL (hop
// limit) below 255; redirected to the control CPU when they belong to a
// control flow and their TCP checksum verifies (passed where they arrived
// when it does not); otherwise policed. Everything else the program hands
// to the kernel is policed too, by class (SetPolicer). None of it touches
// forwarded packets.

// ControlQueueSize is the queue size of the control CPU's CPUMAP entry: the
// frames that can wait for the control CPU's kernel before more are
// dropped.
const ControlQueueSize = 2048

// ForwardQueueSize is the queue size of each forward CPU's CPUMAP entry
// (SetForwardCPUs): the frames that can wait for that CPU before more are
// dropped.
const ForwardQueueSize = 2048

// Policer limits (SetPolicer).
const (
	MaxPoliceRate  = 1_000_000_000 // packets per second per CPU
	MaxPoliceBurst = 1 << 30       // packets
)

// ControlFlow is a TCP flow of the router's control plane (a BGP session,
// an in-band ForCES association, a management session) as its packets
// arrive: Src is the peer's address and port, Dst the router's. Both are of
// the same family; IPv4-mapped IPv6 addresses and zones are refused.
type ControlFlow struct {
	Src, Dst netip.AddrPort
}

// String returns "tcp SRC -> DST".
func (f ControlFlow) String() string {
	return fmt.Sprintf("tcp %s -> %s", f.Src, f.Dst)
}

// SetControlCPU makes the program redirect the packets of control flows
// through a CPUMAP to CPU cpu, where the kernel then processes them, so
// that forwarding load on the other CPUs cannot delay them; -1 removes the
// control CPU, and control flows then pass to the kernel on the CPU that
// received them (counted as "pass_control"). The CPU's queue holds
// ControlQueueSize frames. Setting the CPU it already has changes nothing;
// a forward CPU (SetForwardCPUs) cannot be the control CPU (ErrInvalid).
func (d *Datapath) SetControlCPU(cpu int) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("set control CPU: %w", err)
	}
	if cpu < -1 || cpu >= ncpu {
		return fmt.Errorf("set control CPU: CPU %d out of range [-1, %d): %w", cpu, ncpu, ErrInvalid)
	}
	d.ctlMu.Lock()
	defer d.ctlMu.Unlock()
	if slices.Contains(d.fwdCPUs, cpu) {
		return fmt.Errorf("set control CPU: CPU %d is a forward CPU: %w", cpu, ErrInvalid)
	}
	cfg := d.cfg
	old := -1
	if cfg.ControlCpuSet != 0 {
		old = int(cfg.ControlCpu)
	}
	if cpu == old {
		return nil
	}
	// The new entry exists before the program is told to use it, and the
	// old one goes after it no longer is; a packet that sees no entry
	// passes where it arrived.
	if cpu >= 0 {
		val := cpumapVal{Qsize: ControlQueueSize, ProgFD: int32(d.objs.XdpControl.FD())}
		if err := d.objs.CPUMap.Put(uint32(cpu), val); err != nil {
			return fmt.Errorf("set control CPU %d: %w", cpu, err)
		}
		cfg.ControlCpu, cfg.ControlCpuSet = uint32(cpu), 1
	} else {
		cfg.ControlCpu, cfg.ControlCpuSet = 0, 0
	}
	if err := d.putConfig(cfg); err != nil {
		if cpu >= 0 {
			_ = d.objs.CPUMap.Delete(uint32(cpu))
		}
		return fmt.Errorf("set control CPU %d: %w", cpu, err)
	}
	if old >= 0 {
		if err := d.objs.CPUMap.Delete(uint32(old)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set control CPU %d: remove CPU %d: %w", cpu, old, err)
		}
	}
	return nil
}

// cpumapVal is struct bpf_cpumap_val: the entry's queue size and the program
// that runs on its CPU.
type cpumapVal struct {
	Qsize  uint32
	ProgFD int32
}

// SetForwardCPUs makes the given CPUs do all the forwarding, so that the
// control CPU and any other CPU stay free of it: a packet the program would
// forward that arrives on a CPU outside the set is redirected, unmodified,
// through a CPUMAP to the CPU of the set that its flow hash picks (a flow
// stays on one CPU, its packets in order), routed again there and
// forwarded; on the CPU it arrived on it counts as "rx" and "to_fe_cpu",
// on the forward CPU as "forwarded". Packets for the router and those for
// the kernel are not affected, and packets arriving on a forward CPU are
// forwarded there. Each CPU's queue holds ForwardQueueSize frames. nil or
// empty turns it off (the default): every CPU forwards what it receives.
// The set is taken as a set (order does not matter); setting the one in
// place changes nothing. CPUs out of range, listed twice, or the control
// CPU are refused with ErrInvalid.
func (d *Datapath) SetForwardCPUs(cpus []int) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("set forward CPUs: %w", err)
	}
	set := slices.Clone(cpus)
	slices.Sort(set)
	for i, cpu := range set {
		if cpu < 0 || cpu >= ncpu {
			return fmt.Errorf("set forward CPUs: CPU %d out of range [0, %d): %w", cpu, ncpu, ErrInvalid)
		}
		if i > 0 && set[i-1] == cpu {
			return fmt.Errorf("set forward CPUs: CPU %d listed twice: %w", cpu, ErrInvalid)
		}
	}
	d.ctlMu.Lock()
	defer d.ctlMu.Unlock()
	if d.cfg.ControlCpuSet != 0 && slices.Contains(set, int(d.cfg.ControlCpu)) {
		return fmt.Errorf("set forward CPUs: CPU %d is the control CPU: %w", d.cfg.ControlCpu, ErrInvalid)
	}
	old := d.fwdCPUs
	if slices.Equal(set, old) {
		return nil
	}
	// As SetControlCPU: the new CPUs' entries exist before any CPU is
	// told to use them, and the old ones go once none is; a packet that
	// finds no entry is forwarded where it arrived.
	val := cpumapVal{Qsize: ForwardQueueSize, ProgFD: int32(d.objs.XdpForwardCPUMap.FD())}
	var added []int
	undo := func() {
		for _, cpu := range added {
			_ = d.objs.CPUMap.Delete(uint32(cpu))
		}
	}
	for _, cpu := range set {
		if slices.Contains(old, cpu) {
			continue
		}
		if err := d.objs.CPUMap.Put(uint32(cpu), val); err != nil {
			undo()
			return fmt.Errorf("set forward CPUs: CPU %d: %w", cpu, err)
		}
		added = append(added, cpu)
	}
	if err := d.putForwardList(set, ncpu); err != nil {
		undo()
		return fmt.Errorf("set forward CPUs: list: %w", err)
	}
	steer := make([]uint32, ncpu)
	for cpu := range steer {
		if len(set) > 0 && !slices.Contains(set, cpu) {
			steer[cpu] = uint32(len(set))
		}
	}
	if err := d.objs.FwdSteer.Put(uint32(0), steer); err != nil {
		_ = d.putForwardList(old, ncpu)
		undo()
		return fmt.Errorf("set forward CPUs: %w", err)
	}
	d.fwdCPUs = set
	for _, cpu := range old {
		if slices.Contains(set, cpu) {
			continue
		}
		if err := d.objs.CPUMap.Delete(uint32(cpu)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set forward CPUs: remove CPU %d: %w", cpu, err)
		}
	}
	return nil
}

// putForwardList fills every slot of fwd_cpus with set, cyclically (see
// fwd_cpus in xdp.c); an empty set leaves the slots, which no CPU reads
// then. d.ctlMu is held.
func (d *Datapath) putForwardList(set []int, ncpu int) error {
	if len(set) == 0 {
		return nil
	}
	keys := make([]uint32, ncpu)
	vals := make([]uint32, ncpu)
	for i := range keys {
		keys[i], vals[i] = uint32(i), uint32(set[i%len(set)])
	}
	_, err := d.objs.FwdCPUs.BatchUpdate(keys, vals, nil)
	return err
}

// ForwardCPUs returns the forward CPUs in ascending order, or nil when every
// CPU forwards what it receives.
func (d *Datapath) ForwardCPUs() []int {
	d.ctlMu.Lock()
	defer d.ctlMu.Unlock()
	return slices.Clone(d.fwdCPUs)
}

// PoliceClass is a class of the packets the program hands to the kernel;
// each class is policed in a bucket of its own (SetPolicers).
type PoliceClass int

// The police classes, as the program numbers them.
const (
	// PoliceToRouter: the packets for the router's addresses that are
	// not a control flow (ICMP included); over the rate: "drop_policed".
	PoliceToRouter = PoliceClass(xdpPoliceClassPOLICE_LOCAL)
	// PoliceTTLOptions: TTL / hop limit expiry, IPv4 options, IPv6
	// Hop-by-Hop; "drop_policed_ttl_options".
	PoliceTTLOptions = PoliceClass(xdpPoliceClassPOLICE_TTL_OPTIONS)
	// PoliceARPND: ARP and NDP; "drop_policed_arp_nd".
	PoliceARPND = PoliceClass(xdpPoliceClassPOLICE_ARP_ND)
	// PoliceOther: the rest (no route, unresolved neighbour, broadcast,
	// ...); "drop_policed_other".
	PoliceOther = PoliceClass(xdpPoliceClassPOLICE_OTHER)
	// PoliceClasses is the number of classes.
	PoliceClasses = int(xdpPoliceClassPOLICE_CLASSES)
)

var policeClassNames = [PoliceClasses]string{"to_router", "ttl_options", "arp_nd", "other"}

// String returns the class's name as the FE's configuration and status
// spell it: to_router, ttl_options, arp_nd or other.
func (c PoliceClass) String() string {
	if c < 0 || int(c) >= PoliceClasses {
		return fmt.Sprintf("police class %d", int(c))
	}
	return policeClassNames[c]
}

// PoliceRate is one class's policer: each CPU admits up to Burst packets at
// once and PPS packets per second on average. PPS 0: the class is not
// policed (Burst is then ignored).
type PoliceRate struct {
	PPS, Burst uint64
}

// PoliceRates are the rates of the classes, indexed by PoliceClass.
type PoliceRates [PoliceClasses]PoliceRate

// SetPolicer polices every class at the same rate and burst (see
// SetPolicers); a rate of 0 turns policing off (the default).
func (d *Datapath) SetPolicer(ratePPS, burst uint64) error {
	var r PoliceRates
	for c := range r {
		r[c] = PoliceRate{PPS: ratePPS, Burst: burst}
	}
	return d.SetPolicers(r)
}

// SetPolicers polices everything the program hands to the kernel but the
// control flows, in four classes (PoliceClass) with a bucket and a rate
// each, so that a flood of one cannot starve another: the other packets for
// the router (ICMP included; "drop_policed"), TTL / hop limit expiry and IP
// options or IPv6 Hop-by-Hop ("drop_policed_ttl_options"), ARP and NDP
// ("drop_policed_arp_nd"), and the rest: no route, unresolved neighbour,
// broadcast, ... ("drop_policed_other"). In each class each CPU admits up
// to that class's Burst packets at once and its PPS packets per second on
// average, and drops the excess. The buckets are per CPU, so with N CPUs
// receiving such packets up to N*PPS per second of each class reach the
// kernel; the interval between packets is rounded down to whole
// nanoseconds. A class with PPS 0 is not policed (the default). Every
// bucket starts full. A bad rate or burst (above MaxPoliceRate, a burst
// outside [1, MaxPoliceBurst]) is refused with ErrInvalid naming its class,
// and nothing changes.
func (d *Datapath) SetPolicers(rates PoliceRates) error {
	cfgRates := [PoliceClasses]xdpPoliceRate{}
	for c, r := range rates {
		if r.PPS == 0 {
			continue
		}
		if r.PPS > MaxPoliceRate {
			return fmt.Errorf("set policer: %s: rate %d packets/s above %d: %w", PoliceClass(c), r.PPS, MaxPoliceRate, ErrInvalid)
		}
		if r.Burst < 1 || r.Burst > MaxPoliceBurst {
			return fmt.Errorf("set policer: %s: burst %d out of range [1, %d]: %w", PoliceClass(c), r.Burst, MaxPoliceBurst, ErrInvalid)
		}
		interval := 1e9 / r.PPS
		cfgRates[c] = xdpPoliceRate{IntervalNs: interval, ToleranceNs: (r.Burst - 1) * interval}
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("set policer: %w", err)
	}
	d.ctlMu.Lock()
	defer d.ctlMu.Unlock()
	cfg := d.cfg
	cfg.Police = cfgRates
	if err := d.putConfig(cfg); err != nil {
		return fmt.Errorf("set policer: %w", err)
	}
	// A zero state is a full bucket.
	for class := range uint32(PoliceClasses) {
		if err := d.objs.Policer.Put(class, make([]xdpPolicerState, ncpu)); err != nil {
			return fmt.Errorf("set policer: reset buckets: %w", err)
		}
	}
	return nil
}

// putConfig writes cfg to the program's configuration; d.ctlMu is held.
func (d *Datapath) putConfig(cfg xdpFeConfig) error {
	if err := d.objs.FeConfig.Put(uint32(0), &cfg); err != nil {
		return err
	}
	d.cfg = cfg
	return nil
}

// AddControlFlow adds f to the control flows; adding one that is there
// changes nothing (its packet count stays). A full table (MaxControlFlows
// per family) is an error.
func (d *Datapath) AddControlFlow(f ControlFlow) error {
	m, key, err := d.flowKey(f)
	if err != nil {
		return fmt.Errorf("add control flow: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("add control flow %s: %w", f, err)
	}
	err = m.Update(key, make([]xdpCtlFlowStats, ncpu), ebpf.UpdateNoExist)
	if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("add control flow %s: %w", f, err)
	}
	return nil
}

// DeleteControlFlow removes f from the control flows; its packets are then
// policed like any other packet for the router. A missing flow gives an
// error wrapping ErrNotFound.
func (d *Datapath) DeleteControlFlow(f ControlFlow) error {
	m, key, err := d.flowKey(f)
	if err != nil {
		return fmt.Errorf("delete control flow: %w", err)
	}
	return deleteKey(m, key, "delete control flow "+f.String())
}

// FlowCounts are the packets a control flow has matched since it was added,
// summed over the CPUs: all of them, and those of them passed where they
// arrived, unsteered, because their TCP checksum did not verify (the
// flow's share of "pass_steer_bad_csum").
type FlowCounts struct {
	Packets     uint64
	BadChecksum uint64
}

// ControlFlows returns the control flows, IPv4 first, each family sorted by
// source and then destination, and what each has matched.
func (d *Datapath) ControlFlows() ([]ControlFlow, map[ControlFlow]FlowCounts, error) {
	var flows []ControlFlow
	counts := map[ControlFlow]FlowCounts{}
	add := func(f ControlFlow, perCPU []xdpCtlFlowStats) {
		var n FlowCounts
		for _, v := range perCPU {
			n.Packets += v.Packets
			n.BadChecksum += v.BadCsum
		}
		flows = append(flows, f)
		counts[f] = n
	}
	var k4 xdpCtlFlowKey
	var perCPU []xdpCtlFlowStats
	it := d.objs.ControlFlows.Iterate()
	for it.Next(&k4, &perCPU) {
		add(ControlFlow{
			Src: netip.AddrPortFrom(addr4(k4.Saddr), port(k4.Sport)),
			Dst: netip.AddrPortFrom(addr4(k4.Daddr), port(k4.Dport)),
		}, perCPU)
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("list control flows: %w", err)
	}
	var k6 xdpCtlFlowKey6
	it = d.objs.ControlFlows6.Iterate()
	for it.Next(&k6, &perCPU) {
		add(ControlFlow{
			Src: netip.AddrPortFrom(netip.AddrFrom16(k6.Saddr), port(k6.Sport)),
			Dst: netip.AddrPortFrom(netip.AddrFrom16(k6.Daddr), port(k6.Dport)),
		}, perCPU)
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("list control flows: %w", err)
	}
	slices.SortFunc(flows, func(a, b ControlFlow) int {
		if a.Src.Addr().Is4() != b.Src.Addr().Is4() {
			if a.Src.Addr().Is4() {
				return -1
			}
			return 1
		}
		return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst))
	})
	return flows, counts, nil
}

// SetGTSM turns the Generalized TTL Security Mechanism (RFC 5082) for the
// single-hop BGP peer at peer on or off: while on, TCP packets from peer to
// the router with port 179 on either side (the session in whichever
// direction it was opened) that arrive with a TTL (hop limit) below 255 are
// dropped and counted as "drop_gtsm", and so are the packets whose ports
// cannot be seen (a first IPv4 fragment too short to hold them, an IPv6
// extension header chain longer than the program follows). Turning it on
// or off twice changes nothing.
func (d *Datapath) SetGTSM(peer netip.Addr, on bool) error {
	is6, err := checkAddr("GTSM peer", peer)
	if err != nil {
		return fmt.Errorf("set GTSM: %w", err)
	}
	var m *ebpf.Map
	var key any
	if is6 {
		m, key = d.objs.GtsmPeers6, peer.As16()
	} else {
		m, key = d.objs.GtsmPeers, be32(peer)
	}
	if on {
		err = m.Put(key, uint8(1))
	} else if err = m.Delete(key); errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("set GTSM for %s to %t: %w", peer, on, err)
	}
	return nil
}

// flowKey checks f and returns its control flow map and key.
func (d *Datapath) flowKey(f ControlFlow) (*ebpf.Map, any, error) {
	src6, err := checkAddr("source", f.Src.Addr())
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s: %w", f, err)
	}
	dst6, err := checkAddr("destination", f.Dst.Addr())
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s: %w", f, err)
	}
	if src6 != dst6 {
		return nil, nil, fmt.Errorf("flow %s mixes IPv4 and IPv6: %w", f, ErrInvalid)
	}
	if f.Src.Port() == 0 || f.Dst.Port() == 0 {
		return nil, nil, fmt.Errorf("flow %s has port 0: %w", f, ErrInvalid)
	}
	if src6 {
		return d.objs.ControlFlows6, &xdpCtlFlowKey6{
			Saddr: f.Src.Addr().As16(), Daddr: f.Dst.Addr().As16(),
			Sport: be16(f.Src.Port()), Dport: be16(f.Dst.Port()),
		}, nil
	}
	return d.objs.ControlFlows, &xdpCtlFlowKey{
		Saddr: be32(f.Src.Addr()), Daddr: be32(f.Dst.Addr()),
		Sport: be16(f.Src.Port()), Dport: be16(f.Dst.Port()),
	}, nil
}

// be16 returns the port as the uint16 whose in-memory bytes are in network
// order, as the BPF program keeps ports; port undoes it.
func be16(p uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, p))
}

func port(v uint16) uint16 {
	return binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, v))
}

// addr4 undoes be32.
func addr4(v uint32) netip.Addr {
	var a [4]byte
	binary.NativeEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}
