package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/internal/status"
)

// TestClusterByHand builds a two-FE router as a user would from
// docs/cluster.md, without the lab: namespaces of its own, veths with
// their defaults (MTU 1500 everywhere, the mesh link too, offloads on),
// hand-written configs, no TLS on a management veth, no site prefixes.
// The FEs find the namespaces' and veths' defaults: each turns the
// kernel's forwarding on (its slow path), raises its end of the mesh link's
// MTU to carry full-size packets encapsulated, and the FE behind host 2
// counts and names the frames the kernel drops into a veth whose peer has
// neither XDP nor GRO. With GRO on at the hosts, as the warning says,
// host 1 and host 2, each on its FE's own subnet, reach each other's
// addresses (a connected subnet on the other FE) with small and full-size
// packets, and the packets cross in XDP.
func TestClusterByHand(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	const p = "spbh"
	ns := func(s string) string { return p + "-" + s }
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, n := range []string{"r1", "r2", "h1", "h2"} {
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns(n)).Run() })
		ip("netns", "add", ns(n))
		ip("-n", ns(n), "link", "set", "lo", "up")
	}
	for _, v := range [][4]string{
		{"h1", "eth0", "r1", "to-h1"}, {"h2", "eth0", "r2", "to-h2"},
		{"r1", "ife2", "r2", "ife1"}, {"r1", "mgmt", "r2", "mgmt"},
	} {
		ip("link", "add", v[1], "netns", ns(v[0]), "type", "veth", "peer", "name", v[3], "netns", ns(v[2]))
		ip("-n", ns(v[0]), "link", "set", v[1], "up")
		ip("-n", ns(v[2]), "link", "set", v[3], "up")
	}
	for _, a := range [][3]string{
		{"r1", "mgmt", "10.99.0.1/30"}, {"r2", "mgmt", "10.99.0.2/30"},
		{"r1", "to-h1", "192.168.1.1/24"}, {"h1", "eth0", "192.168.1.2/24"},
		{"r2", "to-h2", "192.168.2.1/24"}, {"h2", "eth0", "192.168.2.2/24"},
	} {
		ip("-n", ns(a[0]), "addr", "add", a[2], "dev", a[1])
	}
	ip("-n", ns("h1"), "route", "add", "default", "via", "192.168.1.1")
	ip("-n", ns("h2"), "route", "add", "default", "via", "192.168.2.1")

	write := func(name, body string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ce := write("ce.yaml", fmt.Sprintf(`id: 1
asn: 65001
router_id: 192.168.1.1
forces_listen: 10.99.0.1:6700
forces_allowed_fes: ["1-2"]
forces_accept_unauthenticated_fes: true
status_socket: %s/ce.sock
api_listen: unix:%s/api.sock
`, dir, dir))
	feConf := func(id, peer int, host string) string {
		return write(fmt.Sprintf("fe%d.yaml", id), fmt.Sprintf(`id: %d
ce_address: 10.99.0.1:6700
ports: [%s, ife%d]
inter_fe_links: [{port: ife%d, peer_fe: %d}]
status_socket: %s/fe%d.sock
`, id, host, peer, peer, peer, dir, id))
	}
	inNS := func(n string, args ...string) []string {
		return append([]string{"--net=/run/netns/" + ns(n), bin}, args...)
	}
	ceP := startDaemon(t, "nsenter", inNS("r1", "ce", "--config", ce)...)
	fe1 := startDaemon(t, "nsenter", inNS("r1", "fe", "--config", feConf(1, 2, "to-h1"))...)
	fe2 := startDaemon(t, "nsenter", inNS("r2", "fe", "--config", feConf(2, 1, "to-h2"))...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CE:\n%s\nFE 1:\n%s\nFE 2:\n%s", ceP.out.String(), fe1.out.String(), fe2.out.String())
		}
	})

	// Each FE raised its end of the mesh link to 1500 + 48.
	for _, e := range [][2]string{{"r1", "ife2"}, {"r2", "ife1"}} {
		eventually(t, 10*time.Second, "the MTU of "+e[1]+" raised", func() error {
			out, err := exec.Command("ip", "-n", ns(e[0]), "-o", "link", "show", e[1]).CombinedOutput()
			if err != nil || !strings.Contains(string(out), " mtu 1548 ") {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	ping := func(from, to string, size int) error {
		args := []string{"--net=/run/netns/" + ns(from), "ping", "-c", "3", "-i", "0.2", "-W", "1"}
		if size > 0 {
			args = append(args, "-s", fmt.Sprint(size), "-M", "do")
		}
		out, err := exec.Command("nsenter", append(args, to)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 3 received") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	// Each FE turned its namespace's forwarding on: the slow path must
	// forward (and so resolve) what XDP passes it.
	for i, out := range []string{fe1.out.String(), fe2.out.String()} {
		if !strings.Contains(out, "kernel forwarding turned on") {
			t.Errorf("FE %d did not turn the kernel's forwarding on", i+1)
		}
	}
	// With default veths the hosts' ends have neither XDP nor GRO, so the
	// kernel drops what the FEs redirect to them: each FE finds it out,
	// counts it on the port and says what to do.
	lost := func(sock, port string) uint64 {
		var st fe.Status
		if err := status.Get(filepath.Join(dir, sock), "/", &st); err != nil {
			t.Logf("%s: %v", sock, err)
			return 0
		}
		for _, p := range st.Ports {
			if p.Name == port {
				return p.RedirectLost
			}
		}
		return 0
	}
	eventually(t, 20*time.Second, "the FEs count the frames their veths to the hosts drop", func() error {
		ping("h1", "192.168.2.2", 0)
		l1, l2 := lost("fe1.sock", "to-h1"), lost("fe2.sock", "to-h2")
		if l1+l2 == 0 {
			return fmt.Errorf("redirect_lost: FE 1's to-h1 %d, FE 2's to-h2 %d", l1, l2)
		}
		for i, out := range []string{fe1.out.String(), fe2.out.String()} {
			if (i == 0 && l1 > 0 || i == 1 && l2 > 0) && !strings.Contains(out, "'ethtool -K PEER gro on'") {
				return fmt.Errorf("FE %d counts lost frames but has not said so", i+1)
			}
		}
		return nil
	})
	// The fix the warning names, on the hosts' side.
	for _, h := range []string{"h1", "h2"} {
		if out, err := exec.Command("ip", "netns", "exec", ns(h), "ethtool", "-K", "eth0", "gro", "on").CombinedOutput(); err != nil {
			t.Fatalf("ethtool -K eth0 gro on in %s: %v: %s", ns(h), err, out)
		}
	}
	eventually(t, 20*time.Second, "host 1 reaches host 2", func() error { return ping("h1", "192.168.2.2", 0) })
	before := map[string]string{}
	for _, n := range []string{"r1", "r2"} {
		out, _ := exec.Command("ip", "netns", "exec", ns(n), "nstat", "-az", "IpForwDatagrams").CombinedOutput()
		before[n] = string(out)
	}
	for _, c := range []struct {
		from, to string
		size     int
	}{{"h1", "192.168.2.2", 0}, {"h2", "192.168.1.2", 0}, {"h1", "192.168.2.2", 1472}, {"h2", "192.168.1.2", 1472}} {
		if err := ping(c.from, c.to, c.size); err != nil {
			t.Errorf("%s pings %s (%d bytes): %v", c.from, c.to, c.size, err)
		}
	}
	for _, n := range []string{"r1", "r2"} {
		out, _ := exec.Command("ip", "netns", "exec", ns(n), "nstat", "-az", "IpForwDatagrams").CombinedOutput()
		if fwd := forwDatagrams(string(out)); fwd != forwDatagrams(before[n]) {
			t.Errorf("%s's kernel forwarded %d datagrams; XDP should have forwarded them all", n, fwd-forwDatagrams(before[n]))
		}
	}
}

// forwDatagrams reads IpForwDatagrams from nstat's output.
func forwDatagrams(out string) int {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "IpForwDatagrams" {
			var n int
			fmt.Sscan(f[1], &n)
			return n
		}
	}
	return -1
}
