// maps.h: the constants, types and maps of splitplane's XDP pipeline,
// shared by every BPF object built from it (fe/datapath/xdp.c, the FE's, and
// the benchmarks' copy of the router). The Go side repeats the constants
// (datapath.go, fib.go, fib6.go) and reads the types through bpf2go -type.

#ifndef SPLITPLANE_MAPS_H
#define SPLITPLANE_MAPS_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Map sizes; datapath.go repeats them for input validation.
#define MAX_NEXTHOPS 65536
#define MAX_NEIGHBORS 65536 // per address family
#define MAX_LOCAL_ADDRS 4096 // per address family
#define MAX_TX_PORTS 1024
#define MAX_CONTROL_FLOWS 8192 // per address family
#define MAX_GTSM_PEERS 4096 // per address family
#define MAX_CPUS 64 // cpu_map size in the object; Go sets the possible CPUs at load

// ECMP nexthop groups; datapath.go repeats these. A route's nexthop id
// below NH_GROUP_BASE is a nexthop, NH_GROUP_BASE + i is nh_groups[i].
#define NH_GROUP_BASE 0x10000
#define MAX_NH_GROUPS 4096
#define NH_GROUP_MEMBERS 16 // a power of two: the index mask relies on it

// DIR-24-8 FIB; fib.go repeats these. A tbl24 entry is indexed by the top 24
// bits of the destination. An entry of either table is 0 (no route),
// FIB_VALID | nexthop or group id, or (tbl24 only) FIB_GROUP | index of a tbl8 group
// of 256 entries indexed by the last address byte, for the /24s that hold
// longer prefixes. One 32-bit load decides, so a reader never sees half an
// entry.
//
// Both tables are arrays of rows of 256 entries (tbl24: one row per /16,
// tbl8: one row per group) because an array map stores each value at an
// 8-byte stride: with 4-byte values the mmapped memory would not be a plain
// u32 array.
#define FIB_ROW 256
#define FIB_TBL24_ROWS 65536
#define FIB_TBL8_GROUPS 8192
#define FIB_GROUP (1u << 31)
#define FIB_VALID (1u << 30)
#define FIB_NEXTHOP_MASK 0x1ffff // nexthop ids and NH_GROUP_BASE + group
#define FIB_GROUP_MASK 0xffffff

// The range table (DXR) in front of DIR-24-8; dxr.go repeats these and
// explains the layout. A dxr_direct entry, indexed by the top 16 bits of
// the destination, is a FIB entry for the whole /16 (0 or FIB_VALID | id),
// DXR_TBL24 (look the /16 up in fib_tbl24 and fib_tbl8), or DXR_RANGES |
// log2(range count) << DXR_LOG_SHIFT | first word in dxr_ranges, with
// DXR_SHORT for 16-bit range entries (start & 0xff00 | value index) instead
// of 32-bit ones (start << 16 | value index). A block never crosses a row
// of dxr_ranges. dxr_values maps a value index to its FIB entry.
#define DXR_ROW 4096
#define DXR_RANGE_ROWS 1024
#define DXR_DIRECT_ROWS 256 // of FIB_ROW entries: 65536
#define DXR_VALUE_ROWS 256  // of FIB_ROW entries: 65536
#define DXR_RANGES (1u << 31)
#define DXR_TBL24 (1u << 29)
#define DXR_SHORT (1u << 28)
#define DXR_LOG_SHIFT 24
// In a FIB entry of the range table, with FIB_VALID: an address of the
// router (fib_lookup returns LOOKUP_LOCAL).
#define FIB_LOCAL (1u << 27)
#define DXR_BASE_MASK 0xffffff

// IPv6 stride table; fib6.go repeats these. Entries are encoded as in the
// IPv4 table. fib6_tbl16 is indexed by the first two address bytes (one row
// per first byte); an entry with FIB_GROUP points at a group of fib6_tbl8
// indexed by the next address byte, and so on down to byte 15. Groups are
// allocated to the prefixes longer than /16 as they need them.
#define FIB6_TBL16_ROWS 256
#define FIB6_TBL8_GROUPS 131072

// The IPv6 range table in front of the stride table; dxr6.go repeats these
// and explains the layout. A dxr6_direct entry, indexed by the top 16 bits
// of the destination, is a FIB entry for the whole /16, DXR6_SUB | group
// (dxr6_sub's row for the /16, indexed by the next 8 bits) or DXR6_STRIDE
// (look the address up in the stride table). A dxr6_sub entry is a FIB
// entry for the whole /24, DXR6_STRIDE, or DXR_RANGES | log2(range count)
// << DXR_LOG_SHIFT | first entry in dxr6_ranges, whose 64-bit entries are
// address bits 24 to 63 of the range's start << 24 | 0 (no route) or
// DXR6_VALID | nexthop id. A block never crosses a row of dxr6_ranges.
#define DXR6_ROW 2048
#define DXR6_DIRECT_ROWS 256 // of FIB_ROW entries: 65536
#define DXR6_SUB_GROUPS 4096
#define DXR6_RANGE_ROWS 512
#define DXR6_SUB (1u << 28)
#define DXR6_STRIDE DXR_TBL24
#define DXR6_VALID (1u << 23)
#define DXR6_VALUE_BITS 24

// nexthop.gw_family: which gateway field holds the neighbour to send to.
#define GW_NONE 0 // connected: the packet's destination is the neighbour
#define GW_IPV4 4 // gateway
#define GW_IPV6 6 // gateway6
#define GW_REMOTE 1 // behind another FE: remote (see struct nexthop), no neighbour here

// stat_reason indexes the stats map. The Go side names each entry, so add new
// reasons before STAT_MAX and give them a name in datapath.go.
enum stat_reason {
	STAT_RX,                // every packet seen
	STAT_FORWARDED,         // redirected to an egress port
	STAT_FORWARDED_BYTES,   // frame bytes of the forwarded packets
	STAT_PASS_TRUNCATED,    // frame too short for its headers, tot_len or payload_len
	STAT_PASS_NOT_IPV4,     // ARP and any other ethertype but IPv4 and IPv6
	STAT_PASS_VLAN,         // 802.1Q / 802.1ad tagged
	STAT_PASS_NOT_UNICAST,  // L2 group address, IPv4 multicast/broadcast, IPv6 multicast
	STAT_PASS_BAD_HEADER,   // IPv4 ethertype but version != 4 or ihl < 5; IPv6 but version != 6
	STAT_PASS_OPTIONS,      // ihl > 5 or IPv6 Hop-by-Hop: options are the kernel's business
	STAT_PASS_LOCAL,        // destination is one of the router's addresses
	STAT_PASS_TTL,          // ttl or hop limit <= 1: the kernel sends Time Exceeded
	STAT_PASS_NO_ROUTE,     // no matching prefix
	STAT_PASS_NO_NEXTHOP,   // route points at an empty nexthop slot
	STAT_PASS_NO_NEIGH,     // neighbour MAC not known (yet)
	STAT_PASS_NO_TX_PORT,   // nexthop interface is not in tx_ports
	STAT_FORWARDED_IPV6,    // the IPv6 packets among STAT_FORWARDED
	STAT_PASS_NOT_ROUTABLE, // IPv6 link-local source or destination
	STAT_TO_CONTROL_CPU,    // control flow redirected to the control CPU
	STAT_PASS_CONTROL,      // control flow passed here: no control CPU set
	STAT_DROP_POLICED,      // for the router, over the policer's rate
	STAT_DROP_GTSM,         // BGP from a GTSM peer with TTL / hop limit < 255
	STAT_CONTROL_CPU_RX,    // control-flow packets the CPUMAP brought to this CPU
	STAT_TO_FE_CPU,         // forwardable, redirected to a forward CPU to be forwarded there
	STAT_DROP_BAD_CHECKSUM, // IPv4 header checksum wrong
	STAT_DROP_MARTIAN_SRC,  // source a router must not forward from (RFC 1812 5.3.7, RFC 4291)
	STAT_DROP_MARTIAN_DST,  // destination a router must not forward to
	STAT_PASS_OTHER_HOST,   // unicast frame for another MAC than the ingress port's
	STAT_PASS_MTU,          // larger than the egress port's MTU: the kernel sends the ICMP error
	STAT_PASS_STEER_BAD_CSUM, // control flow whose TCP checksum the program could not verify: passed here
	STAT_DROP_POLICED_TTL_OPTIONS, // to the kernel for TTL expiry or IP options, over the policer's rate
	STAT_DROP_POLICED_ARP_ND,      // ARP or NDP, over the policer's rate
	STAT_DROP_POLICED_OTHER,       // any other packet for the kernel, over the policer's rate
	STAT_IFE_ENCAP,         // the forwarded packets sent encapsulated to another FE (ingress FE)
	STAT_IFE_VIA,           // the encapsulated ones sent through an intermediate FE (VLB)
	STAT_IFE_DECAP,         // the forwarded packets that arrived encapsulated for this FE (egress FE)
	STAT_IFE_TRANSIT,       // the forwarded IFE frames for another FE, sent on unchanged (intermediate FE)
	STAT_PASS_IFE_NO_LINK,  // remote nexthop, but no inter-FE link up to its FE or an intermediate
	STAT_DROP_IFE_MALFORMED, // IFE frame on an inter-FE link that does not parse, or lacks a metadatum
	STAT_DROP_IFE_NO_LINK,  // IFE frame in transit, no link up to its egress FE
	STAT_PASS_IFE_NO_NEXTHOP, // IFE frame for this FE whose nexthop key maps to no local nexthop: inner frame passed
	STAT_PASS_IFE_HEADROOM, // no headroom for the IFE header (bpf_xdp_adjust_head failed)
	STAT_IFE_PROBE_REPLY,   // inter-FE link probe requests answered (XDP_TX)
	STAT_IFE_PROBE_RX,      // inter-FE link probe replies passed to the kernel (for the agent)
	STAT_MAX,
};

// Referenced only so that the enum lands in BTF for bpf2go -type.
const enum stat_reason *unused_stat_reason __attribute__((unused));

// One nexthop array serves both families: a route of either family may use
// a gateway of either family (RFC 8950 IPv4 routes via IPv6 gateways), and
// gw_family says which neighbour table resolves it.
//
// A GW_REMOTE nexthop lies behind another FE of the same router (NE): the
// packet goes there over an inter-FE link, encapsulated (RFC 8013), and the
// gateway fields hold instead what the egress FE needs (struct remote_nh);
// ifindex is then only non-zero, to mark the slot used.
struct remote_nh {
	__u32 fe;   // egress FE ID, 1 .. MAX_FES-1
	__u32 key;  // NE-wide nexthop key, which the egress FE maps to its nexthop
	__u32 port; // egress port on the egress FE, carried as metadata
	__u32 pad;
};

struct nexthop {
	__u32 ifindex;  // 0 = empty slot
	__be32 gateway; // IPv4 gateway when gw_family is GW_IPV4
	__u8 smac[ETH_ALEN];
	__u8 gw_family; // GW_NONE (connected), GW_IPV4, GW_IPV6 or GW_REMOTE
	__u8 pad;
	union {
		__u8 gateway6[16];      // IPv6 gateway when gw_family is GW_IPV6
		struct remote_nh remote; // when gw_family is GW_REMOTE
	};
	// The gateway's MAC, when dmac_ok: a copy of its neighbors entry that
	// the Go side keeps current (nhmac.go), so that a packet to a gateway
	// reads no neighbour hash.
	__u8 dmac[ETH_ALEN];
	__u8 dmac_ok;
	__u8 pad2;
};

struct neigh_key {
	__u32 ifindex;
	__be32 addr;
};

struct neigh_key6 {
	__u32 ifindex;
	__u8 addr[16];
};

struct neigh {
	__u8 mac[ETH_ALEN];
	__u8 pad[2];
};

// nh_group is an ECMP group: a flow uses members[flow_hash % count]. The Go
// side fills all NH_GROUP_MEMBERS slots, repeating the members cyclically,
// so that a reader racing with an update (array values are copied, not
// swapped) only ever picks an old or a new member, never a stale slot.
// count 0 marks an empty group.
struct nh_group {
	__u32 count;
	__u32 members[NH_GROUP_MEMBERS]; // nexthop ids
};

struct fib_row {
	__u32 e[FIB_ROW];
};

// The tables are mmapped by the Go side, which writes them with plain stores.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB_TBL24_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} fib_tbl24 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB_TBL8_GROUPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} fib_tbl8 SEC(".maps");

struct dxr_row {
	__u32 e[DXR_ROW];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR_DIRECT_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} dxr_direct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR_RANGE_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dxr_row);
} dxr_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR_VALUE_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} dxr_values SEC(".maps");

struct dxr6_row {
	__u64 e[DXR6_ROW];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR6_DIRECT_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} dxr6_direct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR6_SUB_GROUPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} dxr6_sub SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DXR6_RANGE_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dxr6_row);
} dxr6_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB6_TBL16_ROWS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} fib6_tbl16 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB6_TBL8_GROUPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_row);
} fib6_tbl8 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NEXTHOPS);
	__type(key, __u32);
	__type(value, struct nexthop);
} nexthops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NH_GROUPS);
	__type(key, __u32);
	__type(value, struct nh_group);
} nh_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NEIGHBORS);
	__type(key, struct neigh_key);
	__type(value, struct neigh);
} neighbors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NEIGHBORS);
	__type(key, struct neigh_key6);
	__type(value, struct neigh);
} neighbors6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOCAL_ADDRS);
	__type(key, __be32);
	__type(value, __u8);
} local_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOCAL_ADDRS);
	__type(key, struct in6_addr);
	__type(value, __u8);
} local_addrs6 SEC(".maps");

// ctl_flow_key is a TCP control flow as its packets arrive: s* is the peer,
// d* the router. Addresses and ports are in network order.
struct ctl_flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
};

struct ctl_flow_key6 {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
};

// ctl_flow_stats counts, on one CPU, the packets of a control flow: all of
// them, and those of them passed where they arrived because their TCP
// checksum did not verify (the flow's share of pass_steer_bad_csum). Both
// are in the one value the lookup returns, so counting either costs a
// store to a line the packet has loaded anyway.
struct ctl_flow_stats {
	__u64 packets;
	__u64 bad_csum;
};

// control_flows and control_flows6 hold the router's control flows; the
// value counts each flow's packets on each CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_CONTROL_FLOWS);
	__type(key, struct ctl_flow_key);
	__type(value, struct ctl_flow_stats);
} control_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_CONTROL_FLOWS);
	__type(key, struct ctl_flow_key6);
	__type(value, struct ctl_flow_stats);
} control_flows6 SEC(".maps");

// gtsm_peers and gtsm_peers6 hold the peers whose BGP packets must arrive
// with TTL / hop limit 255 (RFC 5082).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_GTSM_PEERS);
	__type(key, __be32);
	__type(value, __u8);
} gtsm_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_GTSM_PEERS);
	__type(key, struct in6_addr);
	__type(value, __u8);
} gtsm_peers6 SEC(".maps");

// cpu_map has an entry at the control CPU, while one is configured, with
// xdp_control, and one at each forward CPU, while forward CPUs are set, with
// xdp_forward_cpumap: each entry holds its queue size and the program that
// runs there on every packet the map brings. No CPU is both.
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

// fwd_cpus lists the forward CPUs (the Go side's SetForwardCPUs) cyclically
// over all its slots, as nh_group does its members: a packet whose flow hash
// is h goes to fwd_cpus[h % n], and with every slot filled a reader that
// races with an update (an old n, a new list) still picks a forward CPU.
// Go sizes it to the possible CPUs at load.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} fwd_cpus SEC(".maps");

// fwd_steer holds, on each CPU, the number n of forward CPUs if packets this
// CPU would forward go to a forward CPU instead, and 0 if it forwards them
// itself (no forward CPUs set, or this CPU is one of them). One per-CPU
// load thus decides, and forwarding with the feature off pays only that.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fwd_steer SEC(".maps");

// The police classes: everything the program hands to the kernel, but the
// control flows, is policed in one of them, each with a bucket and a rate
// of its own (fe_config's police[class]), so that a flood of one class
// cannot starve another.
enum police_class {
	POLICE_LOCAL,       // other traffic to the router's addresses
	POLICE_TTL_OPTIONS, // TTL / hop limit expiry, IPv4 options, IPv6 Hop-by-Hop
	POLICE_ARP_ND,      // ARP, NDP
	POLICE_OTHER,       // the rest: no route, unresolved neighbour, broadcast, ...
	POLICE_CLASSES,
};

// Referenced only so that the enum lands in BTF for bpf2go -type.
const enum police_class *unused_police_class __attribute__((unused));

// police_rate is the rate of one police class. The policer is a token
// bucket in its GCRA ("virtual scheduling") form: a packet conforms while
// the bucket's theoretical arrival time is at most tolerance_ns ahead of
// now, and each conforming packet moves it interval_ns (1 s / rate) later.
// That admits burst packets at once (tolerance = (burst - 1) * interval)
// and rate packets per second after that, with one timestamp of state and
// no multiplication on the packet path. interval_ns 0: the class is not
// policed.
struct police_rate {
	__u64 interval_ns;
	__u64 tolerance_ns;
};

// fe_config is the one entry of fe_config_map, written whole by the Go side.
// The Go side may rewrite one field while a packet reads another; a packet
// that sees half of an update is policed with a mix of the old and the new
// setting, which is harmless.
struct fe_config {
	__u32 control_cpu;
	__u32 control_cpu_set; // 0: no control CPU, control flows pass here
	struct police_rate police[POLICE_CLASSES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fe_config);
} fe_config_map SEC(".maps");

// policer_state is this CPU's bucket of one police class: the time at which
// it will be full again. 0 (as the Go side resets it) means full.
struct policer_state {
	__u64 tat_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POLICE_CLASSES);
	__type(key, __u32);
	__type(value, struct policer_state);
} policer SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, MAX_TX_PORTS);
	__type(key, __u32);   // ifindex
	__type(value, __u32); // the same ifindex
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// port_counters counts the traffic of one port. Each packet counts once as rx
// on its ingress port and, when forwarded, once as tx on its egress port;
// passed counts the rx packets handed to the kernel (here or, for control
// flows, on the control CPU) and dropped those the program dropped (GTSM,
// policer). A redirect that fails after the program returned is dropped by
// the driver, out of the program's sight.
struct port_counters {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 passed;
	__u64 dropped;
};

// port_stats holds the counters of each port slot. The Go side gives every
// tx port a slot 1..MAX_TX_PORTS; slot 0 collects any other ifindex and is
// not reported. Slots, not ifindexes, index it because a hash lookup by
// ifindex costs ~10 ns per packet and these array lookups ~1 ns.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_TX_PORTS + 1);
	__type(key, __u32);
	__type(value, struct port_counters);
} port_stats SEC(".maps");

// port_slots maps an ifindex below PORT_SLOTS_DIRECT to its slot (0 when
// it has none); port_slots_hash holds the slots of larger ifindexes, which
// are rare but possible once a namespace has created many devices.
#define PORT_SLOTS_DIRECT 65536

// port_info is what the program checks against on a port: its MAC (a
// unicast frame for another MAC is not forwarded) and its MTU (a packet
// larger than the egress port's MTU goes to the kernel, which answers with
// ICMP). A zero MAC or MTU disables the check. port_info_map is indexed by
// port slot, as port_stats.
struct port_info {
	__u8 mac[ETH_ALEN];
	__u16 mtu;
} __attribute__((aligned(8))); // so that the MAC reads as one 32-bit and one 16-bit load

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TX_PORTS + 1);
	__type(key, __u32);
	__type(value, struct port_info);
} port_info_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_SLOTS_DIRECT);
	__type(key, __u32);
	__type(value, __u32);
} port_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} port_slots_hash SEC(".maps");

// --- Inter-FE forwarding (several FEs, one router) --------------------------
//
// FE IDs index arrays, so they are below MAX_FES (a power of two: masks
// rely on it). ife.go repeats these.
#define MAX_FES 64
// NE-wide nexthop keys are 0 .. MAX_NH_KEYS-1: the CE's nexthop rows below
// 65536, its connected egress rows (4096) from there.
#define MAX_NH_KEYS (65536 + 4096)
#define SPILL_SCALE 1024 // spill is in 1/1024ths of the flows

// The metadata TLV types (forces/ife) the program sends and reads.
#define IFE_TYPE_FLOW_HASH 2
#define IFE_TYPE_EGRESS_PORT 0x5350
#define IFE_TYPE_EGRESS_FE 0x5352
#define IFE_TYPE_NH_KEY 0x5353
#define IFE_TYPE_PROBE 0x5354
#define IFE_MAX_TLVS 8       // a receiver reads at most this many TLVs
#define IFE_MAX_METALEN 256  // and metadata at most this long

// fe_link is how this FE reaches FE k directly: out of port ifindex (an
// inter-FE link) to peer_mac; up is 0 while the link (or FE k) is down,
// spill is the share of flows to FE k sent through an intermediate FE
// (in 1/SPILL_SCALE), and pos is k's index in mesh.up while up.
struct fe_link {
	__u32 ifindex; // 0: FE k is not reachable directly
	__u8 peer_mac[ETH_ALEN];
	__u8 up;
	__u8 pos;
	__u16 spill;
	__u16 pad;
};

// mesh is the one entry of mesh_map: this FE's ID and the FEs whose
// direct links are up (not this FE), the candidates for an intermediate.
// Written whole by Go; a reader racing with an update may pick a stale
// intermediate, which the intermediate then forwards on or drops, counted.
struct mesh {
	__u32 self_fe; // 0: no inter-FE forwarding configured
	__u32 count; // FEs in up
	__u8 up[MAX_FES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mesh);
} mesh_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FES);
	__type(key, __u32);
	__type(value, struct fe_link);
} fe_links SEC(".maps");

// fe_demand counts, by egress FE, the forwarded packets this FE sent
// encapsulated to it (directly or through an intermediate): the traffic
// this FE asks of the mesh, from which the agent sets each link's spill
// ("direct VLB", fe/vlb.go).
struct fe_demand {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FES);
	__type(key, __u32);
	__type(value, struct fe_demand);
} fe_demand_map SEC(".maps");

// ife_ports marks, by port slot, the ports that are inter-FE links: only
// there is an IFE frame decapsulated or sent on.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TX_PORTS + 1);
	__type(key, __u32);
	__type(value, __u32);
} ife_ports SEC(".maps");

// nh_keys maps an NE-wide nexthop key to this FE's nexthop id, as
// NH_KEY_VALID | id (0: unknown key).
#define NH_KEY_VALID (1u << 31)
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NH_KEYS);
	__type(key, __u32);
	__type(value, __u32);
} nh_keys SEC(".maps");

#endif // SPLITPLANE_MAPS_H
