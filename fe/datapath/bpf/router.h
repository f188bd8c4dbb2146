// router.h: splitplane's XDP pipeline, the whole of what xdp_router does to
// a packet, as static functions, so that every BPF object that runs the
// router (fe/datapath/xdp.c, the FE's, and the benchmarks' copy of it in
// integration/bench/fibbench) compiles the very same code.
//
// The including file defines the pipeline's hooks, after including this
// header and before its programs; each is inlined, so a hook that does
// nothing costs nothing:
//
//   hook_lookup4(daddr, &nh_id, variant), hook_lookup6(&daddr6, &nh_id, variant):
//     the route lookup, 1 with *nh_id set or 0 for no route; for IPv4
//     LOOKUP_ROUTE, LOOKUP_NONE or LOOKUP_LOCAL (an address of the router,
//     which hook_lookup4 answers itself: fib_lookup does). variant is the
//     constant the program passed to router(), so that one object can hold
//     programs with different lookups (the FE's: fib_lookup, fib6_lookup).
//   hook_dst4(ip), hook_dst6(ip6): called once the header is checked and
//     before the destination is read; may rewrite it (the FE's: nothing).
//   hook_ignore_ttl(): read only for a packet whose TTL or hop limit has
//     expired; nonzero forwards it anyway (the FE's: 0).
//
// A program is then router(ctx, variant, on_fe_cpu).

#ifndef SPLITPLANE_ROUTER_H
#define SPLITPLANE_ROUTER_H

#include "control.h"
#include "ife.h"

static __always_inline int hook_lookup4(__be32 daddr, __u32 *nh_id, const int variant);
static __always_inline int hook_lookup6(const struct in6_addr *daddr, __u32 *nh_id, const int variant);
static __always_inline void hook_dst4(struct iphdr *ip);
static __always_inline void hook_dst6(struct ipv6hdr *ip6);
static __always_inline int hook_ignore_ttl(void);

// router4 forwards the IPv4 packet after eth, or passes it. variant is a
// constant at each call site, handed to the lookup hook, so each program
// keeps only its own lookup; so is on_fe_cpu, set in the forward CPUs' CPUMAP program, which forwards
// what it gets and never steers again.
static __always_inline int router4(struct xdp_md *volatile *ctxp, struct ethhdr *eth, void *data_end,
				   const int variant, const int on_fe_cpu)
{
	struct iphdr *ip = (void *)(eth + 1);
	struct nexthop *nh;
	struct neigh *neigh;
	__u32 nh_id, n, slot, hash;
	__be32 daddr;
	__u16 tot_len;
	__u8 d0;
	int reason, found;

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
	// RFC 1812 section 5.2.2: a router verifies the header checksum and
	// discards a packet that fails.
	if (!ip4_csum_ok(ip))
		return drop(STAT_DROP_BAD_CHECKSUM);

	hook_dst4(ip);

	// RFC 1812 section 5.3.7 by the first octet of the destination: 224/4
	// (multicast) and the limited broadcast are for the local stack; the
	// rest of 240/4, 0/8 and 127/8 are no destination at all.
	daddr = ip->daddr;
	d0 = ((__u8 *)&ip->daddr)[0];
	if (d0 >= 224) {
		if (d0 < 240 || daddr == 0xffffffff)
			return pass(STAT_PASS_NOT_UNICAST);
		return drop(STAT_DROP_MARTIAN_DST);
	}
	if (d0 == 0 || d0 == 127)
		return drop(STAT_DROP_MARTIAN_DST);
	// One lookup tells the router's own addresses from the rest.
	found = hook_lookup4(daddr, &nh_id, variant);
	if (found == LOOKUP_LOCAL)
		return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us4(ip, data_end);
	// Only for forwarded packets: a 169.254/16 peer of the router itself
	// (as on some cloud interconnects) is legitimate, and the kernel
	// judges the rest of the router's own traffic.
	if (martian_src4(ip->saddr))
		return drop(STAT_DROP_MARTIAN_SRC);
	if (ip->ttl <= 1 && !hook_ignore_ttl())
		return pass(STAT_PASS_TTL);
	if (found != LOOKUP_ROUTE)
		return pass(STAT_PASS_NO_ROUTE);
	if (nh_id >= NH_GROUP_BASE) {
		reason = group_member(&nh_id, flow_hash4(ip, data_end));
		if (reason)
			return pass(reason);
	}
	reason = egress(nh_id, daddr, 0, &nh, &neigh);
	if (reason) {
		// A nexthop behind another FE has no neighbour here: the packet
		// is encapsulated, by a forward CPU when there are some, as any
		// packet this CPU would forward.
		if (reason == STAT_PASS_NO_NEIGH && nh->gw_family == GW_REMOTE) {
			hash = flow_hash4(ip, data_end);
			if (!on_fe_cpu && (n = fwd_steer_count()) && steer_fe_cpu(hash, n))
				return ACT_TO_FE_CPU;
			return ife_encap(*ctxp, nh, hash, tot_len, 0);
		}
		return pass(reason);
	}
	if (!on_fe_cpu && (n = fwd_steer_count())) {
		reason = to_fe_cpu(flow_hash4(ip, data_end), n, nh->ifindex);
		if (reason == ACT_TO_FE_CPU)
			return reason;
		if (reason)
			return pass(reason);
	}

	// The kernel answers a packet too big for the egress port with ICMP
	// "fragmentation needed" (DF set) or fragments it (DF clear).
	slot = port_slot(nh->ifindex);
	if (over_mtu(slot, tot_len))
		return pass(STAT_PASS_MTU);
	ip_decrease_ttl(ip);
	return forwarded(eth, nh, neigh, data_end - (void *)eth, slot);
}

// router6 forwards the IPv6 packet after eth, or passes it. Extension
// headers other than Hop-by-Hop are not parsed: RFC 8200 section 4 has
// routers forward them untouched. variant and on_fe_cpu are as for router4.
static __always_inline int router6(struct xdp_md *volatile *ctxp, struct ethhdr *eth, void *data_end,
				   const int variant, const int on_fe_cpu)
{
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct nexthop *nh;
	struct neigh *neigh;
	__u32 nh_id, n, slot, hash;
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

	hook_dst6(ip6);

	// ff00::/8, which includes the solicited-node addresses of NDP.
	if (ip6->daddr.s6_addr[0] == 0xff)
		return pass(STAT_PASS_NOT_UNICAST);
	// Link-local packets are for the kernel, which also answers
	// link-local sources with ICMPv6 "beyond scope of source address"
	// (RFC 4291 section 2.5.6); ::, ::1 and multicast sources are no
	// packet a router may forward.
	if (is_link_local6(&ip6->daddr))
		return pass(STAT_PASS_NOT_ROUTABLE);
	if (is_martian6(&ip6->daddr))
		return drop(STAT_DROP_MARTIAN_DST);
	if (ip6->saddr.s6_addr[0] == 0xff || is_martian6(&ip6->saddr))
		return drop(STAT_DROP_MARTIAN_SRC);
	if (is_link_local6(&ip6->saddr))
		return pass(STAT_PASS_NOT_ROUTABLE);
	if (bpf_map_lookup_elem(&local_addrs6, &ip6->daddr))
		return on_fe_cpu ? pass(STAT_PASS_LOCAL) : for_us6(ip6, data_end);
	if (ip6->hop_limit <= 1 && !hook_ignore_ttl())
		return pass(STAT_PASS_TTL);

	if (!hook_lookup6(&ip6->daddr, &nh_id, variant))
		return pass(STAT_PASS_NO_ROUTE);
	if (nh_id >= NH_GROUP_BASE) {
		reason = group_member(&nh_id, flow_hash6(ip6, data_end));
		if (reason)
			return pass(reason);
	}
	reason = egress(nh_id, 0, &ip6->daddr, &nh, &neigh);
	if (reason) {
		if (reason == STAT_PASS_NO_NEIGH && nh->gw_family == GW_REMOTE) {
			hash = flow_hash6(ip6, data_end);
			if (!on_fe_cpu && (n = fwd_steer_count()) && steer_fe_cpu(hash, n))
				return ACT_TO_FE_CPU;
			return ife_encap(*ctxp, nh, hash, sizeof(*ip6) + bpf_ntohs(ip6->payload_len), 1);
		}
		return pass(reason);
	}
	if (!on_fe_cpu && (n = fwd_steer_count())) {
		reason = to_fe_cpu(flow_hash6(ip6, data_end), n, nh->ifindex);
		if (reason == ACT_TO_FE_CPU)
			return reason;
		if (reason)
			return pass(reason);
	}

	// The kernel answers a packet too big for the egress port with
	// ICMPv6 "packet too big" (RFC 8200 section 5).
	slot = port_slot(nh->ifindex);
	if (over_mtu(slot, sizeof(*ip6) + bpf_ntohs(ip6->payload_len)))
		return pass(STAT_PASS_MTU);
	// IPv6 has no header checksum to update.
	ip6->hop_limit--;
	stat_add(STAT_FORWARDED_IPV6, 1);
	return forwarded(eth, nh, neigh, data_end - (void *)eth, slot);
}

// route decides what happens to the packet that arrived on the port in
// slot; variant selects the lookup of
// both families (hook_lookup4, hook_lookup6). on_fe_cpu is set for the packets another CPU redirected to
// this forward CPU: they were counted as rx there, and rx counts every
// packet once, on the CPU that received it.
static __always_inline int route(struct xdp_md *volatile *ctxp, void *data, void *data_end, const int variant,
				 const int on_fe_cpu, __u32 slot)
{
	struct ethhdr *eth = data;
	__u32 steer, hash = 0;
	int action;

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
	case bpf_htons(ETH_P_IFE):
		// Delivery and transit are forwarding, steered to the forward
		// CPUs as any (here: on_fe_cpu is a constant, so the CPUMAP
		// program holds no use of cpu_map).
		steer = !on_fe_cpu ? fwd_steer_count() : 0;
		action = ife_rx(*ctxp, slot, steer, &hash);
		if (action != ACT_IFE_STEER)
			return action;
		if (steer && steer_fe_cpu(hash, steer))
			return ACT_TO_FE_CPU;
		// No cpu_map entry for that CPU (the set is changing): here.
		return ife_rx(*ctxp, slot, 0, &hash);
	default:
		return pass(STAT_PASS_NOT_IPV4);
	}
	// Broadcast and multicast frames are for the local stack, whatever
	// their IP destination says.
	if (eth->h_dest[0] & 1)
		return pass(STAT_PASS_NOT_UNICAST);
	// Unicast for another host (a port in promiscuous mode, a bridge or
	// a switch flooding an unknown MAC): the kernel drops it as
	// PACKET_OTHERHOST, or hands it to a macvlan that owns the MAC. A
	// forward CPU gets only frames its sender checked.
	if (!on_fe_cpu && other_host(eth, slot))
		return pass(STAT_PASS_OTHER_HOST);

	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return router6(ctxp, eth, data_end, variant, on_fe_cpu);
	return router4(ctxp, eth, data_end, variant, on_fe_cpu);
}

// router is the whole program: route plus the ingress port's counters.
// With on_fe_cpu (the forward CPUs' CPUMAP program) the ingress port's rx
// is not counted again: the receiving CPU did, and a packet counts once as
// rx, however many CPUs it visits.
static __always_inline int router(struct xdp_md *ctx, const int variant, const int on_fe_cpu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 slot = port_slot(ctx->ingress_ifindex);
	// Only inter-FE forwarding (bpf_xdp_adjust_head) and the slow path
	// after it need ctx again: kept on the stack, not in a register that
	// the forwarding path would miss.
	struct xdp_md *volatile saved_ctx = ctx;
	// Taken before route rewrites the frame; the length never changes.
	__u64 len = data_end - data;
	struct port_counters *ps;
	int action;

	action = route(&saved_ctx, data, data_end, variant, on_fe_cpu, slot);
	// CoPP: what goes to the kernel is policed by class (control.h). The
	// frame is read again: inter-FE forwarding may have moved its head.
	if (action == XDP_PASS)
		action = police_slow_path((void *)(long)saved_ctx->data,
					  (void *)(long)saved_ctx->data_end);
	else if (action == ACT_PASS_DONE)
		action = XDP_PASS;
	ps = port_counters(slot);
	if (!ps)
		return action >= ACT_TO_CONTROL_CPU ? XDP_REDIRECT : action;
	if (!on_fe_cpu) {
		ps->rx_packets++;
		ps->rx_bytes += len;
	}
	// XDP_TX: an inter-FE link probe answered (ife_probe).
	if (action == XDP_REDIRECT || action == XDP_TX)
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

#endif // SPLITPLANE_ROUTER_H
