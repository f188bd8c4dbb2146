// forward.h: the forwarding steps of splitplane's XDP pipeline (counters,
// the FIB lookups, address checks, the flow hash, ECMP, egress and the
// rewrite), as static functions for router.h and for the programs that
// include it.

#ifndef SPLITPLANE_FORWARD_H
#define SPLITPLANE_FORWARD_H

#include "maps.h"

// port_slot_hash is a BPF-to-BPF call for the reason neigh6 is: inlined,
// its lookup and port_slots' may share one call site, and the verifier
// would then inline neither.
static __attribute__((noinline)) __u32 port_slot_hash(__u32 ifindex)
{
	__u32 *slot = bpf_map_lookup_elem(&port_slots_hash, &ifindex);

	return slot ? *slot : 0;
}

// port_slot returns the slot of port ifindex in port_stats and
// port_info_map, 0 for a port without one.
static __always_inline __u32 port_slot(__u32 ifindex)
{
	__u32 *s;

	if (ifindex < PORT_SLOTS_DIRECT) {
		s = bpf_map_lookup_elem(&port_slots, &ifindex);
		return s ? *s : 0;
	}
	return port_slot_hash(ifindex);
}

// port_counters returns this CPU's counters of the port in slot.
static __always_inline struct port_counters *port_counters(__u32 slot)
{
	return bpf_map_lookup_elem(&port_stats, &slot);
}

// other_host is true for a frame whose (unicast) destination MAC is not
// that of the port in slot; a port whose MAC is not known (zero) takes
// every frame. The MACs are compared as a 32-bit and a 16-bit word (read
// through void *: struct ethhdr is packed, and clang would otherwise read
// the frame's MAC a byte at a time).
static __always_inline int other_host(const struct ethhdr *eth, __u32 slot)
{
	const void *d = eth;
	struct port_info *pi = bpf_map_lookup_elem(&port_info_map, &slot);
	__u32 m0;
	__u16 m1;

	if (!pi)
		return 0;
	m0 = *(__u32 *)pi->mac;
	m1 = *(__u16 *)&pi->mac[4];
	if (!(m0 | m1))
		return 0;
	return ((*(const __u32 *)d ^ m0) | (*(const __u16 *)(d + 4) ^ m1)) != 0;
}

// over_mtu is true when an IP packet of l3len bytes does not fit the MTU
// of the port in slot (never when the MTU is not known, zero).
static __always_inline int over_mtu(__u32 slot, __u32 l3len)
{
	struct port_info *pi = bpf_map_lookup_elem(&port_info_map, &slot);

	return pi && pi->mtu && l3len > pi->mtu;
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

// tbl24_lookup returns the DIR-24-8 entry for addr (host order), 0 if none.
// Each entry is read exactly once (volatile), so the group flag and the
// group index come from the same value even while the Go side rewrites the
// entry.
static __always_inline __u32 tbl24_lookup(__u32 addr)
{
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
	return e;
}

// dxr_search returns the value index of the last of the 2^k ranges at
// word base of dxr_ranges that starts at or before addr's place in its /16:
// a binary search of exactly k steps (the block is padded to 2^k by
// repeating its last range), all in one row.
static __always_inline __u32 dxr_search(__u32 d, __u32 addr)
{
	__u32 base = d & DXR_BASE_MASK, k = (d >> DXR_LOG_SHIFT) & 0xf;
	__u32 key = base / DXR_ROW, off = base % DXR_ROW, i = 0, j;
	struct dxr_row *row;
	int s;

	row = bpf_map_lookup_elem(&dxr_ranges, &key);
	if (!row)
		return 0;
	if (d & DXR_SHORT) {
		const __u16 *h = (const __u16 *)row->e;
		__u16 lo = addr & 0xff00;

		off *= 2;
#pragma unroll
		for (s = 7; s >= 0; s--) {
			j = i | (1u << s);
			if (s < k && (h[(off + j) & (2 * DXR_ROW - 1)] & 0xff00) <= lo)
				i = j;
		}
		return h[(off + i) & (2 * DXR_ROW - 1)] & 0xff;
	}
#pragma unroll
	for (s = 11; s >= 0; s--) {
		j = i | (1u << s);
		if (s < k && (row->e[(off + j) & (DXR_ROW - 1)] >> 16) <= (addr & 0xffff))
			i = j;
	}
	return row->e[(off + i) & (DXR_ROW - 1)] & 0xffff;
}

// What fib_lookup finds: no route, a route, or an address of the router.
#define LOOKUP_NONE 0
#define LOOKUP_ROUTE 1
#define LOOKUP_LOCAL 2

// fib_lookup stores the nexthop id for daddr in *nh_id and returns
// LOOKUP_ROUTE, or returns LOOKUP_LOCAL for an address of the router and
// LOOKUP_NONE when no route matches: the range table first (dxr.go), which
// holds the router's addresses too, and DIR-24-8 with local_addrs for the
// /16s it does not hold. A published block is never changed, so only the
// direct entry needs a single read.
static __always_inline int fib_lookup(__be32 daddr, __u32 *nh_id)
{
	__u32 addr = bpf_ntohl(daddr);
	__u32 key = addr >> 24;
	struct fib_row *row;
	__u32 d, e;

	row = bpf_map_lookup_elem(&dxr_direct, &key);
	if (!row)
		return 0;
	d = *(volatile __u32 *)&row->e[(addr >> 16) & 0xff];
	if (d & DXR_RANGES) {
		key = dxr_search(d, addr);
		row = bpf_map_lookup_elem(&dxr_values, &(__u32){ key / FIB_ROW });
		if (!row)
			return 0;
		e = row->e[key % FIB_ROW];
		if (e & FIB_LOCAL)
			return LOOKUP_LOCAL;
	} else if (d & DXR_TBL24) {
		if (bpf_map_lookup_elem(&local_addrs, &daddr))
			return LOOKUP_LOCAL;
		e = tbl24_lookup(addr);
	} else {
		e = d;
	}
	if (!(e & FIB_VALID))
		return LOOKUP_NONE;
	*nh_id = e & FIB_NEXTHOP_MASK;
	return LOOKUP_ROUTE;
}

// fib_lookup_tbl24 is fib_lookup on DIR-24-8 and local_addrs alone, the
// baseline of the range table in the benchmarks.
static __always_inline int fib_lookup_tbl24(__be32 daddr, __u32 *nh_id)
{
	__u32 e;

	if (bpf_map_lookup_elem(&local_addrs, &daddr))
		return LOOKUP_LOCAL;
	e = tbl24_lookup(bpf_ntohl(daddr));
	if (!(e & FIB_VALID))
		return LOOKUP_NONE;
	*nh_id = e & FIB_NEXTHOP_MASK;
	return LOOKUP_ROUTE;
}

// fib6_stride_lookup is fib_lookup for IPv6 on the stride table alone: the
// first two bytes of daddr index
// fib6_tbl16, and while the entry points at a group, the next byte indexes
// that group. Each entry is read exactly once, as in fib_lookup. The loop
// is unrolled so that every address byte is read at a constant offset; once
// an entry holds a value, the remaining iterations are one untaken branch
// each.
static __always_inline int fib6_stride_lookup(const struct in6_addr *daddr, __u32 *nh_id)
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

// dxr6_search returns the value of the range of sub entry d (with
// DXR_RANGES) that holds the address whose first 64 bits are hi: a binary
// search of exactly log2(block size) steps, as dxr_search.
static __always_inline __u32 dxr6_search(__u32 d, __u64 hi)
{
	__u32 k = (d >> DXR_LOG_SHIFT) & 0xf, base = d & DXR_BASE_MASK;
	__u32 key = base / DXR6_ROW, off = base % DXR6_ROW, i = 0, j;
	__u64 want = hi << DXR6_VALUE_BITS;
	const __u64 mask = ~((1ull << DXR6_VALUE_BITS) - 1);
	struct dxr6_row *row;
	int s;

	row = bpf_map_lookup_elem(&dxr6_ranges, &key);
	if (!row)
		return 0;
#pragma unroll
	for (s = 10; s >= 0; s--) {
		j = i | (1u << s);
		if (s < k && (row->e[(off + j) & (DXR6_ROW - 1)] & mask) <= want)
			i = j;
	}
	return row->e[(off + i) & (DXR6_ROW - 1)] & ((1u << DXR6_VALUE_BITS) - 1);
}

// fib6_lookup is fib_lookup for IPv6: the range table first (dxr6.go),
// the stride table for what it does not hold. The router's own addresses
// are in local_addrs6.
static __always_inline int fib6_lookup(const struct in6_addr *daddr, __u32 *nh_id)
{
	__u64 hi = (__u64)bpf_ntohl(daddr->s6_addr32[0]) << 32 | bpf_ntohl(daddr->s6_addr32[1]);
	__u32 key = hi >> 56;
	struct fib_row *row;
	__u32 d, v;

	row = bpf_map_lookup_elem(&dxr6_direct, &key);
	if (!row)
		return 0;
	d = *(volatile __u32 *)&row->e[(hi >> 48) & 0xff];
	if (d & DXR6_SUB) {
		key = d & DXR_BASE_MASK;
		row = bpf_map_lookup_elem(&dxr6_sub, &key);
		if (!row)
			return 0;
		d = *(volatile __u32 *)&row->e[(hi >> 40) & 0xff];
	}
	if (d & DXR_RANGES) {
		v = dxr6_search(d, hi);
		if (!(v & DXR6_VALID))
			return 0;
		*nh_id = v & FIB_NEXTHOP_MASK;
		return 1;
	}
	if (d & DXR6_STRIDE)
		return fib6_stride_lookup(daddr, nh_id);
	if (!(d & FIB_VALID))
		return 0;
	*nh_id = d & FIB_NEXTHOP_MASK;
	return 1;
}

// ip4_csum_ok verifies the checksum of an IPv4 header without options: the
// ones' complement sum of its five 32-bit words, folded to 16 bits, is
// 0xffff (RFC 1071: the sum may be taken in any word size and byte order).
static __always_inline int ip4_csum_ok(const struct iphdr *ip)
{
	const __u32 *w = (const __u32 *)ip;
	__u64 s = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

// martian_src4 is true for the sources RFC 1812 section 5.3.7 forbids a
// router to forward from: 0/8 ("this network"), 127/8 (loopback), 224/4
// (multicast) and 240/4 (reserved, and the limited broadcast), and for
// 169.254/16 (link-local, RFC 3927 section 7).
static __always_inline int martian_src4(__be32 saddr)
{
	__u32 s = bpf_ntohl(saddr);
	__u32 a = s >> 24;

	return a == 0 || a == 127 || a >= 224 || (s >> 16) == 0xa9fe;
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

// is_link_local6 is true for fe80::/10, which never leaves its link.
static __always_inline int is_link_local6(const struct in6_addr *a)
{
	return a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80;
}

// is_martian6 is true for the unspecified address :: and the loopback ::1,
// which no packet may carry across a router (RFC 4291 sections 2.5.2 and
// 2.5.3). The first 64 bits decide for nearly every address.
static __always_inline int is_martian6(const struct in6_addr *a)
{
	return (a->s6_addr32[0] | a->s6_addr32[1]) == 0 && a->s6_addr32[2] == 0 &&
	       (a->s6_addr32[3] == 0 || a->s6_addr32[3] == bpf_htonl(1));
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
	case GW_REMOTE:
		return 0; // behind another FE: see ife_encap
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
	// Stored first: a remote nexthop (GW_REMOTE) returns
	// STAT_PASS_NO_NEIGH, and the caller then sends it to its FE.
	*nhp = nh;
	// A gateway's MAC is in the nexthop once resolved; only connected
	// routes (the destination is the neighbour) read the neighbour hash.
	if (nh->dmac_ok)
		neigh = (struct neigh *)nh->dmac;
	else
		neigh = neigh_lookup(nh, daddr, daddr6);
	if (!neigh)
		return STAT_PASS_NO_NEIGH;
	// Pick the egress before touching the frame: with XDP_PASS as the
	// fallback a missing tx port hands the kernel the packet unmodified
	// instead of dropping it. The redirect itself happens after the
	// program returns, so rewriting the frame afterwards is safe.
	if (bpf_redirect_map(&tx_ports, nh->ifindex, XDP_PASS) != XDP_REDIRECT)
		return STAT_PASS_NO_TX_PORT;
	*neighp = neigh;
	return 0;
}

// count_forwarded counts a forwarded packet of len bytes, on the egress
// port in slot too, and returns XDP_REDIRECT.
static __always_inline int count_forwarded(__u64 len, __u32 slot)
{
	struct port_counters *ps;

	stat_add(STAT_FORWARDED, 1);
	stat_add(STAT_FORWARDED_BYTES, len);
	// Per CPU, so plain adds, as in stat_add.
	ps = port_counters(slot);
	if (ps) {
		ps->tx_packets++;
		ps->tx_bytes += len;
	}
	return XDP_REDIRECT;
}

// forwarded rewrites the MACs and counts the packet, on the egress port in
// slot too.
static __always_inline int forwarded(struct ethhdr *eth, const struct nexthop *nh,
				     const struct neigh *neigh, __u64 len, __u32 slot)
{
	__builtin_memcpy(eth->h_dest, neigh->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, nh->smac, ETH_ALEN);
	return count_forwarded(len, slot);
}

#endif // SPLITPLANE_FORWARD_H
