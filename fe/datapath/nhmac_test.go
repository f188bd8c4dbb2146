//go:build linux

package datapath

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
)

// TestNexthopMAC: a nexthop via a gateway forwards with the MAC it holds
// itself, which follows the neighbour's changes; the neighbour hash is not
// read on the way.
func TestNexthopMAC(t *testing.T) {
	d := fibFixture(t, loadOptions{}, 2)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	gw := netip.MustParseAddr("10.0.0.1")
	if err := d.SetRoutes([]Route{{netip.MustParsePrefix("30.0.0.0/8"), 1}}); err != nil {
		t.Fatal(err)
	}
	frame := udpFrame("30.1.2.3", 64)
	dstMAC := func(what string) net.HardwareAddr {
		t.Helper()
		ret, out := run(t, d, frame)
		if ret != xdpRedirect {
			t.Fatalf("%s: action %d, want a redirect", what, ret)
		}
		return net.HardwareAddr(out[0:6])
	}
	if got := dstMAC("set"); !bytes.Equal(got, macNeigh1) {
		t.Fatalf("forwarded to %s, want the neighbour's %s", got, macNeigh1)
	}
	// Behind the datapath's back the neighbour entry goes: the nexthop's
	// copy still forwards.
	key, _ := neighKey(lo.Index, gw)
	if err := d.objs.Neighbors.Delete(key); err != nil {
		t.Fatal(err)
	}
	if got := dstMAC("entry gone"); !bytes.Equal(got, macNeigh1) {
		t.Fatalf("with the neighbour hash entry gone: forwarded to %s, want the nexthop's copy %s", got, macNeigh1)
	}
	// A new MAC reaches the nexthop.
	newMAC := net.HardwareAddr{0x02, 0, 0, 0, 0x77, 0x77}
	if err := d.SetNeighbor(lo.Index, gw, newMAC); err != nil {
		t.Fatal(err)
	}
	if got := dstMAC("new MAC"); !bytes.Equal(got, newMAC) {
		t.Fatalf("after the neighbour's change: forwarded to %s, want %s", got, newMAC)
	}
	// A nexthop set after its neighbour takes the MAC at once.
	if err := d.SetNexthop(1, Nexthop{Ifindex: lo.Index, Gateway: gw, SrcMAC: nhMAC(1)}); err != nil {
		t.Fatal(err)
	}
	if got := dstMAC("nexthop reset"); !bytes.Equal(got, newMAC) {
		t.Fatalf("nexthop set again: forwarded to %s, want %s", got, newMAC)
	}
	// Without the neighbour the packet goes to the kernel, which resolves.
	if err := d.DeleteNeighbor(lo.Index, gw); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, d, frame); ret == xdpRedirect {
		t.Fatal("forwarded after the neighbour was deleted")
	}
	// A nexthop that moves to another gateway stops following the old one.
	gw2 := netip.MustParseAddr("10.0.0.2")
	if err := d.SetNexthop(1, Nexthop{Ifindex: lo.Index, Gateway: gw2, SrcMAC: nhMAC(1)}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetNeighbor(lo.Index, gw, macNeigh1); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, d, frame); ret == xdpRedirect {
		t.Fatal("forwarded via the old gateway's MAC")
	}
	if n := len(d.nh.users[gwRef{lo.Index, gw}]); n != 1 { // nexthop 0 still uses it
		t.Fatalf("%d nexthops recorded through %s, want 1", n, gw)
	}
}
