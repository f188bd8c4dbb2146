package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/status"
)

// requireLab skips unless the test can build namespaces and attach XDP.
func requireLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and attaches XDP programs")
	}
	for _, tool := range []string{"ip", "nsenter", "ethtool", "ping", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (make test installs it): %v", tool, err)
		}
	}
}

// buildBinary builds the splitplane binary the lab runs, as a user would.
func buildBinary(t *testing.T) string {
	t.Helper()
	// splitplane-lab beside it: splitplane hands lab, bench and peer to it.
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/splitplane/splitplane/cmd/splitplane", "github.com/splitplane/splitplane/cmd/splitplane-lab")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "splitplane")
}

// splitplane runs the binary and returns its combined output.
func splitplane(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

func pingB(o lab.Options, count int) error {
	out, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "1", lab.HostBAddr().String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping: %w: %s", err, out)
	}
	if !strings.Contains(string(out), " 0% packet loss") {
		return fmt.Errorf("ping lost packets: %s", out)
	}
	return nil
}

// logsOnFailure prints the last lines of the lab's daemon logs when the test
// has failed, so a failure in CI can be read without the lab (its directory
// goes with the test). Register it after the cleanup that takes the lab down:
// cleanups run last-registered first.
func logsOnFailure(t *testing.T, o lab.Options) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(o.Dir, "*.log"))
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("%s (last %d lines):\n%s", filepath.Base(l), len(lines), strings.Join(lines, "\n"))
		}
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %v", what, timeout, err)
}

// TestSkeletonEndToEnd is the walking skeleton through the real binary: the
// lab comes up, the peer's BGP routes reach the FE over ForCES, host A reaches
// host B only through XDP, a withdrawal stops the traffic, and lab down leaves
// nothing behind.
func TestSkeletonEndToEnd(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spt", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	const routes = 2000

	t.Cleanup(func() {
		if out, err := splitplane(t, bin, args("lab", "down")...); err != nil {
			t.Errorf("cleanup lab down: %v\n%s", err, out)
		}
	})
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--routes", fmt.Sprint(routes))...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}

	// A second lab up is refused and leaves the running lab alone.
	if out, err := splitplane(t, bin, args("lab", "up")...); err == nil || !strings.Contains(out, "already up") {
		t.Fatalf("second lab up: %v\n%s", err, out)
	}

	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if st.BGPState != "established" || !st.FEAssociated {
		t.Fatalf("after lab up: bgp %q, fe associated %v", st.BGPState, st.FEAssociated)
	}
	if st.CERoutes != routes+2 || st.FERoutes != routes+2 {
		t.Fatalf("routes: CE %d, FE %d, want %d in both", st.CERoutes, st.FERoutes, routes+2)
	}
	out, err := splitplane(t, bin, args("lab", "status")...)
	if err != nil || !strings.Contains(out, "established") || !strings.Contains(out, fmt.Sprint(routes+2)) {
		t.Fatalf("lab status: %v\n%s", err, out)
	}

	// The FE copied the route into the router's kernel, the slow path.
	if out, err := exec.Command("ip", "-n", o.Namespace("rtr"), "route", "show", lab.HostBNet().String(), "proto", "201").CombinedOutput(); err != nil || !strings.Contains(string(out), "via "+lab.HostB().String()) {
		t.Fatalf("the router's kernel has no copy of %s via %s: %v %s", lab.HostBNet(), lab.HostB(), err, out)
	}

	// Host A reaches host B's address, which only the BGP route covers. The
	// first ping may lose a packet while the router learns A's MAC.
	eventually(t, 20*time.Second, "ping A -> B through XDP", func() error { return pingB(o, 1) })
	st, err = lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	before := st.Counters["forwarded"]
	kernelBefore := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
	if err := pingB(o, 3); err != nil {
		t.Fatal(err)
	}
	if k := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the router's kernel forwarded %d packets of the ping; XDP should have", k)
	}
	st, err = lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	// Three echo requests and three replies at least.
	if got := st.Counters["forwarded"] - before; got < 6 {
		t.Fatalf("XDP forwarded %d packets for a successful 3-packet ping, want >= 6 (counters %v)", got, st.Counters)
	}

	checkIPv6(t, o) // before the link flap below, which drops host A's IPv6 addresses
	checkRedirection(t, o)
	checkPortEvents(t, o)
	checkTTLExceeded(t, o)

	// The peer withdraws the route: it leaves the FE and the traffic stops.
	if out, err := splitplane(t, bin, args("lab", "peer", "withdraw", lab.HostBNet().String())...); err != nil {
		t.Fatalf("withdraw: %v\n%s", err, out)
	}
	eventually(t, 15*time.Second, "route withdrawn from the FE", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if st.FERoutes != routes+1 {
			return fmt.Errorf("FE has %d routes, want %d", st.FERoutes, routes+1)
		}
		return nil
	})
	st, _ = lab.GetStatus(o)
	noRoute := st.Counters["pass_no_route"]
	pingOut, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-c", "2", "-i", "0.2", "-W", "1", lab.HostBAddr().String()).CombinedOutput()
	if err == nil {
		t.Fatal("ping A -> B still works after the peer withdrew the route")
	}
	// The kernel, handed the packet by XDP, answers for the router.
	if !strings.Contains(string(pingOut), "Unreachable") {
		t.Errorf("no ICMP unreachable from the router for a withdrawn destination:\n%s", pingOut)
	}
	st, _ = lab.GetStatus(o)
	if st.Counters["pass_no_route"] <= noRoute {
		t.Fatalf("pass_no_route did not grow while pinging a withdrawn destination (counters %v)", st.Counters)
	}

	// And it comes back when announced again.
	if out, err := splitplane(t, bin, args("lab", "peer", "announce", lab.HostBNet().String())...); err != nil {
		t.Fatalf("announce: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "ping A -> B after re-announcement", func() error { return pingB(o, 1) })

	// lab down leaves no namespace, link or process.
	state, _ := os.ReadFile(filepath.Join(o.Dir, "state.json"))
	if out, err := splitplane(t, bin, args("lab", "down")...); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	assertNoLab(t, o)
	if procs, _ := exec.Command("pgrep", "-f", bin).Output(); len(strings.TrimSpace(string(procs))) > 0 {
		t.Errorf("processes of %s still running after lab down: %s (state was %s)", bin, procs, state)
	}
}

func assertNoLab(t *testing.T, o lab.Options) {
	t.Helper()
	for _, role := range []string{"rtr", "peer", "a", "b"} {
		if _, err := os.Stat("/run/netns/" + o.Namespace(role)); err == nil {
			t.Errorf("namespace %s still exists", o.Namespace(role))
		}
	}
	if _, err := os.Stat(o.Dir); err == nil {
		t.Errorf("lab directory %s still exists", o.Dir)
	}
}

// TestLabUpFailureCleansUp: when a daemon dies during lab up (here the FE,
// given an XDP mode that does not exist), lab up reports it with the daemon's
// log and removes everything it had made.
func TestLabUpFailureCleansUp(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spf", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin}
	out, err := splitplane(t, bin, "lab", "up", "--name", o.Name, "--dir", o.Dir, "--routes", "10", "--xdp-mode", "bogus")
	if err == nil {
		splitplane(t, bin, "lab", "down", "--name", o.Name, "--dir", o.Dir)
		t.Fatalf("lab up with --xdp-mode bogus succeeded:\n%s", out)
	}
	if !strings.Contains(out, "xdp_mode") || !strings.Contains(out, "bogus") {
		t.Errorf("lab up error does not name the bad field and value:\n%s", out)
	}
	assertNoLab(t, o)
	if procs, _ := exec.Command("pgrep", "-f", bin).Output(); len(strings.TrimSpace(string(procs))) > 0 {
		t.Errorf("processes of %s still running after the failed lab up: %s", bin, procs)
	}
}

// TestCERestartWithoutLoss: the CE is killed and restarted while host A pings
// host B every 20 ms. The FE keeps forwarding with its FIB while the CE is
// gone, the restarted CE relearns the routes over BGP and, once converged,
// resyncs the FE in one transaction that changes nothing in the datapath
// for the routes it has again: no ping is lost. A route the new CE does
// not have (one added through the API, which lives in the CE's memory
// only) stays in the FE, and is forwarded along, while the CE is away, and
// is swept by the resync: out of the FE's tables, its XDP program and its
// kernel.
func TestCERestartWithoutLoss(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spr", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() { splitplane(t, bin, args("lab", "down")...) })
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--routes", "2000")...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "ping A -> B", func() error { return pingB(o, 1) })
	before, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}

	// The API route to sweep: 192.0.2.0/24 through host B, which owns
	// 192.0.2.10. Forwarded by XDP before the CE goes.
	stale := netip.MustParseAddr("192.0.2.10")
	if err := exec.Command("ip", "-n", o.Namespace("b"), "addr", "add", stale.String()+"/32", "dev", "eth0").Run(); err != nil {
		t.Fatal(err)
	}
	if out, err := splitplane(t, bin, "route", "add", "192.0.2.0/24", "via", lab.HostB().String(), "--api", "unix:"+o.Socket("api")); err != nil {
		t.Fatalf("route add: %v\n%s", err, out)
	}
	feRoutes := func(n int) func() error {
		return func() error {
			var f fe.Status
			if err := status.Get(o.Socket("fe"), "/", &f); err != nil {
				return err
			}
			if f.Routes != n || f.Programmed != n {
				return fmt.Errorf("FE has %d routes (%d programmed), want %d", f.Routes, f.Programmed, n)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, "the API route in the FE", feRoutes(2003))
	checkXDPPing(t, o, stale)

	ping := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-q", "-i", "0.02", "-c", "500", "-W", "1", lab.HostBAddr().String())
	var out strings.Builder
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := lab.Stop(o, "ce", true); err != nil {
		t.Fatalf("kill the CE: %v", err)
	}
	// The FE on its own: the association gone, every route kept, the API
	// route forwarded along.
	eventually(t, 10*time.Second, "the FE without its CE", func() error {
		var f fe.Status
		if err := status.Get(o.Socket("fe"), "/", &f); err != nil {
			return err
		}
		if f.Associated {
			return errors.New("FE still associated")
		}
		return nil
	})
	if err := feRoutes(2003)(); err != nil {
		t.Fatalf("while the CE is away: %v", err)
	}
	checkXDPPing(t, o, stale)
	if err := lab.Start(o, "ce"); err != nil {
		t.Fatalf("start the CE again: %v", err)
	}
	eventually(t, 40*time.Second, "FE resynced by the new CE", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != 1 || !st.CE.FEs[0].Synced || st.CERoutes != 2002 {
			return fmt.Errorf("CE routes %d, FEs %+v", st.CERoutes, st.CE.FEs)
		}
		return nil
	})
	if err := ping.Wait(); err != nil {
		t.Fatalf("ping during the CE restart: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), " 0% packet loss") {
		t.Fatalf("packets lost across the CE restart:\n%s", out.String())
	}
	after, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if after.FERoutes != 2002 || after.FE.Programmed != 2002 || after.FE.DatapathErrors != 0 || after.FE.ProtocolErrors != before.FE.ProtocolErrors {
		t.Fatalf("after the restart: FE routes %d (%d programmed), datapath errors %d, protocol errors %d; want 2002, the API route swept",
			after.FERoutes, after.FE.Programmed, after.FE.DatapathErrors, after.FE.ProtocolErrors)
	}
	// Swept from the datapath and from the router's kernel too: XDP finds no
	// route and hands the ping to the kernel, which has none either and
	// answers unreachable.
	kernelBefore := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
	pingOut, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-c", "2", "-i", "0.2", "-W", "1", stale.String()).CombinedOutput()
	if err == nil || !strings.Contains(string(pingOut), "Unreachable") {
		t.Fatalf("ping to the swept route's %s: %v, want ICMP unreachable\n%s", stale, err, pingOut)
	}
	end, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if n := end.Counters["forwarded"] - after.Counters["forwarded"]; n != 0 {
		t.Fatalf("XDP forwarded %d packets to the swept route", n)
	}
	if end.Counters["pass_no_route"] < after.Counters["pass_no_route"]+2 {
		t.Fatalf("XDP did not pass the pings to the swept route as no route (counters %v)", end.Counters)
	}
	if k := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the router's kernel forwarded %d packets to the swept route: its copy of the route is still there", k)
	}

	// The peer killed and restarted: with graceful restart the CE keeps its
	// routes (stale) until the peer is back and has sent them again, so the
	// traffic through them never stops.
	ping = exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-q", "-i", "0.02", "-c", "300", "-W", "1", lab.HostBAddr().String())
	out.Reset()
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if o, err := splitplane(t, bin, args("lab", "restart", "peer", "--kill")...); err != nil {
		t.Fatalf("restart peer: %v\n%s", err, o)
	}
	minRoutes := 2002
	eventually(t, 40*time.Second, "the peer back", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		minRoutes = min(minRoutes, st.CERoutes, st.FERoutes)
		if st.Peer.State != "established" || st.CERoutes != 2002 {
			return fmt.Errorf("peer %s, CE routes %d", st.Peer.State, st.CERoutes)
		}
		return nil
	})
	if err := ping.Wait(); err != nil {
		t.Fatalf("ping during the peer restart: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), " 0% packet loss") || minRoutes != 2002 {
		t.Fatalf("across the peer restart: at least %d routes seen, ping:\n%s", minRoutes, out.String())
	}
}

// TestBIRDPeer: BIRD 2, a third-party BGP daemon, as the lab's peer, with
// IPv4 and IPv6 unicast over one session. Its routes are learned, reach the
// FE over ForCES and forward through XDP (towards BIRD, their next hop):
// pings to the anycast addresses BIRD's namespace owns, IPv4 and IPv6, are
// answered, and the router's kernel forwards none of them. Graceful restart
// keeps them through BIRD's restart; when BIRD stops announcing, they leave
// the CE and the FE, IPv6 first, then IPv4.
func TestBIRDPeer(t *testing.T) {
	requireLab(t)
	requireBIRD(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spbird", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin, Peer: "bird", Routes: 1000}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() { splitplane(t, bin, args("lab", "down")...) })
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--peer", "bird", "--routes", "1000")...); err != nil {
		t.Fatalf("lab up with BIRD: %v\n%s", err, out)
	}
	all := o.RouteCount() // 1000, 198.51.100.0/24 and the anycast prefixes, IPv4 and IPv6
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if st.BGPState != "established" || st.CERoutes != all || st.FERoutes != all {
		t.Fatalf("with BIRD: bgp %q, CE %d routes, FE %d routes; want established, %d, %d", st.BGPState, st.CERoutes, st.FERoutes, all, all)
	}
	if st.Peer.State != "established" || st.Peer.Announced != all {
		t.Fatalf("BIRD's own view: session %q, %d routes exported; want established, %d", st.Peer.State, st.Peer.Announced, all)
	}
	// Learned with BIRD as the next hop, over IPv4 and IPv6.
	for _, r := range []struct {
		prefix netip.Prefix
		via    string
	}{{lab.AnycastNet(), bird4}, {lab.AnycastNet6(), bird6}, {lab.HostBNet(), bird4}} {
		if hops, err := resolvedHops(o, r.prefix); err != nil || !slices.Equal(hops, []string{r.via}) {
			t.Fatalf("%s through %v (%v), want %s", r.prefix, hops, err, r.via)
		}
	}

	// Traffic to BIRD's prefixes leaves through the peer port, forwarded by
	// XDP, and BIRD's namespace answers.
	txBefore := portTx(st, "to-peer")
	checkPing(t, o, lab.AnycastAddr())
	checkPing(t, o, lab.AnycastAddr6())
	if st, err = lab.GetStatus(o); err != nil {
		t.Fatal(err)
	}
	if n := portTx(st, "to-peer") - txBefore; n < 6 {
		t.Fatalf("to-peer sent %d packets through XDP, want >= 6", n)
	}

	// BIRD killed and restarted: with graceful restart (both sides) the CE
	// keeps its routes through the restart, and the FE never loses one.
	if out, err := splitplane(t, bin, args("lab", "restart", "peer", "--kill")...); err != nil {
		t.Fatalf("restart BIRD: %v\n%s", err, out)
	}
	// Asked of the CE and the FE directly: BIRD's own status is not there
	// while it restarts.
	least, polls := all, 0
	eventually(t, 40*time.Second, "BIRD back, the session up again", func() error {
		var c ce.Status
		var f fe.Status
		if err := status.Get(o.Socket("ce"), "/", &c); err != nil {
			return err
		}
		if err := status.Get(o.Socket("fe"), "/", &f); err != nil {
			return err
		}
		polls++
		least = min(least, c.Routes, f.Routes)
		if len(c.Neighbors) != 1 || c.Neighbors[0].State != "established" || polls < 5 {
			return fmt.Errorf("CE neighbours %+v, %d polls", c.Neighbors, polls)
		}
		return nil
	})
	if least != all {
		t.Fatalf("routes dropped to %d while BIRD restarted (graceful restart should keep them)", least)
	}

	// BIRD stops announcing IPv6: the route leaves the CE and the FE, and
	// the ping fails; IPv4 stays.
	birdc := func(cmd ...string) {
		t.Helper()
		if out, err := exec.Command("birdc", append([]string{"-s", o.BIRDSocket("peer")}, cmd...)...).CombinedOutput(); err != nil {
			t.Fatalf("birdc %v: %v %s", cmd, err, out)
		}
	}
	birdc("disable", "table6")
	waitRoutes(t, o, all-1)
	if hops, err := resolvedHops(o, lab.AnycastNet6()); err != nil || hops != nil {
		t.Fatalf("%s still through %v after BIRD withdrew it (%v)", lab.AnycastNet6(), hops, err)
	}
	if err := pingOnce(o, lab.AnycastAddr6()); err == nil {
		t.Fatal("ping -6 still answered after BIRD withdrew the route")
	}
	checkPing(t, o, lab.AnycastAddr())

	// And IPv4: every route leaves.
	birdc("disable", "table4")
	waitRoutes(t, o, 0)
}

// waitRoutes waits until the CE and the FE both hold n routes.
func waitRoutes(t *testing.T, o lab.Options, n int) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("%d routes in the CE and the FE", n), func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if st.FERoutes != n || st.CERoutes != n {
			return fmt.Errorf("CE %d, FE %d routes", st.CERoutes, st.FERoutes)
		}
		return nil
	})
}

// pingOnce pings dst from host A once.
func pingOnce(o lab.Options, dst netip.Addr) error {
	args := []string{"--net=/run/netns/" + o.Namespace("a"), "ping", "-c", "1", "-W", "1", dst.String()}
	if dst.Is6() {
		args = slices.Insert(args, 2, "-6")
	}
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s: %w: %s", dst, err, out)
	}
	return nil
}

// checkPing: host A's pings to dst are answered, forwarded by XDP both
// ways: XDP's forwarded counter of dst's family grows, the router kernel's
// does not.
func checkPing(t *testing.T, o lab.Options, dst netip.Addr) {
	t.Helper()
	eventually(t, 20*time.Second, "ping "+dst.String(), func() error { return pingOnce(o, dst) })
	counter := "forwarded"
	if dst.Is6() {
		counter = "forwarded_ipv6"
	}
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	before, kernelBefore := st.Counters[counter], kernelForwarded(t, o, dst)
	for range 3 {
		if err := pingOnce(o, dst); err != nil {
			t.Fatal(err)
		}
	}
	if k := kernelForwarded(t, o, dst) - kernelBefore; k != 0 {
		t.Fatalf("the router's kernel forwarded %d packets of the pings to %s; XDP should have", k, dst)
	}
	if st, err = lab.GetStatus(o); err != nil {
		t.Fatal(err)
	}
	if got := st.Counters[counter] - before; got < 6 {
		t.Fatalf("XDP's %s grew by %d for 3 answered pings to %s, want >= 6 (counters %v)", counter, got, dst, st.Counters)
	}
}

// checkXDPPing: host A's pings to dst are answered, forwarded by the FE's
// XDP program both ways and not by the router's kernel. It asks the FE
// alone, so it works while the CE is away.
func checkXDPPing(t *testing.T, o lab.Options, dst netip.Addr) {
	t.Helper()
	eventually(t, 10*time.Second, "ping "+dst.String(), func() error { return pingOnce(o, dst) })
	var before, after fe.Status
	if err := status.Get(o.Socket("fe"), "/", &before); err != nil {
		t.Fatal(err)
	}
	kernelBefore := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
	for range 3 {
		if err := pingOnce(o, dst); err != nil {
			t.Fatal(err)
		}
	}
	if k := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the router's kernel forwarded %d packets of the pings to %s; XDP should have", k, dst)
	}
	if err := status.Get(o.Socket("fe"), "/", &after); err != nil {
		t.Fatal(err)
	}
	if got := after.Counters["forwarded"] - before.Counters["forwarded"]; got < 6 {
		t.Fatalf("XDP forwarded %d packets for 3 answered pings to %s, want >= 6", got, dst)
	}
}

func portTx(st lab.Status, name string) uint64 {
	for _, p := range st.FE.Ports {
		if p.Name == name {
			return p.Counters.TxPackets
		}
	}
	return 0
}
