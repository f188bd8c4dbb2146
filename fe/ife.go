package fe

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// Crossing FEs (docs/cluster.md, "Crossing FEs: how the FE programs remote
// nexthops"). An FE with inter_fe_links is one FE of a router made of
// several: at start it gives the datapath its own FE ID (its ForCES
// sub-ID) and, once it has learned each peer's MAC on the link, the link;
// it keeps the link's state in the datapath: its port's state and what
// the probes of its peer's datapath say (ifeprobe.go). The CE's
// nexthop egress rows then decide what each gateway's datapath nexthop is:
// a gateway behind another FE becomes a remote nexthop (sent there over
// the links, encapsulated), and a gateway behind this FE gets the row's
// nexthop key, so that the frames the other FEs send for it find it. An FE
// without inter_fe_links ignores the egress rows, as before.

// InterFEDatapath is what a datapath offers for inter-FE forwarding
// (fe/datapath/ife.go); the agent uses it when its Datapath has it.
type InterFEDatapath interface {
	SetLocalFE(id uint32) error
	SetInterFELink(ifindex int, peerFE uint32, peerMAC net.HardwareAddr) error
	SetInterFELinkUp(peerFE uint32, up bool) error
	SetRemoteNexthop(id uint32, r datapath.RemoteNexthop) error
	SetNexthopKey(key, localID uint32) error
	DeleteNexthopKey(key uint32) error
}

// nexthopKey is the NE-wide key of a CE nexthop row: the row's number
// and its family in the lowest bit (each family numbers its rows on its
// own, the datapath has one key space, whose keys from
// datapath.ConnectedKeyBase up are the connected rows'). A row at or above
// datapath.ConnectedKeyBase/2 has no key: ok is false, and the gateway is
// forwarded as if no egress row named it.
func nexthopKey(v6 bool, row uint32) (key uint32, ok bool) {
	if row >= datapath.ConnectedKeyBase/2 {
		return 0, false
	}
	key = row << 1
	if v6 {
		key |= 1
	}
	return key, true
}

// remoteState is what the programmer maps from the egress rows: the remote
// nexthop of each gateway behind another FE, and the gateway of each key
// whose egress is this FE.
type remoteState struct {
	remote map[netip.Addr]datapath.RemoteNexthop
	local  map[uint32]netip.Addr
}

// egressOf works out the remote state t's egress rows ask for, for FE
// self. Rows whose nexthop row the table does not hold mean nothing yet.
func egressOf(t *table, self uint32) remoteState {
	rs := remoteState{remote: map[netip.Addr]datapath.RemoteNexthop{}, local: map[uint32]netip.Addr{}}
	for _, fam := range []struct {
		v6   bool
		rows map[uint32]forces.NexthopEgressInfo
		nhs  map[uint32]netip.Addr
	}{{false, t.egress.v4, t.v4.nexthops}, {true, t.egress.v6, t.v6.nexthops}} {
		for row, e := range fam.rows {
			gw, ok := fam.nhs[row]
			if !ok {
				continue
			}
			key, ok := nexthopKey(fam.v6, row)
			if !ok {
				continue
			}
			if e.FE == self {
				rs.local[key] = gw
			} else {
				rs.remote[gw] = datapath.RemoteNexthop{FE: e.FE, Key: key, Port: e.Port}
			}
		}
	}
	return rs
}

// programRemote brings the slots and the nexthop keys in line with t's
// egress rows: a slot whose gateway is behind another FE becomes that
// remote nexthop; one that stops being remote is emptied and resolved
// again as a local gateway; each key whose egress is this FE maps to its
// gateway's (local) slot. It does nothing unless the FE is in a cluster
// (pr.ife set). Slots with no route left are freed by flush, which drops
// their keys.
func (pr *programmer) programRemote(t *table) {
	if pr.ife == nil {
		return
	}
	rs := egressOf(t, pr.self)
	for gw, s := range pr.slots {
		r, remote := rs.remote[gw]
		switch {
		case remote && (!s.remote || s.rn != r):
			if err := pr.ife.SetRemoteNexthop(s.id, r); err != nil {
				pr.datapathError(err)
				continue
			}
			s.remote, s.rn, s.ifindex = true, r, 0
		case !remote && s.remote:
			if err := pr.dp.DeleteNexthop(s.id); err != nil {
				pr.datapathError(err)
			}
			s.remote, s.rn, s.ifindex = false, datapath.RemoteNexthop{}, 0
			if pr.egressPort != nil {
				pr.resolve(s, pr.egressPort(gw))
			}
			select {
			case pr.kick <- struct{}{}:
			default:
			}
		}
	}
	for key, gw := range rs.local {
		s := pr.slots[gw]
		if s == nil || s.remote {
			continue
		}
		if id, ok := pr.keys[key]; ok && id == s.id {
			continue
		}
		if err := pr.ife.SetNexthopKey(key, s.id); err != nil {
			pr.datapathError(err)
			continue
		}
		pr.keys[key] = s.id
	}
	for key, id := range pr.keys {
		if gw, ok := rs.local[key]; ok {
			if s := pr.slots[gw]; s != nil && s.id == id && !s.remote {
				continue
			}
		}
		pr.dropKey(key)
	}
}

// dropKey deletes nexthop key from the datapath and from pr.keys.
func (pr *programmer) dropKey(key uint32) {
	if err := pr.ife.DeleteNexthopKey(key); err != nil && !errors.Is(err, datapath.ErrNotFound) {
		pr.datapathError(err)
	}
	delete(pr.keys, key)
}

// dropKeysOf deletes the nexthop keys that map to slot id (being freed).
func (pr *programmer) dropKeysOf(id uint32) {
	for key, to := range pr.keys {
		if to == id {
			pr.dropKey(key)
		}
	}
}

// ifeLink is one configured inter-FE link as the agent drives it: its
// port, the peer's MAC once learned, and whether the datapath has it.
type ifeLink struct {
	port     string
	ifindex  int
	peerFE   uint32
	peerMAC  net.HardwareAddr // nil until learned
	declared bool             // SetInterFELink done with peerMAC
	// alive is what the probes say of the peer's datapath (ifeprobe.go):
	// true until inter_fe_probe_misses probes in a row go unanswered.
	alive bool
	probe *linkProbe
}

// startInterFE makes the FE one of a cluster if it has inter-FE links and
// its datapath supports them: the datapath learns this FE's ID, and the
// programmer maps the egress rows from then on. The links themselves are
// declared as their peers' MACs are learned (learnPeerMAC). Called in the
// loop, once the ports are installed.
func (a *Agent) startInterFE(dp Datapath) {
	if len(a.cfg.InterFELinks) == 0 {
		return
	}
	ife, ok := dp.(InterFEDatapath)
	if !ok {
		a.log.Warn("fe: the datapath cannot forward between FEs; inter_fe_links unused")
		return
	}
	self := forces.FESubID(a.id)
	if err := ife.SetLocalFE(self); err != nil {
		a.log.Error("fe: inter-FE forwarding off: the datapath refused this FE's ID", "id", self, "err", err)
		return
	}
	a.links = map[int]*ifeLink{}
	for _, l := range a.cfg.InterFELinks {
		for _, p := range a.ports {
			if p.Name == l.Port {
				lp := &linkProbe{port: p.Name, ifindex: p.Ifindex, peerFE: l.PeerFE, self: self, start: time.Now()}
				copy(lp.src[:], p.mac)
				lp.portUp.Store(p.Up)
				a.links[p.Ifindex] = &ifeLink{port: p.Name, ifindex: p.Ifindex, peerFE: l.PeerFE, alive: true, probe: lp}
			}
		}
	}
	a.prog.ife, a.prog.self = ife, self
	a.vlb = newVLB(a.cfg.VLB, a.cfg.InterFELinks, func(port string) int {
		for _, l := range a.links {
			if l.port == port {
				return l.ifindex
			}
		}
		return 0
	})
	a.log.Info("fe: inter-FE forwarding on", "fe", self, "links", len(a.links))
	a.warnLinkMTUs()
}

// setPeerMAC takes mac as the MAC of the peer on inter-FE link port
// ifindex, and declares the link to the datapath (again, if the MAC
// changed) with its port's state. Called in the loop.
func (a *Agent) setPeerMAC(ifindex int, mac net.HardwareAddr) {
	l := a.links[ifindex]
	if l == nil || bytes.Equal(l.peerMAC, mac) {
		return
	}
	if err := a.prog.ife.SetInterFELink(l.ifindex, l.peerFE, mac); err != nil {
		a.log.Error("fe: inter-FE link not declared to the datapath", "port", l.port, "peer_fe", l.peerFE, "peer_mac", mac, "err", err)
		return
	}
	l.peerMAC, l.declared = append(net.HardwareAddr(nil), mac...), true
	l.probe.setPeer(mac)
	a.log.Info("fe: inter-FE link ready", "port", l.port, "peer_fe", l.peerFE, "peer_mac", mac.String())
	a.linkState(ifindex)
}

// linkState tells the datapath whether inter-FE link port ifindex is up:
// its port up and its peer answering the probes (nothing for another port
// or a link not declared yet, which the datapath does not have: as good
// as down). Called in the loop.
func (a *Agent) linkState(ifindex int) {
	l := a.links[ifindex]
	p := a.ports[ifindex]
	if l == nil || p == nil {
		return
	}
	l.probe.portUp.Store(p.Up)
	if !l.declared {
		return
	}
	up := p.Up && l.alive
	if err := a.prog.ife.SetInterFELinkUp(l.peerFE, up); err != nil {
		a.log.Error("fe: inter-FE link state not updated in the datapath", "port", l.port, "up", up, "err", err)
	}
}

// linkPorts returns the ports of the inter-FE links (for the neighbour
// watcher) and the names of those whose peer MAC is still unknown (for the
// resolver to solicit). Called in the loop.
func (a *Agent) linkPorts() (all map[int]bool, unknown []string) {
	all = map[int]bool{}
	for ifindex, l := range a.links {
		all[ifindex] = true
		if l.peerMAC == nil {
			unknown = append(unknown, l.port)
		}
	}
	return all, unknown
}

// peerNeighbor returns the MAC of a usable IPv6 link-local neighbour on one
// of the link ports: on a point-to-point link, the peer FE.
func peerNeighbor(u netlink.NeighUpdate, links map[int]bool) (int, net.HardwareAddr, bool) {
	n := u.Neigh
	if u.Type != unix.RTM_NEWNEIGH || !links[n.LinkIndex] || n.Family != unix.AF_INET6 ||
		n.State&usableNeighbor == 0 || len(n.HardwareAddr) != 6 || !n.IP.IsLinkLocalUnicast() {
		return 0, nil, false
	}
	return n.LinkIndex, n.HardwareAddr, true
}

// solicitPeers sends an ICMPv6 echo request to all nodes (ff02::1) on
// each named port: the peer answers from its link-local address, after
// soliciting ours with its MAC, which the kernel's neighbour table keeps
// and the neighbour watcher passes on (learnPeerMAC).
func solicitPeers(ports []string) {
	if len(ports) == 0 {
		return
	}
	c, err := net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: net.IPv6unspecified})
	if err != nil {
		return
	}
	defer c.Close()
	echo := []byte{128, 0, 0, 0, 0x53, 0x50, 0, 1} // type, code, checksum (the kernel's), id, sequence
	for _, name := range ports {
		_, _ = c.WriteTo(echo, &net.IPAddr{IP: net.IPv6linklocalallnodes, Zone: name})
	}
}
