package fe

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// KernelRoutes says which of the CE's routes the FE copies into the kernel's
// FIB, the slow path for what XDP hands the kernel: packets whose TTL
// expires (the kernel answers ICMP Time Exceeded only for destinations it
// has a route to) and packets to unresolved neighbours.
const (
	KernelRoutesConnected = "connected" // only the ports' own subnets
	KernelRoutesDefault   = "default"   // plus the CE's default route, if it has one (the default)
	KernelRoutesAll       = "all"       // every CE route: for tables of up to some 100k routes
)

// kernelProto marks the routes the FE puts in the kernel, so it can find and
// remove its own (and those a crashed FE left) without touching others'.
const kernelProto = netlink.RouteProtocol(201)

// kernelFIB mirrors CE routes into the kernel's main table.
type kernelFIB struct {
	mode      string
	installed map[prefix4]uint32 // prefix -> gateway (ip4)
	errors    uint64
	lastErr   string
}

func newKernelFIB(mode string) *kernelFIB {
	return &kernelFIB{mode: mode, installed: map[prefix4]uint32{}}
}

func (k *kernelFIB) wants(p prefix4) bool {
	switch k.mode {
	case KernelRoutesAll:
		return true
	case KernelRoutesDefault:
		return p.Prefix().Bits() == 0
	}
	return false
}

// sweep removes routes an earlier FE left in the kernel.
func (k *kernelFIB) sweep() error {
	routes, err := netlink.RouteListFiltered(unix.AF_INET, &netlink.Route{Protocol: kernelProto}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list kernel routes: %w", err)
	}
	for i := range routes {
		_ = netlink.RouteDel(&routes[i])
	}
	return nil
}

// sync makes the kernel's copy of prefix p match gw (0: no route).
func (k *kernelFIB) sync(p prefix4, gw uint32) {
	if !k.wants(p) {
		return
	}
	have, had := k.installed[p]
	if had && have == gw {
		return
	}
	pfx := p.Prefix()
	dst := &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), 32)}
	var err error
	if gw != 0 {
		err = netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: addr4(gw).AsSlice(), Protocol: kernelProto})
		if err == nil {
			k.installed[p] = gw
		}
	} else if had {
		err = netlink.RouteDel(&netlink.Route{Dst: dst, Protocol: kernelProto})
		delete(k.installed, p)
	}
	if err != nil {
		k.errors++
		k.lastErr = fmt.Sprintf("%s via %s: %v", pfx, addr4(gw), err)
	}
}

// removeAll takes the FE's routes out of the kernel.
func (k *kernelFIB) removeAll() {
	for p := range k.installed {
		k.sync(p, 0)
	}
}
