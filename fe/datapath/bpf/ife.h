// ife.h: inter-FE forwarding, for a router (NE) made of several FEs. A
// packet whose nexthop lies behind another FE (GW_REMOTE) is routed here
// once (checks, TTL or hop limit, checksum) and then sent to that FE over
// an inter-FE link inside an RFC 8013 inter-FE frame (forces/ife,
// docs/cluster.md): outer Ethernet header, EtherType 0xED3E, metadata TLVs
// (egress port, egress FE, NE nexthop key, flow hash), the routed frame.
// The FE the frame is for maps the nexthop key to its own nexthop and
// sends the inner frame out of the egress port without a second lookup or
// TTL decrement; an FE the frame passes through on its way (two-phase
// Valiant load balancing) sends it on unchanged to its egress FE.

#ifndef SPLITPLANE_IFE_H
#define SPLITPLANE_IFE_H

#include "control.h"

// What the program sends: the metadata length field and four 32-bit TLVs.
#define IFE_SEND_METALEN (2 + 4 * 8)
#define IFE_SEND_OVERHEAD (ETH_HLEN + IFE_SEND_METALEN)

// The metadata an IFE frame must carry, as bits of ife_meta.seen.
#define IFE_SEEN_PORT 1
#define IFE_SEEN_FE 2
#define IFE_SEEN_KEY 4
#define IFE_SEEN_HASH 8
#define IFE_SEEN_NEEDED (IFE_SEEN_PORT | IFE_SEEN_FE | IFE_SEEN_KEY)

struct ife_meta {
	__u32 port, fe, key, hash, seen;
};

// put_tlv32 writes a 32-bit TLV (type, length 8, value) at p.
static __always_inline void put_tlv32(void *p, __u16 type, __u32 v)
{
	*(__u32 *)p = bpf_htonl(((__u32)type << 16) | 8);
	*(__u32 *)(p + 4) = bpf_htonl(v);
}

// ife_pick_link chooses the link a flow with hash takes to egress FE el's
// FE: direct, unless the link is down or the flow falls in the spill
// share, and then through an intermediate FE that the hash picks among the
// others whose links are up. It returns the link, or NULL when there is
// no way (and stores in *via whether it is an intermediate).
static __always_inline struct fe_link *ife_pick_link(struct fe_link *el, const struct mesh *m,
						     __u32 hash, int *via)
{
	struct fe_link *l;
	__u32 n = m->count, j, fe;

	*via = 0;
	if (el->up && (hash % SPILL_SCALE) >= el->spill)
		return el;
	// The intermediates: every FE in m->up but el's, which is there
	// (at el->pos) when its link is up.
	if (el->up) {
		if (n < 2)
			return el;
		j = (hash / SPILL_SCALE) % (n - 1);
		if (j >= el->pos)
			j++;
	} else {
		if (n < 1 || n > MAX_FES)
			return NULL;
		j = (hash / SPILL_SCALE) % n;
	}
	// j < MAX_FES already, but the verifier cannot bound a modulo by a
	// variable: the mask bounds it, and the empty asm keeps clang from
	// dropping the mask as redundant (as in group_member).
	asm volatile("" : "+r"(j));
	fe = m->up[j & (MAX_FES - 1)];
	l = bpf_map_lookup_elem(&fe_links, &fe);
	// A mesh read halfway through an update may name a link gone down.
	if (!l || !l->up || !l->ifindex)
		return el->up ? el : NULL;
	*via = 1;
	return l;
}

// ife_encap sends the packet of l3len bytes after the Ethernet header (IPv6
// when is6), which router4 or router6 has checked and routed to the remote
// nexthop nh, to its egress FE: it picks the link, decrements the TTL or
// hop limit, encapsulates and redirects. A packet that cannot go is passed
// to the kernel unmodified.
//
// Called, not inlined, as ife_rx: the forwarding path of router4 and
// router6 stays as compact as it was without inter-FE forwarding.
__attribute__((noinline)) int ife_encap(struct xdp_md *ctx, const struct nexthop *nh,
					 __u32 hash, __u32 l3len, const int is6)
{
	__u32 zero = 0, fe, slot;
	struct port_info *pi;
	struct fe_link *el, *l;
	struct fe_demand *dem;
	struct mesh *m;
	void *data, *data_end;
	int via;

	if (!nh)
		return pass(STAT_PASS_IFE_NO_LINK);
	fe = nh->remote.fe;
	m = bpf_map_lookup_elem(&mesh_map, &zero);
	if (!m || !m->self_fe || fe >= MAX_FES)
		return pass(STAT_PASS_IFE_NO_LINK);
	el = bpf_map_lookup_elem(&fe_links, &fe);
	if (!el)
		return pass(STAT_PASS_IFE_NO_LINK);
	l = ife_pick_link(el, m, hash, &via);
	if (!l || !l->ifindex)
		return pass(STAT_PASS_IFE_NO_LINK);
	if (bpf_redirect_map(&tx_ports, l->ifindex, XDP_PASS) != XDP_REDIRECT)
		return pass(STAT_PASS_NO_TX_PORT);
	// The link's MTU counts the metadata and the inner frame.
	slot = port_slot(l->ifindex);
	if (over_mtu(slot, l3len + ETH_HLEN + IFE_SEND_METALEN))
		return pass(STAT_PASS_MTU);
	pi = bpf_map_lookup_elem(&port_info_map, &slot);
	if (!pi)
		return pass(STAT_PASS_NO_TX_PORT);

	if (bpf_xdp_adjust_head(ctx, -IFE_SEND_OVERHEAD))
		return pass(STAT_PASS_IFE_HEADROOM);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	// The inner frame was checked to hold its header before; the
	// verifier needs it again for the new packet pointers.
	if (is6) {
		struct ipv6hdr *ip6 = data + IFE_SEND_OVERHEAD + ETH_HLEN;

		if ((void *)(ip6 + 1) > data_end)
			return drop(STAT_DROP_IFE_MALFORMED);
		ip6->hop_limit--;
		stat_add(STAT_FORWARDED_IPV6, 1);
	} else {
		struct iphdr *ip = data + IFE_SEND_OVERHEAD + ETH_HLEN;

		if ((void *)(ip + 1) > data_end)
			return drop(STAT_DROP_IFE_MALFORMED);
		ip_decrease_ttl(ip);
	}
	__builtin_memcpy(data, l->peer_mac, ETH_ALEN);
	__builtin_memcpy(data + ETH_ALEN, pi->mac, ETH_ALEN);
	*(__u32 *)(data + 12) = bpf_htonl((ETH_P_IFE << 16) | IFE_SEND_METALEN);
	put_tlv32(data + 16, IFE_TYPE_EGRESS_PORT, nh->remote.port);
	put_tlv32(data + 24, IFE_TYPE_EGRESS_FE, fe);
	put_tlv32(data + 32, IFE_TYPE_NH_KEY, nh->remote.key);
	put_tlv32(data + 40, IFE_TYPE_FLOW_HASH, hash);

	stat_add(STAT_IFE_ENCAP, 1);
	if (via)
		stat_add(STAT_IFE_VIA, 1);
	dem = bpf_map_lookup_elem(&fe_demand_map, &fe);
	if (dem) {
		dem->packets++;
		dem->bytes += data_end - data;
	}
	return count_forwarded(data_end - data, slot);
}

// ife_parse reads the metadata of the IFE frame at data into *im and
// returns the metadata length, or 0 for a malformed frame: a metadata
// length below 2, above IFE_MAX_METALEN or past the frame, fewer than 14
// bytes of inner frame, a TLV shorter than its header or past the
// metadata, one of our TLVs with a value not 4 bytes or given twice, more
// than IFE_MAX_TLVS TLVs, or a missing egress port, egress FE or nexthop
// key. TLVs of other types are passed over, as RFC 8013 asks.
//
// A global function on purpose, as ife_encap and ife_rx are: the verifier
// checks a global function once, on its own, against its prototype
// (pointer arguments may be NULL), where it follows a static one, or inlined
// code, through the rest of the program once for every way through it
// (here: which metadata the loop saw, and where). Static, the three made
// loading the program take 3.6 s instead of 0.55 (TestLoadSpec).
__attribute__((noinline)) __u32 ife_parse(struct xdp_md *ctx, struct ife_meta *im)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	void *meta = data + ETH_HLEN;
	__u32 metalen, off = 2, tl, type, len, step, bit, v;
	int i;

	if (!im || meta + 2 > data_end)
		return 0;
	metalen = bpf_ntohs(*(__be16 *)meta);
	if (metalen < 2 || metalen > IFE_MAX_METALEN)
		return 0;
	if (meta + metalen + ETH_HLEN > data_end)
		return 0;
	for (i = 0; i < IFE_MAX_TLVS; i++) {
		if (off >= metalen)
			break;
		if (off + 4 > metalen || off > IFE_MAX_METALEN)
			return 0;
		if (meta + off + 4 > data_end)
			return 0;
		tl = bpf_ntohl(*(__u32 *)(meta + off));
		type = tl >> 16;
		len = tl & 0xffff;
		if (len < 4)
			return 0;
		step = (len + 3) & ~3u;
		if (off + step > metalen)
			return 0;
		switch (type) {
		case IFE_TYPE_EGRESS_PORT:
			bit = IFE_SEEN_PORT;
			break;
		case IFE_TYPE_EGRESS_FE:
			bit = IFE_SEEN_FE;
			break;
		case IFE_TYPE_NH_KEY:
			bit = IFE_SEEN_KEY;
			break;
		case IFE_TYPE_FLOW_HASH:
			bit = IFE_SEEN_HASH;
			break;
		default:
			bit = 0;
		}
		if (bit) {
			if (len != 8 || (im->seen & bit))
				return 0;
			if (meta + off + 8 > data_end)
				return 0;
			v = bpf_ntohl(*(__u32 *)(meta + off + 4));
			im->seen |= bit;
			if (bit == IFE_SEEN_PORT)
				im->port = v;
			else if (bit == IFE_SEEN_FE)
				im->fe = v;
			else if (bit == IFE_SEEN_KEY)
				im->key = v;
			else
				im->hash = v;
		}
		off += step;
	}
	if (off < metalen)
		return 0; // more TLVs than IFE_MAX_TLVS
	if ((im->seen & IFE_SEEN_NEEDED) != IFE_SEEN_NEEDED)
		return 0;
	return metalen;
}

// ife_parse_ours reads the metadata of an IFE frame laid out exactly as
// ife_encap writes it (metadata length IFE_SEND_METALEN: egress port,
// egress FE, nexthop key, flow hash, in that order, and an inner Ethernet
// header) into *im, with a few compares instead of ife_parse's walk of the
// TLVs. It returns the metadata length, or 0 for any other frame, which
// ife_parse then reads.
static __always_inline __u32 ife_parse_ours(void *data, void *data_end, struct ife_meta *im)
{
	void *meta = data + ETH_HLEN;

	if (data + IFE_SEND_OVERHEAD + ETH_HLEN > data_end)
		return 0;
	if (*(__be16 *)meta != bpf_htons(IFE_SEND_METALEN) ||
	    *(__u32 *)(meta + 2) != bpf_htonl((IFE_TYPE_EGRESS_PORT << 16) | 8) ||
	    *(__u32 *)(meta + 10) != bpf_htonl((IFE_TYPE_EGRESS_FE << 16) | 8) ||
	    *(__u32 *)(meta + 18) != bpf_htonl((IFE_TYPE_NH_KEY << 16) | 8) ||
	    *(__u32 *)(meta + 26) != bpf_htonl((IFE_TYPE_FLOW_HASH << 16) | 8))
		return 0;
	im->port = bpf_ntohl(*(__u32 *)(meta + 6));
	im->fe = bpf_ntohl(*(__u32 *)(meta + 14));
	im->key = bpf_ntohl(*(__u32 *)(meta + 22));
	im->hash = bpf_ntohl(*(__u32 *)(meta + 30));
	im->seen = IFE_SEEN_NEEDED | IFE_SEEN_HASH;
	return IFE_SEND_METALEN;
}

// ife_transit sends the IFE frame for FE fe, which arrived here as the
// intermediate of two-phase VLB, on to fe over the direct link, unchanged
// but for the outer MACs. Without a link up to fe it is dropped: it is no
// packet the kernel could use.
static __always_inline int ife_transit(void *data, void *data_end, __u32 fe)
{
	struct port_info *pi;
	struct fe_link *l;
	__u32 slot, len = data_end - data;

	l = bpf_map_lookup_elem(&fe_links, &fe);
	if (!l || !l->up || !l->ifindex)
		return drop(STAT_DROP_IFE_NO_LINK);
	if (bpf_redirect_map(&tx_ports, l->ifindex, XDP_DROP) != XDP_REDIRECT)
		return drop(STAT_DROP_IFE_NO_LINK);
	slot = port_slot(l->ifindex);
	pi = bpf_map_lookup_elem(&port_info_map, &slot);
	if (!pi || data + ETH_HLEN > data_end)
		return drop(STAT_DROP_IFE_NO_LINK);
	__builtin_memcpy(data, l->peer_mac, ETH_ALEN);
	__builtin_memcpy(data + ETH_ALEN, pi->mac, ETH_ALEN);
	stat_add(STAT_IFE_TRANSIT, 1);
	return count_forwarded(len, slot);
}

// ife_decap_pass strips the IFE header and hands the inner frame to the
// kernel, addressed to the link port in slot so that the kernel takes it,
// counted under reason: the kernel resolves the neighbour, sends the ICMP
// error or routes it itself.
static __always_inline int ife_decap_pass(struct xdp_md *ctx, __u32 hdrlen, __u32 slot, __u32 reason)
{
	struct port_info *pi = bpf_map_lookup_elem(&port_info_map, &slot);
	void *data;

	if (bpf_xdp_adjust_head(ctx, hdrlen))
		return drop(STAT_DROP_IFE_MALFORMED);
	data = (void *)(long)ctx->data;
	if (data + ETH_HLEN > (void *)(long)ctx->data_end)
		return drop(STAT_DROP_IFE_MALFORMED);
	if (pi && (*(__u32 *)pi->mac | *(__u16 *)&pi->mac[4]))
		__builtin_memcpy(data, pi->mac, ETH_ALEN);
	return pass(reason);
}

// ife_deliver sends the inner frame of the IFE frame (hdrlen bytes of outer
// header and metadata) out of the local nexthop that the NE nexthop key
// maps to, with that nexthop's MACs: no lookup, no TTL decrement, the
// ingress FE did both.
static __always_inline int ife_deliver(struct xdp_md *ctx, __u32 hdrlen, __u32 key, __u32 in_slot)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *inner;
	struct nexthop *nh;
	struct neigh *neigh;
	__u32 *v, id, slot, l3len, len;
	__be32 daddr = 0;
	int is6 = 0;

	if (hdrlen > ETH_HLEN + IFE_MAX_METALEN)
		return drop(STAT_DROP_IFE_MALFORMED);
	inner = data + hdrlen;
	if ((void *)(inner + 1) > data_end)
		return drop(STAT_DROP_IFE_MALFORMED);
	if (inner->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(inner + 1);

		if ((void *)(ip + 1) > data_end)
			return drop(STAT_DROP_IFE_MALFORMED);
		daddr = ip->daddr;
		l3len = bpf_ntohs(ip->tot_len);
	} else if (inner->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(inner + 1);

		if ((void *)(ip6 + 1) > data_end)
			return drop(STAT_DROP_IFE_MALFORMED);
		is6 = 1;
		l3len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	} else {
		return drop(STAT_DROP_IFE_MALFORMED);
	}

	if (key >= MAX_NH_KEYS)
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_IFE_NO_NEXTHOP);
	v = bpf_map_lookup_elem(&nh_keys, &key);
	if (!v || !(*v & NH_KEY_VALID))
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_IFE_NO_NEXTHOP);
	id = *v & ~NH_KEY_VALID;
	nh = bpf_map_lookup_elem(&nexthops, &id);
	if (!nh || !nh->ifindex || nh->gw_family == GW_REMOTE)
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_IFE_NO_NEXTHOP);
	if (is6) {
		struct ipv6hdr *ip6 = (void *)(inner + 1);

		if ((void *)(ip6 + 1) > data_end)
			return drop(STAT_DROP_IFE_MALFORMED);
		neigh = neigh_lookup(nh, 0, &ip6->daddr);
	} else {
		neigh = neigh_lookup(nh, daddr, 0);
	}
	if (!neigh)
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_NO_NEIGH);
	if (bpf_redirect_map(&tx_ports, nh->ifindex, XDP_PASS) != XDP_REDIRECT)
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_NO_TX_PORT);
	slot = port_slot(nh->ifindex);
	if (over_mtu(slot, l3len))
		return ife_decap_pass(ctx, hdrlen, in_slot, STAT_PASS_MTU);

	if (bpf_xdp_adjust_head(ctx, hdrlen))
		return drop(STAT_DROP_IFE_MALFORMED);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	inner = data;
	if ((void *)(inner + 1) > data_end)
		return drop(STAT_DROP_IFE_MALFORMED);
	len = data_end - data;
	stat_add(STAT_IFE_DECAP, 1);
	if (is6)
		stat_add(STAT_FORWARDED_IPV6, 1);
	return forwarded(inner, nh, neigh, len, slot);
}

// A liveness probe of an inter-FE link (forces/ife probe.go): a frame of
// fixed layout, its metadata one Probe TLV of IFE_PROBE_VALLEN bytes
// (sender FE, responder FE, flags, sequence, time), then a 14-byte inner
// frame. The offsets below are from the metadata length field.
#define IFE_PROBE_VALLEN 24
#define IFE_PROBE_METALEN (2 + 4 + IFE_PROBE_VALLEN)
#define IFE_PROBE_RESPONDER 10
#define IFE_PROBE_FLAGS 14
#define IFE_PROBE_FLAG_REPLY 1

// ife_probe answers a probe request that arrived on an inter-FE link: it
// writes this FE's ID as the responder, sets the reply flag, swaps the
// MACs and sends the frame back (XDP_TX), which proves to the peer that
// this FE's datapath runs, not only its kernel. A probe reply goes to the
// kernel, where the agent reads it, unpoliced: a reply policed away would
// take a live link down. It returns -1 for a frame that is no probe.
// Global, as ife_parse, to be verified once on its own.
__attribute__((noinline)) int ife_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data + ETH_HLEN, mac[ETH_ALEN];
	struct mesh *m;
	__u32 zero = 0, flags;

	if ((void *)(p + IFE_PROBE_METALEN + ETH_HLEN) > data_end)
		return -1;
	if (*(__be16 *)p != bpf_htons(IFE_PROBE_METALEN) ||
	    *(__be32 *)(p + 2) != bpf_htonl((IFE_TYPE_PROBE << 16) | (4 + IFE_PROBE_VALLEN)))
		return -1;
	flags = bpf_ntohl(*(__be32 *)(p + IFE_PROBE_FLAGS));
	if (flags & IFE_PROBE_FLAG_REPLY) {
		stat_add(STAT_IFE_PROBE_RX, 1);
		return ACT_PASS_DONE;
	}
	m = bpf_map_lookup_elem(&mesh_map, &zero);
	if (!m || !m->self_fe)
		return drop(STAT_DROP_IFE_NO_LINK);
	*(__be32 *)(p + IFE_PROBE_RESPONDER) = bpf_htonl(m->self_fe);
	*(__be32 *)(p + IFE_PROBE_FLAGS) = bpf_htonl(flags | IFE_PROBE_FLAG_REPLY);
	__builtin_memcpy(mac, data, ETH_ALEN);
	__builtin_memcpy(data, data + ETH_ALEN, ETH_ALEN);
	__builtin_memcpy(data + ETH_ALEN, mac, ETH_ALEN);
	stat_add(STAT_IFE_PROBE_REPLY, 1);
	return XDP_TX;
}

// ife_rx handles a frame of EtherType 0xED3E that arrived on the port in
// slot. Only on an inter-FE link is it an IFE frame; elsewhere it is any
// other EtherType's frame, for the kernel. With steer set (forward CPUs
// do the forwarding, and this is not one), a frame to deliver or pass on
// is left untouched and uncounted: ife_rx stores its flow hash in *hash
// and returns ACT_IFE_STEER for route to steer it. Called, not inlined,
// for the reason ife_encap is.
__attribute__((noinline)) int ife_rx(struct xdp_md *ctx, __u32 slot, __u32 steer, __u32 *hash)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ife_meta im = {};
	struct mesh *m;
	__u32 *is_link, zero = 0, metalen;
	int probe;

	is_link = bpf_map_lookup_elem(&ife_ports, &slot);
	if (!is_link || !*is_link || slot == 0)
		return pass(STAT_PASS_NOT_IPV4);
	if ((void *)(eth + 1) > data_end)
		return pass(STAT_PASS_TRUNCATED);
	if (eth->h_dest[0] & 1)
		return pass(STAT_PASS_NOT_UNICAST);
	if (other_host(eth, slot))
		return pass(STAT_PASS_OTHER_HOST);
	// The frames FEs send one another first, as ife_encap lays them out;
	// then probes; anything else the general way.
	metalen = ife_parse_ours(data, data_end, &im);
	if (!metalen) {
		probe = ife_probe(ctx);
		if (probe >= 0)
			return probe;
		// ife_parse is a global function, verified on its own: here its
		// result is any scalar until bounded again. Clang knows the bound
		// and would drop the check, so the empty asm hides the value from
		// it.
		metalen = ife_parse(ctx, &im);
		asm volatile("" : "+r"(metalen));
	}
	if (!metalen || metalen > IFE_MAX_METALEN || !im.fe || im.fe >= MAX_FES)
		return drop(STAT_DROP_IFE_MALFORMED);
	// Delivery and transit are forwarding: on the forward CPUs when there
	// are some, by the flow hash the frame carries (or, without one, the
	// nexthop key: still one CPU for a flow). route steers: cpu_map must
	// not be used by code the forward CPUs' CPUMAP program holds, or the
	// map, which holds that program, and the program hold each other.
	if (steer && hash) {
		*hash = (im.seen & IFE_SEEN_HASH) ? im.hash : im.key;
		return ACT_IFE_STEER;
	}
	m = bpf_map_lookup_elem(&mesh_map, &zero);
	if (!m || !m->self_fe)
		return drop(STAT_DROP_IFE_NO_LINK);
	if (im.fe != m->self_fe)
		return ife_transit(data, data_end, im.fe);
	return ife_deliver(ctx, ETH_HLEN + metalen, im.key, slot);
}

#endif // SPLITPLANE_IFE_H
