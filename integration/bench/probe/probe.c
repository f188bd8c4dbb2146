//go:build ignore

// The measuring programs of `splitplane bench all`, beside the traffic
// programs of ../gen. None of them is part of the router.
//
// xdp_sink_latency is a sink that records how long each probe frame took
// from its sender to here: the sender writes the low 32 bits of
// CLOCK_MONOTONIC (nanoseconds) into the frame, the IPv4 identification
// (high half) and the UDP checksum field (low half), where no router on
// the path changes them and no padding is needed (a 0-byte payload keeps
// the stamp; the kernel trims Ethernet padding when it forwards).
// bpf_ktime_get_ns is the same clock, so the difference is the latency.
//
// xdp_kernel_fib is the kernel-FIB forwarder of the lookup benchmark, run
// with BPF_PROG_TEST_RUN: the same work as the router's fast path (parse,
// checks, lookup, next hop's MACs, TTL and checksum, redirect) with the
// lookup done by bpf_fib_lookup in the kernel's own FIB (the table
// kfib_tbid of the namespace the run happens in) instead of splitplane's
// DIR-24-8 tables; every run takes the next destination of kfib_dsts.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

// probe.go repeats these.
#define LAT_SAMPLES 65536
#define KFIB_DSTS 65536
#define KFIB_RCS 16
#define AF_INET 2

#define L4_OFF (sizeof(struct ethhdr) + sizeof(struct iphdr))

// lat_port is the UDP destination port (host order) of probe frames.
__u32 lat_port;
// lat_count counts the probes recorded; sample i is in lat_samples[i %
// LAT_SAMPLES] (the reader resets lat_count and reads at most
// LAT_SAMPLES).
__u32 lat_count;
__u32 lat_samples[LAT_SAMPLES];

SEC("xdp")
int xdp_sink_latency(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = data + L4_OFF;
	__u32 now = (__u32)bpf_ktime_get_ns();
	__u32 sent, i;

	if (data + L4_OFF + sizeof(struct udphdr) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    udp->dest != bpf_htons((__u16)lat_port))
		return XDP_DROP;
	sent = (__u32)bpf_ntohs(ip->id) << 16 | bpf_ntohs(udp->check);
	i = __sync_fetch_and_add(&lat_count, 1);
	lat_samples[i & (LAT_SAMPLES - 1)] = now - sent;
	return XDP_DROP;
}

// kfib_tbid is the routing table xdp_kernel_fib looks up in.
__u32 kfib_tbid;
// kfib_ignore_ttl forwards whatever the TTL: BPF_PROG_TEST_RUN runs a
// repeat on the frame the previous run left, TTL already decremented (the
// router's fast path has bench_ignore_ttl for the same reason).
__u32 kfib_ignore_ttl;
// kfib_dsts are the destinations the runs rotate over (network order).
__be32 kfib_dsts[KFIB_DSTS];
__u32 kfib_next;
// kfib_rcs counts bpf_fib_lookup's results by return code (BPF_FIB_LKUP_RET_*;
// the last slot also counts any larger or negative code).
__u64 kfib_rcs[KFIB_RCS];

SEC("xdp")
int xdp_kernel_fib(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct bpf_fib_lookup fib = {};
	__u32 sum;
	long rc;

	if (data + L4_OFF > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || (ip->ttl <= 1 && !kfib_ignore_ttl))
		return XDP_PASS;
	ip->daddr = kfib_dsts[kfib_next++ & (KFIB_DSTS - 1)];

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;
	fib.tbid = kfib_tbid;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_TBID);
	kfib_rcs[rc >= 0 && rc < KFIB_RCS ? rc : KFIB_RCS - 1]++;
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;

	// TTL - 1 and the checksum updated as the kernel's ip_decrease_ttl()
	// and the router's fast path do it (RFC 1624).
	sum = (__u32)ip->check + (__u32)bpf_htons(0x0100);
	ip->check = (__sum16)(sum + (sum >= 0xFFFF));
	ip->ttl--;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	return bpf_redirect(fib.ifindex, 0);
}
