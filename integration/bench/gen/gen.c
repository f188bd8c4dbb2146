//go:build ignore

// The traffic side of `splitplane bench forward` and `splitplane lab dos`: a
// generator, sinks and the bare redirect that stands for the machine's
// forwarding limit. None of them is part of the router.
//
// xdp_gen is run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES: every run
// sends one frame out of the ingress interface given in the context
// (XDP_TX). The kernel recycles the frames zero-copy, so the edits the
// router makes in them (TTL, MACs) come back on a later run; the program
// therefore rewrites the whole header from gen_tmpl on every run, then gives
// it the next address of gen_addrs (as its destination, or as its source
// for a flood from spoofed sources) and, if asked, the next port.
// xdp_gen6 does the same for IPv6/UDP frames from gen6_tmpl, taking the
// next destination of gen_addrs6.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// gen.go repeats these. The template has room for a TCP header; a UDP
// frame's bytes after its UDP header are payload (zeros).
#define GEN_HDR_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct tcphdr))
#define GEN_ADDRS 65536

#define L4_OFF (sizeof(struct ethhdr) + sizeof(struct iphdr))

// The IPv6 template: Ethernet, IPv6 and UDP headers, nothing after them.
#define GEN6_HDR_LEN (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct udphdr))
#define L4_OFF6 (sizeof(struct ethhdr) + sizeof(struct ipv6hdr))

// gen_tmpl is the Ethernet, IPv4 and UDP or TCP header of every frame, with
// the rotating address and port 0 and the checksums over that. It is a plain
// global (in .data), not volatile const: clang 14 folds a const array read
// with memcpy into zeros. The initialiser keeps it out of .bss.
__u8 gen_tmpl[GEN_HDR_LEN] = {1};
// gen_addrs are the addresses the runs rotate over (network order).
__be32 gen_addrs[GEN_ADDRS];
__u32 gen_next;
// gen_src: the address table replaces the source address (spoofed
// sources), not the destination.
__u32 gen_src;
// gen_tcp: the L4 header is TCP, whose checksum is kept valid; UDP frames
// carry checksum 0 (none, as IPv4 allows).
__u32 gen_tcp;
// gen_port_mask: when not 0, the run's port is gen_port_base + (run &
// gen_port_mask), written into the destination port if gen_port_dst, else
// into the source port.
__u32 gen_port_mask;
__u32 gen_port_base;
__u32 gen_port_dst;

// gen6_tmpl is the Ethernet, IPv6 and UDP header of every IPv6 frame, with
// destination :: and the UDP checksum over that (IPv6 requires one).
__u8 gen6_tmpl[GEN6_HDR_LEN] = {1};
// gen_addrs6 are the IPv6 destinations the runs of xdp_gen6 rotate over.
struct gen_addr6 {
	__be32 w[4];
};
struct gen_addr6 gen_addrs6[GEN_ADDRS];

// sink_packets counts what xdp_sink dropped, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink_packets SEC(".maps");

// sink_udp_port is the UDP destination port (host order) xdp_sink_udp drops.
__u32 sink_udp_port;

// bare_port holds, at key 0, the ifindex xdp_redirect_bare sends to.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bare_port SEC(".maps");

static __always_inline __u32 fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct tcphdr *tcp = data + L4_OFF;
	struct udphdr *udp = data + L4_OFF; // for the ports, which TCP has at the same offsets
	__u32 n, sum, add, port = 0;
	__be32 addr;

	if (data + GEN_HDR_LEN > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, gen_tmpl, GEN_HDR_LEN);
	n = gen_next++;
	addr = gen_addrs[n & (GEN_ADDRS - 1)];
	if (gen_src)
		ip->saddr = addr;
	else
		ip->daddr = addr;
	// The template's checksums cover address and port 0; add the two
	// 16-bit words of the address (RFC 1624). One's complement sums do not
	// depend on byte order as long as every word is read the same way.
	add = (addr & 0xffff) + (addr >> 16);
	sum = (__u16)~ip->check;
	ip->check = (__sum16)~fold(sum + add);
	// Ports sit at the same offsets in TCP and UDP headers.
	if (gen_port_mask) {
		port = bpf_htons((__u16)(gen_port_base + (n & gen_port_mask)));
		if (gen_port_dst)
			udp->dest = port;
		else
			udp->source = port;
	}
	// The TCP checksum's pseudo-header covers the address too.
	if (gen_tcp) {
		sum = (__u16)~tcp->check;
		tcp->check = (__sum16)~fold(sum + add + port);
	}
	return XDP_TX;
}

// xdp_gen6 is xdp_gen for IPv6/UDP: every run rewrites the header from
// gen6_tmpl, writes the next destination of gen_addrs6 and completes the UDP
// checksum, whose pseudo-header covers the destination.
SEC("xdp")
int xdp_gen6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	struct udphdr *udp = data + L4_OFF6;
	struct gen_addr6 *a;
	__u32 n, sum, add = 0;
	__u16 check;
	int i;

	if (data + GEN6_HDR_LEN > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, gen6_tmpl, GEN6_HDR_LEN);
	n = gen_next++;
	a = &gen_addrs6[n & (GEN_ADDRS - 1)];
	__builtin_memcpy(&ip6->daddr, a, sizeof(*a));
	// As in xdp_gen (RFC 1624): add the address's 16-bit words to the
	// template's sum, which covers destination ::.
#pragma unroll
	for (i = 0; i < 4; i++)
		add += (a->w[i] & 0xffff) + (a->w[i] >> 16);
	sum = (__u16)~udp->check;
	check = (__u16)~fold(sum + add);
	// A UDP checksum that computes to 0 goes out as all ones (RFC 768).
	udp->check = (__sum16)(check ? check : 0xffff);
	return XDP_TX;
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&sink_packets, &key);

	// Per-CPU slot and XDP does not nest on a CPU: a plain add is safe.
	if (n)
		*n += 1;
	return XDP_DROP;
}

// xdp_sink_udp counts and drops IPv4 UDP packets to sink_udp_port (without
// IP options) and passes everything else, so that the host keeps answering
// ARP and its other traffic.
SEC("xdp")
int xdp_sink_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = data + L4_OFF;
	__u32 key = 0;
	__u64 *n;

	if (data + L4_OFF + sizeof(struct udphdr) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (udp->dest != bpf_htons((__u16)sink_udp_port))
		return XDP_PASS;
	n = bpf_map_lookup_elem(&sink_packets, &key);
	if (n)
		*n += 1;
	return XDP_DROP;
}

// xdp_redirect_bare forwards with no work at all: no parsing, no lookup, no
// rewrite. What it reaches is the most any forwarder can reach on the same
// ports.
SEC("xdp")
int xdp_redirect_bare(struct xdp_md *ctx)
{
	return bpf_redirect_map(&bare_port, 0, 0);
}
