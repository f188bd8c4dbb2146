// Package classifier finds the router's own control flows (BGP sessions,
// ForCES associations, management sessions) so that their return traffic can
// be steered to the control core while everything else addressed to the router
// is policed, and no forwarding load or flood can starve the control plane
// (Hagsand et al. 2011).
//
// Discovery (flows.go) reads the kernel's TCP sockets through netlink
// sock_diag: every control flow is one real connection's exact 5-tuple, never
// a guess such as "port 179 from anywhere". [Flows] reads them once; [Watch]
// polls and reports the flows that appear and go, which is what steering rules
// are made from.
//
// Steering has two paths. The software path, for veth, virtio and any NIC
// without n-tuple filters, is in the FE's XDP program (fe/datapath): exact
// control-flow rules redirect return packets through a CPUMAP to the control
// CPU, a per-CPU policer limits the rest of the traffic to the router, and GTSM
// guards the BGP port; the FE agent (fe/classifier.go) keeps the rules in step
// with [Watch]. The hardware path (nic.go: the device and what it can do;
// ntuple.go: the ioctls; irq.go: its queues' interrupts, the one
// /proc/interrupts parser, [QueueIRQs]; steerer.go) programs n-tuple rules
// through SIOCETHTOOL (ETHTOOL_SRXCLSRLINS/DEL, GRXCLSRLALL; byte layout
// checked against what the ethtool binary sends), spreads the RSS indirection
// table over the forwarding queues, pins each queue's IRQ to its core, and
// restores all of it on exit ([Steerer]).
package classifier
