package lab

// The cluster lab (Options.Cluster): N FE "servers" joined by a full mesh
// of inter-FE links, each with a host of its own on subnets of its own.
// FE 1 keeps today's ports (hosts A and B, the peer); FE n (1 to N) has a
// port to-hN to its host NAME-hN (ClusterHost). The mesh veths carry
// inter-FE frames only: no IPv4 address, an MTU with room for the IFE
// header (MeshMTU), declared as inter_fe_links in each FE's config. The
// topology is drawn in docs/cluster.md, "The cluster lab".

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces/ife"
	"github.com/splitplane/splitplane/integration/harness"
)

// ClusterHost is FE n's own host in a cluster lab, in namespace NAME-hN
// behind the FE's port to-hN. Its link is 10.20.n.0/24 and fd00:20:n::/64;
// its site prefixes, on its loopback, are routed to it by static routes of
// the CE (next hop Addr, Addr6), so that every FE has a route whose egress
// is FE n (a subnet connected to FE n is no route of the FIB: the other FEs
// would not know it). Its default routes send from the site addresses.
type ClusterHost struct {
	FE                  int
	Namespace           string
	Port                string     // the FE's port towards it: "to-hN"
	Addr, Addr6         netip.Addr // on its link: 10.20.n.2, fd00:20:n::2
	Gateway, Gateway6   netip.Addr // the FE's end of the link: 10.20.n.1, fd00:20:n::1
	Site, Site6         netip.Prefix
	SiteAddr, SiteAddr6 netip.Addr // in Site, Site6, on its loopback: 10.30.n.10, fd00:30:n::10
}

// ClusterHost returns FE n's host (n from 1 to Options.Cluster).
func (o *Options) ClusterHost(n int) ClusterHost {
	b := byte(n)
	h := ClusterHost{
		FE:        n,
		Namespace: o.Namespace("h" + strconv.Itoa(n)),
		Port:      "to-h" + strconv.Itoa(n),
		Addr:      netip.AddrFrom4([4]byte{10, 20, b, 2}),
		Gateway:   netip.AddrFrom4([4]byte{10, 20, b, 1}),
		Site:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 30, b, 0}), 24),
		SiteAddr:  netip.AddrFrom4([4]byte{10, 30, b, 10}),
	}
	six := func(net uint16, host byte) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 0, byte(net >> 8), byte(net), 0, b, 15: host})
	}
	h.Addr6, h.Gateway6, h.SiteAddr6 = six(0x20, 2), six(0x20, 1), six(0x30, 0x10)
	h.Site6 = netip.PrefixFrom(six(0x30, 0), 64)
	return h
}

// MeshPort is the name of FE n's port towards FE peer: "ife<peer>".
func MeshPort(peer int) string { return "ife" + strconv.Itoa(peer) }

// MeshLinkName names the mesh link between FE i and FE j, i < j: "ife-i-j"
// (lab link ife-1-3 down).
func MeshLinkName(i, j int) string {
	i, j = min(i, j), max(i, j)
	return fmt.Sprintf("ife-%d-%d", i, j)
}

// ParseMeshLink reads a mesh link's name, "ife-I-J" (MeshLinkName).
func ParseMeshLink(name string) (i, j int, err error) {
	f := strings.Split(name, "-")
	if len(f) == 3 && f[0] == "ife" {
		i, err1 := strconv.Atoi(f[1])
		j, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && i >= 1 && j >= 1 && i != j && i <= MaxFEs && j <= MaxFEs {
			return min(i, j), max(i, j), nil
		}
	}
	return 0, 0, fmt.Errorf("mesh link %q: want ife-I-J, two different FEs from 1 to %d (ife-1-3)", name, MaxFEs)
}

// MeshMTU is the MTU of the mesh veths: an inter-FE frame carries the whole
// inner frame, its Ethernet header included, behind the metadata, so a link
// between FEs whose ports have the default MTU of 1500 needs 1500 plus the
// IFE overhead of what the datapath sends (egress port, egress FE, nexthop
// key, flow hash: 48 bytes, ife.LinkMTU, datapath.IFEOverhead), or the
// largest packets the hosts send would go to the ingress FE's kernel
// (pass_mtu) instead of across.
func MeshMTU() int {
	return ife.LinkMTU(1500, []ife.Meta{ife.EgressPort(0), ife.EgressFE(0), ife.NexthopKey(0), ife.FlowHash(0)})
}

// clusterLinks are FE n's links of its own in a cluster lab: to its host.
func (o *Options) clusterLinks(n int) []link {
	_, sfx := FEName(n)
	h := o.ClusterHost(n)
	return []link{{o.Namespace("rtr" + sfx), h.Port, pfx(h.Gateway, 24), pfx(h.Gateway6, 64),
		h.Namespace, "eth0", pfx(h.Addr, 24), pfx(h.Addr6, 64)}}
}

func pfx(a netip.Addr, bits int) string { return netip.PrefixFrom(a, bits).String() }

// meshPorts are FE n's ports to the other FEs, in FE order.
func (o *Options) meshPorts(n int) []string {
	var ps []string
	for m := 1; m <= o.Cluster; m++ {
		if m != n {
			ps = append(ps, MeshPort(m))
		}
	}
	return ps
}

// interFELinks is FE n's inter_fe_links setting.
func (o *Options) interFELinks(n int) string {
	var ls []string
	for m := 1; m <= o.Cluster; m++ {
		if m != n {
			l := fmt.Sprintf("{port: %s, peer_fe: %d", MeshPort(m), m)
			if o.MeshCapacityMbps > 0 {
				l += fmt.Sprintf(", capacity_mbps: %d", o.MeshCapacityMbps)
			}
			ls = append(ls, l+"}")
		}
	}
	return "inter_fe_links: [" + strings.Join(ls, ", ") + "]   # the mesh: a veth to each other FE\n" +
		"vlb: {mode: direct, max_link_load: 0.8}   # flows to an FE go direct until the link is 80% loaded, the rest through other FEs\n"
}

// clusterStatic is the CE's static routes of a cluster lab: each host's
// site prefixes through the host.
func (o *Options) clusterStatic() string {
	var b strings.Builder
	b.WriteString("static_routes:                  # each cluster host's site, behind its FE: every FE gets a route whose egress is that FE\n")
	for n := 1; n <= o.Cluster; n++ {
		h := o.ClusterHost(n)
		fmt.Fprintf(&b, "  - {prefix: %s, next_hops: [%s]}\n  - {prefix: %q, next_hops: [%q]}\n", h.Site, h.Addr, h.Site6, h.Addr6)
	}
	return b.String()
}

// upMesh links every pair of FE namespaces by a veth, FE i's end ifeJ and
// FE j's ifeI, with the mesh MTU, set up. No addresses: the links carry
// inter-FE frames, not IP (the kernel gives them link-local IPv6
// addresses, which nothing uses).
func (o *Options) upMesh(ctx context.Context) error {
	for i := 1; i <= o.Cluster; i++ {
		for j := i + 1; j <= o.Cluster; j++ {
			_, si := FEName(i)
			_, sj := FEName(j)
			a := harness.End{NS: o.Namespace("rtr" + si), Dev: MeshPort(j)}
			b := harness.End{NS: o.Namespace("rtr" + sj), Dev: MeshPort(i)}
			fmt.Fprintf(o.Out, "mesh link %s: %s/%s <-> %s/%s, mtu %d\n", MeshLinkName(i, j), a.NS, a.Dev, b.NS, b.Dev, MeshMTU())
			if err := harness.AddVeth(ctx, harness.Veth{A: a, B: b}); err != nil {
				return err
			}
			for _, e := range []harness.End{a, b} {
				if err := inNS(e.NS, "ip", "link", "set", e.Dev, "mtu", strconv.Itoa(MeshMTU()), "up"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// upClusterHosts gives each cluster host its site addresses and its
// default routes, which send from them, so that the lab's traffic crosses
// FEs through routes with a gateway (static routes to the sites); a host's
// link address is reached across FEs too, through the connected egress
// rows (TestClusterConnected).
func (o *Options) upClusterHosts() error {
	for n := 1; n <= o.Cluster; n++ {
		h := o.ClusterHost(n)
		for _, c := range [][]string{
			{"ip", "addr", "add", pfx(h.SiteAddr, 32), "dev", "lo"},
			{"ip", "-6", "addr", "add", pfx(h.SiteAddr6, 128), "dev", "lo"},
			{"ip", "route", "add", "default", "via", h.Gateway.String(), "src", h.SiteAddr.String()},
			{"ip", "-6", "route", "add", "default", "via", h.Gateway6.String(), "src", h.SiteAddr6.String()},
		} {
			if err := inNS(h.Namespace, c[0], c[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetMeshLink takes the mesh link between FE i and FE j down or up: FE i's
// end (its port ifeJ) goes administratively down, so FE i sees its port
// down and FE j's end loses its carrier, as when a cable is pulled out of
// FE i's side; up sets it up again. Both FEs report the change to the CE.
func SetMeshLink(o Options, i, j int, up bool) error {
	if err := o.defaults(); err != nil {
		return err
	}
	n := o.labFEs()
	if i < 1 || j < 1 || i > n || j > n || i == j {
		return fmt.Errorf("mesh link FE %d to FE %d: lab %q has FEs 1 to %d", i, j, o.Name, n)
	}
	_, si := FEName(i)
	ns, dev := o.Namespace("rtr"+si), MeshPort(j)
	if err := inNS(ns, "ip", "link", "show", dev); err != nil {
		return fmt.Errorf("lab %q has no mesh link %s (is it a cluster lab?): %w", o.Name, MeshLinkName(i, j), err)
	}
	state := "down"
	if up {
		state = "up"
	}
	fmt.Fprintf(o.Out, "mesh link %s: %s/%s %s\n", MeshLinkName(i, j), ns, dev, state)
	return inNS(ns, "ip", "link", "set", dev, state)
}

// meshReady reports why the CE's view of the mesh is not yet complete
// (every FE associated with its n-1 links, up, to the right peers), or nil.
func meshReady(st ce.Status, n int) error {
	if len(st.FEs) != n {
		return fmt.Errorf("%d of %d FEs associated with the CE", len(st.FEs), n)
	}
	for _, f := range st.FEs {
		up := 0
		for _, l := range f.InterFELinks {
			if l.Up && l.PeerAssociated && l.PortName == MeshPort(int(l.PeerFE)) {
				up++
			}
		}
		if up != n-1 {
			return fmt.Errorf("%s: %d of %d inter-FE links up (%+v)", f.ID, up, n-1, f.InterFELinks)
		}
	}
	return nil
}
