// Package datapath loads the XDP fast path of a splitplane FE (xdp.c) and
// gives typed access to its routes, nexthops, neighbours, local addresses,
// egress ports and counters, and to the protection of the router's own
// traffic: control flows steered to the control CPU, GTSM and the policer
// (control.go), and to inter-FE forwarding, for a router made of several
// FEs: inter-FE links, remote nexthops sent to their FE inside RFC 8013
// frames, delivery of such frames without a second lookup, and two-phase
// Valiant load balancing through intermediate FEs (ife.go).
package datapath

// The generated xdp_bpfel.go and xdp_bpfel.o are committed, so building needs
// no clang; rerun this after editing xdp.c or bpf/*.h.
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type nexthop -type neigh_key -type neigh_key6 -type neigh -type stat_reason -type port_counters -type nh_group -type ctl_flow_key -type ctl_flow_key6 -type ctl_flow_stats -type police_rate -type fe_config -type policer_state -type port_info -type police_class -type fe_link -type mesh xdp xdp.c -- -I/usr/include/x86_64-linux-gnu
