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
// are made from. Steering (NIC n-tuple rules and RSS indirection, XDP cpumap)
// and policing build on them: see the project's issue 7.
package classifier
