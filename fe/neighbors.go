package fe

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resolveInterval is how often unresolved next hops are retried and their
// neighbours solicited.
const resolveInterval = time.Second

// kernelEgressPort asks the kernel's routing table which interface reaches
// gw, and returns it if it is one of the FE's ports.
func (a *Agent) kernelEgressPort(gw netip.Addr) int {
	routes, err := netlink.RouteGet(gw.AsSlice())
	if err != nil || len(routes) == 0 {
		return 0
	}
	if _, ok := a.ports[routes[0].LinkIndex]; !ok {
		return 0 // reachable only through an interface this FE does not forward on
	}
	return routes[0].LinkIndex
}

// resolveLoop retries unresolved gateways and, for resolved ones whose MAC is
// not known yet, makes the kernel resolve it by sending it a datagram (the
// kernel ARPs for it; the datagram itself goes to the discard port).
func (a *Agent) resolveLoop(ctx context.Context) {
	t := time.NewTicker(resolveInterval)
	defer t.Stop()
	for {
		var solicit []netip.Addr
		a.mu.Lock()
		for gw, s := range a.prog.slots {
			a.resolve(gw, s)
			if s.ifindex != 0 {
				if _, known := a.neighbors[neighKey{s.ifindex, gw}]; !known {
					solicit = append(solicit, gw)
				}
			}
		}
		a.mu.Unlock()
		for _, gw := range solicit {
			if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9))); err == nil {
				_, _ = c.Write([]byte{0})
				c.Close()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
	}
}

// watchNeighbors mirrors the kernel's IPv4 neighbour table for the FE's ports
// into the datapath, first with a dump, then from netlink notifications.
func (a *Agent) watchNeighbors(ctx context.Context) {
	ch := make(chan netlink.NeighUpdate, 1024)
	done := make(chan struct{})
	defer close(done)
	errs := func(err error) { a.log.Warn("fe: neighbour watch", "err", err) }
	if err := netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{ListExisting: true, ErrorCallback: errs}); err != nil {
		a.log.Error("fe: subscribe to neighbours; next-hop MACs will not be learned", "err", err)
		return
	}
	forEach(ctx, ch, a.neighborUpdate)
}

// forEach calls fn with every value from ch until ctx ends or ch closes.
func forEach[T any](ctx context.Context, ch <-chan T, fn func(T)) {
	for {
		select {
		case <-ctx.Done():
			return
		case v, ok := <-ch:
			if !ok {
				return
			}
			fn(v)
		}
	}
}

const usableNeighbor = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP

func (a *Agent) neighborUpdate(u netlink.NeighUpdate) {
	n := u.Neigh
	var ip netip.Addr
	switch n.Family {
	case unix.AF_INET:
		ip, _ = netip.AddrFromSlice(n.IP.To4())
	case unix.AF_INET6:
		ip, _ = netip.AddrFromSlice(n.IP.To16())
	}
	if !ip.IsValid() || ip.Is4In6() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ours := a.ports[n.LinkIndex]; !ours {
		return
	}
	key := neighKey{n.LinkIndex, ip}
	if u.Type == unix.RTM_NEWNEIGH && n.State&usableNeighbor != 0 && len(n.HardwareAddr) == 6 {
		if old, ok := a.neighbors[key]; ok && old.String() == n.HardwareAddr.String() {
			return
		}
		if err := a.dp.SetNeighbor(n.LinkIndex, ip, n.HardwareAddr); err != nil {
			a.log.Error("fe: program neighbour", "addr", ip, "err", err)
			return
		}
		a.neighbors[key] = n.HardwareAddr
		return
	}
	if _, ok := a.neighbors[key]; ok {
		delete(a.neighbors, key)
		_ = a.dp.DeleteNeighbor(n.LinkIndex, ip)
	}
}
