package fe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

// lookupPorts finds every configured port, before anything is loaded, so a
// wrong name is reported first and changes nothing.
func (a *Agent) lookupPorts() ([]netlink.Link, error) {
	links := make([]netlink.Link, len(a.cfg.Ports))
	for i, name := range a.cfg.Ports {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("ports[%d] %q: no such interface: %w", i, name, err)
		}
		if len(l.Attrs().HardwareAddr) != 6 {
			return nil, fmt.Errorf("ports[%d] %q: not an Ethernet interface", i, name)
		}
		links[i] = l
	}
	return links, nil
}

// portSetup is what setupPorts found and programmed, for the owner of the
// agent's state to take in.
type portSetup struct {
	ports      []*port
	connected  map[prefix.V4]uint32
	connected6 map[netip.Prefix]uint32
}

// install records the ports and their connected routes in a; called by the
// owner of a's state.
func (ps *portSetup) install(a *Agent) {
	for _, p := range ps.ports {
		a.ports[p.Ifindex] = p
	}
	for p, id := range ps.connected {
		a.prog.connected[p] = id
	}
	for p, id := range ps.connected6 {
		a.prog.connected6[p] = id
	}
}

// setupPorts attaches XDP to every port and programs into dp what the FE
// knows by itself: its own addresses (for-us traffic goes to the kernel) and
// the connected routes of its ports. It runs before the datapath is shared,
// and reports what it did for install.
func (a *Agent) setupPorts(dp Datapath, links []netlink.Link) (*portSetup, error) {
	ps := &portSetup{connected: map[prefix.V4]uint32{}, connected6: map[netip.Prefix]uint32{}}
	mode, _ := a.cfg.mode()
	for i, l := range links {
		name := a.cfg.Ports[i]
		attrs := l.Attrs()
		if attrs.Flags&net.FlagUp == 0 {
			if err := netlink.LinkSetUp(l); err != nil {
				return nil, fmt.Errorf("ports[%d] %q: set up: %w", i, name, err)
			}
		}
		portMode := mode
		err := dp.Attach(attrs.Index, mode)
		if err != nil && mode == datapath.ModeNative {
			// The driver may lack native XDP: generic mode works everywhere,
			// about three times slower.
			if gerr := dp.Attach(attrs.Index, datapath.ModeGeneric); gerr == nil {
				a.log.Warn("fe: native XDP not available, using generic mode (slower)", "port", name, "driver_error", err)
				portMode, err = datapath.ModeGeneric, nil
			}
		}
		if errors.Is(err, unix.EBUSY) {
			// The kernel allows one XDP program per port (without
			// multi-program dispatch): another FE, or another program,
			// drives this one.
			prog := "an XDP program"
			if l, lerr := netlink.LinkByIndex(attrs.Index); lerr == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.ProgId != 0 {
				prog = fmt.Sprintf("XDP program %d", l.Attrs().Xdp.ProgId)
			}
			return nil, fmt.Errorf("ports[%d] %q: %s is already attached to it (another FE, or another program, drives this port; 'ip link set dev %s xdp off' detaches it): %w",
				i, name, prog, name, err)
		}
		if err != nil {
			return nil, fmt.Errorf("ports[%d] %q: attach XDP (%s): %w", i, name, mode, err)
		}
		up := attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown
		p := &port{Name: name, Ifindex: attrs.Index, MAC: attrs.HardwareAddr.String(), Mode: portMode.String(), Up: up, mac: attrs.HardwareAddr, mtu: attrs.MTU, rxQueues: attrs.NumRxQueues}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("ports[%d] %q: list addresses: %w", i, name, err)
		}
		localID := uint32(forces.MaxNexthopID + 1 + i)
		if err := dp.SetNexthop(localID, datapath.Nexthop{Ifindex: attrs.Index, SrcMAC: attrs.HardwareAddr}); err != nil {
			return nil, fmt.Errorf("ports[%d] %q: connected nexthop: %w", i, name, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			if !ok || ip.IsLinkLocalUnicast() {
				continue // link-local traffic always goes to the kernel
			}
			ip = ip.Unmap()
			ones, _ := ad.Mask.Size()
			pfx := netip.PrefixFrom(ip, ones)
			p.Addrs = append(p.Addrs, pfx)
			if err := dp.SetLocalAddr(ip); err != nil {
				return nil, err
			}
			if err := dp.SetRoute(pfx.Masked(), localID); err != nil {
				return nil, err
			}
			if ip.Is4() {
				ps.connected[prefix.FromV4(pfx)] = localID
			} else {
				ps.connected6[pfx.Masked()] = localID
			}
		}
		ps.ports = append(ps.ports, p)
		a.log.Info("fe: port ready", "port", name, "ifindex", attrs.Index, "xdp", mode.String(), "addresses", p.Addrs)
	}
	return ps, nil
}
