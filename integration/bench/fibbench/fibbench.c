//go:build ignore

// The benchmarks' BPF object (`splitplane bench fib`, `bench forward`): a
// copy of the FE's router compiled from the very same pipeline
// (fe/datapath/bpf/router.h), so that its figures measure the FE's code,
// with the hooks a BPF_PROG_TEST_RUN benchmark needs, and the baselines the
// router is compared against. The FE never loads it; fibbench.Load programs
// it with the FE's own control code (datapath.LoadSpec).
//
//   - xdp_router, xdp_control and xdp_forward_cpumap: the FE's programs.
//     With bench_rotate set before load, every run's destination is the
//     next one of bench_dsts (bench_dsts6 for IPv6) and the TTL is not
//     checked; unset (as for `bench forward`), the verifier removes both
//     as dead code and the programs do what the FE's do.
//   - xdp_router_trie: the same router with the kernel's LPM tries in
//     place of the FIBs, the baseline of the lookup benchmarks;
//     xdp_router_tbl24 with DIR-24-8 alone (no range table in front).
//   - xdp_redirect_lookup: a bare redirect after one IPv4 FIB lookup, the
//     baseline of `bench forward`.

#include "../../../fe/datapath/bpf/router.h"

char __license[] SEC("license") = "Dual MIT/GPL";

#define MAX_ROUTES 2000000 // the FIB's bound, datapath.MaxRoutes
#define MAX_ROUTES6 1000000

#define BENCH_DSTS 65536 // a power of two: the index mask relies on it

// The variants of router(): the lookup hook_lookup4 and hook_lookup6 use.
#define VARIANT_FIB 0
#define VARIANT_TRIE 1
#define VARIANT_TBL24 2 // DIR-24-8 alone, without the range table in front

// When set before load, every run replaces the destination address with the
// next one of bench_dsts (bench_dsts6), so that a BPF_PROG_TEST_RUN
// benchmark with one frame looks up spread destinations, and the TTL check
// is skipped: BPF_PROG_TEST_RUN reruns the program on the same buffer, so
// the TTL would otherwise reach 1 after 254 runs. The arrays are plain
// globals, not const ones: clang 14 folds a const array read to zeros.
volatile const __u32 bench_rotate = 0;
__be32 bench_dsts[BENCH_DSTS];
struct in6_addr bench_dsts6[BENCH_DSTS];
__u32 bench_next;

struct lpm_key {
	__u32 prefixlen;
	__be32 addr;
};

struct lpm_key6 {
	__u32 prefixlen;
	__u8 addr[16];
};


// routes is the LPM trie of xdp_router_trie.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u32); // nexthop id
} routes SEC(".maps");

// routes6 is the IPv6 LPM trie of xdp_router_trie: a binary trie, so
// a lookup costs more as the table grows.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_ROUTES6);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key6);
	__type(value, __u32); // nexthop id
} routes6 SEC(".maps");

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

static __always_inline int hook_lookup4(__be32 daddr, __u32 *nh_id, const int variant)
{
	if (variant == VARIANT_TRIE) {
		if (bpf_map_lookup_elem(&local_addrs, &daddr))
			return LOOKUP_LOCAL;
		return trie_lookup(daddr, nh_id);
	}
	if (variant == VARIANT_TBL24)
		return fib_lookup_tbl24(daddr, nh_id);
	return fib_lookup(daddr, nh_id);
}

static __always_inline int hook_lookup6(const struct in6_addr *daddr, __u32 *nh_id, const int variant)
{
	if (variant == VARIANT_TRIE)
		return trie6_lookup(daddr, nh_id);
	return fib6_lookup(daddr, nh_id);
}

// csum_replace16 updates the IPv4 header checksum *check for a 16-bit word
// of the header changing from old to new (RFC 1624, eqn. 3).
static __always_inline void csum_replace16(__sum16 *check, __u16 old, __u16 new)
{
	__u32 s = (__u16)~*check + (__u16)~old + new;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*check = (__sum16)~s;
}

// hook_dst4 also keeps the header checksum valid, which the router checks
// on the next run, and the TTL at 255: the incremental update of
// ip_decrease_ttl does not survive the TTL wrapping from 0 to 255.
static __always_inline void hook_dst4(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__be32 d;
	__u16 ttl;

	if (!bench_rotate)
		return;
	d = bench_dsts[bench_next++ & (BENCH_DSTS - 1)];
	ttl = w[4];
	ip->ttl = 255;
	csum_replace16(&ip->check, ttl, w[4]);
	csum_replace16(&ip->check, w[8], (__u16)d);
	csum_replace16(&ip->check, w[9], (__u16)(d >> 16));
	ip->daddr = d;
}

static __always_inline void hook_dst6(struct ipv6hdr *ip6)
{
	if (bench_rotate)
		ip6->daddr = bench_dsts6[bench_next++ & (BENCH_DSTS - 1)];
}

// hook_ignore_ttl is read only for packets whose TTL is already <= 1, so
// the benchmark's fast path does not pay for it either.
static __always_inline int hook_ignore_ttl(void)
{
	return bench_rotate;
}

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	return router(ctx, VARIANT_FIB, 0);
}

SEC("xdp/cpumap")
int xdp_control(struct xdp_md *ctx)
{
	return control_rx();
}

SEC("xdp/cpumap")
int xdp_forward_cpumap(struct xdp_md *ctx)
{
	return router(ctx, VARIANT_FIB, 1);
}

SEC("xdp")
int xdp_router_trie(struct xdp_md *ctx)
{
	return router(ctx, VARIANT_TRIE, 0);
}

// xdp_router_tbl24 is the router reading DIR-24-8 only, as the FE did
// before the range table: the baseline of the range table's figures.
SEC("xdp")
int xdp_router_tbl24(struct xdp_md *ctx)
{
	return router(ctx, VARIANT_TBL24, 0);
}

// bench_redirect_port is the ifindex xdp_redirect_lookup sends to (a tx_ports
// entry).
__u32 bench_redirect_port;

// xdp_redirect_lookup is the bare redirect with one IPv4 FIB lookup of the
// destination before it, and none of the router's other work. Every packet
// pays what a lookup costs in memory (with a full table and spread
// destinations, a cache and TLB miss on tbl24), so its rate bounds what any
// forwarder doing one such lookup per packet reaches on the same ports.
SEC("xdp")
int xdp_redirect_lookup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 nh;

	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	if (fib_lookup(ip->daddr, &nh) != LOOKUP_ROUTE)
		return XDP_PASS;
	return bpf_redirect_map(&tx_ports, bench_redirect_port, XDP_PASS);
}
