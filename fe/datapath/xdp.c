//go:build ignore

// xdp_router is the IPv4 fast path of a splitplane FE. It is attached to
// every router port and forwards plain unicast IPv4 whose route, nexthop and
// neighbour are all known; everything else (ARP, IPv6, VLAN, options, TTL
// expiry, packets for the router itself, misses) goes to the kernel with
// XDP_PASS, so the kernel stays the slow path and the source of ICMP errors.
// Every packet is counted once as "rx" and once under the reason it left by.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// Map sizes; datapath.go repeats them for input validation.
#define MAX_ROUTES 2000000
#define MAX_NEXTHOPS 65536
#define MAX_NEIGHBORS 65536
#define MAX_LOCAL_ADDRS 4096
#define MAX_TX_PORTS 1024

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

// route_lookup returns the nexthop id for daddr, or NULL. It is the only
// place that knows the FIB is an LPM trie, so a faster FIB can replace it.
static __always_inline __u32 *route_lookup(__be32 daddr)
{
	struct lpm_key key = { .prefixlen = 32, .addr = daddr };

	return bpf_map_lookup_elem(&routes, &key);
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

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct neigh_key nkey = {};
	struct nexthop *nh;
	struct neigh *neigh;
	struct iphdr *ip;
	__u32 *nh_id;
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

	daddr = ip->daddr;
	if (!is_unicast_ipv4(daddr))
		return pass(STAT_PASS_NOT_UNICAST);
	if (bpf_map_lookup_elem(&local_addrs, &daddr))
		return pass(STAT_PASS_LOCAL);
	if (ip->ttl <= 1 && !bench_ignore_ttl)
		return pass(STAT_PASS_TTL);

	nh_id = route_lookup(daddr);
	if (!nh_id)
		return pass(STAT_PASS_NO_ROUTE);
	nh = bpf_map_lookup_elem(&nexthops, nh_id);
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
