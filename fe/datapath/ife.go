//go:build linux

package datapath

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
)

// Inter-FE forwarding (bpf/ife.h): one router (NE) made of several FEs.
//
// Each FE has an ID (SetLocalFE), below MaxFEs. Some of its ports are
// inter-FE links, each declared with the peer FE it reaches directly and
// the peer's MAC on it (SetInterFELink): the declaration is the map from FE
// ID to link. A route whose egress lies behind another FE uses a remote
// nexthop (SetRemoteNexthop): the packet is routed here (checks, TTL or hop
// limit, checksum) and sent over the link to that FE inside an RFC 8013
// inter-FE frame (forces/ife) carrying the egress port, the egress FE, the
// NE-wide nexthop key and the flow hash. The egress FE maps the key to its
// own nexthop (SetNexthopKey) and sends the inner frame out of the egress
// port with that nexthop's MACs: no FIB lookup, no second TTL decrement.
//
// Two-phase Valiant load balancing (RouteBricks): a flow to FE k goes
// through an intermediate FE when hash(5-tuple) % SpillScale is below k's
// spill (SetSpill), or when the link to k is down (SetInterFELinkUp); the
// intermediate, chosen by the hash among the other FEs whose links are up,
// sends the frame on to k unchanged. The choice is per flow, so a flow's
// packets keep their order. Spill 0, the default, sends every flow direct
// while the direct link is up ("direct VLB" with no load).
//
// Counters: "ife_encap" (forwarded packets sent encapsulated to another
// FE), "ife_via" (of those, through an intermediate), "ife_decap"
// (forwarded packets that arrived encapsulated for this FE), "ife_transit"
// (IFE frames sent on as the intermediate), "pass_ife_no_link" (a remote
// nexthop with no link up to its FE nor an intermediate: passed
// unmodified), "pass_ife_headroom" (no room for the header),
// "pass_ife_no_nexthop" (an IFE frame whose key maps to no local nexthop:
// the inner frame goes to the kernel, as do those counted "pass_no_neigh",
// "pass_no_tx_port" and "pass_mtu" after decapsulation), "drop_ife_malformed"
// (an IFE frame on a link that does not parse or lacks the egress port,
// egress FE or nexthop key) and "drop_ife_no_link" (an IFE frame in transit
// without a link up to its FE), "ife_probe_reply" (probe requests of a
// peer FE answered, with XDP_TX: forces/ife's Probe, which proves this
// FE's datapath alive to the peer) and "ife_probe_rx" (probe replies
// passed to the kernel, unpoliced, for the agent's prober). An EtherType 0xED3E frame on a port that
// is no inter-FE link is not an IFE frame and goes to the kernel
// ("pass_not_ipv4"). With forward CPUs (SetForwardCPUs), a packet to a
// remote nexthop that arrives on another CPU is steered to a forward CPU,
// which encapsulates it ("to_fe_cpu"), as any packet to forward.

// Limits of inter-FE forwarding; they match bpf/maps.h.
const (
	MaxFEs         = 64                      // FE IDs are 1 .. MaxFEs-1
	MaxNexthopKeys = ConnectedKeyBase + 4096 // NE nexthop keys are 0 .. MaxNexthopKeys-1
	// ConnectedKeyBase splits the key space: the keys below it are the
	// CE's nexthop rows', those from it up its connected egress rows'
	// (ConnectedKeyBase + row, fe/connremote.go).
	ConnectedKeyBase = 65536
	// SpillScale is the hash range the spill share is taken from: a flow
	// goes through an intermediate when hash % SpillScale < spill.
	SpillScale = 1024
	// IFEOverhead is what the program's encapsulation adds to a frame:
	// outer Ethernet header, metadata length and four 32-bit TLVs (egress
	// port, egress FE, nexthop key, flow hash), as forces/ife.Overhead
	// counts it. An inter-FE link needs the ports' MTU plus this.
	IFEOverhead = 14 + 2 + 4*8
)

// gwRemote is GW_REMOTE of bpf/maps.h.
const gwRemote = 1

// remoteIfindex marks a remote nexthop's slot used (ifindex non-zero);
// it is no valid ifindex, so nothing is ever sent to it.
const remoteIfindex = 0xffffffff

// nhKeyValid is NH_KEY_VALID of bpf/maps.h.
const nhKeyValid = 1 << 31

// RemoteNexthop is a nexthop behind another FE of the router.
type RemoteNexthop struct {
	// FE is the egress FE's ID, 1 .. MaxFEs-1, not this FE's.
	FE uint32
	// Key is the NE-wide nexthop key (the CE's nexthop row ID), which the
	// egress FE maps to its own nexthop with SetNexthopKey.
	Key uint32
	// Port is the egress port on the egress FE, in its own numbering,
	// carried as the egress port metadatum.
	Port uint32
}

// InterFELink describes how this FE reaches a peer FE directly.
type InterFELink struct {
	Ifindex int
	PeerMAC net.HardwareAddr
	Up      bool
	// SpillPermille is the share of flows to the peer sent through an
	// intermediate FE, in thousandths.
	SpillPermille int
}

// ifeState is the Go side's copy of mesh_map and fe_links; d.ifeMu guards it.
type ifeState struct {
	self  uint32
	links map[uint32]*InterFELink
}

func checkFE(field string, id uint32) error {
	if id == 0 || id >= MaxFEs {
		return fmt.Errorf("%s %d out of range [1, %d): %w", field, id, MaxFEs, ErrInvalid)
	}
	return nil
}

// SetLocalFE sets this FE's ID, which IFE frames for it carry as their
// egress FE. It must be set before the links, and differ from every peer.
func (d *Datapath) SetLocalFE(id uint32) error {
	if err := checkFE("local FE", id); err != nil {
		return fmt.Errorf("set local FE: %w", err)
	}
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	if _, ok := d.ife.links[id]; ok {
		return fmt.Errorf("set local FE %d: an inter-FE link to FE %d exists: %w", id, id, ErrInvalid)
	}
	d.ife.self = id
	return d.writeMesh()
}

// SetInterFELink declares port ifindex, which must be attached, the link
// that reaches peer FE peerFE directly, whose MAC on the link is peerMAC.
// It replaces an earlier link to peerFE; the link starts up, with spill 0.
// One port may reach several peers (a switch between the FEs).
func (d *Datapath) SetInterFELink(ifindex int, peerFE uint32, peerMAC net.HardwareAddr) error {
	if err := checkIfindex(ifindex); err != nil {
		return fmt.Errorf("set inter-FE link: %w", err)
	}
	if err := checkFE("peer FE", peerFE); err != nil {
		return fmt.Errorf("set inter-FE link %s: %w", ifName(ifindex), err)
	}
	if err := checkMAC("peer MAC", peerMAC); err != nil {
		return fmt.Errorf("set inter-FE link %s to FE %d: %w", ifName(ifindex), peerFE, err)
	}
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	if d.ife.self == 0 {
		return fmt.Errorf("set inter-FE link %s to FE %d: local FE not set (SetLocalFE): %w", ifName(ifindex), peerFE, ErrInvalid)
	}
	if peerFE == d.ife.self {
		return fmt.Errorf("set inter-FE link %s: peer FE %d is this FE: %w", ifName(ifindex), peerFE, ErrInvalid)
	}
	d.mu.Lock()
	slot, ok := d.slots[ifindex]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("set inter-FE link %s to FE %d: %w", ifName(ifindex), peerFE, ErrNotAttached)
	}
	old := d.ife.links[peerFE]
	l := &InterFELink{Ifindex: ifindex, PeerMAC: slices.Clone(peerMAC), Up: true}
	if old != nil {
		l.SpillPermille = old.SpillPermille
	}
	if err := d.objs.IfePorts.Put(slot, uint32(1)); err != nil {
		return fmt.Errorf("set inter-FE link %s to FE %d: %w", ifName(ifindex), peerFE, err)
	}
	d.ife.links[peerFE] = l
	if old != nil && old.Ifindex != ifindex {
		if err := d.unmarkPort(old.Ifindex); err != nil {
			return fmt.Errorf("set inter-FE link %s to FE %d: %w", ifName(ifindex), peerFE, err)
		}
	}
	return d.writeMesh()
}

// DeleteInterFELink removes the link to peer FE peerFE; flows to it then
// go through an intermediate. Its port stops being an inter-FE link when
// it reaches no other peer. A missing link gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteInterFELink(peerFE uint32) error {
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	l, ok := d.ife.links[peerFE]
	if !ok {
		return fmt.Errorf("delete inter-FE link to FE %d: %w", peerFE, ErrNotFound)
	}
	delete(d.ife.links, peerFE)
	if err := d.writeMesh(); err != nil {
		return fmt.Errorf("delete inter-FE link to FE %d: %w", peerFE, err)
	}
	if err := d.unmarkPort(l.Ifindex); err != nil {
		return fmt.Errorf("delete inter-FE link to FE %d: %w", peerFE, err)
	}
	return nil
}

// SetInterFELinkUp marks the link to peerFE up or down (the port's or the
// peer FE's state). Flows to a peer whose link is down go through an
// intermediate FE; no flow picks a peer whose link is down as one.
func (d *Datapath) SetInterFELinkUp(peerFE uint32, up bool) error {
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	l, ok := d.ife.links[peerFE]
	if !ok {
		return fmt.Errorf("set inter-FE link to FE %d up=%t: %w", peerFE, up, ErrNotFound)
	}
	l.Up = up
	return d.writeMesh()
}

// SetSpill sets the share of the flows to peer FE peerFE, in thousandths
// (0 to 1000), that go through an intermediate FE while the direct link is
// up: 0 sends all direct, 1000 all through intermediates (classic VLB).
func (d *Datapath) SetSpill(peerFE uint32, permille int) error {
	if permille < 0 || permille > 1000 {
		return fmt.Errorf("set spill to FE %d: permille %d out of range [0, 1000]: %w", peerFE, permille, ErrInvalid)
	}
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	l, ok := d.ife.links[peerFE]
	if !ok {
		return fmt.Errorf("set spill to FE %d: %w", peerFE, ErrNotFound)
	}
	l.SpillPermille = permille
	return d.writeMesh()
}

// InterFELinks returns the declared links by peer FE ID.
func (d *Datapath) InterFELinks() map[uint32]InterFELink {
	d.ifeMu.Lock()
	defer d.ifeMu.Unlock()
	m := make(map[uint32]InterFELink, len(d.ife.links))
	for fe, l := range d.ife.links {
		c := *l
		c.PeerMAC = slices.Clone(l.PeerMAC)
		m[fe] = c
	}
	return m
}

// spillThreshold converts thousandths to the program's 1/SpillScale,
// rounding to nearest: 1000 is every flow.
func spillThreshold(permille int) uint16 {
	return uint16((permille*SpillScale + 500) / 1000)
}

// writeMesh writes fe_links and mesh_map from d.ife: each link, and the
// list of the FEs whose links are up with their positions. d.ifeMu is held.
func (d *Datapath) writeMesh() error {
	var m xdpMesh
	m.SelfFe = d.ife.self
	ids := make([]uint32, 0, len(d.ife.links))
	for fe := range d.ife.links {
		ids = append(ids, fe)
	}
	slices.Sort(ids)
	pos := map[uint32]uint8{}
	for _, fe := range ids {
		if d.ife.links[fe].Up {
			pos[fe] = uint8(m.Count)
			m.Up[m.Count] = uint8(fe)
			m.Count++
		}
	}
	for fe := uint32(1); fe < MaxFEs; fe++ {
		var v xdpFeLink
		if l, ok := d.ife.links[fe]; ok {
			v.Ifindex = uint32(l.Ifindex)
			copy(v.PeerMac[:], l.PeerMAC)
			if l.Up {
				v.Up = 1
			}
			v.Pos = pos[fe]
			v.Spill = spillThreshold(l.SpillPermille)
		}
		if err := d.objs.FeLinks.Put(fe, &v); err != nil {
			return fmt.Errorf("write link to FE %d: %w", fe, err)
		}
	}
	if err := d.objs.MeshMap.Put(uint32(0), &m); err != nil {
		return fmt.Errorf("write mesh: %w", err)
	}
	return nil
}

// unmarkPort clears the inter-FE flag of port ifindex unless a link still
// uses it. d.ifeMu is held.
func (d *Datapath) unmarkPort(ifindex int) error {
	for _, l := range d.ife.links {
		if l.Ifindex == ifindex {
			return nil
		}
	}
	d.mu.Lock()
	slot, ok := d.slots[ifindex]
	d.mu.Unlock()
	if !ok {
		return nil // detached: addPortSlot clears the flag of a reused slot
	}
	return d.objs.IfePorts.Put(slot, uint32(0))
}

// SetRemoteNexthop stores nexthop id as one behind FE r.FE: routes to it
// send their packets there over the inter-FE links, encapsulated.
func (d *Datapath) SetRemoteNexthop(id uint32, r RemoteNexthop) error {
	if err := checkNexthopID(id); err != nil {
		return fmt.Errorf("set remote nexthop: %w", err)
	}
	if err := checkFE("egress FE", r.FE); err != nil {
		return fmt.Errorf("set remote nexthop %d: %w", id, err)
	}
	if r.Key >= MaxNexthopKeys {
		return fmt.Errorf("set remote nexthop %d: nexthop key %d out of range [0, %d): %w", id, r.Key, MaxNexthopKeys, ErrInvalid)
	}
	d.ifeMu.Lock()
	self := d.ife.self
	d.ifeMu.Unlock()
	if r.FE == self {
		return fmt.Errorf("set remote nexthop %d: egress FE %d is this FE: %w", id, r.FE, ErrInvalid)
	}
	v := xdpNexthop{Ifindex: remoteIfindex, GwFamily: gwRemote}
	binary.NativeEndian.PutUint32(v.Gateway6[0:], r.FE)
	binary.NativeEndian.PutUint32(v.Gateway6[4:], r.Key)
	binary.NativeEndian.PutUint32(v.Gateway6[8:], r.Port)
	if err := d.putNexthop(id, v, gwRef{}); err != nil {
		return fmt.Errorf("set remote nexthop %d: %w", id, err)
	}
	return nil
}

// SetNexthopKey maps the NE-wide nexthop key to this FE's nexthop localID:
// IFE frames for this FE carrying key leave by that nexthop.
func (d *Datapath) SetNexthopKey(key, localID uint32) error {
	if key >= MaxNexthopKeys {
		return fmt.Errorf("set nexthop key: key %d out of range [0, %d): %w", key, MaxNexthopKeys, ErrInvalid)
	}
	if err := checkNexthopID(localID); err != nil {
		return fmt.Errorf("set nexthop key %d: %w", key, err)
	}
	if err := d.objs.NhKeys.Put(key, nhKeyValid|localID); err != nil {
		return fmt.Errorf("set nexthop key %d: %w", key, err)
	}
	return nil
}

// DeleteNexthopKey forgets key; an unmapped key gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteNexthopKey(key uint32) error {
	if key >= MaxNexthopKeys {
		return fmt.Errorf("delete nexthop key: key %d out of range [0, %d): %w", key, MaxNexthopKeys, ErrInvalid)
	}
	var v uint32
	if err := d.objs.NhKeys.Lookup(key, &v); err != nil {
		return fmt.Errorf("delete nexthop key %d: %w", key, err)
	}
	if v&nhKeyValid == 0 {
		return fmt.Errorf("delete nexthop key %d: %w", key, ErrNotFound)
	}
	if err := d.objs.NhKeys.Put(key, uint32(0)); err != nil {
		return fmt.Errorf("delete nexthop key %d: %w", key, err)
	}
	return nil
}
