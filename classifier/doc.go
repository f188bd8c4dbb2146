// Package classifier will steer the return traffic of the router's own
// control flows (BGP sessions, ForCES associations, management) to the
// control core, and police everything else addressed to the router, so that
// no forwarding load or flood can starve the control plane (Hagsand et al.
// 2011). Hardware path: NIC n-tuple rules and RSS indirection; software path:
// XDP cpumap steering. Nothing is implemented yet: see the project's issues.
package classifier
