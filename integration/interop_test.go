package integration_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/status"
)

// requireBIRD skips unless BIRD 2 (bird and birdc) is installed.
func requireBIRD(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs BIRD 2's %s (make test installs bird2): %v", tool, err)
		}
	}
}

// ecmpLab brings up a lab with BIRD (the first peer, AS 65002, the
// generated table) and FRR (the second, AS 65003) both announcing the
// anycast prefixes, and waits until the CE has both next hops for both.
func ecmpLab(t *testing.T, o lab.Options) {
	t.Helper()
	requireLab(t)
	requireBIRD(t)
	requireFRR(t)
	t.Cleanup(func() {
		if err := lab.Down(o); err != nil {
			t.Errorf("cleanup lab down: %v", err)
		}
	})
	logsOnFailure(t, o)
	if out, err := splitplane(t, o.Binary, labUpArgs(o)...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)
}

// labUpArgs is the command line of lab up for o, as a user would type it.
func labUpArgs(o lab.Options) []string {
	a := []string{"lab", "up", "--name", o.Name, "--dir", o.Dir, "--routes", fmt.Sprint(o.Routes), "--peer", o.Peer}
	if o.Peer2 != "" {
		a = append(a, "--peer2", o.Peer2)
	}
	if o.NoGracefulRestart {
		a = append(a, "--no-graceful-restart")
	}
	if o.PeerRestartTime != 0 {
		a = append(a, "--peer-restart-time", o.PeerRestartTime.String())
	}
	if o.BFD {
		a = append(a, "--bfd")
	}
	return a
}

// The next hops of the two peers: BIRD's (the first peer) and FRR's.
const (
	bird4, bird6 = "10.10.3.2", "fd00:10:3::2"
	frr4, frr6   = "10.10.4.2", "fd00:10:4::2"
)

// resolvedHops returns the next hops the CE forwards prefix through, from
// `splitplane route list`; none when it has no route.
func resolvedHops(o lab.Options, prefix netip.Prefix) ([]string, error) {
	out, err := exec.Command(o.Binary, "route", "list", prefix.String(), "-o", "json", "--api", "unix:"+o.Socket("api")).CombinedOutput()
	if err != nil {
		if exitCode(err) == 3 { // not found
			return nil, nil
		}
		return nil, fmt.Errorf("route list: %v: %s", err, out)
	}
	var routes []struct {
		Installed bool     `json:"installed"`
		Resolved  []string `json:"resolved_next_hops"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("route list: %v: %s", err, out)
	}
	for _, r := range routes {
		if r.Installed {
			slices.Sort(r.Resolved)
			return r.Resolved, nil
		}
	}
	return nil, nil
}

// waitHops waits until the CE forwards prefix through exactly hops.
func waitHops(t *testing.T, o lab.Options, prefix netip.Prefix, hops ...string) {
	t.Helper()
	slices.Sort(hops)
	eventually(t, 30*time.Second, fmt.Sprintf("%s through %v", prefix, hops), func() error {
		got, err := resolvedHops(o, prefix)
		if err != nil {
			return err
		}
		if !slices.Equal(got, hops) {
			return fmt.Errorf("through %v", got)
		}
		return nil
	})
}

// flows sends n UDP flows (source ports 40000 up, two datagrams each) from
// host A to dst port 9, which every BIRD or FRR peer of the lab listens on,
// and returns, for each peer ("peer", "peer2"), the flows it received. A
// flow whose datagrams arrive at both peers fails the test; one that
// arrives nowhere is sent again (a burst can overrun a veth's ring), a few
// times at most.
func flows(t *testing.T, o lab.Options, dst netip.Addr, n int) map[string]int {
	t.Helper()
	network := "udp4"
	if dst.Is6() {
		network = "udp6"
	}
	roles := []string{"peer"}
	if o.Peer2 != "" {
		roles = append(roles, "peer2")
	}
	type datagram struct {
		role string
		port int
	}
	got := make(chan datagram, 1024)
	var sinks []*net.UDPConn
	defer func() {
		for _, c := range sinks {
			c.Close()
		}
	}()
	for _, role := range roles {
		var c *net.UDPConn
		var err error
		inNetns(t, o.Namespace(role), func() {
			c, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		})
		if err != nil {
			t.Fatalf("listen in %s: %v", role, err)
		}
		sinks = append(sinks, c)
		go func() {
			buf := make([]byte, 64)
			for {
				_, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				got <- datagram{role, int(from.Port())}
			}
		}()
	}
	at := map[int]map[string]int{} // flow's port -> peer -> datagrams
	send := func(ports []int) {
		var sendErr error
		inNetns(t, o.Namespace("a"), func() {
			for i, port := range ports {
				c, err := net.ListenUDP(network, &net.UDPAddr{Port: port})
				if err != nil {
					sendErr = err
					return
				}
				for range 2 {
					if _, err := c.WriteToUDPAddrPort([]byte("splitplane ecmp"), netip.AddrPortFrom(dst, 9)); err != nil {
						sendErr = err
					}
				}
				c.Close()
				if i%16 == 15 {
					time.Sleep(time.Millisecond) // gently: a veth ring holds 256 frames
				}
			}
		})
		if sendErr != nil {
			t.Fatalf("send from host A: %v", sendErr)
		}
		want := 2 * len(ports)
		for want > 0 {
			select {
			case d := <-got:
				if at[d.port] == nil {
					at[d.port] = map[string]int{}
				}
				at[d.port][d.role]++
				want--
				continue
			case <-time.After(time.Second):
			}
			break
		}
	}
	missing := make([]int, n)
	for i := range n {
		missing[i] = 40000 + i
	}
	for try := 0; try < 3 && len(missing) > 0; try++ {
		send(missing)
		missing = slices.DeleteFunc(missing, func(port int) bool { return len(at[port]) > 0 })
	}
	perPeer := map[string]int{}
	var bad []string
	for i := range n {
		peers := at[40000+i]
		if len(peers) != 1 {
			bad = append(bad, fmt.Sprintf("flow %d: %v", 40000+i, peers))
			continue
		}
		for role := range peers {
			perPeer[role]++
		}
	}
	if len(bad) > 0 {
		t.Fatalf("to %s, %d of %d flows did not arrive at exactly one peer: %s", dst, len(bad), n, strings.Join(bad[:min(len(bad), 10)], "; "))
	}
	return perPeer
}

// checkSpread: n flows from host A to dst are spread over both peers, each
// getting at least a quarter of them (half, give or take a few, from a fair
// hash), and the router's kernel forwards none of it: XDP does.
func checkSpread(t *testing.T, o lab.Options, dst netip.Addr) {
	t.Helper()
	const n = 256
	flows(t, o, dst, n) // the first packets may meet unresolved neighbours
	before := kernelForwarded(t, o, dst)
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	got := flows(t, o, dst, n)
	if k := kernelForwarded(t, o, dst) - before; k != 0 {
		t.Errorf("to %s: the router's kernel forwarded %d packets; XDP should have", dst, k)
	}
	after, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ECMP to %s: %d flows to BIRD, %d to FRR; XDP sent %d packets out of to-peer, %d out of to-peer2", dst, got["peer"], got["peer2"],
		portTx(after, "to-peer")-portTx(st, "to-peer"), portTx(after, "to-peer2")-portTx(st, "to-peer2"))
	if got["peer"] < n/4 || got["peer2"] < n/4 {
		t.Fatalf("to %s: %d flows to BIRD, %d to FRR; want both at least %d", dst, got["peer"], got["peer2"], n/4)
	}
}

// checkAllAt: every flow from host A to dst reaches the one peer, role.
func checkAllAt(t *testing.T, o lab.Options, dst netip.Addr, role string) {
	t.Helper()
	const n = 64
	if got := flows(t, o, dst, n); got[role] != n {
		t.Fatalf("to %s: flows per peer %v, want all %d at %s", dst, got, n, role)
	}
}

// kernelForwarded reads the router kernel's forwarding counter for dst's family.
func kernelForwarded(t *testing.T, o lab.Options, dst netip.Addr) int {
	t.Helper()
	if dst.Is6() {
		return snmp6(t, o.Namespace("rtr"), "Ip6OutForwDatagrams")
	}
	return snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
}

// neighborState is the CE's view of its session to a peer address.
func neighborState(o lab.Options, addr string) (string, error) {
	st, err := lab.GetStatus(o)
	if err != nil {
		return "", err
	}
	for _, n := range st.CE.Neighbors {
		if n.Address == addr {
			return n.State, nil
		}
	}
	return "", fmt.Errorf("the CE has no neighbour %s: %+v", addr, st.CE.Neighbors)
}

// frrFromCE counts the IPv4 routes FRR (the second peer) holds from the CE,
// BIRD's that the CE passes on (but the anycast prefix, which the CE sends
// FRR only while its best path is BIRD's), and how many of them are stale
// (kept through a graceful restart).
func frrFromCE(o lab.Options) (routes, stale int, err error) {
	out, err := lab.FRRPeerCommand(o, "peer2", "show bgp ipv4 unicast json")
	if err != nil {
		return 0, 0, err
	}
	var table struct {
		Routes map[string][]struct {
			Stale    bool `json:"stale"`
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		return 0, 0, fmt.Errorf("vtysh show bgp ipv4 unicast json: %w: %.200s", err, out)
	}
	for prefix, paths := range table.Routes {
		if prefix == lab.AnycastNet().String() {
			continue
		}
		for _, p := range paths {
			if len(p.Nexthops) > 0 && p.Nexthops[0].IP == "10.10.4.1" {
				routes++
				if p.Stale {
					stale++
				}
			}
		}
	}
	return routes, stale, nil
}

// setLink sets the peer's end of its link down or up, as a cable pulled at
// the far end would (the router's port loses its carrier). Up restores what
// the link going down took from the peer's namespace: its IPv6 address and
// its default routes.
func setLink(t *testing.T, o lab.Options, role, state string) {
	t.Helper()
	ns := o.Namespace(role)
	addr6, gw, gw6 := frr6, "10.10.4.1", "fd00:10:4::1"
	if role == "peer" {
		addr6, gw, gw6 = bird6, "10.10.3.1", "fd00:10:3::1"
	}
	cmds := [][]string{{"link", "set", "eth0", state}}
	if state == "up" {
		cmds = append(cmds,
			[]string{"-6", "addr", "replace", addr6 + "/64", "dev", "eth0", "nodad"},
			[]string{"route", "replace", "default", "via", gw},
			[]string{"-6", "route", "replace", "default", "via", gw6})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v in %s: %v: %s", c, ns, err, out)
		}
	}
}

// silence makes FRR (the second peer) fall silent ("add"), its link up and
// its connection open: a blackhole route in its namespace swallows
// everything it sends the router; "del" lets it be heard again.
func silence(t *testing.T, o lab.Options, verb string) {
	t.Helper()
	for _, c := range [][]string{{"route", verb, "blackhole", "10.10.4.1/32"}, {"-6", "route", verb, "blackhole", "fd00:10:4::1/128"}} {
		if out, err := exec.Command("ip", append([]string{"-n", o.Namespace("peer2")}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", c, err, out)
		}
	}
}

// TestInteropECMP: BIRD and FRR, two third-party BGP daemons in two ASes,
// announce the same IPv4 and IPv6 prefixes with themselves as the next
// hop. With graceful restart on, as a production router runs:
//
//   - the CE installs both paths as an ECMP group and XDP spreads host A's
//     flows over both peers (each flow whole at one of them);
//   - the CE killed and restarted: the FE forwards a 20 ms ping stream
//     without a loss, FRR keeps the CE's routes (stale) meanwhile, and
//     everything reconverges;
//   - FRR's link going down takes its next hop out of the FIB at once
//     (not after the hold time: a next hop on a port without carrier is
//     unreachable, graceful restart or not), and back when it comes up;
//   - FRR silent (its packets blackholed, no FIN): the hold timer ends the
//     session, which GoBGP takes for a restart: the paths stay, stale, for
//     FRR's restart time, then go;
//   - FRR killed: as graceful restart promises a restarting peer, the CE
//     keeps its routes, stale, and forwards to it, for the restart time FRR
//     announced; then sweeps them, and every flow goes to BIRD. FRR started
//     again: both paths again;
//   - BIRD hung: BFD takes its session and routes down in about a second,
//     graceful restart notwithstanding, and every flow goes to FRR.
func TestInteropECMP(t *testing.T) {
	t.Parallel()
	requireLab(t)
	requireBIRD(t)
	requireFRR(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spe", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin,
		Peer: "bird", Peer2: "frr", Routes: 100, PeerRestartTime: 8 * time.Second, BFD: true}
	ecmpLab(t, o)
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if st.BGPState != "established" || len(st.CE.Neighbors) != 2 || st.CERoutes != o.RouteCount() || st.FERoutes != o.RouteCount() {
		t.Fatalf("after lab up: neighbours %+v, CE %d routes, FE %d; want both established, %d routes", st.CE.Neighbors, st.CERoutes, st.FERoutes, o.RouteCount())
	}
	if st.Peer.State != "established" || st.Peer2 == nil || st.Peer2.State != "established" {
		t.Fatalf("the peers' own views: BIRD %+v, FRR %+v", st.Peer, st.Peer2)
	}

	// ECMP through the XDP datapath, IPv4 and IPv6.
	checkSpread(t, o, lab.AnycastAddr())
	checkSpread(t, o, lab.AnycastAddr6())

	// The CE killed and restarted under a steady ping stream.
	routes, _, err := frrFromCE(o)
	if err != nil || routes != o.Routes+1 { // BIRD's table and 198.51.100.0/24, through the CE
		t.Fatalf("FRR holds %d routes from the CE, want %d: %v", routes, o.Routes+1, err)
	}
	ping := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-q", "-i", "0.02", "-c", "400", "-W", "1", lab.AnycastAddr().String())
	var pingOut strings.Builder
	ping.Stdout, ping.Stderr = &pingOut, &pingOut
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ping.Process.Kill() }) // if the test ends early
	pingDone := make(chan error, 1)
	var pingEnded atomic.Bool
	go func() {
		err := ping.Wait()
		pingEnded.Store(true)
		pingDone <- err
	}()
	time.Sleep(time.Second)
	if err := lab.Stop(o, "ce", true); err != nil {
		t.Fatal(err)
	}
	ceKilled := time.Now()
	eventually(t, 15*time.Second, "FRR keeps the CE's routes, stale, while the CE is away", func() error {
		routes, stale, err := frrFromCE(o)
		if err != nil {
			return err
		}
		if routes != o.Routes+1 || stale != routes {
			return fmt.Errorf("FRR holds %d routes from the CE, %d stale", routes, stale)
		}
		return nil
	})
	if err := lab.Start(o, "ce"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	eventually(t, 40*time.Second, "everything reconverged after the CE restart", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if st.BGPState != "established" || len(st.CE.FEs) != 1 || !st.CE.FEs[0].Synced || st.CERoutes != o.RouteCount() || st.FERoutes != o.RouteCount() {
			return fmt.Errorf("sessions %+v, CE %d routes, FE %d, FEs %+v", st.CE.Neighbors, st.CERoutes, st.FERoutes, st.CE.FEs)
		}
		routes, stale, err := frrFromCE(o)
		if err != nil {
			return err
		}
		if routes != o.Routes+1 || stale != 0 {
			return fmt.Errorf("FRR holds %d routes from the CE, %d stale", routes, stale)
		}
		return nil
	})
	t.Logf("CE killed, started again after %.1fs, everything reconverged %.1fs after the kill", restarted.Sub(ceKilled).Seconds(), time.Since(ceKilled).Seconds())
	if pingEnded.Load() {
		t.Logf("note: the ping stream ended before the lab reconverged; the resync went unwatched")
	}
	select {
	case err = <-pingDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the ping did not end")
	}
	if err != nil || !strings.Contains(pingOut.String(), " 0% packet loss") {
		t.Fatalf("packets lost while the CE restarted (%v):\n%s", err, pingOut.String())
	}
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)

	// FRR's link down: its next hops leave the FIB at once, every flow
	// goes to BIRD; and come back with the link.
	setLink(t, o, "peer2", "down")
	down := time.Now()
	waitHops(t, o, lab.AnycastNet(), bird4)
	waitHops(t, o, lab.AnycastNet6(), bird6)
	t.Logf("FRR's link down: its next hops out of the FIB after %.1fs", time.Since(down).Seconds())
	checkAllAt(t, o, lab.AnycastAddr(), "peer")
	checkAllAt(t, o, lab.AnycastAddr6(), "peer")
	setLink(t, o, "peer2", "up")
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)
	eventually(t, 30*time.Second, "the session to FRR established", func() error {
		if s, err := neighborState(o, frr4); err != nil || s != "established" {
			return fmt.Errorf("%q %v", s, err)
		}
		return nil
	})

	// FRR silent: the hold timer ends the session and GoBGP, as BIRD
	// would, takes that for a restart: FRR's paths stay, stale, for its
	// restart time, then go.
	silence(t, o, "add")
	silent := time.Now()
	eventually(t, 20*time.Second, "the hold timer ends the session to FRR", func() error {
		if s, err := neighborState(o, frr4); err != nil || s == "established" {
			return fmt.Errorf("%q %v", s, err)
		}
		return nil
	})
	expired := time.Now()
	if hops, err := resolvedHops(o, lab.AnycastNet()); err != nil || len(hops) != 2 {
		t.Fatalf("FRR's path gone when its session ended (%v, %v); graceful restart should keep it for %s", hops, err, o.PeerRestartTime)
	}
	waitHops(t, o, lab.AnycastNet(), bird4)
	waitHops(t, o, lab.AnycastNet6(), bird6)
	t.Logf("FRR silent: the session ended %.1fs later (hold time 9s), its paths swept %.1fs after that (restart time %s)",
		expired.Sub(silent).Seconds(), time.Since(expired).Seconds(), o.PeerRestartTime)
	checkAllAt(t, o, lab.AnycastAddr(), "peer")
	silence(t, o, "del")
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)
	eventually(t, 30*time.Second, "the session to FRR established", func() error {
		if s, err := neighborState(o, frr4); err != nil || s != "established" {
			return fmt.Errorf("%q %v", s, err)
		}
		return nil
	})

	// FRR killed: graceful restart keeps its routes for its restart time
	// (8s here), then they are swept.
	if err := lab.Stop(o, "peer2", true); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, 10*time.Second, "the CE sees the session to FRR end", func() error {
		if s, err := neighborState(o, frr4); err != nil || s == "established" {
			return fmt.Errorf("%q %v", s, err)
		}
		return nil
	})
	if hops, err := resolvedHops(o, lab.AnycastNet()); err != nil || len(hops) != 2 {
		t.Fatalf("the CE dropped FRR's path at once (%v, %v); graceful restart should keep it for %s", hops, err, o.PeerRestartTime)
	}
	checkSpread(t, o, lab.AnycastAddr()) // FRR's namespace still forwards: graceful restart's premise
	waitHops(t, o, lab.AnycastNet(), bird4)
	waitHops(t, o, lab.AnycastNet6(), bird6)
	if d := time.Since(killed); d < o.PeerRestartTime-time.Second {
		t.Fatalf("FRR's stale paths swept %.1fs after it died, before its restart time, %s", d.Seconds(), o.PeerRestartTime)
	}
	t.Logf("FRR killed: its paths kept (stale) and swept %.1fs later (restart time %s)", time.Since(killed).Seconds(), o.PeerRestartTime)
	checkAllAt(t, o, lab.AnycastAddr(), "peer")
	checkAllAt(t, o, lab.AnycastAddr6(), "peer")
	if err := lab.Start(o, "peer2"); err != nil {
		t.Fatal(err)
	}
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)
	checkSpread(t, o, lab.AnycastAddr())

	// BIRD hangs (SIGSTOP): its kernel still holds the connection open, no
	// FIN, and graceful restart would keep its routes through a hold timer
	// expiry. BFD notices in about a second and the CE resets the session
	// with a Cease, which is no graceful restart: BIRD's paths and its
	// table are withdrawn at once, every flow goes to FRR.
	pid, err := lab.Pid(o, "peer")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	hung := time.Now()
	deadline := hung.Add(6 * time.Second) // well inside the hold time
	for {
		hops, err := resolvedHops(o, lab.AnycastNet())
		var c ce.Status
		serr := status.Get(o.Socket("ce"), "/", &c) // BIRD's own status hangs with it
		if err == nil && serr == nil && slices.Equal(hops, []string{frr4}) && c.Routes == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after BIRD hung: %s through %v (%v), CE %d routes (%v); want only FRR's anycast routes",
				time.Since(hung), lab.AnycastNet(), hops, err, c.Routes, serr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("BIRD hung: BFD took its session and routes down %.1fs later (graceful restart on)", time.Since(hung).Seconds())
	waitHops(t, o, lab.AnycastNet6(), frr6)
	checkAllAt(t, o, lab.AnycastAddr(), "peer2")
	checkAllAt(t, o, lab.AnycastAddr6(), "peer2")
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// TestPeerFailureWithoutGR: a peer that disappears, with graceful restart
// off (both sides), the classic BGP behaviour: BIRD and FRR share the
// anycast prefixes by ECMP as above, and
//
//   - FRR falls silent (its packets to the router blackholed, its link
//     up: no FIN, no NOTIFICATION reaches the CE): its paths stay until the
//     hold time (9s) runs out, then are withdrawn and every flow goes to
//     BIRD; once FRR is heard again, the session and both paths come back;
//   - BIRD's process killed: the kernel closes its connection, so its
//     routes (and the whole generated table) are withdrawn at once, long
//     before the hold time, and every flow goes to FRR.
func TestPeerFailureWithoutGR(t *testing.T) {
	t.Parallel()
	requireLab(t)
	requireBIRD(t)
	requireFRR(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spn", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin,
		Peer: "bird", Peer2: "frr", Routes: 100, NoGracefulRestart: true}
	ecmpLab(t, o)
	checkSpread(t, o, lab.AnycastAddr())

	// FRR silent: a blackhole route in its namespace swallows everything
	// it sends the router.
	silence(t, o, "add")
	silent := time.Now()
	// The hold timer runs for 9s from FRR's last keepalive, at most 3s
	// before it fell silent: until 6s, nothing may change.
	time.Sleep(4 * time.Second)
	if hops, err := resolvedHops(o, lab.AnycastNet()); err != nil || len(hops) != 2 {
		t.Fatalf("FRR's path gone %s after it fell silent, before the hold time: %v %v", time.Since(silent), hops, err)
	}
	waitHops(t, o, lab.AnycastNet(), bird4)
	waitHops(t, o, lab.AnycastNet6(), bird6)
	t.Logf("FRR silent: its paths withdrawn %.1fs later (hold time 9s)", time.Since(silent).Seconds())
	if s, err := neighborState(o, frr4); err != nil || s == "established" {
		t.Fatalf("FRR's paths withdrawn but the session %q (%v)", s, err)
	}
	checkAllAt(t, o, lab.AnycastAddr(), "peer")
	checkAllAt(t, o, lab.AnycastAddr6(), "peer")
	silence(t, o, "del")
	waitHops(t, o, lab.AnycastNet(), bird4, frr4)
	waitHops(t, o, lab.AnycastNet6(), bird6, frr6)

	// BIRD killed: withdrawn at once.
	if err := lab.Stop(o, "peer", true); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deadline := killed.Add(6 * time.Second) // well inside the hold time
	for {
		hops, err := resolvedHops(o, lab.AnycastNet())
		st, serr := lab.GetStatus(o)
		if err == nil && serr == nil && slices.Equal(hops, []string{frr4}) && st.CERoutes == 2 && st.FERoutes == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after BIRD was killed: %s through %v (%v), CE %d routes, FE %d (%v); want only FRR's anycast routes",
				time.Since(killed), lab.AnycastNet(), hops, err, st.CERoutes, st.FERoutes, serr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("BIRD killed: its routes withdrawn %.1fs later", time.Since(killed).Seconds())
	waitHops(t, o, lab.AnycastNet6(), frr6)
	checkAllAt(t, o, lab.AnycastAddr(), "peer2")
	checkAllAt(t, o, lab.AnycastAddr6(), "peer2")
}
