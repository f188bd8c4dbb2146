package bench

import (
	"net/netip"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/integration/bench/gen"
)

// Forward's IPv6 figures: the datapath with a full-shaped IPv6 table
// (fibbench.Routes6Full), against the bare redirect of the same frames.
const (
	MetricForward6PPSFull   = "forward6_pps_full"
	MetricRedirect6LimitPPS = "redirect6_limit_pps"
)

// forward6Routes is the IPv6 table Forward measures.
func forward6Routes(seed int64) []datapath.Route {
	return fibbench.Routes6Full(fibbench.Full6Routes, seed)
}

// fwdAddr6 is the IPv6 address of the port of a port role (unique local,
// inside the benchmark's namespaces only).
func fwdAddr6(role int) netip.Addr {
	return [nPorts]netip.Addr{
		roleGen:    netip.MustParseAddr("fd00:201:1::2"),
		roleRtrIn:  netip.MustParseAddr("fd00:201:1::1"),
		roleRtrOut: netip.MustParseAddr("fd00:201:2::1"),
		roleSink:   netip.MustParseAddr("fd00:201:2::2"),
	}[role]
}

// gen6Header is the generator's header of the IPv6 mode.
func gen6Header() gen.Header {
	return gen.Header{
		SrcMAC: fwdMAC(roleGen), DstMAC: fwdMAC(roleRtrIn), Src: fwdAddr6(roleGen),
		SrcPort: 40000, DstPort: 9, TTL: 64,
	}
}

// loadDatapath6 loads an FE datapath with the IPv6 routes, their nexthops
// 1 to fibbench.EdgeUpstreams all via the sink's IPv6 address (resolved),
// the router's own IPv6 addresses local, and a group pool room for the
// table; attached only while its mode is measured.
func (t *fwdTopo) loadDatapath6(routes []datapath.Route) (_ *datapath.Datapath, err error) {
	d, err := datapath.LoadSized(datapath.Sizes{FIB6Groups: 2*len(routes) + 4096})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	out := t.ifindex[roleRtrOut]
	for id := uint32(1); id <= fibbench.EdgeUpstreams; id++ {
		if err := d.SetNexthop(id, datapath.Nexthop{Ifindex: out, Gateway: fwdAddr6(roleSink), SrcMAC: fwdMAC(roleRtrOut)}); err != nil {
			return nil, err
		}
	}
	if err := d.SetNeighbor(out, fwdAddr6(roleSink), fwdMAC(roleSink)); err != nil {
		return nil, err
	}
	for _, p := range []int{roleRtrIn, roleRtrOut} {
		if err := d.SetLocalAddr(fwdAddr6(p)); err != nil {
			return nil, err
		}
	}
	if err := d.SetRoutes(routes); err != nil {
		return nil, err
	}
	return d, nil
}

// destinations6 returns gen.MaxDsts addresses (seeded), each a random
// address inside a random one of the routes' prefixes.
func destinations6(routes []datapath.Route, seed int64) ([]netip.Addr, error) {
	raw, err := fibbench.InsideDestinations6(routes, gen.MaxDsts, false, seed)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(raw))
	for i, a := range raw {
		out[i] = netip.AddrFrom16(a)
	}
	return out, nil
}
