//go:build ignore

// xdp_router is the IPv4 fast path of a splitplane FE. It is attached to
// every router port and forwards plain unicast IPv4 whose route, nexthop and
// neighbour are all known; everything else (ARP, IPv6, VLAN, options, TTL
// expiry, packets for the router itself, misses) goes to the kernel with
// XDP_PASS, so the kernel stays the slow path and the source of ICMP errors.
// Every packet is counted once as "rx" and once under the reason it left by.
//
// Routes are looked up in a DIR-24-8 table (as DPDK's rte_lpm): one array
// load for prefixes up to /24, a second one for longer prefixes, whatever the
// table size. fib.go builds the table. xdp_router_trie is the same program
// with the kernel's LPM trie instead; it is kept only as the baseline that
// benchmarks compare against and is not loaded by the FE.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// Map sizes; datapath.go repeats them for input validation.
#define MAX_ROUTES 2000000 // LPM trie baseline only
#define MAX_NEXTHOPS 65536
#define MAX_NEIGHBORS 65536
#define MAX_LOCAL_ADDRS 4096
#define MAX_TX_PORTS 1024

// DIR-24-8 FIB; fib.go repeats these. A tbl24 entry is indexed by the top 24
// bits of the destination. An entry of either table is 0 (no route),
// FIB_VALID | nexthop id, or (tbl24 only) FIB_GROUP | index of a tbl8 group
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
#define FIB_NEXTHOP_MASK 0xffff
#define FIB_GROUP_MASK 0xffffff

#define BENCH_DSTS 65536

// stat_reason indexes the stats map. The Go side names each entry, so add new
// reasons before STAT_MAX and give them a name in datapath.go.
enum stat_reason {
	STAT_RX,                // every packet seen
	STAT_FORWARDED,         // redirected to an egress port
	STAT_FORWARDED_BYTES,   // frame bytes of the forwarded packets
	STAT_PASS_TRUNCATED,    // frame too short for its headers or tot_len
	STAT_PASS_NOT_IPV4,     // ARP, IPv6 and any other ethertype
	STAT_PASS_VLAN,         // 802.1Q / 802.1ad tagged
	STAT_PASS_NOT_UNICAST,  // L2 group address or IPv4 multicast/broadcast
	STAT_PASS_BAD_HEADER,   // IPv4 ethertype but version != 4 or ihl < 5
	STAT_PASS_OPTIONS,      // ihl > 5: options are the kernel's business
	STAT_PASS_LOCAL,        // destination is one of the router's addresses
	STAT_PASS_TTL,          // ttl <= 1: the kernel sends Time Exceeded
	STAT_PASS_NO_ROUTE,     // no matching prefix
	STAT_PASS_NO_NEXTHOP,   // route points at an empty nexthop slot
	STAT_PASS_NO_NEIGH,     // neighbour MAC not known (yet)
	STAT_PASS_NO_TX_PORT,   // nexthop interface is not in tx_ports
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

struct lpm_key {
	__u32 prefixlen;
	__be32 addr;
};

struct nexthop {
	__u32 ifindex;  // 0 = empty slot
	__be32 gateway; // 0 = connected: the destination is the neighbour
	__u8 smac[ETH_ALEN];
	__u8 pad[2];
};

struct neigh_key {
	__u32 ifindex;
	__be32 addr;
};

struct neigh {
	__u8 mac[ETH_ALEN];
	__u8 pad[2];
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
	__uint(max_entries, MAX_NEXTHOPS);
	__type(key, __u32);
	__type(value, struct nexthop);
} nexthops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NEIGHBORS);
	__type(key, struct neigh_key);
	__type(value, struct neigh);
} neighbors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOCAL_ADDRS);
	__type(key, __be32);
	__type(value, __u8);
} local_addrs SEC(".maps");

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

// router is the whole program; use_trie is a constant at each call site, so
// each program keeps only its own lookup.
static __always_inline int router(struct xdp_md *ctx, const int use_trie)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct neigh_key nkey = {};
	struct nexthop *nh;
	struct neigh *neigh;
	struct iphdr *ip;
	__u32 nh_id;
	__be32 daddr;
	__u16 tot_len;

	stat_add(STAT_RX, 1);

	if ((void *)(eth + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	switch (eth->h_proto) {
	case bpf_htons(ETH_P_IP):
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

	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	if (ip->version != 4 || ip->ihl < 5)
		return pass(STAT_PASS_BAD_HEADER);
	if (ip->ihl > 5)
		return pass(STAT_PASS_OPTIONS);
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
		return pass(STAT_PASS_LOCAL);
	if (ip->ttl <= 1 && !bench_ignore_ttl)
		return pass(STAT_PASS_TTL);

	if (!(use_trie ? trie_lookup(daddr, &nh_id) : fib_lookup(daddr, &nh_id)))
		return pass(STAT_PASS_NO_ROUTE);
	nh = bpf_map_lookup_elem(&nexthops, &nh_id);
	if (!nh || !nh->ifindex)
		return pass(STAT_PASS_NO_NEXTHOP);

	nkey.ifindex = nh->ifindex;
	nkey.addr = nh->gateway ? nh->gateway : daddr;
	neigh = bpf_map_lookup_elem(&neighbors, &nkey);
	if (!neigh)
		return pass(STAT_PASS_NO_NEIGH);

	// Pick the egress before touching the frame: with XDP_PASS as the
	// fallback a missing tx port hands the kernel the packet unmodified
	// instead of dropping it. The redirect itself happens after the
	// program returns, so rewriting the frame afterwards is safe.
	if (bpf_redirect_map(&tx_ports, nh->ifindex, XDP_PASS) != XDP_REDIRECT)
		return pass(STAT_PASS_NO_TX_PORT);

	ip_decrease_ttl(ip);
	__builtin_memcpy(eth->h_dest, neigh->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, nh->smac, ETH_ALEN);

	stat_add(STAT_FORWARDED, 1);
	stat_add(STAT_FORWARDED_BYTES, data_end - data);
	return XDP_REDIRECT;
}

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	return router(ctx, 0);
}

SEC("xdp")
int xdp_router_trie(struct xdp_md *ctx)
{
	return router(ctx, 1);
}
