package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// The cluster topology of Cluster: a generator, three FEs in a full mesh
// and a sink, each in its namespace, joined by veth pairs.
//
//	gen0 -- in0 [FE 1] out0 -- sink1
//	          ife2 / \ ife3
//	        ife1  /   \  ife1
//	       [FE 2] ----- [FE 3] out0 -- sink3
//	            ife3   ife2
//
// FE 1 forwards the local prefix out of out0 to sink1, and the cross
// prefix to FE 3 (a remote nexthop), which sends it out of its out0 to
// sink3; FE 2 is the intermediate of two-phase VLB.
const clusterFEs = 3

// Namespace roles of the cluster topology: the FEs are 1..clusterFEs.
const (
	cnsGen  = 0
	cnsSink = clusterFEs + 1
	cnsN    = clusterFEs + 2
)

// The key of the cross prefix's nexthop: the NE-wide nexthop key FE 1's
// remote nexthop carries and FE 3 maps to its own nexthop.
const clusterNexthopKey = 5

// Nexthop IDs in the FEs' datapaths.
const (
	clusterNHLocal  = 1 // FE 1: out0 to sink1; FE 3: out0 to sink3
	clusterNHRemote = 2 // FE 1: the remote nexthop behind FE 3
)

// The prefixes the generator sends to: the local one leaves FE 1 by its own
// port, the cross one by FE 3's.
var (
	clusterLocalPrefix = netip.MustParsePrefix("10.211.0.0/16")
	clusterCrossPrefix = netip.MustParsePrefix("10.213.0.0/16")
)

// cport is a port of the cluster topology: its namespace role and name.
type cport struct {
	ns  int
	dev string
}

var (
	cpGen    = cport{cnsGen, "gen0"}
	cpIn     = cport{1, "in0"}
	cpOut1   = cport{1, "out0"}
	cpSink1  = cport{cnsSink, "sink1"}
	cpOut3   = cport{clusterFEs, "out0"}
	cpSink3  = cport{cnsSink, "sink3"}
	cpSinkFE = map[int]cport{1: cpSink1, clusterFEs: cpSink3}
)

// meshPort is FE fe's end of the link to FE peer.
func meshPort(fe, peer int) cport { return cport{fe, "ife" + strconv.Itoa(peer)} }

// mac is the port's MAC: 02:00:00:5c:NS:N, N 0x10 + the peer FE for a
// mesh port, else the digit ending its name plus 1 for out0 (beside in0).
func (p cport) mac() net.HardwareAddr {
	n := p.dev[len(p.dev)-1] - '0'
	switch {
	case strings.HasPrefix(p.dev, "ife"):
		n += 0x10
	case p.dev == "out0":
		n++
	}
	return net.HardwareAddr{0x02, 0, 0, 0x5c, byte(p.ns), n}
}

// Addresses of the external ports (the mesh links have none).
var clusterAddr = map[cport]netip.Addr{
	cpGen:   netip.MustParseAddr("10.202.0.2"),
	cpIn:    netip.MustParseAddr("10.202.0.1"),
	cpOut1:  netip.MustParseAddr("10.202.1.1"),
	cpSink1: netip.MustParseAddr("10.202.1.2"),
	cpOut3:  netip.MustParseAddr("10.202.3.1"),
	cpSink3: netip.MustParseAddr("10.202.3.2"),
}

// clusterTopo is the topology of one Cluster call. It reuses fwdTopo for
// the generator's measurement and the teardown: the fwdTopo's gen role is
// the generator, its router role FE 1, its sink role the sink.
type clusterTopo struct {
	*fwdTopo
	ns      [cnsN]string
	ifindex map[cport]int // in the port's namespace
	// fe are the FEs' datapaths, by FE ID (fe[0] unused).
	fe [clusterFEs + 1]*datapath.Datapath
}

func newClusterTopo(base string) *clusterTopo {
	c := &clusterTopo{fwdTopo: &fwdTopo{}, ifindex: map[cport]int{}}
	prefix := harness.FreePrefix(base)
	for i := range cnsN {
		switch i {
		case cnsGen:
			c.ns[i] = prefix + "-gen"
		case cnsSink:
			c.ns[i] = prefix + "-sink"
		default:
			c.ns[i] = prefix + "-fe" + strconv.Itoa(i)
		}
	}
	c.fwdTopo.ns = [3]string{roleGen: c.ns[cnsGen], roleRtr: c.ns[1], roleSink: c.ns[cnsSink]}
	return c
}

// up creates namespaces, veths (mesh links with the MTU inter-FE frames
// need), addresses and static neighbours, and resolves the ifindexes.
func (c *clusterTopo) up(ctx context.Context) error {
	for _, ns := range c.ns {
		if err := harness.AddNamespace(ctx, ns); err != nil {
			return err
		}
		c.created = append(c.created, ns)
	}
	end := func(p cport) harness.End {
		e := harness.End{NS: c.ns[p.ns], Dev: p.dev, MAC: p.mac()}
		if a, ok := clusterAddr[p]; ok {
			e.Addrs = []netip.Prefix{netip.PrefixFrom(a, 24)}
		}
		return e
	}
	pairs := [][2]cport{{cpGen, cpIn}, {cpOut1, cpSink1}, {cpOut3, cpSink3}}
	for i := 1; i <= clusterFEs; i++ {
		for j := i + 1; j <= clusterFEs; j++ {
			pairs = append(pairs, [2]cport{meshPort(i, j), meshPort(j, i)})
		}
	}
	meshMTU := strconv.Itoa(1500 + datapath.IFEOverhead)
	for _, p := range pairs {
		if err := harness.AddVeth(ctx, harness.Veth{A: end(p[0]), B: end(p[1])}); err != nil {
			return err
		}
		if _, ok := clusterAddr[p[0]]; ok {
			continue
		}
		for _, e := range p {
			if err := harness.Run(ctx, "ip", "-n", c.ns[e.ns], "link", "set", e.dev, "mtu", meshMTU, "up"); err != nil {
				return err
			}
		}
	}
	peers := [][2]cport{{cpGen, cpIn}, {cpIn, cpGen}, {cpOut1, cpSink1}, {cpSink1, cpOut1}, {cpOut3, cpSink3}, {cpSink3, cpOut3}}
	for _, p := range peers {
		err := harness.Run(ctx, "ip", "-n", c.ns[p[0].ns], "neigh", "replace", clusterAddr[p[1]].String(),
			"lladdr", p[1].mac().String(), "dev", p[0].dev, "nud", "permanent")
		if err != nil {
			return err
		}
	}
	for _, ns := range c.ns {
		if err := harness.NoIPv6(ctx, ns); err != nil {
			return err
		}
	}
	// The generator's live frames enter in0 only with its NAPI on (the
	// datapath's program turns it on too; GRO keeps it on between).
	if err := harness.Exec(ctx, c.ns[1], "ethtool", "-K", cpIn.dev, "gro", "on"); err != nil {
		return err
	}
	for _, p := range pairs {
		for _, e := range p {
			err := c.nsRun(e.ns, func() error {
				ifi, err := net.InterfaceByName(e.dev)
				if err != nil {
					return err
				}
				c.ifindex[e] = ifi.Index
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	c.fwdTopo.ifindex[roleGen] = c.ifindex[cpGen]
	return nil
}

// nsRun runs f on an OS thread in the namespace of role ns.
func (c *clusterTopo) nsRun(ns int, f func() error) error {
	return nsthread.Run(c.ns[ns], f)
}

// program loads one datapath per FE and programs it through the datapath
// API as the FE agent does: attach the ports, the local FE and its links
// with the peers' MACs, FE 1's local and remote nexthops and routes, FE 3's
// local nexthop and the key that maps to it.
func (c *clusterTopo) program() error {
	for fe := 1; fe <= clusterFEs; fe++ {
		d, err := datapath.Load()
		if err != nil {
			return fmt.Errorf("FE %d: %w", fe, err)
		}
		c.fe[fe] = d
		c.closers = append(c.closers, d.Close)
		ports := []cport{}
		switch fe {
		case 1:
			ports = append(ports, cpIn, cpOut1)
		case clusterFEs:
			ports = append(ports, cpOut3)
		}
		for peer := 1; peer <= clusterFEs; peer++ {
			if peer != fe {
				ports = append(ports, meshPort(fe, peer))
			}
		}
		err = c.nsRun(fe, func() error {
			for _, p := range ports {
				if err := d.Attach(c.ifindex[p], datapath.ModeNative); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("FE %d: %w", fe, err)
		}
		if err := d.SetLocalFE(uint32(fe)); err != nil {
			return fmt.Errorf("FE %d: %w", fe, err)
		}
		for peer := 1; peer <= clusterFEs; peer++ {
			if peer == fe {
				continue
			}
			if err := d.SetInterFELink(c.ifindex[meshPort(fe, peer)], uint32(peer), meshPort(peer, fe).mac()); err != nil {
				return fmt.Errorf("FE %d: %w", fe, err)
			}
		}
		if sink, ok := cpSinkFE[fe]; ok {
			out := cpOut1
			if fe == clusterFEs {
				out = cpOut3
			}
			nh := datapath.Nexthop{Ifindex: c.ifindex[out], Gateway: clusterAddr[sink], SrcMAC: out.mac()}
			if err := d.SetNexthop(clusterNHLocal, nh); err != nil {
				return fmt.Errorf("FE %d: %w", fe, err)
			}
			if err := d.SetNeighbor(c.ifindex[out], clusterAddr[sink], sink.mac()); err != nil {
				return fmt.Errorf("FE %d: %w", fe, err)
			}
		}
	}
	fe1, fe3 := c.fe[1], c.fe[clusterFEs]
	if err := fe1.SetNeighbor(c.ifindex[cpIn], clusterAddr[cpGen], cpGen.mac()); err != nil {
		return fmt.Errorf("FE 1: %w", err)
	}
	remote := datapath.RemoteNexthop{FE: clusterFEs, Key: clusterNexthopKey, Port: uint32(c.ifindex[cpOut3])}
	if err := fe1.SetRemoteNexthop(clusterNHRemote, remote); err != nil {
		return fmt.Errorf("FE 1: %w", err)
	}
	err := fe1.SetRoutes([]datapath.Route{
		{Prefix: clusterLocalPrefix, Nexthop: clusterNHLocal},
		{Prefix: clusterCrossPrefix, Nexthop: clusterNHRemote},
	})
	if err != nil {
		return fmt.Errorf("FE 1: %w", err)
	}
	if err := fe3.SetNexthopKey(clusterNexthopKey, clusterNHLocal); err != nil {
		return fmt.Errorf("FE %d: %w", clusterFEs, err)
	}
	return nil
}

// setLink sets the link between FE 1 and FE 3 up or down on both ends, as
// the FEs do when its port goes down or comes back.
func (c *clusterTopo) setLink(up bool) error {
	if err := c.fe[1].SetInterFELinkUp(clusterFEs, up); err != nil {
		return fmt.Errorf("FE 1: %w", err)
	}
	if err := c.fe[clusterFEs].SetInterFELinkUp(1, up); err != nil {
		return fmt.Errorf("FE %d: %w", clusterFEs, err)
	}
	return nil
}

// counters reads every FE's counters, by FE ID.
func (c *clusterTopo) counters() ([clusterFEs + 1]datapath.Counters, error) {
	var out [clusterFEs + 1]datapath.Counters
	for fe := 1; fe <= clusterFEs; fe++ {
		n, err := c.fe[fe].Counters()
		if err != nil {
			return out, fmt.Errorf("FE %d: %w", fe, err)
		}
		out[fe] = n
	}
	return out, nil
}
