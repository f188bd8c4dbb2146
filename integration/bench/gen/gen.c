//go:build ignore

// The traffic side of `splitplane bench forward`: a generator, a sink and the
// bare redirect that stands for the machine's forwarding limit. None of them
// is part of the router.
//
// xdp_gen is run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES: every run
// sends one frame out of the ingress interface given in the context
// (XDP_TX). The kernel recycles the frames zero-copy, so the edits the
// router makes in them (TTL, MACs) come back on a later run; the program
// therefore rewrites the whole header from gen_tmpl on every run, then gives
// it the next destination of gen_dsts.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// gen.go repeats these.
#define GEN_HDR_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define GEN_DSTS 65536

// gen_tmpl is the Ethernet, IPv4 and UDP header of every frame, with
// daddr 0 and the IPv4 checksum of that header. It is a plain global (in
// .data), not volatile const: clang 14 folds a const array read with memcpy
// into zeros. The initialiser keeps it out of .bss.
__u8 gen_tmpl[GEN_HDR_LEN] = {1};
// gen_dsts are the destinations the runs rotate over (network order).
__be32 gen_dsts[GEN_DSTS];
__u32 gen_next;

// sink_packets counts what xdp_sink dropped, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink_packets SEC(".maps");

// bare_port holds, at key 0, the ifindex xdp_redirect_bare sends to.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bare_port SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__be32 daddr;
	__u32 sum;

	if (data + GEN_HDR_LEN > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, gen_tmpl, GEN_HDR_LEN);
	daddr = gen_dsts[gen_next++ & (GEN_DSTS - 1)];
	ip->daddr = daddr;
	// The template's checksum covers daddr 0; add the two 16-bit words of
	// the address (RFC 1624). One's complement sums do not depend on byte
	// order as long as every word is read the same way.
	sum = (__u16)~ip->check;
	sum += (daddr & 0xffff) + (daddr >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = (__sum16)~sum;
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

// xdp_redirect_bare forwards with no work at all: no parsing, no lookup, no
// rewrite. What it reaches is the most any forwarder can reach on the same
// ports.
SEC("xdp")
int xdp_redirect_bare(struct xdp_md *ctx)
{
	return bpf_redirect_map(&bare_port, 0, 0);
}
