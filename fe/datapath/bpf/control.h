// control.h: the protection of the router's own traffic in splitplane's
// XDP pipeline: GTSM, the control flows steered to the control CPU, the
// policer (for_us4, for_us6), and the steering of forwarded packets to the
// forward CPUs (to_fe_cpu).

#ifndef SPLITPLANE_CONTROL_H
#define SPLITPLANE_CONTROL_H

#include "forward.h"

#define BGP_PORT 179

// ACT_TO_CONTROL_CPU is what route returns for a packet redirected to the
// control CPU: router counts it as passed (the kernel gets it) and returns
// XDP_REDIRECT. It is no XDP action.
#define ACT_TO_CONTROL_CPU 0x100
// ACT_TO_FE_CPU is what route returns for a packet redirected to a forward
// CPU: router counts only its rx (the forward CPU counts the rest) and
// returns XDP_REDIRECT.
#define ACT_TO_FE_CPU 0x101
// ACT_IFE_STEER is what ife_rx returns for an inter-FE frame that route
// is to steer to a forward CPU (ife.h). Never returned by route.
#define ACT_IFE_STEER 0x103

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

// ACT_PASS_DONE is what route returns for a packet for the kernel whose
// fate for_us4 or for_us6 decided (policed as POLICE_LOCAL, or a control
// flow, never policed): router counts and returns it as XDP_PASS, without
// police_slow_path.
#define ACT_PASS_DONE 0x102

// police_bucket says whether this CPU's bucket of class has a token for the
// packet, and takes it; see struct police_rate. The bucket is per CPU, so
// the rate and burst are per CPU too, and no CPU waits for another.
static __always_inline int police_bucket(const struct fe_config *cfg, __u32 class)
{
	const struct police_rate *rate;
	struct policer_state *st;
	__u64 interval, now, tat;

	if (class >= POLICE_CLASSES)
		return 1;
	rate = &cfg->police[class];
	interval = rate->interval_ns;
	if (!interval)
		return 1;
	st = bpf_map_lookup_elem(&policer, &class);
	if (!st)
		return 1;
	now = bpf_ktime_get_ns();
	tat = st->tat_ns;
	if (tat < now)
		tat = now; // the bucket has been full since tat
	if (tat - now > rate->tolerance_ns)
		return 0;
	// Per CPU and XDP does not nest, so a plain store, as in stat_add.
	st->tat_ns = tat + interval;
	return 1;
}

// police passes a packet for the router (POLICE_LOCAL) if its bucket has a
// token and drops it otherwise.
static __always_inline int police(const struct fe_config *cfg)
{
	if (!police_bucket(cfg, POLICE_LOCAL))
		return drop(STAT_DROP_POLICED);
	stat_add(STAT_PASS_LOCAL, 1);
	return ACT_PASS_DONE;
}

// police_slow_path polices a packet that route passed to the kernel (and
// counted under its pass_* reason) in its class: POLICE_TTL_OPTIONS,
// POLICE_ARP_ND or POLICE_OTHER. It returns XDP_PASS, or XDP_DROP counted
// under the class's drop_policed_* reason. The packet is unmodified and its
// headers were checked by route as far as it read them; what is read here
// is checked again. A BPF-to-BPF call, so that forwarded packets do not
// carry its code.
static __attribute__((noinline)) int police_slow_path(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	__u32 class = POLICE_OTHER, reason = STAT_DROP_POLICED_OTHER;
	struct fe_config *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&fe_config_map, &zero);
	if (!cfg)
		return XDP_PASS;
	if ((void *)(eth + 1) > data_end)
		goto police;
	if (eth->h_proto == bpf_htons(0x0806 /* ETH_P_ARP */)) {
		class = POLICE_ARP_ND;
	} else if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		// L2 multicast with TTL 1 is link-local protocol traffic,
		// not an expired packet.
		if ((void *)(ip + 1) <= data_end && !(eth->h_dest[0] & 1) &&
		    (ip->ihl != 5 || ip->ttl <= 1))
			class = POLICE_TTL_OPTIONS;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u8 *icmp = (void *)(ip6 + 1);

		if ((void *)(ip6 + 1) > data_end)
			goto police;
		if (ip6->nexthdr == 58 /* ICMPv6 */ && (void *)(icmp + 1) <= data_end &&
		    *icmp >= 133 && *icmp <= 137)
			class = POLICE_ARP_ND;
		else if (!(eth->h_dest[0] & 1) && (ip6->nexthdr == 0 || ip6->hop_limit <= 1))
			class = POLICE_TTL_OPTIONS;
	}
police:
	if (class == POLICE_TTL_OPTIONS)
		reason = STAT_DROP_POLICED_TTL_OPTIONS;
	else if (class == POLICE_ARP_ND)
		reason = STAT_DROP_POLICED_ARP_ND;
	if (police_bucket(cfg, class))
		return XDP_PASS;
	stat_add(reason, 1);
	return XDP_DROP;
}

// to_control sends a packet of a control flow (whose per-CPU counts are
// *flow) to the control CPU, or passes it here when none is configured. A
// missing cpu_map entry (while the Go side moves the control CPU) makes
// bpf_redirect_map return XDP_PASS, and the packet passes here too.
static __always_inline int to_control(const struct fe_config *cfg, struct ctl_flow_stats *flow)
{
	flow->packets += 1;
	if (cfg->control_cpu_set &&
	    bpf_redirect_map(&cpu_map, cfg->control_cpu, XDP_PASS) == XDP_REDIRECT) {
		stat_add(STAT_TO_CONTROL_CPU, 1);
		return ACT_TO_CONTROL_CPU;
	}
	stat_add(STAT_PASS_CONTROL, 1);
	return ACT_PASS_DONE;
}

// The TCP checksum check before steering. A sender on a veth (and some
// virtual NICs) leaves the TCP checksum to "hardware" (CHECKSUM_PARTIAL:
// the field holds only the pseudo-header's sum), and the kernel accepts
// such a packet because the skb says so; a packet redirected through the
// CPUMAP is rebuilt on the control CPU without that note, its checksum is
// then checked in full and fails, and the control flow dies. So the program
// steers only what it has verified, and passes the rest where it arrived,
// as it would without steering (docs/troubleshooting.md).
#define CSUM_CHUNK 256 // bytes a bpf_csum_diff call sums in the main loop
#define CSUM_MAX_CHUNKS 36
#define CSUM_MAX_LEN (CSUM_CHUNK * CSUM_MAX_CHUNKS) // 9216: a jumbo frame's segment

// csum_fold folds a sum of 32-bit partial sums to 16 bits.
static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

// l4_csum_ok says whether the len bytes at l4, summed in ones' complement
// with sum (the pseudo-header's, in memory order, as bpf_csum_diff sums),
// give 0xffff: a valid checksum. It says no when the frame ends before
// l4 + len or len is over CSUM_MAX_LEN. A BPF-to-BPF call, so that its
// loops are verified once for each family and the packets that are not
// steered do not carry its code.
static __attribute__((noinline)) int l4_csum_ok(void *l4, __u32 len, void *data_end, __u64 sum)
{
	__u32 i, n, off, rem;
	void *p;

	if (len > CSUM_MAX_LEN)
		return 0;
	n = len / CSUM_CHUNK;
	for (i = 0; i < CSUM_MAX_CHUNKS; i++) {
		if (i >= n)
			break;
		p = l4 + i * CSUM_CHUNK;
		if (p + CSUM_CHUNK > data_end)
			return 0;
		sum = bpf_csum_diff(0, 0, p, CSUM_CHUNK, (__u32)sum) & 0xffffffff;
	}
	// Computed from len, not carried out of the loop, so that the
	// verifier sees one state here whatever the iteration count.
	off = len & ~(CSUM_CHUNK - 1);
	rem = len & (CSUM_CHUNK - 1);
#define CSUM_TAIL(c)                                                                 \
	if (rem & (c)) {                                                             \
		p = l4 + off;                                                        \
		if (p + (c) > data_end)                                              \
			return 0;                                                    \
		sum += bpf_csum_diff(0, 0, p, (c), 0) & 0xffffffff;                  \
		off += (c);                                                          \
	}
	CSUM_TAIL(128)
	CSUM_TAIL(64)
	CSUM_TAIL(32)
	CSUM_TAIL(16)
	CSUM_TAIL(8)
	CSUM_TAIL(4)
#undef CSUM_TAIL
	if (rem & 2) {
		p = l4 + off;
		if (p + 2 > data_end)
			return 0;
		sum += *(__u16 *)p;
		off += 2;
	}
	if (rem & 1) {
		// The last odd byte is the high-order byte of a word padded
		// with zero: in memory order, the word's first byte.
		p = l4 + off;
		if (p + 1 > data_end)
			return 0;
		sum += *(__u8 *)p;
	}
	return csum_fold(sum) == 0xffff;
}

// tcp4_csum_ok says whether the TCP segment at l4 of ip has a valid
// checksum over its IPv4 pseudo-header (RFC 793) and is whole in the frame.
static __always_inline int tcp4_csum_ok(struct iphdr *ip, void *l4, void *data_end)
{
	__u32 hlen = ip->ihl * 4, tot_len = bpf_ntohs(ip->tot_len);
	__u64 sum;

	if (tot_len < hlen + 20 /* TCP header */)
		return 0;
	sum = (__u64)ip->saddr + ip->daddr + bpf_htons(6 /* TCP */) + bpf_htons(tot_len - hlen);
	return l4_csum_ok(l4, tot_len - hlen, data_end, sum);
}

// tcp6_csum_ok is tcp4_csum_ok for IPv6 (RFC 8200 section 8.1): l4 is the
// TCP header, behind the extension headers that end payload_len sooner.
static __always_inline int tcp6_csum_ok(struct ipv6hdr *ip6, void *l4, void *data_end)
{
	__u32 ext = l4 - (void *)(ip6 + 1), plen = bpf_ntohs(ip6->payload_len), len;
	__u64 sum;

	if (ext > 1024 || plen < ext + 20)
		return 0;
	len = plen - ext;
	sum = bpf_csum_diff(0, 0, (__be32 *)&ip6->saddr, 32, 0) & 0xffffffff;
	sum += bpf_htons(len) + bpf_htons(6 /* TCP */);
	return l4_csum_ok(l4, len, data_end, sum);
}

// steer sends a packet of a control flow (whose per-CPU counts are *flow)
// to the control CPU after checking its TCP checksum (verify, the result of
// tcp4_csum_ok or tcp6_csum_ok, is only evaluated when a control CPU is
// set); a packet it cannot vouch for passes here, on the path it would take
// without steering, and counts as pass_steer_bad_csum, in total and on its
// flow.
#define steer(cfg, flow, verify)                                                     \
	({                                                                           \
		int __r;                                                             \
		if ((cfg)->control_cpu_set && !(verify)) {                           \
			(flow)->packets += 1;                                        \
			(flow)->bad_csum += 1;                                       \
			stat_add(STAT_PASS_STEER_BAD_CSUM, 1);                       \
			__r = ACT_PASS_DONE;                                         \
		} else {                                                             \
			__r = to_control((cfg), (flow));                             \
		}                                                                    \
		__r;                                                                 \
	})

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
	struct ctl_flow_stats *flow;
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
		flow = bpf_map_lookup_elem(&control_flows, &key);
		if (flow)
			return steer(cfg, flow, tcp4_csum_ok(ip, l4, data_end));
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

// for_us6 is for_us4 for IPv6. NDP (ICMPv6 types 133-137) passes here
// and is policed in its own class (POLICE_ARP_ND) by police_slow_path. The upper-layer header is found behind up to EXT6_MAX
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
	struct ctl_flow_stats *flow;
	__u32 zero = 0;

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
		flow = bpf_map_lookup_elem(&control_flows6, &key);
		if (flow)
			return steer(cfg, flow, tcp6_csum_ok(ip6, l4, data_end));
	}
	return police(cfg);
}

// steer_fe_cpu redirects the packet, unmodified, through cpu_map to the
// forward CPU that its flow hash picks among the n, so that a flow stays on
// one CPU and in order, and counts it; it returns 0, having redirected
// nothing, when that CPU has no cpu_map entry (while the Go side changes
// the set). For a packet to forward here or to encapsulate to another FE.
static __attribute__((noinline)) int steer_fe_cpu(__u32 hash, __u32 n)
{
	__u32 key = hash % n;
	__u32 *cpu = bpf_map_lookup_elem(&fwd_cpus, &key);

	if (cpu && bpf_redirect_map(&cpu_map, *cpu, XDP_PASS) == XDP_REDIRECT) {
		stat_add(STAT_TO_FE_CPU, 1);
		return 1;
	}
	return 0;
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
	if (steer_fe_cpu(hash, n))
		return ACT_TO_FE_CPU;
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

// control_rx is the whole of xdp_control, the control CPU's CPUMAP program:
// it counts the packet on that CPU, which is how one sees where the work is
// done, and hands it to that CPU's kernel stack.
static __always_inline int control_rx(void)
{
	stat_add(STAT_CONTROL_CPU_RX, 1);
	return XDP_PASS;
}

#endif // SPLITPLANE_CONTROL_H
