package bgp

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// GoBGP's StopBgp deletes the neighbours one at a time, and deleting one
// drops the routes learned from it, which sends withdrawals to the
// neighbours still connected: a graceful-restart helper would then lose the
// CE's routes after all (and withdrawals pass any export policy). A CE
// process that dies does not do that: the kernel just closes its sockets.
// So, to stop as a restarting speaker, Stop first aborts the TCP
// connections of the graceful-restart neighbours (SOCK_DESTROY, which
// sends a RST): both ends then see the transport fail, which is graceful
// restart's cue to keep the other's routes, stale, and GoBGP has no
// connected neighbour left to send withdrawals to when StopBgp runs.
// vishvananda/netlink destroys IPv4 sockets only, and SOCK_DESTROY needs
// CAP_NET_ADMIN and a kernel with CONFIG_INET_DIAG_DESTROY; without them
// (or for IPv6 neighbours) Stop falls back to StopBgp alone.

// abortSessions resets the established TCP connections to the given
// neighbours whose other end is local port listenPort (accepted) or the
// neighbour's port (connected). It returns how many it reset.
func abortSessions(ns []Neighbor, listenPort int32) int {
	socks, err := netlink.SocketDiagTCP(unix.AF_INET)
	if err != nil {
		return 0
	}
	ports := map[netip.Addr]uint16{}
	for _, n := range ns {
		if n.Address.Is4() {
			p := uint16(n.Port)
			if p == 0 {
				p = 179
			}
			ports[n.Address] = p
		}
	}
	aborted := 0
	for _, s := range socks {
		const established = 1 // TCP_ESTABLISHED
		remote, _ := netip.AddrFromSlice(s.ID.Destination)
		port, ok := ports[remote.Unmap()]
		if !ok || s.State != established || (s.ID.SourcePort != uint16(listenPort) && s.ID.DestinationPort != port) {
			continue
		}
		err := netlink.SocketDestroy(
			&net.TCPAddr{IP: s.ID.Source, Port: int(s.ID.SourcePort)},
			&net.TCPAddr{IP: s.ID.Destination, Port: int(s.ID.DestinationPort)})
		if err == nil {
			aborted++
		}
	}
	return aborted
}
