package integration_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/status"
)

// TestMultiFE: one CE controlling two FEs on two "servers" (namespaces
// spm-rtr and spm-rtr2), FE 2 associated over the management LAN with TCP
// and mutual TLS. Both get the same FIB, each forwards between its own
// ports through XDP, a route change reaches both, a next hop that only FE
// 1 has a port towards leaves FE 2's copy of the route unresolved (to its
// kernel), and FE 2 killed does not disturb FE 1; restarted, it is synced
// again.
func TestMultiFE(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spm", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin, FEs: 2, Routes: 500}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() {
		if err := lab.Down(o); err != nil {
			t.Errorf("cleanup lab down: %v", err)
		}
	})
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--fes", "2", "--routes", "500")...); err != nil {
		t.Fatalf("lab up --fes 2: %v\n%s", err, out)
	}
	want := o.RouteCount()

	// Both associated (FE 2 from the management LAN) and synced, with the
	// CE's routes.
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CE.FEs) != 2 || len(st.OtherFEs) != 1 {
		t.Fatalf("the CE has %d FEs (%+v), the lab reports %d besides FE 1; want 2", len(st.CE.FEs), st.CE.FEs, len(st.OtherFEs))
	}
	for i, f := range st.CE.FEs {
		from := fmt.Sprintf("10.10.0.%d:", i+1)
		if f.ID != fmt.Sprintf("FE(%d)", i+1) || !f.Synced || !strings.HasPrefix(f.Remote, from) {
			t.Fatalf("the CE's FE %d: %s synced=%v from %s; want FE(%d), synced, from %s*", i+1, f.ID, f.Synced, f.Remote, i+1, from)
		}
	}
	for n := 1; n <= 2; n++ {
		if f := feOf(st, n); !f.Associated || f.Routes != want || f.Programmed != want || st.CERoutes != want {
			t.Fatalf("FE %d: associated=%v, %d routes (%d programmed); CE %d; want %d everywhere", n, f.Associated, f.Routes, f.Programmed, st.CERoutes, want)
		}
	}
	// The status names both.
	if out, err := splitplane(t, bin, args("lab", "status")...); err != nil || !strings.Contains(out, `FE(2) "lab-fe2" synced=true`) || !strings.Contains(out, "FE 2: associated=true") {
		t.Fatalf("lab status: %v\n%s", err, out)
	}

	// Traffic through each FE, from its own host A to its own host B.
	checkThroughFE(t, o, 1, lab.HostBAddr())
	checkThroughFE(t, o, 2, lab.HostBAddr())

	// The peer withdraws host B's prefix: it leaves both FEs, and neither
	// forwards to it; announced again, both do.
	if out, err := splitplane(t, bin, args("lab", "peer", "withdraw", lab.HostBNet().String())...); err != nil {
		t.Fatalf("withdraw: %v\n%s", err, out)
	}
	waitFERoutes(t, o, want-1, want-1)
	for n := 1; n <= 2; n++ {
		if out, err := pingFromFE(o, n, lab.HostBAddr(), 1); err == nil || !strings.Contains(out, "Unreachable") {
			t.Fatalf("ping through FE %d after the withdrawal: %v, want an ICMP unreachable\n%s", n, err, out)
		}
	}
	if out, err := splitplane(t, bin, args("lab", "peer", "announce", lab.HostBNet().String())...); err != nil {
		t.Fatalf("announce: %v\n%s", err, out)
	}
	waitFERoutes(t, o, want, want)
	checkThroughFE(t, o, 1, lab.HostBAddr())
	checkThroughFE(t, o, 2, lab.HostBAddr())

	// A route through the peer, whose link only FE 1 has: the CE resolves
	// it (through FE 1's to-peer) and gives it to both FEs, as it gives
	// them one FIB; FE 1 resolves its gateway, FE 2 cannot, so FE 2's XDP
	// hands its packets to FE 2's kernel, which has no route either (its
	// copy fails) and answers Net Unreachable.
	api := "unix:" + o.Socket("api")
	if out, err := splitplane(t, bin, "route", "add", "192.0.2.0/24", "via", "10.10.3.2", "--api", api); err != nil {
		t.Fatalf("route add: %v\n%s", err, out)
	}
	waitFERoutes(t, o, want+1, want+1)
	st, err = lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if f1, f2 := feOf(st, 1), feOf(st, 2); f1.Resolved != f1.Gateways || f2.Gateways != f1.Gateways || f2.Resolved != f2.Gateways-1 {
		t.Fatalf("gateways resolved: FE 1 %d/%d, FE 2 %d/%d; want all on FE 1, all but the peer on FE 2", f1.Resolved, f1.Gateways, f2.Resolved, f2.Gateways)
	}
	noNexthop := feOf(st, 2).Counters["pass_no_nexthop"]
	if out, err := pingFromFE(o, 2, netip.MustParseAddr("192.0.2.1"), 1); err == nil || !strings.Contains(out, "Unreachable") {
		t.Fatalf("ping through FE 2 to a next hop only FE 1 reaches: %v, want an ICMP unreachable\n%s", err, out)
	}
	if st, err = lab.GetStatus(o); err != nil {
		t.Fatal(err)
	}
	if feOf(st, 2).Counters["pass_no_nexthop"] == noNexthop {
		t.Fatalf("FE 2's XDP did not hand the packet to its kernel as unresolved (counters %v)", feOf(st, 2).Counters)
	}
	if out, err := splitplane(t, bin, "route", "delete", "192.0.2.0/24", "--api", api); err != nil {
		t.Fatalf("route delete: %v\n%s", err, out)
	}
	waitFERoutes(t, o, want, want)

	// FE 2 killed while host A pings host B through FE 1 every 20 ms: no
	// ping is lost, FE 1's association and routes do not move, and the CE
	// forgets FE 2.
	before := st.CE.FEs[0]
	ping := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"),
		"ping", "-q", "-i", "0.02", "-c", "100", "-W", "1", lab.HostBAddr().String())
	var out strings.Builder
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := lab.Stop(o, "fe2", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the CE without FE 2", func() error {
		st, err := ceStatus(o)
		if err != nil {
			return err
		}
		if len(st.FEs) != 1 {
			return fmt.Errorf("FEs %+v", st.FEs)
		}
		return nil
	})
	if err := ping.Wait(); err != nil || !strings.Contains(out.String(), " 0% packet loss") {
		t.Fatalf("ping through FE 1 while FE 2 was killed: %v\n%s", err, out.String())
	}
	c, err := ceStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	var f1 fe.Status
	if err := status.Get(o.Socket("fe"), "/", &f1); err != nil {
		t.Fatal(err)
	}
	if after := c.FEs[0]; after.ID != before.ID || !after.AssociatedAt.Equal(before.AssociatedAt) || !after.Synced || after.Failed != before.Failed ||
		c.Routes != want || f1.Routes != want || f1.ProtocolErrors != 0 || f1.DatapathErrors != 0 {
		t.Fatalf("FE 1 after FE 2 was killed: CE's view %+v (was %+v), CE routes %d, FE 1 routes %d, protocol errors %d, datapath errors %d",
			after, before, c.Routes, f1.Routes, f1.ProtocolErrors, f1.DatapathErrors)
	}
	checkThroughFE(t, o, 1, lab.HostBAddr())

	// FE 2 back: a new association, a full sync, forwarding again.
	if err := lab.Start(o, "fe2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "FE 2 synced again", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != 2 || !st.CE.FEs[1].Synced || feOf(st, 2).Routes != want {
			return fmt.Errorf("CE's FEs %+v, FE 2 routes %d", st.CE.FEs, feOf(st, 2).Routes)
		}
		return nil
	})
	checkThroughFE(t, o, 2, lab.HostBAddr())

	// lab down, not told how many FEs there were, removes every namespace.
	if out, err := splitplane(t, bin, args("lab", "down")...); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	assertNoLab(t, o)
	for _, role := range []string{"rtr2", "a2", "b2"} {
		if _, err := os.Stat("/run/netns/" + o.Namespace(role)); err == nil {
			t.Errorf("namespace %s still exists after lab down", o.Namespace(role))
		}
	}
}

// TestLabFEsOption: a number of FEs the lab cannot build is refused before
// anything is made (no root needed).
func TestLabFEsOption(t *testing.T) {
	for _, n := range []int{-1, lab.MaxFEs + 1} {
		err := lab.Up(context.Background(), lab.Options{Name: "spx", Dir: t.TempDir(), Binary: "/nonexistent", FEs: n})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("fes %d", n)) {
			t.Errorf("lab up with %d FEs: %v, want an error naming fes %d", n, err, n)
		}
	}
	if _, err := os.Stat("/run/netns/spx-rtr"); err == nil {
		t.Error("a refused lab up made namespace spx-rtr")
	}
}

// feOf returns FE n's status from the lab's.
func feOf(st lab.Status, n int) fe.Status {
	if n == 1 {
		return st.FE
	}
	if n-2 < len(st.OtherFEs) {
		return st.OtherFEs[n-2]
	}
	return fe.Status{}
}

// ceStatus asks the lab's CE for its status.
func ceStatus(o lab.Options) (ce.Status, error) {
	var c ce.Status
	err := status.Get(o.Socket("ce"), "/", &c)
	return c, err
}

// pingFromFE pings dst count times from FE n's host A, through FE n, and
// returns ping's output; an error if a packet was lost.
func pingFromFE(o lab.Options, n int, dst netip.Addr, count int) (string, error) {
	_, sfx := lab.FEName(n)
	out, err := exec.Command("nsenter", "--net=/run/netns/"+o.Namespace("a"+sfx),
		"ping", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "1", dst.String()).CombinedOutput()
	if err == nil && !strings.Contains(string(out), " 0% packet loss") {
		err = fmt.Errorf("packets lost")
	}
	return string(out), err
}

// checkThroughFE: FE n's host A reaches dst through FE n's XDP program:
// FE n forwards the pings both ways, its router's kernel forwards none of
// them, and no other FE sees them.
func checkThroughFE(t *testing.T, o lab.Options, n int, dst netip.Addr) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("ping through FE %d", n), func() error {
		_, err := pingFromFE(o, n, dst, 1)
		return err
	})
	_, sfx := lab.FEName(n)
	rtr := o.Namespace("rtr" + sfx)
	before, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	kernelBefore := snmp(t, rtr, "Ip", "ForwDatagrams")
	if out, err := pingFromFE(o, n, dst, 3); err != nil {
		t.Fatalf("ping through FE %d: %v\n%s", n, err, out)
	}
	if k := snmp(t, rtr, "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("FE %d's kernel forwarded %d packets of the ping; XDP should have", n, k)
	}
	after, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= 1+len(after.OtherFEs); m++ {
		got := feOf(after, m).Counters["forwarded"] - feOf(before, m).Counters["forwarded"]
		if m == n && got < 6 {
			t.Fatalf("FE %d's XDP forwarded %d packets of a 3-packet ping through it, want >= 6", n, got)
		}
		if m != n && got != 0 {
			t.Fatalf("FE %d's XDP forwarded %d packets while host A of FE %d pinged through FE %d", m, got, n, n)
		}
	}
}

// waitFERoutes waits until FE 1 holds n1 routes and FE 2 n2.
func waitFERoutes(t *testing.T, o lab.Options, n1, n2 int) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("%d routes in FE 1, %d in FE 2", n1, n2), func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if feOf(st, 1).Routes != n1 || feOf(st, 2).Routes != n2 {
			return fmt.Errorf("FE 1 %d, FE 2 %d routes", feOf(st, 1).Routes, feOf(st, 2).Routes)
		}
		return nil
	})
}
