//go:build ignore

// xdp_router is the IPv4 and IPv6 fast path of a splitplane FE. It is
// attached to every router port and forwards plain unicast IPv4 and IPv6
// whose route, nexthop and neighbour are all known; everything else (ARP,
// NDP, VLAN, IPv4 options, Hop-by-Hop options, TTL/hop limit expiry,
// link-local and multicast destinations, packets for the router itself,
// misses) goes to the kernel with XDP_PASS, so the kernel stays the slow path
// and the source of ICMP and ICMPv6 errors. Every packet is counted once as
// "rx", on the CPU that received it, and once under the reason it left by,
// and per port (port_stats) as rx on its ingress port and, when forwarded,
// as tx on its egress port.
//
// With forward CPUs set (fwd_steer), a packet that a CPU outside them would
// forward goes unmodified through cpu_map to the forward CPU its flow hash
// picks (counted "to_fe_cpu" where it arrived), and xdp_forward_cpumap
// routes and forwards it there, counting all but rx again.
//
// Packets for the router itself (local_addrs) are protected (for_us4 and
// for_us6): GTSM drops BGP packets from single-hop peers that arrive with a
// TTL below 255, the router's known control flows are redirected through a
// CPUMAP to the control CPU (so that the kernel processes them there, away
// from the forwarding load), and the rest passes a per-CPU policer. None of
// this runs for forwarded packets.
//
// IPv4 routes are looked up in a DIR-24-8 table (as DPDK's rte_lpm): one
// array load for prefixes up to /24, a second one for longer prefixes,
// whatever the table size. fib.go builds the table. IPv6 routes are looked
// up in a stride table (as DPDK's rte_lpm6, with a 16-bit first level): one
// load per 8 bits of the matching prefix beyond /16, at most 15; fib6.go
// builds it. xdp_router_trie is the same program with the kernel's LPM
// tries for both families instead; it is kept only as the baseline that
// benchmarks compare against and is not loaded by the FE.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// Map sizes; datapath.go repeats them for input validation.
#define MAX_ROUTES 2000000 // LPM trie baseline only
#define MAX_ROUTES6 1000000 // LPM trie baseline only
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

// IPv6 stride table; fib6.go repeats these. Entries are encoded as in the
// IPv4 table. fib6_tbl16 is indexed by the first two address bytes (one row
// per first byte); an entry with FIB_GROUP points at a group of fib6_tbl8
// indexed by the next address byte, and so on down to byte 15. Groups are
// allocated to the prefixes longer than /16 as they need them.
#define FIB6_TBL16_ROWS 256
#define FIB6_TBL8_GROUPS 131072

#define BENCH_DSTS 65536

// nexthop.gw_family: which gateway field holds the neighbour to send to.
#define GW_NONE 0 // connected: the packet's destination is the neighbour
#define GW_IPV4 4 // gateway
#define GW_IPV6 6 // gateway6

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
	STAT_PASS_NOT_ROUTABLE, // IPv6 dst link-local, :: or ::1; src also multicast
	STAT_TO_CONTROL_CPU,    // control flow redirected to the control CPU
	STAT_PASS_CONTROL,      // control flow passed here: no control CPU set
	STAT_DROP_POLICED,      // for the router, over the policer's rate
	STAT_DROP_GTSM,         // BGP from a GTSM peer with TTL / hop limit < 255
	STAT_CONTROL_CPU_RX,    // control-flow packets the CPUMAP brought to this CPU
	STAT_TO_FE_CPU,         // forwardable, redirected to a forward CPU to be forwarded there
	STAT_MAX,
};

// Referenced only so that the enum lands in BTF for bpf2go -type.
const enum stat_reason *unused_stat_reason __attribute__((unused));

// When set before load, the TTL check is skipped. Only benchmarks set it:
// BPF_PROG_TEST_RUN reruns the program on the same buffer, so the TTL would
// otherwise reach 1 after 254 runs. It is read only for packets whose TTL is
// already <= 1, so the fast path never pays for it.
volatile const __u32 bench_ignore_ttl = 0;

// When set before load, every run replaces the destination address with the
// next one of bench_dsts, so that a BPF_PROG_TEST_RUN benchmark with one
// frame looks up random destinations. The FE never sets it, and the verifier
// then removes the branch as dead code; bench_dsts stays zero and unread.
volatile const __u32 bench_rotate = 0;
__be32 bench_dsts[BENCH_DSTS];
__u32 bench_next;
// The IPv6 counterpart of bench_dsts, used for IPv6 frames.
struct in6_addr bench_dsts6[BENCH_DSTS];

struct lpm_key {
	__u32 prefixlen;
	__be32 addr;
};

struct lpm_key6 {
	__u32 prefixlen;
	__u8 addr[16];
};

// One nexthop array serves both families: a route of either family may use
// a gateway of either family (RFC 8950 IPv4 routes via IPv6 gateways), and
// gw_family says which neighbour table resolves it.
struct nexthop {
	__u32 ifindex;  // 0 = empty slot
	__be32 gateway; // IPv4 gateway when gw_family is GW_IPV4
	__u8 smac[ETH_ALEN];
	__u8 gw_family; // GW_NONE (connected), GW_IPV4 or GW_IPV6
	__u8 pad;
	__u8 gateway6[16]; // IPv6 gateway when gw_family is GW_IPV6
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

// The LPM trie of xdp_router_trie (baseline only).
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u32); // nexthop id
} routes SEC(".maps");

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

// The IPv6 LPM trie of xdp_router_trie (baseline only): a binary trie, so
// a lookup costs more as the table grows.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_ROUTES6);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key6);
	__type(value, __u32); // nexthop id
} routes6 SEC(".maps");

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

// control_flows and control_flows6 hold the router's control flows; the
// value counts each flow's packets on each CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_CONTROL_FLOWS);
	__type(key, struct ctl_flow_key);
	__type(value, __u64);
} control_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_CONTROL_FLOWS);
	__type(key, struct ctl_flow_key6);
	__type(value, __u64);
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

// fe_config is the one entry of fe_config_map, written whole by the Go side.
// The policer is a token bucket in its GCRA ("virtual scheduling") form: a
// packet conforms while the bucket's theoretical arrival time is at most
// police_tolerance_ns ahead of now, and each conforming packet moves it
// police_interval_ns (1 s / rate) later. That admits burst packets at once
// (tolerance = (burst - 1) * interval) and rate packets per second after
// that, with one timestamp of state and no multiplication on the packet
// path. The Go side may rewrite one field while a packet reads another; a
// packet that sees half of an update is policed with a mix of the old and
// the new setting, which is harmless.
struct fe_config {
	__u32 control_cpu;
	__u32 control_cpu_set; // 0: no control CPU, control flows pass here
	__u64 police_interval_ns; // 0: no policing
	__u64 police_tolerance_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fe_config);
} fe_config_map SEC(".maps");

// policer_state is this CPU's bucket: the time at which it will be full
// again. 0 (as the Go side resets it) means full.
struct policer_state {
	__u64 tat_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
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

// port_slot_hash is a BPF-to-BPF call for the reason neigh6 is: inlined,
// its lookup and port_slots' may share one call site, and the verifier
// would then inline neither.
static __attribute__((noinline)) __u32 port_slot_hash(__u32 ifindex)
{
	__u32 *slot = bpf_map_lookup_elem(&port_slots_hash, &ifindex);

	return slot ? *slot : 0;
}

// port_counters returns this CPU's counters of port ifindex.
static __always_inline struct port_counters *port_counters(__u32 ifindex)
{
	__u32 slot = 0;
	__u32 *s;

	if (ifindex < PORT_SLOTS_DIRECT) {
		s = bpf_map_lookup_elem(&port_slots, &ifindex);
		if (s)
			slot = *s;
	} else {
		slot = port_slot_hash(ifindex);
	}
	return bpf_map_lookup_elem(&port_stats, &slot);
}

static __always_inline void stat_add(__u32 reason, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &reason);

	// A plain add is enough: the slot is per CPU and XDP does not nest on
	// one CPU, so no other writer can race with it.
	if (c)
		*c += n;
}

static __always_inline int pass(__u32 reason)
{
	stat_add(reason, 1);
	return XDP_PASS;
}

// fib_lookup stores the nexthop id for daddr in *nh_id and returns 1, or
// returns 0 when no route matches. Each entry is read exactly once
// (volatile), so the group flag and the group index come from the same value
// even while the Go side rewrites the entry.
static __always_inline int fib_lookup(__be32 daddr, __u32 *nh_id)
{
	__u32 addr = bpf_ntohl(daddr);
	__u32 key = addr >> 16;
	struct fib_row *row;
	__u32 e;

	row = bpf_map_lookup_elem(&fib_tbl24, &key);
	if (!row)
		return 0;
	e = *(volatile __u32 *)&row->e[(addr >> 8) & 0xff];
	if (e & FIB_GROUP) {
		key = e & FIB_GROUP_MASK;
		row = bpf_map_lookup_elem(&fib_tbl8, &key);
		if (!row)
			return 0;
		e = *(volatile __u32 *)&row->e[addr & 0xff];
	}
	if (!(e & FIB_VALID))
		return 0;
	*nh_id = e & FIB_NEXTHOP_MASK;
	return 1;
}

// trie_lookup is fib_lookup over the kernel's LPM trie, for the baseline.
static __always_inline int trie_lookup(__be32 daddr, __u32 *nh_id)
{
	struct lpm_key key = { .prefixlen = 32, .addr = daddr };
	__u32 *v = bpf_map_lookup_elem(&routes, &key);

	if (!v)
		return 0;
	*nh_id = *v;
	return 1;
}

// fib6_lookup is fib_lookup for IPv6: the first two bytes of daddr index
// fib6_tbl16, and while the entry points at a group, the next byte indexes
// that group. Each entry is read exactly once, as in fib_lookup. The loop
// is unrolled so that every address byte is read at a constant offset; once
// an entry holds a value, the remaining iterations are one untaken branch
// each.
static __always_inline int fib6_lookup(const struct in6_addr *daddr, __u32 *nh_id)
{
	const __u8 *a = daddr->s6_addr;
	__u32 key = a[0];
	struct fib_row *row;
	__u32 e;
	int i;

	row = bpf_map_lookup_elem(&fib6_tbl16, &key);
	if (!row)
		return 0;
	e = *(volatile __u32 *)&row->e[a[1]];
#pragma unroll
	for (i = 2; i < 16; i++) {
		if (e & FIB_GROUP) {
			key = e & FIB_GROUP_MASK;
			row = bpf_map_lookup_elem(&fib6_tbl8, &key);
			e = row ? *(volatile __u32 *)&row->e[a[i]] : 0;
		}
	}
	if ((e & (FIB_VALID | FIB_GROUP)) != FIB_VALID)
		return 0;
	*nh_id = e & FIB_NEXTHOP_MASK;
	return 1;
}

// trie6_lookup is fib6_lookup over the kernel's LPM trie, for the baseline.
static __always_inline int trie6_lookup(const struct in6_addr *daddr, __u32 *nh_id)
{
	struct lpm_key6 key = { .prefixlen = 128 };
	__u32 *v;

	__builtin_memcpy(key.addr, daddr, sizeof(key.addr));
	v = bpf_map_lookup_elem(&routes6, &key);
	if (!v)
		return 0;
	*nh_id = *v;
	return 1;
}

// is_unicast_ipv4 is false for 224/4 (multicast) and 240/4, which holds the
// limited broadcast: a default route must not forward those.
static __always_inline int is_unicast_ipv4(__be32 addr)
{
	return bpf_ntohl(addr) < 0xe0000000;
}

// ip_decrease_ttl updates the header checksum incrementally (RFC 1624) the
// same way the kernel's ip_decrease_ttl() does: the TTL is the high byte of
// its 16-bit word, so the word drops by 0x0100 and the checksum rises by it,
// with the end-around carry folded back in.
static __always_inline void ip_decrease_ttl(struct iphdr *ip)
{
	__u32 check = (__u32)ip->check;

	check += (__u32)bpf_htons(0x0100);
	ip->check = (__sum16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

// is_routable_ipv6 is false for the unicast addresses that must never be
// forwarded to or from: link-local fe80::/10, the unspecified address ::
// and the loopback ::1. The first 64 bits decide the first two;
// only ::/64 needs the second half.
static __always_inline int is_routable_ipv6(const struct in6_addr *a)
{
	if (a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80)
		return 0;
	if ((a->s6_addr32[0] | a->s6_addr32[1]) == 0 && a->s6_addr32[2] == 0 &&
	    (a->s6_addr32[3] == 0 || a->s6_addr32[3] == bpf_htonl(1)))
		return 0;
	return 1;
}

static __always_inline struct neigh *neigh4(__u32 ifindex, __be32 addr)
{
	struct neigh_key key = { .ifindex = ifindex, .addr = addr };

	return bpf_map_lookup_elem(&neighbors, &key);
}

// neigh6 is a BPF-to-BPF call on purpose: inlined, clang sinks its map
// lookup and neigh4's into one call site with two possible maps, and the
// verifier then cannot inline either hash lookup (the map pointer is
// "poisoned"), which costs every IPv4 packet ~20 ns of indirect calls.
static __attribute__((noinline)) struct neigh *neigh6(__u32 ifindex, const void *addr)
{
	struct neigh_key6 key = { .ifindex = ifindex };

	__builtin_memcpy(key.addr, addr, sizeof(key.addr));
	return bpf_map_lookup_elem(&neighbors6, &key);
}

// neigh_lookup returns the neighbour nh sends a packet to: its gateway of
// whichever family it has, or for a connected nexthop the packet's own
// destination (daddr for IPv4, *daddr6 for IPv6).
static __always_inline struct neigh *neigh_lookup(const struct nexthop *nh, __be32 daddr,
						  const struct in6_addr *daddr6)
{
	switch (nh->gw_family) {
	case GW_IPV4:
		return neigh4(nh->ifindex, nh->gateway);
	case GW_IPV6:
		return neigh6(nh->ifindex, nh->gateway6);
	}
	if (daddr6)
		return neigh6(nh->ifindex, daddr6);
	return neigh4(nh->ifindex, daddr);
}

// mix32 is the 32-bit finaliser of "lowbias32" (Chris Wellons' hash
// prospector): cheap, branch-free, and every input bit reaches every output
// bit, so flows that differ in one port bit still spread evenly.
static __always_inline __u32 mix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x7feb352d;
	h ^= h >> 15;
	h *= 0x846ca68b;
	h ^= h >> 16;
	return h;
}

// hash_add folds the word v into the running flow hash h.
static __always_inline __u32 hash_add(__u32 h, __u32 v)
{
	return mix32(h ^ v) + 0x9e3779b9;
}

// l4_ports returns the TCP, UDP or SCTP port pair at l4 (both ports, as one
// word), or 0 for other protocols or a frame too short to hold them.
static __always_inline __u32 l4_ports(__u8 proto, void *l4, void *data_end)
{
	if (proto != 6 /* TCP */ && proto != 17 /* UDP */ && proto != 132 /* SCTP */)
		return 0;
	if (l4 + sizeof(__u32) > data_end)
		return 0;
	return *(__u32 *)l4;
}

// flow_hash4 hashes the 5-tuple of an IPv4 packet without options. Fragments
// hash without ports, which only the first one carries: all fragments of a
// datagram then take the same member, as in the kernel's multipath hash.
static __always_inline __u32 flow_hash4(struct iphdr *ip, void *data_end)
{
	__u32 h = hash_add(0, ip->saddr);

	h = hash_add(h, ip->daddr);
	if (!(ip->frag_off & bpf_htons(0x3fff /* IP_MF | IP_OFFSET */)))
		h = hash_add(h, l4_ports(ip->protocol, ip + 1, data_end));
	return hash_add(h, ip->protocol);
}

// flow_hash6 hashes the addresses, the next header and, for TCP, UDP and
// SCTP directly after the fixed header, the ports; otherwise (extension
// headers, fragments) the flow label, which the source keeps per flow.
static __always_inline __u32 flow_hash6(struct ipv6hdr *ip6, void *data_end)
{
	__u32 h = 0, ports;
	int i;

	for (i = 0; i < 4; i++)
		h = hash_add(h, ip6->saddr.s6_addr32[i]);
	for (i = 0; i < 4; i++)
		h = hash_add(h, ip6->daddr.s6_addr32[i]);
	ports = l4_ports(ip6->nexthdr, ip6 + 1, data_end);
	if (!ports)
		ports = *(__u32 *)ip6 & bpf_htonl(0x000fffff); // flow label
	h = hash_add(h, ports);
	return hash_add(h, ip6->nexthdr);
}

// group_member replaces the group id *nh_id by the member that hash picks,
// or returns STAT_PASS_NO_NEXTHOP when the group is empty. Only routes via
// groups get here, so plain nexthops pay one comparison for ECMP.
static __always_inline int group_member(__u32 *nh_id, __u32 hash)
{
	__u32 key = *nh_id - NH_GROUP_BASE;
	struct nh_group *g;
	__u32 n, i;

	g = bpf_map_lookup_elem(&nh_groups, &key);
	if (!g)
		return STAT_PASS_NO_NEXTHOP;
	n = *(volatile __u32 *)&g->count;
	if (!n || n > NH_GROUP_MEMBERS)
		return STAT_PASS_NO_NEXTHOP;
	// hash % n < n <= NH_GROUP_MEMBERS already, but the verifier cannot
	// bound a modulo by a variable, so the index is masked; the empty asm
	// hides the bound from clang, which would otherwise drop the mask.
	i = hash % n;
	asm volatile("" : "+r"(i));
	*nh_id = g->members[i & (NH_GROUP_MEMBERS - 1)];
	return 0;
}

// egress looks up nexthop nh_id and its neighbour and selects the redirect
// target. On success it stores the nexthop and the neighbour and returns 0;
// otherwise it returns the pass reason.
static __always_inline int egress(__u32 nh_id, __be32 daddr, const struct in6_addr *daddr6,
				  struct nexthop **nhp, struct neigh **neighp)
{
	struct nexthop *nh;
	struct neigh *neigh;

	nh = bpf_map_lookup_elem(&nexthops, &nh_id);
	if (!nh || !nh->ifindex)
		return STAT_PASS_NO_NEXTHOP;
	neigh = neigh_lookup(nh, daddr, daddr6);
	if (!neigh)
		return STAT_PASS_NO_NEIGH;
	// Pick the egress before touching the frame: with XDP_PASS as the
	// fallback a missing tx port hands the kernel the packet unmodified
	// instead of dropping it. The redirect itself happens after the
	// program returns, so rewriting the frame afterwards is safe.
	if (bpf_redirect_map(&tx_ports, nh->ifindex, XDP_PASS) != XDP_REDIRECT)
		return STAT_PASS_NO_TX_PORT;
	*nhp = nh;
	*neighp = neigh;
	return 0;
}

static __always_inline int forwarded(struct ethhdr *eth, const struct nexthop *nh,
				     const struct neigh *neigh, __u64 len)
{
	__u32 ifindex = nh->ifindex;
	struct port_counters *ps;

	__builtin_memcpy(eth->h_dest, neigh->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, nh->smac, ETH_ALEN);
	stat_add(STAT_FORWARDED, 1);
	stat_add(STAT_FORWARDED_BYTES, len);
	// Per CPU, so plain adds, as in stat_add.
	ps = port_counters(ifindex);
	if (ps) {
		ps->tx_packets++;
		ps->tx_bytes += len;
	}
	return XDP_REDIRECT;
}

// --- packets for the router itself ------------------------------------

#define BGP_PORT 179

// ACT_TO_CONTROL_CPU is what route returns for a packet redirected to the
// control CPU: router counts it as passed (the kernel gets it) and returns
// XDP_REDIRECT. It is no XDP action.
#define ACT_TO_CONTROL_CPU 0x100
// ACT_TO_FE_CPU is what route returns for a packet redirected to a forward
// CPU: router counts only its rx (the forward CPU counts the rest) and
// returns XDP_REDIRECT.
#define ACT_TO_FE_CPU 0x101

// is_bgp says whether a TCP packet has port 179 on either side.
static __always_inline int is_bgp(__be16 sport, __be16 dport)
{
	return sport == bpf_htons(BGP_PORT) || dport == bpf_htons(BGP_PORT);
}

static __always_inline int drop(__u32 reason)
{
	stat_add(reason, 1);
	return XDP_DROP;
}

// police passes the packet if this CPU's bucket has a token for it and
// drops it otherwise; see struct fe_config. The bucket is per CPU, so the
// rate and burst are per CPU too, and no CPU waits for another.
static __always_inline int police(const struct fe_config *cfg)
{
	__u64 interval = cfg->police_interval_ns;
	struct policer_state *st;
	__u32 key = 0;
	__u64 now, tat;

	if (!interval)
		return pass(STAT_PASS_LOCAL);
	st = bpf_map_lookup_elem(&policer, &key);
	if (!st)
		return pass(STAT_PASS_LOCAL);
	now = bpf_ktime_get_ns();
	tat = st->tat_ns;
	if (tat < now)
		tat = now; // the bucket has been full since tat
	if (tat - now > cfg->police_tolerance_ns)
		return drop(STAT_DROP_POLICED);
	// Per CPU and XDP does not nest, so a plain store, as in stat_add.
	st->tat_ns = tat + interval;
	return pass(STAT_PASS_LOCAL);
}

// to_control sends a packet of a control flow (whose per-CPU packet count is
// *count) to the control CPU, or passes it here when none is configured. A
// missing cpu_map entry (while the Go side moves the control CPU) makes
// bpf_redirect_map return XDP_PASS, and the packet passes here too.
static __always_inline int to_control(const struct fe_config *cfg, __u64 *count)
{
	*count += 1;
	if (cfg->control_cpu_set &&
	    bpf_redirect_map(&cpu_map, cfg->control_cpu, XDP_PASS) == XDP_REDIRECT) {
		stat_add(STAT_TO_CONTROL_CPU, 1);
		return ACT_TO_CONTROL_CPU;
	}
	return pass(STAT_PASS_CONTROL);
}

// for_us4 decides the fate of an IPv4 packet to one of the router's
// addresses: GTSM, then control flows, then the policer. The header, options
// included, is in the frame; tot_len is not checked (the kernel does).
// It is a BPF-to-BPF call so that forwarded packets, which never get here,
// do not carry its code inline.
static __attribute__((noinline)) int for_us4(struct iphdr *ip, void *data_end)
{
	struct ctl_flow_key key = {};
	struct fe_config *cfg;
	__u32 zero = 0;
	int ports = 0;
	__u64 *count;
	__be16 *l4;

	cfg = bpf_map_lookup_elem(&fe_config_map, &zero);
	if (!cfg)
		return pass(STAT_PASS_LOCAL);
	// Only a first fragment (offset 0) holds the TCP header.
	if (ip->protocol != 6 /* TCP */ || (ip->frag_off & bpf_htons(0x1fff /* IP_OFFSET */)))
		return police(cfg);
	l4 = (void *)ip + ip->ihl * 4;
	if ((void *)(l4 + 2) <= data_end) {
		key.sport = l4[0];
		key.dport = l4[1];
		ports = 1;
	}
	// GTSM protects BGP sessions in both directions: the peer's packets
	// go to port 179 when it connected to the router and come from it when
	// the router connected to the peer. A first fragment too short to show
	// its ports may be BGP and is dropped alike (RFC 1858 calls such
	// fragments an attack anyway).
	if (ip->ttl < 255 && (!ports || is_bgp(key.sport, key.dport)) &&
	    bpf_map_lookup_elem(&gtsm_peers, &ip->saddr))
		return drop(STAT_DROP_GTSM);
	if (ports) {
		key.saddr = ip->saddr;
		key.daddr = ip->daddr;
		count = bpf_map_lookup_elem(&control_flows, &key);
		if (count)
			return to_control(cfg, count);
	}
	return police(cfg);
}

// IPv6 extension headers that for_us6 steps over.
static __always_inline int is_ext6(__u8 nh)
{
	return nh == 0 /* Hop-by-Hop */ || nh == 43 /* Routing */ || nh == 44 /* Fragment */ ||
	       nh == 60 /* Destination Options */;
}

#define EXT6_MAX 4 // extension headers for_us6 follows to find TCP

// for_us6 is for_us4 for IPv6. NDP (ICMPv6 types 133-137) always passes
// unpoliced. The upper-layer header is found behind up to EXT6_MAX
// extension headers, so that they cannot hide BGP from GTSM; a chain that
// cannot be followed counts as possibly BGP for GTSM, and as neither a
// control flow nor NDP otherwise.
static __attribute__((noinline)) int for_us6(struct ipv6hdr *ip6, void *data_end)
{
	struct ctl_flow_key6 key = {};
	struct fe_config *cfg;
	__u8 proto = ip6->nexthdr;
	void *l4 = ip6 + 1;
	int i, opaque = 0, later_frag = 0, ports = 0;
	__u32 zero = 0;
	__u64 *count;

	if (proto == 58 /* ICMPv6 */ && l4 + 1 <= data_end) {
		__u8 type = *(__u8 *)l4;

		if (type >= 133 && type <= 137)
			return pass(STAT_PASS_LOCAL);
	}
	cfg = bpf_map_lookup_elem(&fe_config_map, &zero);
	if (!cfg)
		return pass(STAT_PASS_LOCAL);
#pragma unroll
	for (i = 0; i < EXT6_MAX; i++) {
		__u8 *h = l4;

		if (!is_ext6(proto))
			break;
		if ((void *)(h + 8) > data_end) {
			opaque = 1;
			break;
		}
		if (proto == 44) {
			// Later fragments hold no upper-layer header.
			if (*(__be16 *)(h + 2) & bpf_htons(0xfff8)) {
				later_frag = 1;
				break;
			}
			l4 += 8;
		} else {
			l4 += (h[1] + 1) * 8;
		}
		proto = h[0];
	}
	if (!later_frag && is_ext6(proto))
		opaque = 1;
	if (proto == 6 /* TCP */ && !later_frag && !opaque && l4 + 4 <= data_end) {
		key.sport = ((__be16 *)l4)[0];
		key.dport = ((__be16 *)l4)[1];
		ports = 1;
	}
	if (ip6->hop_limit < 255 &&
	    (opaque || (proto == 6 && !later_frag && (!ports || is_bgp(key.sport, key.dport)))) &&
	    bpf_map_lookup_elem(&gtsm_peers6, &ip6->saddr))
		return drop(STAT_DROP_GTSM);
	if (ports) {
		__builtin_memcpy(key.saddr, &ip6->saddr, sizeof(key.saddr));
		__builtin_memcpy(key.daddr, &ip6->daddr, sizeof(key.daddr));
		count = bpf_map_lookup_elem(&control_flows6, &key);
		if (count)
			return to_control(cfg, count);
	}
	return police(cfg);
}

// to_fe_cpu is called for a packet this CPU would forward (egress selected
// tx port ifindex) while fwd_steer says that n forward CPUs do the
// forwarding: it redirects the packet, unmodified, through cpu_map to the
// forward CPU that its flow hash picks, so that a flow stays on one CPU
// and in order. It returns ACT_TO_FE_CPU, or 0 to forward the packet here
// when the CPU has no cpu_map entry (while the Go side changes the set), or
// the pass reason if the tx port vanished meanwhile. It is a BPF-to-BPF call
// so that the packets forwarded where they arrive do not carry its code.
static __attribute__((noinline)) int to_fe_cpu(__u32 hash, __u32 n, __u32 ifindex)
{
	__u32 key = hash % n;
	__u32 *cpu = bpf_map_lookup_elem(&fwd_cpus, &key);

	if (cpu && bpf_redirect_map(&cpu_map, *cpu, XDP_PASS) == XDP_REDIRECT) {
		stat_add(STAT_TO_FE_CPU, 1);
		return ACT_TO_FE_CPU;
	}
	// A failed cpu_map lookup cleared the redirect that egress set up.
	if (bpf_redirect_map(&tx_ports, ifindex, XDP_PASS) != XDP_REDIRECT)
		return STAT_PASS_NO_TX_PORT;
	return 0;
}

// fwd_steer_count returns this CPU's fwd_steer: 0 to forward here.
static __always_inline __u32 fwd_steer_count(void)
{
	__u32 key = 0;
	__u32 *n = bpf_map_lookup_elem(&fwd_steer, &key);

	return n ? *n : 0;
}

// router4 forwards the IPv4 packet after eth, or passes it. use_trie is a
// constant at each call site, so each program keeps only its own lookup;
// so is on_fe_cpu, set in the forward CPUs' CPUMAP program, which forwards
// what it gets and never steers again.
static __always_inline int router4(struct ethhdr *eth, void *data_end, const int use_trie,
				   const int on_fe_cpu)
{
	struct iphdr *ip = (void *)(eth + 1);
	struct nexthop *nh;
	struct neigh *neigh;
	__u32 nh_id, n;
	__be32 daddr;
	__u16 tot_len;
	int reason;

	if ((void *)(ip + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	if (ip->version != 4 || ip->ihl < 5)
		return pass(STAT_PASS_BAD_HEADER);
	if (ip->ihl > 5) {
		// Options must not let a packet for the router dodge GTSM and
		// the policer; forwarded packets pay nothing for the check.
		if (bpf_map_lookup_elem(&local_addrs, &ip->daddr))
			return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us4(ip, data_end);
		return pass(STAT_PASS_OPTIONS);
	}
	// Padding after tot_len is fine (short frames are padded to 60
	// bytes); a tot_len the frame cannot hold means a broken packet that
	// the kernel should judge.
	tot_len = bpf_ntohs(ip->tot_len);
	if (tot_len < sizeof(*ip) || (void *)ip + tot_len > data_end)
		return pass(STAT_PASS_TRUNCATED);

	if (bench_rotate)
		ip->daddr = bench_dsts[bench_next++ & (BENCH_DSTS - 1)];

	daddr = ip->daddr;
	if (!is_unicast_ipv4(daddr))
		return pass(STAT_PASS_NOT_UNICAST);
	if (bpf_map_lookup_elem(&local_addrs, &daddr))
		return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us4(ip, data_end);
	if (ip->ttl <= 1 && !bench_ignore_ttl)
		return pass(STAT_PASS_TTL);

	if (!(use_trie ? trie_lookup(daddr, &nh_id) : fib_lookup(daddr, &nh_id)))
		return pass(STAT_PASS_NO_ROUTE);
	if (nh_id >= NH_GROUP_BASE) {
		reason = group_member(&nh_id, flow_hash4(ip, data_end));
		if (reason)
			return pass(reason);
	}
	reason = egress(nh_id, daddr, 0, &nh, &neigh);
	if (reason)
		return pass(reason);
	if (!on_fe_cpu && (n = fwd_steer_count())) {
		reason = to_fe_cpu(flow_hash4(ip, data_end), n, nh->ifindex);
		if (reason == ACT_TO_FE_CPU)
			return reason;
		if (reason)
			return pass(reason);
	}

	ip_decrease_ttl(ip);
	return forwarded(eth, nh, neigh, data_end - (void *)eth);
}

// router6 forwards the IPv6 packet after eth, or passes it. Extension
// headers other than Hop-by-Hop are not parsed: RFC 8200 section 4 has
// routers forward them untouched. use_trie and on_fe_cpu are as for router4.
static __always_inline int router6(struct ethhdr *eth, void *data_end, const int use_trie,
				   const int on_fe_cpu)
{
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct nexthop *nh;
	struct neigh *neigh;
	__u32 nh_id, n;
	int reason;

	if ((void *)(ip6 + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	if (ip6->version != 6)
		return pass(STAT_PASS_BAD_HEADER);
	// As for IPv4, Ethernet padding after the payload is fine, a payload
	// the frame cannot hold is not. A Jumbo Payload (payload_len 0) comes
	// with a Hop-by-Hop header and so goes to the kernel below.
	if ((void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	if (ip6->nexthdr == 0 /* IPPROTO_HOPOPTS */) {
		// As for IPv4 options.
		if (bpf_map_lookup_elem(&local_addrs6, &ip6->daddr))
			return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us6(ip6, data_end);
		return pass(STAT_PASS_OPTIONS);
	}

	if (bench_rotate)
		ip6->daddr = bench_dsts6[bench_next++ & (BENCH_DSTS - 1)];

	// ff00::/8, which includes the solicited-node addresses of NDP.
	if (ip6->daddr.s6_addr[0] == 0xff)
		return pass(STAT_PASS_NOT_UNICAST);
	if (!is_routable_ipv6(&ip6->daddr))
		return pass(STAT_PASS_NOT_ROUTABLE);
	// Nor may packets from such sources leave their link (RFC 4291
	// section 2.5.6); the kernel answers link-local ones with ICMPv6
	// "beyond scope of source address".
	if (ip6->saddr.s6_addr[0] == 0xff || !is_routable_ipv6(&ip6->saddr))
		return pass(STAT_PASS_NOT_ROUTABLE);
	if (bpf_map_lookup_elem(&local_addrs6, &ip6->daddr))
		return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us6(ip6, data_end);
	if (ip6->hop_limit <= 1 && !bench_ignore_ttl)
		return pass(STAT_PASS_TTL);

	if (!(use_trie ? trie6_lookup(&ip6->daddr, &nh_id) : fib6_lookup(&ip6->daddr, &nh_id)))
		return pass(STAT_PASS_NO_ROUTE);
	if (nh_id >= NH_GROUP_BASE) {
		reason = group_member(&nh_id, flow_hash6(ip6, data_end));
		if (reason)
			return pass(reason);
	}
	reason = egress(nh_id, 0, &ip6->daddr, &nh, &neigh);
	if (reason)
		return pass(reason);
	if (!on_fe_cpu && (n = fwd_steer_count())) {
		reason = to_fe_cpu(flow_hash6(ip6, data_end), n, nh->ifindex);
		if (reason == ACT_TO_FE_CPU)
			return reason;
		if (reason)
			return pass(reason);
	}

	// IPv6 has no header checksum to update.
	ip6->hop_limit--;
	stat_add(STAT_FORWARDED_IPV6, 1);
	return forwarded(eth, nh, neigh, data_end - (void *)eth);
}

// route decides what happens to the packet; use_trie selects the lookup of
// both families. on_fe_cpu is set for the packets another CPU redirected to
// this forward CPU: they were counted as rx there, and rx counts every
// packet once, on the CPU that received it.
static __always_inline int route(void *data, void *data_end, const int use_trie,
				 const int on_fe_cpu)
{
	struct ethhdr *eth = data;

	if (!on_fe_cpu)
		stat_add(STAT_RX, 1);

	if ((void *)(eth + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	switch (eth->h_proto) {
	case bpf_htons(ETH_P_IP):
	case bpf_htons(ETH_P_IPV6):
		break;
	case bpf_htons(ETH_P_8021Q):
	case bpf_htons(ETH_P_8021AD):
		return pass(STAT_PASS_VLAN);
	default:
		return pass(STAT_PASS_NOT_IPV4);
	}
	// Broadcast and multicast frames are for the local stack, whatever
	// their IP destination says.
	if (eth->h_dest[0] & 1)
		return pass(STAT_PASS_NOT_UNICAST);

	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return router6(eth, data_end, use_trie, on_fe_cpu);
	return router4(eth, data_end, use_trie, on_fe_cpu);
}

// router is the whole program: route plus the ingress port's counters.
// With on_fe_cpu (the forward CPUs' CPUMAP program) the ingress port's rx
// is not counted again: the receiving CPU did, and a packet counts once as
// rx, however many CPUs it visits.
static __always_inline int router(struct xdp_md *ctx, const int use_trie, const int on_fe_cpu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 ifindex = ctx->ingress_ifindex;
	// Taken before route rewrites the frame; the length never changes.
	__u64 len = data_end - data;
	struct port_counters *ps;
	int action;

	action = route(data, data_end, use_trie, on_fe_cpu);
	ps = port_counters(ifindex);
	if (!ps)
		return action >= ACT_TO_CONTROL_CPU ? XDP_REDIRECT : action;
	if (!on_fe_cpu) {
		ps->rx_packets++;
		ps->rx_bytes += len;
	}
	if (action == XDP_REDIRECT)
		return action;
	if (action == XDP_PASS) {
		ps->passed++;
		return action;
	}
	if (action == XDP_DROP) {
		ps->dropped++;
		return action;
	}
	// ACT_TO_FE_CPU: the forward CPU counts the tx (or what else happens).
	if (action == ACT_TO_FE_CPU)
		return XDP_REDIRECT;
	// ACT_TO_CONTROL_CPU: the control CPU's kernel gets the packet.
	ps->passed++;
	return XDP_REDIRECT;
}

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	return router(ctx, 0, 0);
}

// xdp_control runs on the control CPU for every packet cpu_map brings there
// (a control flow's return packet): it counts it on that CPU, which is how
// one sees where the work is done, and hands it to that CPU's kernel stack.
SEC("xdp/cpumap")
int xdp_control(struct xdp_md *ctx)
{
	stat_add(STAT_CONTROL_CPU_RX, 1);
	return XDP_PASS;
}

// xdp_forward_cpumap runs on each forward CPU for every packet cpu_map
// brings there (one that another CPU would have forwarded): it routes the
// packet again, with this CPU's view of the tables, and forwards it, or
// passes it to this CPU's kernel if the tables changed meanwhile (a packet
// for the router included: it skips for_us, which may redirect).
//
// Neither CPUMAP program may use cpu_map, not even in dead code: a cpu_map
// entry holds its program and a program holds the maps it uses, so the
// cycle would keep cpu_map, the program and every map it uses (hundreds
// of MB with the FIB) in the kernel for good once the FE exits.
SEC("xdp/cpumap")
int xdp_forward_cpumap(struct xdp_md *ctx)
{
	return router(ctx, 0, 1);
}

SEC("xdp")
int xdp_router_trie(struct xdp_md *ctx)
{
	return router(ctx, 1, 0);
}

// bench_redirect_port is the ifindex xdp_redirect_lookup sends to (a tx_ports
// entry).
__u32 bench_redirect_port;

// xdp_redirect_lookup is a baseline of `splitplane bench forward`, not part of
// the router (the FE never loads it): the bare redirect with one IPv4 FIB
// lookup of the destination before it, and none of the router's other work.
// Every packet pays what a lookup costs in memory (with a full table and
// spread destinations, a cache and TLB miss on tbl24), so its rate bounds
// what any forwarder doing one such lookup per packet reaches on the same
// ports.
SEC("xdp")
int xdp_redirect_lookup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 nh;

	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	if (!fib_lookup(ip->daddr, &nh))
		return XDP_PASS;
	return bpf_redirect_map(&tx_ports, bench_redirect_port, XDP_PASS);
}
