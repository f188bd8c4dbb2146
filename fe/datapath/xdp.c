//go:build ignore

// xdp_router is the IPv4 and IPv6 fast path of a splitplane FE. It is
// attached to every router port and forwards plain unicast IPv4 and IPv6
// whose route, nexthop and neighbour are all known; everything else (ARP,
// NDP, VLAN, IPv4 options, Hop-by-Hop options, TTL/hop limit expiry,
// link-local and multicast destinations, packets for the router itself,
// misses, unicast frames for another MAC than the port's, packets larger
// than the egress port's MTU) goes to the kernel with XDP_PASS, so the
// kernel stays the slow path and the source of ICMP and ICMPv6 errors
// (path MTU discovery included). What no router may forward (RFC 1812,
// RFC 8200) is dropped: IPv4 with a bad header checksum, martian sources
// and destinations. Every packet is counted once as
// "rx", on the CPU that received it, and once under the reason it left by,
// and per port (port_stats) as rx on its ingress port and, when forwarded,
// as tx on its egress port.
//
// With forward CPUs set (fwd_steer), a packet that a CPU outside them would
// forward goes unmodified through cpu_map to the forward CPU its flow hash
// picks (counted "to_fe_cpu" where it arrived), and xdp_forward_cpumap
// routes and forwards it there, counting all but rx again.
//
// Packets for the router itself (local_addrs) are protected (for_us4 and
// for_us6): GTSM drops BGP packets from single-hop peers that arrive with a
// TTL below 255, the router's known control flows are redirected through a
// CPUMAP to the control CPU (so that the kernel processes them there, away
// from the forwarding load), and the rest passes a per-CPU policer. None of
// this runs for forwarded packets.
//
// IPv4 routes are looked up in a DIR-24-8 table (as DPDK's rte_lpm): one
// array load for prefixes up to /24, a second one for longer prefixes,
// whatever the table size. fib.go builds the table. IPv6 routes are looked
// up in a stride table (as DPDK's rte_lpm6, with a 16-bit first level): one
// load per 8 bits of the matching prefix beyond /16, at most 15; fib6.go
// builds it.
//
// The pipeline lives in bpf/*.h (maps.h, forward.h, control.h, router.h) so
// that the benchmarks' BPF object (integration/bench/fibbench/fibbench.c)
// runs the very same code; this file holds only the FE's hooks and
// programs.


#include "bpf/router.h"

char __license[] SEC("license") = "Dual MIT/GPL";

// The FE's hooks of router.h: the FIBs, the destination as it arrives and
// the TTL checked.
static __always_inline int hook_lookup4(__be32 daddr, __u32 *nh_id, const int variant)
{
	return fib_lookup(daddr, nh_id);
}

static __always_inline int hook_lookup6(const struct in6_addr *daddr, __u32 *nh_id, const int variant)
{
	return fib6_lookup(daddr, nh_id);
}

static __always_inline void hook_dst4(struct iphdr *ip)
{
}

static __always_inline void hook_dst6(struct ipv6hdr *ip6)
{
}

static __always_inline int hook_ignore_ttl(void)
{
	return 0;
}

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	return router(ctx, 0, 0);
}

// xdp_control runs on the control CPU for every packet cpu_map brings there
// (a control flow's return packet): see control_rx.
SEC("xdp/cpumap")
int xdp_control(struct xdp_md *ctx)
{
	return control_rx();
}

// xdp_forward_cpumap runs on each forward CPU for every packet cpu_map
// brings there (one that another CPU would have forwarded): it routes the
// packet again, with this CPU's view of the tables, and forwards it, or
// passes it to this CPU's kernel if the tables changed meanwhile (a packet
// for the router included: it skips for_us, which may redirect).
//
// Neither CPUMAP program may use cpu_map, not even in dead code: a cpu_map
// entry holds its program and a program holds the maps it uses, so the
// cycle would keep cpu_map, the program and every map it uses (hundreds
// of MB with the FIB) in the kernel for good once the FE exits.
SEC("xdp/cpumap")
int xdp_forward_cpumap(struct xdp_md *ctx)
{
	return router(ctx, 0, 1);
}
