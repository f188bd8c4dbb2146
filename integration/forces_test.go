package integration_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/status"
)

// sendFrame sends a raw Ethernet frame out of an interface of a lab namespace.
func sendFrame(t *testing.T, ns, ifname string, frame []byte) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}); err != nil {
		t.Fatal(err)
	}
}

func nsMAC(t *testing.T, ns, ifname string) net.HardwareAddr {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", ifname).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "link/ether" {
			mac, err := net.ParseMAC(f[i+1])
			if err != nil {
				t.Fatal(err)
			}
			return mac
		}
	}
	t.Fatalf("no MAC for %s/%s in %q", ns, ifname, out)
	return nil
}

// icmpInEchos reads how many echo requests a namespace's kernel received.
func icmpInEchos(t *testing.T, ns string) int {
	t.Helper()
	return snmp(t, ns, "Icmp", "InEchos")
}

// checkRedirection: an LLDP frame from host A reaches the CE as a Packet
// Redirect on the low-priority channel, with its ingress port; a frame the CE
// injects out of the FE's port towards host A arrives there.
func checkRedirection(t *testing.T, o lab.Options) {
	t.Helper()
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CE.FEs) != 1 || !st.CE.FEs[0].LowChannel || !st.FE.Low.Up {
		t.Fatalf("low-priority channel not up: CE %+v, FE %+v", st.CE.FEs, st.FE.Low)
	}
	before := st.CE.FEs[0].Redirected
	hostMAC := nsMAC(t, o.Namespace("a"), "eth0")
	lldp := append([]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}, hostMAC...)
	lldp = append(lldp, 0x88, 0xcc)
	lldp = append(lldp, make([]byte, 46)...)
	sendFrame(t, o.Namespace("a"), "eth0", lldp)
	eventually(t, 10*time.Second, "LLDP frame redirected to the CE", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if st.CE.FEs[0].Redirected <= before {
			return fmt.Errorf("CE redirected count %d, FE %+v", st.CE.FEs[0].Redirected, st.FE.Low)
		}
		return nil
	})

	var toA struct {
		ifindex int
		mac     net.HardwareAddr
	}
	for _, p := range st.FE.Ports {
		if p.Name == "to-a" {
			toA.ifindex = p.Ifindex
			toA.mac, _ = net.ParseMAC(p.MAC)
		}
	}
	echos := icmpInEchos(t, o.Namespace("a"))
	frame := icmpEcho(hostMAC, toA.mac, [4]byte{10, 10, 1, 1}, lab.HostA().As4())
	q := url.Values{"fe": {"1"}, "port": {strconv.Itoa(toA.ifindex)}}
	if err := status.PostBody(o.Socket("ce"), "/inject", q, frame); err != nil {
		t.Fatalf("inject: %v", err)
	}
	eventually(t, 10*time.Second, "injected echo request reaches host A", func() error {
		if n := icmpInEchos(t, o.Namespace("a")); n <= echos {
			return fmt.Errorf("host A InEchos %d, was %d", n, echos)
		}
		return nil
	})
	// Bad input is refused and names the problem.
	if err := status.PostBody(o.Socket("ce"), "/inject", url.Values{"fe": {"1"}, "port": {"x"}}, frame); err == nil || !strings.Contains(err.Error(), `port "x"`) {
		t.Errorf("inject with port x: %v", err)
	}
	if err := status.PostBody(o.Socket("ce"), "/inject", url.Values{"fe": {"9"}, "port": {"1"}}, frame); err == nil || !strings.Contains(err.Error(), "not associated") {
		t.Errorf("inject to FE 9: %v", err)
	}
}

// checkPortEvents: a port going down and up reaches the CE as Event
// Notifications.
func checkPortEvents(t *testing.T, o lab.Options) {
	t.Helper()
	portUp := func() (bool, error) {
		st, err := lab.GetStatus(o)
		if err != nil {
			return false, err
		}
		for _, p := range st.CE.FEs[0].Ports {
			if p.Name == "to-a" {
				return p.Up, nil
			}
		}
		return false, fmt.Errorf("CE does not know port to-a: %+v", st.CE.FEs[0].Ports)
	}
	for _, state := range []string{"down", "up"} {
		if out, err := exec.Command("ip", "-n", o.Namespace("a"), "link", "set", "eth0", state).CombinedOutput(); err != nil {
			t.Fatalf("link %s: %v %s", state, err, out)
		}
		eventually(t, 10*time.Second, "CE sees to-a "+state, func() error {
			up, err := portUp()
			if err != nil {
				return err
			}
			if up != (state == "up") {
				return fmt.Errorf("to-a up=%v", up)
			}
			return nil
		})
	}
	// Host A needs its default route back after the link flap.
	exec.Command("ip", "-n", o.Namespace("a"), "route", "replace", "default", "via", "10.10.1.1").Run()
}

// icmpEcho builds an Ethernet/IPv4/ICMP echo request.
func icmpEcho(dst, src net.HardwareAddr, from, to [4]byte) []byte {
	f := make([]byte, 14+20+8+8)
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(ip[2:], 36)
	copy(ip[12:], from[:])
	copy(ip[16:], to[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	icmp := f[34:]
	icmp[0] = 8
	binary.BigEndian.PutUint16(icmp[4:], 0x5370)
	binary.BigEndian.PutUint16(icmp[2:], checksum(icmp))
	return f
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// snmp reads a counter of /proc/net/snmp in a namespace, e.g. ("Ip", "ForwDatagrams").
func snmp(t *testing.T, ns, group, name string) int {
	t.Helper()
	out, err := exec.Command("nsenter", "--net=/run/netns/"+ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, group+":") {
			continue
		}
		f := strings.Fields(line)[1:]
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == name {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	t.Fatalf("no %s %s in /proc/net/snmp", group, name)
	return 0
}

// checkTTLExceeded: a packet whose TTL would expire at the router goes to
// the kernel, which answers with ICMP Time Exceeded.
func checkTTLExceeded(t *testing.T, o lab.Options) {
	t.Helper()
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	before := st.Counters["pass_ttl"]
	out, _ := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-c", "1", "-t", "1", "-W", "2", lab.HostBAddr().String()).CombinedOutput()
	if !strings.Contains(string(out), "Time to live exceeded") {
		t.Fatalf("no ICMP Time Exceeded for a TTL-1 ping through the router:\n%s", out)
	}
	st, err = lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["pass_ttl"] <= before {
		t.Fatalf("pass_ttl did not grow (counters %v)", st.Counters)
	}
}

// checkIPv6: host A reaches host B's IPv6 address, learned over BGP
// (MP_REACH_NLRI) and sent to the FE as IPv6UcastLPM/IPv6NextHop rows,
// through XDP: the router kernel's IPv6 forwarding counter does not move.
func checkIPv6(t *testing.T, o lab.Options) {
	t.Helper()
	ping6 := func(count int) error {
		out, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
			"ping", "-6", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "1", lab.HostBAddr6().String()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 0% packet loss") {
			return fmt.Errorf("ping -6: %v: %s", err, out)
		}
		return nil
	}
	eventually(t, 20*time.Second, "ping6 A -> B", func() error { return ping6(1) })
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	before, kernelBefore := st.Counters["forwarded_ipv6"], snmp6(t, o.Namespace("rtr"), "Ip6OutForwDatagrams")
	if err := ping6(3); err != nil {
		t.Fatal(err)
	}
	st, err = lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Counters["forwarded_ipv6"] - before; got < 6 {
		t.Fatalf("XDP forwarded %d IPv6 packets for a 3-packet ping6, want >= 6 (counters %v)", got, st.Counters)
	}
	if k := snmp6(t, o.Namespace("rtr"), "Ip6OutForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the router's kernel forwarded %d IPv6 packets of the ping; XDP should have", k)
	}
}

// snmp6 reads a counter of /proc/net/snmp6 in a namespace.
func snmp6(t *testing.T, ns, name string) int {
	t.Helper()
	out, err := exec.Command("nsenter", "--net=/run/netns/"+ns, "cat", "/proc/net/snmp6").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	t.Fatalf("no %s in /proc/net/snmp6", name)
	return 0
}
