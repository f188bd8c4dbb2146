package fe

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resolveInterval is how often unresolved next hops are retried and their
// neighbours solicited.
const resolveInterval = time.Second

// kernelEgressPort asks the kernel's routing table which interface reaches
// gw, and returns it if it is one of the FE's ports. The resolver calls it
// outside the loop: the set of ports is fixed before the resolver starts, and
// only their state changes later, in the loop.
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

// resolveLoop looks up the egress port of every gateway (new ones as soon as
// they are kicked, all of them every resolveInterval), and, for resolved ones
// whose MAC is not known yet, makes the kernel resolve it by sending it a
// datagram (the kernel ARPs for it; the datagram itself goes to the discard
// port). The lookups are netlink calls: it makes them between two requests
// to the loop, one for the gateways, one with the answers.
func (a *Agent) resolveLoop(ctx context.Context) {
	t := time.NewTicker(resolveInterval)
	defer t.Stop()
	var gws []netip.Addr
	var egress, via []int
	var unlearned []string // inter-FE link ports whose peer's MAC is unknown
	for {
		gws = gws[:0]
		a.do(func() {
			for gw := range a.prog.slots {
				gws = append(gws, gw)
			}
			_, unlearned = a.linkPorts()
		})
		if !a.noPorts {
			solicitPeers(unlearned)
		}
		egress = egress[:0]
		for _, gw := range gws {
			egress = append(egress, a.lookupEgress(gw))
		}
		via = via[:0]
		a.do(func() {
			for i, gw := range gws {
				ifindex := 0
				if s := a.prog.slots[gw]; s != nil {
					a.prog.resolve(s, egress[i])
					ifindex = s.ifindex
				}
				via = append(via, ifindex)
			}
		})
		var solicit []netip.Addr
		for i, gw := range gws {
			if via[i] != 0 && !a.neighbors.has(via[i], gw) {
				solicit = append(solicit, gw)
			}
		}
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
// An IPv6 link-local neighbour on an inter-FE link port is the peer FE: its
// MAC declares the link (setPeerMAC).
func (a *Agent) watchNeighbors(ctx context.Context) {
	ch := make(chan netlink.NeighUpdate, 1024)
	done := make(chan struct{})
	defer close(done)
	errs := func(err error) { a.log.Warn("fe: neighbour watch", "err", err) }
	if err := netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{ListExisting: true, ErrorCallback: errs}); err != nil {
		a.log.Error("fe: subscribe to neighbours; next-hop MACs will not be learned", "err", err)
		return
	}
	// The ports and the datapath are fixed once Run has set them up: take
	// them once, so that learning a MAC never waits for the loop, busy with a
	// table apply's datapath writes.
	var ours, links map[int]bool
	var dp Datapath
	a.do(func() {
		ours = make(map[int]bool, len(a.ports))
		for ifindex := range a.ports {
			ours[ifindex] = true
		}
		dp = a.prog.dp
		links, _ = a.linkPorts()
	})
	peers := map[int]net.HardwareAddr{} // the peer MACs passed on, by link port
	forEach(ctx, ch, func(u netlink.NeighUpdate) {
		a.neighbors.update(u, ours, dp, a.log)
		if ifindex, mac, ok := peerNeighbor(u, links); ok && !bytes.Equal(peers[ifindex], mac) {
			peers[ifindex] = slices.Clone(mac)
			a.do(func() { a.setPeerMAC(ifindex, mac) })
		}
	})
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

// neighborTable is the MACs of next hops on the FE's ports, as programmed
// into the datapath. Only the neighbour watcher changes it, so it writes the
// datapath without holding mu (readers never wait for a BPF write) and
// without the agent's lock.
type neighborTable struct {
	mu sync.Mutex
	m  map[neighKey]net.HardwareAddr
}

// has reports whether the MAC of ip on ifindex is known.
func (t *neighborTable) has(ifindex int, ip netip.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[neighKey{ifindex, ip}]
	return ok
}

// len is the number of neighbours known.
func (t *neighborTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// update applies a netlink neighbour update on one of the ports in ours to
// dp and t.
func (t *neighborTable) update(u netlink.NeighUpdate, ours map[int]bool, dp Datapath, log *slog.Logger) {
	n := u.Neigh
	var ip netip.Addr
	switch n.Family {
	case unix.AF_INET:
		ip, _ = netip.AddrFromSlice(n.IP.To4())
	case unix.AF_INET6:
		ip, _ = netip.AddrFromSlice(n.IP.To16())
	}
	if !ip.IsValid() || ip.Is4In6() || !ours[n.LinkIndex] {
		return
	}
	key := neighKey{n.LinkIndex, ip}
	t.mu.Lock()
	old, known := t.m[key]
	t.mu.Unlock()
	if u.Type == unix.RTM_NEWNEIGH && n.State&usableNeighbor != 0 && len(n.HardwareAddr) == 6 {
		if known && bytes.Equal(old, n.HardwareAddr) {
			return
		}
		if err := dp.SetNeighbor(n.LinkIndex, ip, n.HardwareAddr); err != nil {
			log.Error("fe: program neighbour", "addr", ip, "err", err)
			return
		}
		t.mu.Lock()
		t.m[key] = slices.Clone(n.HardwareAddr)
		t.mu.Unlock()
		return
	}
	if known {
		t.mu.Lock()
		delete(t.m, key)
		t.mu.Unlock()
		_ = dp.DeleteNeighbor(n.LinkIndex, ip)
	}
}
