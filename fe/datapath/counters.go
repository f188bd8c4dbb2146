//go:build linux

package datapath

import "fmt"

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
	// Added with control-plane protection (control.go).
	xdpStatReasonSTAT_TO_CONTROL_CPU: "to_control_cpu",
	xdpStatReasonSTAT_PASS_CONTROL:   "pass_control",
	xdpStatReasonSTAT_DROP_POLICED:   "drop_policed",
	xdpStatReasonSTAT_DROP_GTSM:      "drop_gtsm",
	// Counted on the control CPU by the CPUMAP's program.
	xdpStatReasonSTAT_CONTROL_CPU_RX: "control_cpu_rx",
	// Added with the forward CPUs (SetForwardCPUs).
	xdpStatReasonSTAT_TO_FE_CPU: "to_fe_cpu",
	// Added with the router's checks of RFC 1812 and RFC 8200.
	xdpStatReasonSTAT_DROP_BAD_CHECKSUM: "drop_bad_checksum",
	xdpStatReasonSTAT_DROP_MARTIAN_SRC:  "drop_martian_src",
	xdpStatReasonSTAT_DROP_MARTIAN_DST:  "drop_martian_dst",
	xdpStatReasonSTAT_PASS_OTHER_HOST:   "pass_other_host",
	xdpStatReasonSTAT_PASS_MTU:          "pass_mtu",
	// Added with the checksum check before steering (control.go).
	xdpStatReasonSTAT_PASS_STEER_BAD_CSUM: "pass_steer_bad_csum",
	// Added with the policing of the whole slow path (SetPolicer).
	xdpStatReasonSTAT_DROP_POLICED_TTL_OPTIONS: "drop_policed_ttl_options",
	xdpStatReasonSTAT_DROP_POLICED_ARP_ND:      "drop_policed_arp_nd",
	xdpStatReasonSTAT_DROP_POLICED_OTHER:       "drop_policed_other",
	// Added with inter-FE forwarding (ife.go).
	xdpStatReasonSTAT_IFE_ENCAP:           "ife_encap",
	xdpStatReasonSTAT_IFE_VIA:             "ife_via",
	xdpStatReasonSTAT_IFE_DECAP:           "ife_decap",
	xdpStatReasonSTAT_IFE_TRANSIT:         "ife_transit",
	xdpStatReasonSTAT_PASS_IFE_NO_LINK:    "pass_ife_no_link",
	xdpStatReasonSTAT_DROP_IFE_MALFORMED:  "drop_ife_malformed",
	xdpStatReasonSTAT_DROP_IFE_NO_LINK:    "drop_ife_no_link",
	xdpStatReasonSTAT_PASS_IFE_NO_NEXTHOP: "pass_ife_no_nexthop",
	xdpStatReasonSTAT_PASS_IFE_HEADROOM:   "pass_ife_headroom",
	// Added with the inter-FE link probes (ife_probe).
	xdpStatReasonSTAT_IFE_PROBE_REPLY: "ife_probe_reply",
	xdpStatReasonSTAT_IFE_PROBE_RX:    "ife_probe_rx",
}

// CounterNames returns the names of all counters in the order of the C enum,
// for stable printing. The names never change meaning.
func CounterNames() []string {
	return append([]string(nil), counterNames[:]...)
}

// Counters holds the datapath counters summed over all CPUs, keyed by the
// names of CounterNames. Every packet counts once as "rx", on the CPU that
// received it, and once under "forwarded", one "pass_*" reason (to the
// kernel on this CPU), "to_control_cpu" (to the kernel on the control CPU)
// or one "drop_*" reason (dropped: "drop_gtsm", "drop_policed",
// "drop_bad_checksum" for an IPv4 header checksum that fails,
// "drop_martian_src" and "drop_martian_dst" for addresses no router may
// forward from or to);
// "forwarded_bytes" counts frame bytes and "forwarded_ipv6" the IPv6
// packets among "forwarded". With forward CPUs set (SetForwardCPUs), a
// packet that another CPU receives counts there as "rx" and "to_fe_cpu",
// and then on the forward CPU under the reason it left by (normally
// "forwarded"); "to_fe_cpu" is thus no reason of its own, and packets that
// a full forward CPU queue drops count in it and under no reason.
// "pass_not_ipv4" counts frames that are neither IPv4 nor IPv6 (ARP, LLDP,
// ...), "pass_local" the conforming packets for the router that are not
// control flows, and "pass_control" control flows passed on the CPU that
// received them because no control CPU is set, "pass_other_host" unicast
// frames for another MAC than the ingress port's, and "pass_mtu" packets
// larger than the egress port's MTU, which the kernel answers with ICMP
// "fragmentation needed" or ICMPv6 "packet too big", and
// "pass_steer_bad_csum" control flows passed on the CPU that received them
// because their TCP checksum did not verify (a sender that offloads it), so
// that steering cannot lose them. The
// policer's drops of the slow path's classes ("drop_policed_ttl_options",
// "drop_policed_arp_nd", "drop_policed_other") are the exception to "once":
// such a packet counted first under the pass_* reason that sent it to the
// kernel, and then under the drop; the port counters count it as dropped
// only.
type Counters map[string]uint64

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
// RxPackets and RxBytes, those handed to the kernel (XDP_PASS, or
// redirected to the control CPU) also in Passed, and those the program
// dropped (GTSM, policer) in Dropped; every packet the fast path forwards
// out of the port counts in TxPackets and TxBytes. Bytes are Ethernet frame
// bytes without the FCS.
type PortCounters struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	Passed    uint64 `json:"passed"`
	Dropped   uint64 `json:"dropped"`
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
			pc.Dropped += c.Dropped
		}
		pcs[ifindex] = pc
	}
	return pcs, nil
}
