package integration_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/lab"
)

// ifeCounters are the inter-FE counters of the FEs of a cluster lab, and
// each FE namespace's kernel forwarding counters (IPv4 and IPv6), at one
// moment.
type ifeCounters struct {
	ife  []map[string]uint64 // by FE - 1
	forw []int               // by FE - 1: Ip ForwDatagrams + Ip6OutForwDatagrams
}

func readIFECounters(t *testing.T, o lab.Options, n int) ifeCounters {
	t.Helper()
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	var c ifeCounters
	for i := 1; i <= n; i++ {
		m := map[string]uint64{}
		for _, name := range []string{"ife_encap", "ife_via", "ife_decap", "ife_transit", "pass_ife_no_link", "pass_ife_no_nexthop"} {
			m[name] = feOf(st, i).Counters[name]
		}
		c.ife = append(c.ife, m)
		_, si := lab.FEName(i)
		ns := o.Namespace("rtr" + si)
		c.forw = append(c.forw, snmp(t, ns, "Ip", "ForwDatagrams")+snmp6(t, ns, "Ip6OutForwDatagrams"))
	}
	return c
}

// pingFromHost pings dst count times from host ns, and fails unless every
// echo is answered. A size above 0 sends echoes of that many data bytes,
// not to be fragmented.
func pingFromHost(ns, dst string, count, size int) error {
	args := []string{"--net=/run/netns/" + ns, "ping", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "1"}
	if size > 0 {
		args = append(args, "-s", strconv.Itoa(size), "-M", "do")
	}
	out, err := exec.Command("nsenter", append(args, dst)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf(" %d received", count)) {
		return fmt.Errorf("ping %s: %v: %s", dst, err, out)
	}
	return nil
}

// checkCrossFE proves that host 1 reaches host 3's site, IPv4 and IPv6,
// with the packets crossing the FEs in XDP: FE 1 encapsulates the echoes
// and FE 3 delivers them (and the other way for the answers); with via, FE
// 1's direct link to FE 3 is down, so both send through FE 2, which
// passes them on. No FE's kernel forwards any of them.
func checkCrossFE(t *testing.T, o lab.Options, n int, via bool) {
	t.Helper()
	h1, h3 := o.ClusterHost(1), o.ClusterHost(3)
	dsts := []string{h3.SiteAddr.String(), h3.SiteAddr6.String()}
	// Until the FEs have learned their peers' and hosts' MACs, a first
	// packet may go to a kernel: warm up, then count.
	for _, dst := range dsts {
		eventually(t, 15*time.Second, "host 1 reaches host 3's site "+dst, func() error { return pingFromHost(h1.Namespace, dst, 1, 0) })
	}
	// Small echoes, and echoes that fill the hosts' MTU of 1500 (which
	// cross only if the mesh's MTU holds them and the IFE overhead).
	const count = 5
	full := map[string]int{dsts[0]: 1500 - 20 - 8, dsts[1]: 1500 - 40 - 8}
	before := readIFECounters(t, o, n)
	for _, dst := range dsts {
		for _, size := range []int{0, full[dst]} {
			if err := pingFromHost(h1.Namespace, dst, count, size); err != nil {
				t.Fatalf("host 1 to host 3's site (via FE 2: %v): %v", via, err)
			}
		}
	}
	after := readIFECounters(t, o, n)
	moved := func(feN int, name string) uint64 { return after.ife[feN-1][name] - before.ife[feN-1][name] }
	sent := uint64(len(dsts) * 2 * count)
	report := func() string {
		var b strings.Builder
		for i := range after.ife {
			fmt.Fprintf(&b, "FE %d: before %v after %v, kernel forwarded %d -> %d\n", i+1, before.ife[i], after.ife[i], before.forw[i], after.forw[i])
		}
		return b.String()
	}
	t.Logf("host 1 to host 3's site, %d echoes (via FE 2: %v):\n%s", sent, via, report())
	for _, c := range []struct {
		fe   int
		name string
	}{{1, "ife_encap"}, {3, "ife_decap"}, {3, "ife_encap"}, {1, "ife_decap"}} {
		if moved(c.fe, c.name) < sent {
			t.Errorf("FE %d's %s moved by %d for %d echoes and as many answers:\n%s", c.fe, c.name, moved(c.fe, c.name), sent, report())
		}
	}
	if via {
		if moved(1, "ife_via") < sent || moved(3, "ife_via") < sent || moved(2, "ife_transit") < 2*sent {
			t.Errorf("with ife-1-3 down, FE 1's and FE 3's ife_via moved by %d and %d, FE 2's ife_transit by %d; want %d, %d, %d:\n%s",
				moved(1, "ife_via"), moved(3, "ife_via"), moved(2, "ife_transit"), sent, sent, 2*sent, report())
		}
	} else if moved(1, "ife_via") != 0 || moved(2, "ife_transit") != 0 {
		t.Errorf("with the direct link up, FE 1's ife_via moved by %d, FE 2's ife_transit by %d; want 0:\n%s",
			moved(1, "ife_via"), moved(2, "ife_transit"), report())
	}
	for i := range after.forw {
		if after.forw[i] != before.forw[i] {
			t.Errorf("FE %d's kernel forwarded %d datagrams; the XDP datapath should have forwarded them all:\n%s", i+1, after.forw[i]-before.forw[i], report())
		}
	}
}

// upCluster brings up a cluster lab of n FEs named name, with routes BGP
// routes, for a test, and takes it down when the test ends (the logs
// shown if it failed).
func upCluster(t *testing.T, name string, n, routes int) lab.Options {
	t.Helper()
	o := lab.Options{Name: name, Dir: filepath.Join(t.TempDir(), "lab"), Binary: buildBinary(t), Cluster: n, Routes: routes}
	t.Cleanup(func() {
		if err := lab.Down(o); err != nil {
			t.Errorf("cleanup lab down: %v", err)
		}
	})
	logsOnFailure(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lab.Up(ctx, o); err != nil {
		t.Fatalf("lab up --cluster %d: %v", n, err)
	}
	return o
}
