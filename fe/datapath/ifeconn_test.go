//go:build linux

package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// Connected subnets across FEs: keys from ConnectedKeyBase up name a
// port's connected nexthop (no gateway). The ingress FE encapsulates to a
// remote nexthop with such a key; the egress FE sends the inner frame to
// the neighbour that is the packet's own destination, and passes it to
// its kernel (which resolves it) when that neighbour is unknown.
func TestIFEConnectedKey(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		const connNH, remoteConnNH = 30, 31
		key := uint32(MaxNexthopKeys - 1) // the last connected row's
		must(t, f.d.SetNexthop(connNH, Nexthop{Ifindex: f.out, SrcMAC: macSrc1}))
		must(t, f.d.SetNexthopKey(key, connNH))
		must(t, f.d.SetNeighbor(f.out, netip.MustParseAddr("192.0.2.9"), macNeigh2))
		must(t, f.d.SetNeighbor(f.out, netip.MustParseAddr("2001:db8:20::9"), macNeigh2))

		// Egress side: the frame leaves the connected port to the host.
		for _, inner := range [][]byte{udpFrame("192.0.2.9", 63), udp6Frame("2001:db8:20::9", 63)} {
			before := counters(t, f.d)
			ret, out := runIn(t, f.d, f.link[2], ifeFrame(t, 2, forFE(ifeSelf, key), inner))
			if ret != xdpRedirect {
				t.Fatalf("returned %d, want XDP_REDIRECT; counters %s", ret, fmtDelta(before, counters(t, f.d)))
			}
			checkEthernet(t, inner, out[:len(inner)], macNeigh2, macSrc1)
			if !bytes.Equal(out[12:len(inner)], inner[12:]) {
				t.Errorf("inner frame changed past the MACs")
			}
			if after := counters(t, f.d); after["ife_decap"]-before["ife_decap"] != 1 || after["forwarded"]-before["forwarded"] != 1 {
				t.Errorf("counters moved %s, want ife_decap and forwarded 1", fmtDelta(before, after))
			}
		}
		// A host whose MAC is not known yet: the kernel's, to resolve.
		before := counters(t, f.d)
		if ret, _ := runIn(t, f.d, f.link[2], ifeFrame(t, 2, forFE(ifeSelf, key), udpFrame("192.0.2.10", 63))); ret != xdpPass {
			t.Fatalf("unknown host: returned %d, want XDP_PASS", ret)
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "pass_no_neigh": 1})

		// Ingress side: a connected route of another FE is a remote
		// nexthop whose key is the row's.
		must(t, f.d.SetRemoteNexthop(remoteConnNH, RemoteNexthop{FE: ifeRemoteFE, Key: key, Port: ifePort}))
		must(t, f.d.SetRoute(netip.MustParsePrefix("10.20.3.0/24"), remoteConnNH))
		in := udpFrame("10.20.3.2", 64)
		ret, out := runIn(t, f.d, f.in, in)
		if ret != xdpRedirect {
			t.Fatalf("ingress: returned %d, want XDP_REDIRECT", ret)
		}
		decodeIFE(t, out[:len(in)+IFEOverhead], macPeerF[3], macLink[3], ifePort, ifeRemoteFE, key, flowHash(in))
		if err := f.d.SetNexthopKey(MaxNexthopKeys, connNH); err == nil {
			t.Error("key MaxNexthopKeys accepted")
		}
	})
}
