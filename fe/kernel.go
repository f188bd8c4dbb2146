package fe

import (
	"fmt"
	"net"
	"net/netip"

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

// kernelFIB mirrors CE routes into the kernel's main table, both families.
type kernelFIB struct {
	mode       string
	h          *netlink.Handle
	installed  map[prefix4]uint32          // prefix -> gateway (ip4)
	installed6 map[netip.Prefix]netip.Addr // prefix -> gateway
	errors     uint64
	lastErr    string
}

// newKernelFIB returns a copy in mode of the CE's routes in the kernel of
// the calling thread's network namespace. It talks to the kernel over one
// netlink socket of its own: netlink's package functions open one per call,
// which took 30 µs a route here against 13.
func newKernelFIB(mode string) *kernelFIB {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		h = &netlink.Handle{} // a socket per call, as the package functions
	}
	return &kernelFIB{mode: mode, h: h, installed: map[prefix4]uint32{}, installed6: map[netip.Prefix]netip.Addr{}}
}

// close releases k's netlink socket (the routes stay: removeAll).
func (k *kernelFIB) close() { k.h.Close() }

func (k *kernelFIB) wants(p netip.Prefix) bool {
	switch k.mode {
	case KernelRoutesAll:
		return true
	case KernelRoutesDefault:
		return p.Bits() == 0
	}
	return false
}

// len is how many routes the FE has in the kernel.
func (k *kernelFIB) len() int { return len(k.installed) + len(k.installed6) }

// sweep removes routes an earlier FE left in the kernel.
func (k *kernelFIB) sweep() error {
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		routes, err := k.h.RouteListFiltered(family, &netlink.Route{Protocol: kernelProto}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return fmt.Errorf("list kernel routes: %w", err)
		}
		for i := range routes {
			_ = k.h.RouteDel(&routes[i])
		}
	}
	return nil
}

// sync makes the kernel's copy of IPv4 prefix p match gw (0: no route).
func (k *kernelFIB) sync(p prefix4, gw uint32) {
	pfx := p.Prefix()
	if !k.wants(pfx) {
		return
	}
	have, had := k.installed[p]
	if had && have == gw {
		return
	}
	var err error
	if gw != 0 {
		if err = k.replace(pfx, addr4(gw)); err == nil {
			k.installed[p] = gw
		}
	} else if had {
		err = k.del(pfx)
		delete(k.installed, p)
	}
	if err != nil {
		k.fail(pfx, addr4(gw), err)
	}
}

// sync6 makes the kernel's copy of IPv6 prefix p match gw (invalid: no
// route).
func (k *kernelFIB) sync6(p netip.Prefix, gw netip.Addr) {
	if !k.wants(p) {
		return
	}
	have, had := k.installed6[p]
	if had && have == gw {
		return
	}
	var err error
	if gw.IsValid() {
		if err = k.replace(p, gw); err == nil {
			k.installed6[p] = gw
		}
	} else if had {
		err = k.del(p)
		delete(k.installed6, p)
	}
	if err != nil {
		k.fail(p, gw, err)
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (k *kernelFIB) replace(p netip.Prefix, gw netip.Addr) error {
	return k.h.RouteReplace(&netlink.Route{Dst: ipNet(p), Gw: gw.AsSlice(), Protocol: kernelProto})
}

func (k *kernelFIB) del(p netip.Prefix) error {
	return k.h.RouteDel(&netlink.Route{Dst: ipNet(p), Protocol: kernelProto})
}

func (k *kernelFIB) fail(p netip.Prefix, gw netip.Addr, err error) {
	k.errors++
	k.lastErr = fmt.Sprintf("%s via %s: %v", p, gw, err)
}

// removeAll takes the FE's routes out of the kernel.
func (k *kernelFIB) removeAll() {
	for p := range k.installed {
		k.sync(p, 0)
	}
	for p := range k.installed6 {
		k.sync6(p, netip.Addr{})
	}
}
