// Package fedptest is a recording fake of the FE's datapath for tests of the
// layers above it (the FE agent, the API, benchmarks of the control path):
// it holds what it was told as the real datapath would, fails where the
// real one fails (deleting what is not there, a group ID out of range), and
// renders its state as text for golden files.
package fedptest

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/splitplane/splitplane/fe/datapath"
)

// Datapath is the fake. It satisfies fe.Datapath, and is safe for
// concurrent use as the real one is.
type Datapath struct {
	mu        sync.Mutex
	attached  map[int]datapath.Mode
	routes    map[netip.Prefix]uint32
	nexthops  map[uint32]datapath.Nexthop
	groups    map[uint32][]uint32
	neighbors map[neighbor]net.HardwareAddr
	locals    map[netip.Addr]bool
	writes    int // route, nexthop and group updates and deletes
	perCPU    []datapath.Counters
	ports     map[int]datapath.PortCounters

	// Inter-FE forwarding: this FE's ID, the links by peer FE, the remote
	// nexthops by ID (a nexthop ID is either in nexthops or here) and the
	// nexthop keys (NE-wide key -> local nexthop ID).
	localFE uint32
	links   map[uint32]datapath.InterFELink
	remotes map[uint32]datapath.RemoteNexthop
	keys    map[uint32]uint32
}

type neighbor struct {
	ifindex int
	ip      netip.Addr
}

// New returns an empty datapath with no counters.
func New() *Datapath {
	return &Datapath{
		attached: map[int]datapath.Mode{}, routes: map[netip.Prefix]uint32{}, nexthops: map[uint32]datapath.Nexthop{},
		groups: map[uint32][]uint32{}, neighbors: map[neighbor]net.HardwareAddr{}, locals: map[netip.Addr]bool{},
		links: map[uint32]datapath.InterFELink{}, remotes: map[uint32]datapath.RemoteNexthop{}, keys: map[uint32]uint32{},
	}
}

// Attach records that the program was attached to ifindex in mode.
func (d *Datapath) Attach(ifindex int, mode datapath.Mode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attached[ifindex] = mode
	return nil
}

// SetRoute routes p to nexthop (or group) id.
func (d *Datapath) SetRoute(p netip.Prefix, id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routes[p] = id
	d.writes++
	return nil
}

// DeleteRoute removes p; datapath.ErrNotFound if it is not there.
func (d *Datapath) DeleteRoute(p netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.routes[p]; !ok {
		return datapath.ErrNotFound
	}
	delete(d.routes, p)
	d.writes++
	return nil
}

// SetRoutes sets every route.
func (d *Datapath) SetRoutes(rs []datapath.Route) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		d.routes[r.Prefix] = r.Nexthop
		d.writes++
	}
	return nil
}

// DeleteRoutes removes every prefix, or none (datapath.ErrNotFound) if one
// of them is not there.
func (d *Datapath) DeleteRoutes(ps []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range ps {
		if _, ok := d.routes[p]; !ok {
			return datapath.ErrNotFound
		}
	}
	for _, p := range ps {
		delete(d.routes, p)
		d.writes++
	}
	return nil
}

// SetNexthop sets nexthop id.
func (d *Datapath) SetNexthop(id uint32, nh datapath.Nexthop) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	nh.SrcMAC = slices.Clone(nh.SrcMAC)
	d.nexthops[id] = nh
	delete(d.remotes, id)
	d.writes++
	return nil
}

// DeleteNexthop removes nexthop id.
func (d *Datapath) DeleteNexthop(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.nexthops, id)
	delete(d.remotes, id)
	d.writes++
	return nil
}

// SetNexthopGroup sets group id (datapath.ErrInvalid below
// datapath.GroupIDBase) to members.
func (d *Datapath) SetNexthopGroup(id uint32, members []uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id < datapath.GroupIDBase {
		return datapath.ErrInvalid
	}
	d.groups[id] = slices.Clone(members)
	d.writes++
	return nil
}

// DeleteNexthopGroup removes group id.
func (d *Datapath) DeleteNexthopGroup(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.groups, id)
	d.writes++
	return nil
}

// SetNeighbor records ip's MAC on ifindex.
func (d *Datapath) SetNeighbor(ifindex int, ip netip.Addr, mac net.HardwareAddr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.neighbors[neighbor{ifindex, ip}] = slices.Clone(mac)
	return nil
}

// DeleteNeighbor forgets ip on ifindex.
func (d *Datapath) DeleteNeighbor(ifindex int, ip netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.neighbors, neighbor{ifindex, ip})
	return nil
}

// SetLocalAddr records one of the router's own addresses.
func (d *Datapath) SetLocalAddr(ip netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.locals[ip] = true
	return nil
}

// SetCounters makes the datapath report perCPU as its counters per CPU
// (Counters is their sum) and ports as its port counters.
func (d *Datapath) SetCounters(perCPU []datapath.Counters, ports map[int]datapath.PortCounters) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.perCPU, d.ports = perCPU, ports
}

// Counters returns the counters set with SetCounters, summed over the CPUs
// (empty if none were).
func (d *Datapath) Counters() (datapath.Counters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := datapath.Counters{}
	for _, c := range d.perCPU {
		for name, v := range c {
			out[name] += v
		}
	}
	return out, nil
}

// CPUCounters returns copies of the counters per CPU set with SetCounters.
func (d *Datapath) CPUCounters() ([]datapath.Counters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []datapath.Counters
	for _, c := range d.perCPU {
		cc := datapath.Counters{}
		for name, v := range c {
			cc[name] = v
		}
		out = append(out, cc)
	}
	return out, nil
}

// PortCounters returns a copy of the port counters set with SetCounters.
func (d *Datapath) PortCounters() (map[int]datapath.PortCounters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ports == nil {
		return nil, nil
	}
	out := make(map[int]datapath.PortCounters, len(d.ports))
	for k, v := range d.ports {
		out[k] = v
	}
	return out, nil
}

// SetLocalFE records this FE's ID (datapath.ErrInvalid out of range or the
// ID of a linked peer).
func (d *Datapath) SetLocalFE(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, linked := d.links[id]; id == 0 || id >= datapath.MaxFEs || linked {
		return fmt.Errorf("set local FE %d: %w", id, datapath.ErrInvalid)
	}
	d.localFE = id
	return nil
}

// SetInterFELink records the link to peerFE, up, keeping its spill; as
// the real datapath, it needs the local FE set first, a peer other than
// it and a 6-byte MAC.
func (d *Datapath) SetInterFELink(ifindex int, peerFE uint32, peerMAC net.HardwareAddr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.localFE == 0 || peerFE == 0 || peerFE >= datapath.MaxFEs || peerFE == d.localFE || len(peerMAC) != 6 || ifindex <= 0 {
		return fmt.Errorf("set inter-FE link %d to FE %d: %w", ifindex, peerFE, datapath.ErrInvalid)
	}
	l := datapath.InterFELink{Ifindex: ifindex, PeerMAC: slices.Clone(peerMAC), Up: true}
	l.SpillPermille = d.links[peerFE].SpillPermille
	d.links[peerFE] = l
	return nil
}

// DeleteInterFELink forgets the link to peerFE (datapath.ErrNotFound if
// there is none).
func (d *Datapath) DeleteInterFELink(peerFE uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.links[peerFE]; !ok {
		return datapath.ErrNotFound
	}
	delete(d.links, peerFE)
	return nil
}

// SetInterFELinkUp marks the link to peerFE up or down
// (datapath.ErrNotFound if there is none).
func (d *Datapath) SetInterFELinkUp(peerFE uint32, up bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.links[peerFE]
	if !ok {
		return fmt.Errorf("set inter-FE link to FE %d up=%t: %w", peerFE, up, datapath.ErrNotFound)
	}
	l.Up = up
	d.links[peerFE] = l
	return nil
}

// InterFELinks returns a copy of the links by peer FE.
func (d *Datapath) InterFELinks() map[uint32]datapath.InterFELink {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[uint32]datapath.InterFELink, len(d.links))
	for fe, l := range d.links {
		l.PeerMAC = slices.Clone(l.PeerMAC)
		out[fe] = l
	}
	return out
}

// SetRemoteNexthop makes nexthop id one behind FE r.FE (datapath.ErrInvalid
// for this FE or a key out of range), replacing a local one of that ID.
func (d *Datapath) SetRemoteNexthop(id uint32, r datapath.RemoteNexthop) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.FE == 0 || r.FE >= datapath.MaxFEs || r.FE == d.localFE || r.Key >= datapath.MaxNexthopKeys {
		return fmt.Errorf("set remote nexthop %d: %w", id, datapath.ErrInvalid)
	}
	delete(d.nexthops, id)
	d.remotes[id] = r
	d.writes++
	return nil
}

// Remote returns the remote nexthop prefix p routes to, if it routes to one.
func (d *Datapath) Remote(p string) (datapath.RemoteNexthop, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.remotes[d.routes[netip.MustParsePrefix(p)]]
	return r, ok
}

// SetNexthopKey maps key to local nexthop localID.
func (d *Datapath) SetNexthopKey(key, localID uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if key >= datapath.MaxNexthopKeys {
		return fmt.Errorf("set nexthop key %d: %w", key, datapath.ErrInvalid)
	}
	d.keys[key] = localID
	d.writes++
	return nil
}

// DeleteNexthopKey forgets key (datapath.ErrNotFound if it is not mapped).
func (d *Datapath) DeleteNexthopKey(key uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.keys[key]; !ok {
		return fmt.Errorf("delete nexthop key %d: %w", key, datapath.ErrNotFound)
	}
	delete(d.keys, key)
	d.writes++
	return nil
}

// NexthopKeys returns a copy of the nexthop keys (key -> local nexthop ID).
func (d *Datapath) NexthopKeys() map[uint32]uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[uint32]uint32, len(d.keys))
	for k, v := range d.keys {
		out[k] = v
	}
	return out
}

// Close does nothing.
func (d *Datapath) Close() error { return nil }

// Route returns the nexthop or group ID prefix p (such as "10.0.0.0/8")
// routes to, and whether it is routed.
func (d *Datapath) Route(p string) (uint32, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.routes[netip.MustParsePrefix(p)]
	return id, ok
}

// Gateway returns the gateway prefix p is forwarded to: "" if p is not
// routed, the members' gateways joined by commas for a group, and
// "slot-without-nexthop" for an ID that is neither a nexthop nor a group.
func (d *Datapath) Gateway(p string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.routes[netip.MustParsePrefix(p)]
	if !ok {
		return ""
	}
	return d.gateway(id)
}

func (d *Datapath) gateway(id uint32) string {
	if members, ok := d.groups[id]; ok {
		var gws []string
		for _, m := range members {
			gws = append(gws, d.nexthops[m].Gateway.String())
		}
		return strings.Join(gws, ",")
	}
	if r, ok := d.remotes[id]; ok {
		return remoteString(r)
	}
	nh, ok := d.nexthops[id]
	if !ok {
		return "slot-without-nexthop"
	}
	return nh.Gateway.String()
}

// gwString renders a nexthop's gateway, "connected" for a port's
// connected nexthop (none).
func gwString(nh datapath.Nexthop) string {
	if !nh.Gateway.IsValid() {
		return "connected"
	}
	return nh.Gateway.String()
}

func remoteString(r datapath.RemoteNexthop) string {
	return fmt.Sprintf("fe %d key %d port %d", r.FE, r.Key, r.Port)
}

// Gateways returns what every routed prefix is forwarded to, as Gateway.
func (d *Datapath) Gateways() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.routes))
	for p, id := range d.routes {
		out[p.String()] = d.gateway(id)
	}
	return out
}

// Groups returns a copy of the nexthop groups by ID.
func (d *Datapath) Groups() map[uint32][]uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[uint32][]uint32, len(d.groups))
	for id, m := range d.groups {
		out[id] = slices.Clone(m)
	}
	return out
}

// Writes counts the route, nexthop and group updates and deletes so far.
func (d *Datapath) Writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes
}

// String renders the datapath's state for golden files: attached ports,
// local addresses, neighbours, the local FE and inter-FE links, nexthops
// (local, remote, and the nexthop keys with their local nexthop's
// gateway), groups and routes, one line each,
// sorted. Nexthops and groups are shown by what they hold and routes by
// where they lead, not by ID: the IDs are the FE's to allocate, in an order
// that need not be stable.
func (d *Datapath) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	for _, ifindex := range sortedKeys(d.attached, cmp.Compare[int]) {
		add("attach ifindex %d mode %v", ifindex, d.attached[ifindex])
	}
	for _, ip := range sortedKeys(d.locals, netip.Addr.Compare) {
		add("local %s", ip)
	}
	for _, n := range sortedKeys(d.neighbors, func(a, b neighbor) int {
		if a.ifindex != b.ifindex {
			return a.ifindex - b.ifindex
		}
		return a.ip.Compare(b.ip)
	}) {
		add("neighbor %s dev %d lladdr %s", n.ip, n.ifindex, d.neighbors[n])
	}
	if d.localFE != 0 {
		add("local fe %d", d.localFE)
	}
	for _, fe := range sortedKeys(d.links, cmp.Compare[uint32]) {
		l := d.links[fe]
		add("ife link to fe %d dev %d peer %s up %t spill %d", fe, l.Ifindex, l.PeerMAC, l.Up, l.SpillPermille)
	}
	var nhs, groups []string
	for _, nh := range d.nexthops {
		nhs = append(nhs, fmt.Sprintf("nexthop via %s dev %d src %s", gwString(nh), nh.Ifindex, nh.SrcMAC))
	}
	for _, r := range d.remotes {
		nhs = append(nhs, "nexthop remote "+remoteString(r))
	}
	for key, id := range d.keys {
		to := "missing"
		if nh, ok := d.nexthops[id]; ok {
			to = gwString(nh)
		}
		nhs = append(nhs, fmt.Sprintf("nexthop key %d to %s", key, to))
	}
	for _, members := range d.groups {
		groups = append(groups, "group via "+d.members(members))
	}
	slices.Sort(nhs)
	slices.Sort(groups)
	lines = append(append(lines, nhs...), groups...)
	for _, p := range sortedKeys(d.routes, comparePrefix) {
		id := d.routes[p]
		if members, ok := d.groups[id]; ok {
			add("route %s via %s", p, d.members(members))
		} else if nh, ok := d.nexthops[id]; ok {
			add("route %s via %s dev %d", p, gwString(nh), nh.Ifindex)
		} else if r, ok := d.remotes[id]; ok {
			add("route %s via %s", p, remoteString(r))
		} else {
			add("route %s to missing nexthop", p)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// members renders a group's gateways, sorted: the order of a group's
// members is the FE's.
func (d *Datapath) members(ids []uint32) string {
	var gws []string
	for _, m := range ids {
		if nh, ok := d.nexthops[m]; ok {
			gws = append(gws, nh.Gateway.String())
		} else if r, ok := d.remotes[m]; ok {
			gws = append(gws, remoteString(r))
		} else {
			gws = append(gws, "missing")
		}
	}
	slices.Sort(gws)
	return strings.Join(gws, ",")
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compare)
	return out
}
