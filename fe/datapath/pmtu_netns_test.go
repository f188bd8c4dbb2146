//go:build linux

package datapath

import (
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// Host namespaces of TestPathMTUDiscovery (fixed names: run privileged tests
// under /tmp/sp-integration.lock).
const (
	pmtuHostA = "sp-pmtu-a"
	pmtuHostB = "sp-pmtu-b"
)

// TestPathMTUDiscovery checks that path MTU discovery works through the
// fast path: a packet too big for the egress port goes to the kernel,
// which answers host A with ICMP "fragmentation needed" (IPv4, DF set) or
// ICMPv6 "packet too big", and A's kernel learns the path MTU. Without the
// check the redirect into the smaller port drops the packet silently.
//
//	A: a0 --veth-- r0 [XDP] (router: the test's namespace) r1 [XDP] --veth, MTU 1280-- b0 :B
func TestPathMTUDiscovery(t *testing.T) {
	d := loadForTest(t, loadOptions{})
	netnstest.Run(t, func(h *netlink.Handle) {
		// exec forks from this locked thread, so ip runs in the router's
		// namespace unless told otherwise.
		sh := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		for _, ns := range []string{pmtuHostA, pmtuHostB} {
			_ = exec.Command("ip", "netns", "del", ns).Run() // left over from a killed run
			sh("ip", "netns", "add", ns)
			defer exec.Command("ip", "netns", "del", ns).Run() //nolint:errcheck
		}
		sh("ip", "link", "add", "r0", "type", "veth", "peer", "name", "a0", "netns", pmtuHostA)
		sh("ip", "link", "add", "r1", "mtu", "1280", "type", "veth", "peer", "name", "b0", "netns", pmtuHostB, "mtu", "1280")
		sh("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
		for _, c := range [][]string{
			{"addr", "add", "10.9.1.1/24", "dev", "r0"},
			{"addr", "add", "10.9.2.1/24", "dev", "r1"},
			{"addr", "add", "2001:db8:91::1/64", "dev", "r0", "nodad"},
			{"addr", "add", "2001:db8:92::1/64", "dev", "r1", "nodad"},
			{"link", "set", "r0", "up"},
			{"link", "set", "r1", "up"},
		} {
			sh(append([]string{"ip"}, c...)...)
		}
		for _, host := range []struct{ ns, dev, v4, gw4, v6, gw6 string }{
			{pmtuHostA, "a0", "10.9.1.2/24", "10.9.1.1", "2001:db8:91::2/64", "2001:db8:91::1"},
			{pmtuHostB, "b0", "10.9.2.2/24", "10.9.2.1", "2001:db8:92::2/64", "2001:db8:92::1"},
		} {
			for _, c := range [][]string{
				{"addr", "add", host.v4, "dev", host.dev},
				{"addr", "add", host.v6, "dev", host.dev, "nodad"},
				{"link", "set", host.dev, "up"},
				{"link", "set", "lo", "up"},
				{"route", "add", "default", "via", host.gw4},
				{"-6", "route", "add", "default", "via", host.gw6},
			} {
				sh(append([]string{"ip", "-n", host.ns}, c...)...)
			}
		}
		r0, err := net.InterfaceByName("r0")
		if err != nil {
			t.Fatal(err)
		}
		r1, err := net.InterfaceByName("r1")
		if err != nil {
			t.Fatal(err)
		}
		b0 := sh("ip", "-n", pmtuHostB, "-br", "link", "show", "b0")
		b0MAC, err := net.ParseMAC(strings.Fields(b0)[2])
		if err != nil {
			t.Fatalf("b0's MAC in %q: %v", b0, err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		// Generic mode: a native redirect into a veth needs XDP on the
		// peer, which the hosts' kernels should not see.
		must(d.Attach(r0.Index, ModeGeneric))
		must(d.Attach(r1.Index, ModeGeneric))
		a := netip.MustParseAddr
		gw4, gw6 := a("10.9.2.2"), a("2001:db8:92::2")
		must(d.SetNexthop(1, Nexthop{Ifindex: r1.Index, Gateway: gw4, SrcMAC: r1.HardwareAddr}))
		must(d.SetNexthop(2, Nexthop{Ifindex: r1.Index, Gateway: gw6, SrcMAC: r1.HardwareAddr}))
		must(d.SetNeighbor(r1.Index, gw4, b0MAC))
		must(d.SetNeighbor(r1.Index, gw6, b0MAC))
		must(d.SetRoute(netip.MustParsePrefix("10.9.2.0/24"), 1))
		must(d.SetRoute(netip.MustParsePrefix("2001:db8:92::/64"), 2))
		for _, l := range []string{"10.9.1.1", "10.9.2.1", "2001:db8:91::1", "2001:db8:92::1"} {
			must(d.SetLocalAddr(a(l)))
		}
		waitFor(t, "links up", func() bool {
			for _, name := range []string{"r0", "r1"} {
				l, err := h.LinkByName(name)
				if err != nil || l.Attrs().OperState != netlink.OperUp {
					return false
				}
			}
			return true
		})

		ping := func(args ...string) (string, error) {
			cmd := exec.Command("ip", append([]string{"netns", "exec", pmtuHostA, "ping", "-c", "1", "-W", "2", "-M", "do"}, args...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, fam := range []struct {
			name, flag, dst string
			icmp            []string // what ping prints for the ICMP error
		}{
			{"IPv4", "-4", "10.9.2.2", []string{"Frag needed", "message too long"}},
			{"IPv6", "-6", "2001:db8:92::2", []string{"Packet too big", "message too long"}},
		} {
			t.Run(fam.name, func(t *testing.T) {
				// Fits: forwarded by the fast path (the first one may
				// wait for B's neighbour discovery of the router).
				before := counters(t, d)
				if _, err := ping(fam.flag, "-s", "1000", fam.dst); err != nil {
					if out, err := ping(fam.flag, "-s", "1000", fam.dst); err != nil {
						t.Fatalf("ping -s 1000 %s: %v\n%s", fam.dst, err, out)
					}
				}
				if c := counters(t, d); c["forwarded"] == before["forwarded"] {
					t.Fatalf("the 1000-byte ping was not forwarded by XDP: %s", fmtDelta(before, c))
				}
				// Too big for r1: the router's kernel answers.
				before = counters(t, d)
				out, err := ping(fam.flag, "-s", "1400", fam.dst)
				if err == nil {
					t.Fatalf("ping -M do -s 1400 %s through an MTU of 1280 succeeded:\n%s", fam.dst, out)
				}
				if !containsAny(out, fam.icmp) {
					t.Errorf("ping -M do -s 1400 %s: no ICMP error (want one of %q):\n%s", fam.dst, fam.icmp, out)
				}
				if c := counters(t, d); c["pass_mtu"] == before["pass_mtu"] {
					t.Errorf("pass_mtu did not move: %s", fmtDelta(before, c))
				}
				// A's kernel learned the path MTU.
				route := sh("ip", "-n", pmtuHostA, fam.flag, "route", "get", fam.dst)
				if !strings.Contains(route, "mtu 1280") {
					t.Errorf("A's route to %s did not learn the path MTU:\n%s", fam.dst, route)
				}
			})
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
