package integration_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/lab"
)

// pingFrom pings dst count times from host ns with source address src,
// and fails unless every echo is answered; it returns ping's output.
func pingFrom(ns, src, dst string, count int) (string, error) {
	out, err := exec.Command("nsenter", "--net=/run/netns/"+ns, "ping", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "1",
		"-I", src, dst).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf(" %d received", count)) {
		return string(out), fmt.Errorf("ping %s from %s: %v: %s", dst, src, err, out)
	}
	return string(out), nil
}

// remoteConnected returns FE n's count of other FEs' subnets it forwards
// to.
func remoteConnected(t *testing.T, o lab.Options, n int) int {
	t.Helper()
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	return feOf(st, n).RemoteConnected
}

// TestClusterConnected: in a cluster of three FEs, host 1 (behind FE 1)
// reaches host 3's own addresses on FE 3's port to-h3, IPv4 and IPv6, from
// its own link address (so host 3's answers, too, go to a connected subnet
// of another FE): FE 1 encapsulates, FE 3 delivers, and the other way for
// the answers, no FE kernel forwarding any of them once warm. A second
// address of host 3, which no FE has seen, is first resolved by FE 3's
// kernel, then forwarded in XDP too. FE 3's to-h3 taken down withdraws the
// subnet from the other FEs (host 1 is told it is unreachable, nothing is
// lost silently); up again brings it back.
func TestClusterConnected(t *testing.T) {
	requireLab(t)
	const n = 3
	o := upCluster(t, "spw", n, 10)
	h1, h3 := o.ClusterHost(1), o.ClusterHost(3)
	fe3 := o.Namespace("rtr3")
	ip := func(ns string, args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s %v: %v: %s", ns, args, err, out)
		}
	}
	// Host 3's second addresses, which no FE resolves by itself.
	ip(h3.Namespace, "addr", "add", "10.20.3.3/24", "dev", "eth0")
	ip(h3.Namespace, "addr", "add", "fd00:20:3::3/64", "dev", "eth0", "nodad")
	// FE 3's port keeps its IPv6 address when taken down below.
	if out, err := exec.Command("nsenter", "--net=/run/netns/"+fe3, "sysctl", "-qw", "net.ipv6.conf."+h3.Port+".keep_addr_on_down=1").CombinedOutput(); err != nil {
		t.Fatalf("keep_addr_on_down: %v: %s", err, out)
	}

	// Every FE forwards to the other two FEs' host subnets, IPv4 and IPv6.
	eventually(t, 20*time.Second, "FE 1 has the other FEs' subnets", func() error {
		if got := remoteConnected(t, o, 1); got != 4 {
			return fmt.Errorf("FE 1 forwards to %d subnets of other FEs, want 4 (10.20.2.0/24, 10.20.3.0/24 and their IPv6)", got)
		}
		return nil
	})
	type pair struct{ ns, src, dst string }
	pairs := []pair{
		{h1.Namespace, h1.Addr.String(), h3.Addr.String()},
		{h1.Namespace, h1.Addr6.String(), h3.Addr6.String()},
		{h1.Namespace, h1.Addr.String(), "10.20.3.3"},
		{h1.Namespace, h1.Addr6.String(), "fd00:20:3::3"},
		{h3.Namespace, h3.Addr.String(), h1.Addr.String()},
		{h3.Namespace, h3.Addr6.String(), h1.Addr6.String()},
	}
	// Warm up: the first packets to a host no FE resolved yet go through
	// FE 3's kernel, which resolves it.
	for _, p := range pairs {
		eventually(t, 20*time.Second, fmt.Sprintf("%s reaches %s", p.src, p.dst), func() error {
			_, err := pingFrom(p.ns, p.src, p.dst, 1)
			return err
		})
	}
	const count = 5
	before := readIFECounters(t, o, n)
	for _, p := range pairs {
		if out, err := pingFrom(p.ns, p.src, p.dst, count); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	after := readIFECounters(t, o, n)
	moved := func(feN int, name string) uint64 { return after.ife[feN-1][name] - before.ife[feN-1][name] }
	sent := uint64(len(pairs) * count) // echoes, and as many answers
	report := func() string {
		var b strings.Builder
		for i := range after.ife {
			fmt.Fprintf(&b, "FE %d: before %v after %v, kernel forwarded %d -> %d\n", i+1, before.ife[i], after.ife[i], before.forw[i], after.forw[i])
		}
		return b.String()
	}
	t.Logf("%d echoes between hosts 1 and 3's own addresses:\n%s", sent, report())
	for _, feN := range []int{1, 3} {
		if moved(feN, "ife_encap") < sent || moved(feN, "ife_decap") < sent {
			t.Errorf("FE %d encapsulated %d and delivered %d, want at least %d each:\n%s", feN, moved(feN, "ife_encap"), moved(feN, "ife_decap"), sent, report())
		}
	}
	for i := range after.forw {
		if after.forw[i] != before.forw[i] {
			t.Errorf("FE %d's kernel forwarded %d datagrams; XDP should have forwarded them all:\n%s", i+1, after.forw[i]-before.forw[i], report())
		}
	}

	// FE 3's port to host 3 goes down: FE 1 drops host 3's subnets, and
	// host 1 hears that they are unreachable.
	ip(fe3, "link", "set", h3.Port, "down")
	eventually(t, 20*time.Second, "FE 1 drops host 3's subnets", func() error {
		if got := remoteConnected(t, o, 1); got != 2 {
			return fmt.Errorf("FE 1 forwards to %d subnets of other FEs, want 2", got)
		}
		return nil
	})
	for _, dst := range []string{h3.Addr.String(), h3.Addr6.String()} {
		src := h1.Addr.String()
		if strings.Contains(dst, ":") {
			src = h1.Addr6.String()
		}
		out, err := pingFrom(h1.Namespace, src, dst, 1)
		if err == nil || !strings.Contains(out, "nreachable") {
			t.Errorf("with to-h3 down, ping %s: %v, want an ICMP unreachable:\n%s", dst, err, out)
		}
	}
	ip(fe3, "link", "set", h3.Port, "up")
	eventually(t, 20*time.Second, "FE 1 has host 3's subnets again", func() error {
		if got := remoteConnected(t, o, 1); got != 4 {
			return fmt.Errorf("FE 1 forwards to %d subnets of other FEs, want 4", got)
		}
		return nil
	})
	for _, p := range pairs[:2] {
		eventually(t, 20*time.Second, fmt.Sprintf("after to-h3 up, %s reaches %s", p.src, p.dst), func() error {
			_, err := pingFrom(p.ns, p.src, p.dst, 1)
			return err
		})
	}
}
