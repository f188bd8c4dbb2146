package integration_test

import (
	"encoding/json"
	"errors"
	"fmt"
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

// meshRow is one FE of `splitplane fe mesh -o json`.
type meshRow struct {
	ID       string      `json:"id"`
	EgressOf int         `json:"egress_of_nexthops"`
	Links    []ce.FELink `json:"inter_fe_links"`
}

// TestClusterLab: `lab up --cluster 3` builds one router across three FE
// "servers" (namespaces spk-rtr, spk-rtr2, spk-rtr3) joined by a full mesh
// of inter-FE links, each FE with a host of its own. Every FE associates
// and syncs; the CE sees each FE's two links up to the right peers; every
// FE holds the same nexthop egress rows, naming FE 1 for the peer's
// routes' next hop (host B, behind FE 1) and FE n for host n's site; host
// 1 pings host 3's site and the packets cross the FEs in XDP (checkCrossFE);
// under a load past the links' declared capacity FE 1 spills flows through
// FE 2 (checkVLBSpill); a mesh link taken down shows down in the CE's view and moves no row (no
// gateway is behind it) while the pings go through FE 2; FE 3 killed and restarted comes back with its
// links; lab down, not told it was a cluster, leaves nothing.
func TestClusterLab(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	const n = 3
	o := lab.Options{Name: "spk", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin, Cluster: n, Routes: 200, MeshCapacityMbps: 1}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() {
		if err := lab.Down(o); err != nil {
			t.Errorf("cleanup lab down: %v", err)
		}
	})
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--cluster", "3", "--routes", "200", "--mesh-capacity-mbps", "1")...); err != nil {
		t.Fatalf("lab up --cluster 3: %v\n%s", err, out)
	}
	want := o.RouteCount()

	// Every FE associated and synced, with the CE's routes (the peer's and
	// the static routes to the hosts' sites).
	st, err := lab.GetStatus(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CE.FEs) != n || len(st.OtherFEs) != n-1 {
		t.Fatalf("the CE has %d FEs (%+v), the lab reports %d besides FE 1; want %d", len(st.CE.FEs), st.CE.FEs, len(st.OtherFEs), n)
	}
	for i := 1; i <= n; i++ {
		f := feOf(st, i)
		if c := st.CE.FEs[i-1]; c.ID != fmt.Sprintf("FE(%d)", i) || !c.Synced || !f.Associated || f.Routes != want || st.CERoutes != want {
			t.Fatalf("FE %d: CE's view %s synced=%v; FE associated=%v with %d routes; CE %d; want FE(%d), synced, %d routes",
				i, c.ID, c.Synced, f.Associated, f.Routes, st.CERoutes, i, want)
		}
	}
	portOf := func(st ce.Status, feN int, name string) uint32 {
		t.Helper()
		for _, p := range st.FEs[feN-1].Ports {
			if p.Name == name {
				return p.ID
			}
		}
		t.Fatalf("FE %d reported no port %s to the CE: %+v", feN, name, st.FEs[feN-1].Ports)
		return 0
	}
	toB := portOf(st.CE, 1, "to-b")

	// The mesh as `fe mesh` reads it from the CE: two links per FE, up,
	// each to the FE its name says; FE 1 the egress of host B and host
	// 1 (IPv4 and IPv6), FE 2 and FE 3 of their host.
	mesh := func() []meshRow {
		t.Helper()
		out, err := splitplane(t, bin, "fe", "mesh", "--status-socket", o.Socket("ce"), "-o", "json")
		if err != nil {
			t.Fatalf("fe mesh: %v\n%s", err, out)
		}
		var m []meshRow
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("fe mesh -o json: %v\n%s", err, out)
		}
		return m
	}
	// linksUp checks the mesh's state: every link up but down's (FE i's
	// link to FE j and FE j's to FE i, when given).
	linksUp := func(m []meshRow, down ...int) error {
		if len(m) != n {
			return fmt.Errorf("%d FEs in the mesh, want %d: %+v", len(m), n, m)
		}
		for i, f := range m {
			var peers []uint32
			for _, l := range f.Links {
				peers = append(peers, l.PeerFE)
				isDown := len(down) == 2 && (i+1 == down[0] && int(l.PeerFE) == down[1] || i+1 == down[1] && int(l.PeerFE) == down[0])
				if l.PortName != fmt.Sprintf("ife%d", l.PeerFE) || l.Up == isDown || !l.PeerAssociated {
					return fmt.Errorf("%s: link %+v; want port ife%d, up %v, peer associated", f.ID, l, l.PeerFE, !isDown)
				}
			}
			slices.Sort(peers)
			others := slices.DeleteFunc([]uint32{1, 2, 3}, func(p uint32) bool { return int(p) == i+1 })
			if f.ID != fmt.Sprintf("FE(%d)", i+1) || !slices.Equal(peers, others) {
				return fmt.Errorf("%s: links to FEs %v, want %v", f.ID, peers, others)
			}
		}
		return nil
	}
	m := mesh()
	if err := linksUp(m); err != nil {
		t.Fatal(err)
	}
	for i, f := range m {
		wantOf := 2 // host n, IPv4 and IPv6
		if i == 0 {
			wantOf = 4 // and host B
		}
		if f.EgressOf != wantOf {
			t.Errorf("%s is the egress of %d nexthops, want %d", f.ID, f.EgressOf, wantOf)
		}
	}
	// lab status prints it.
	if out, err := splitplane(t, bin, args("lab", "status")...); err != nil ||
		!strings.Contains(out, "mesh: FE(2) egress of 2 nexthops; inter-FE links ife1 to FE(1) up, ife3 to FE(3) up") {
		t.Fatalf("lab status does not show FE 2's links: %v\n%s", err, out)
	}

	// Every FE holds the same egress rows (remote: the row's FE is
	// another); FE 2 and FE 3 reach the peer's routes' next hop (host B)
	// through FE 1's to-b and host n's site through FE n's to-hN, in both
	// families.
	rowsOf := func() [][]fe.EgressRow {
		t.Helper()
		var all [][]fe.EgressRow
		for i := 1; i <= n; i++ {
			name, _ := lab.FEName(i)
			var rows []fe.EgressRow
			if err := status.Get(o.Socket(name), "/egress", &rows); err != nil {
				t.Fatalf("FE %d's egress rows: %v", i, err)
			}
			all = append(all, rows)
		}
		return all
	}
	same := func(a, b []fe.EgressRow) bool {
		return slices.EqualFunc(a, b, func(x, y fe.EgressRow) bool {
			return x.IPv6 == y.IPv6 && x.Nexthop == y.Nexthop && x.FE == y.FE && x.Port == y.Port
		})
	}
	rows := rowsOf()
	for i, rs := range rows {
		if !same(rs, rows[0]) {
			t.Fatalf("FE %d's egress rows %+v differ from FE 1's %+v", i+1, rs, rows[0])
		}
		for _, r := range rs {
			if r.Remote != (int(r.FE) != i+1) {
				t.Errorf("FE %d: row %+v: remote %v", i+1, r, r.Remote)
			}
		}
	}
	has := func(rs []fe.EgressRow, ipv6 bool, feN int, port uint32) bool {
		return slices.ContainsFunc(rs, func(r fe.EgressRow) bool { return r.IPv6 == ipv6 && int(r.FE) == feN && r.Port == port })
	}
	for i := 2; i <= n; i++ {
		for _, v6 := range []bool{false, true} {
			if !has(rows[i-1], v6, 1, toB) {
				t.Errorf("FE %d (ipv6 %v): no row naming FE 1's to-b (%d) for the peer's next hop: %+v", i, v6, toB, rows[i-1])
			}
			for h := 1; h <= n; h++ {
				if p := portOf(st.CE, h, fmt.Sprintf("to-h%d", h)); !has(rows[i-1], v6, h, p) {
					t.Errorf("FE %d (ipv6 %v): no row naming FE %d's to-h%d (%d) for its host: %+v", i, v6, h, h, p, rows[i-1])
				}
			}
		}
	}

	// Host 1 sends from its site addresses, whose static routes bring
	// host B's answers back: it reaches host B through FE 1 alone, IPv4
	// and IPv6.
	for _, dst := range []string{lab.HostBAddr().String(), lab.HostBAddr6().String()} {
		h1 := o.ClusterHost(1)
		eventually(t, 10*time.Second, "host 1 pings "+dst, func() error {
			out, err := exec.Command("nsenter", "--net=/run/netns/"+h1.Namespace, "ping", "-c", "1", "-W", "1", dst).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}

	// Host 1 reaches host 3's site across the FEs, in XDP: over ife-1-3.
	checkCrossFE(t, o, n, false)
	// Loaded past what the lab declares its links hold, FE 1 spills flows
	// to FE 3 through FE 2, and stops once the load is gone.
	checkVLBSpill(t, o, n)

	// The mesh link between FE 1 and FE 3 down: both ends down in the
	// CE's view, the others up, and no row moves (no gateway is behind an
	// inter-FE link); host 1 still reaches host 3, through FE 2.
	if out, err := splitplane(t, bin, args("lab", "link", "ife-1-3", "down")...); err != nil {
		t.Fatalf("lab link ife-1-3 down: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "ife-1-3 down in the CE's view", func() error { return linksUp(mesh(), 1, 3) })
	// The port events that took the link down went through the CE's loop,
	// which recomputes the rows on the same event; give a change, had there
	// been one, the time to reach the FEs before looking.
	time.Sleep(time.Second)
	for i, rs := range rowsOf() {
		if !same(rs, rows[i]) {
			t.Errorf("FE %d's egress rows changed when a mesh link went down: %+v, were %+v", i+1, rs, rows[i])
		}
	}
	for i, f := range mesh() {
		if f.EgressOf != m[i].EgressOf {
			t.Errorf("%s is the egress of %d nexthops with ife-1-3 down, was %d", f.ID, f.EgressOf, m[i].EgressOf)
		}
	}
	checkCrossFE(t, o, n, true)
	if out, err := splitplane(t, bin, args("lab", "link", "ife-1-3", "up")...); err != nil {
		t.Fatalf("lab link ife-1-3 up: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "ife-1-3 up again", func() error { return linksUp(mesh()) })
	checkCrossFE(t, o, n, false)

	// FE 3 crashed and started again: associated, synced, its links up.
	if out, err := splitplane(t, bin, args("lab", "restart", "fe3", "--kill")...); err != nil {
		t.Fatalf("lab restart fe3 --kill: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "FE 3 back with its links", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != n || !st.CE.FEs[2].Synced || feOf(st, 3).Routes != want {
			return fmt.Errorf("CE's FEs %+v, FE 3 routes %d", st.CE.FEs, feOf(st, 3).Routes)
		}
		return linksUp(mesh())
	})

	// lab down, not told it was a cluster, removes every namespace (and
	// the mesh veths with them) and stops every process.
	if out, err := splitplane(t, bin, args("lab", "down")...); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	assertNoLab(t, o)
	for _, role := range []string{"rtr2", "rtr3", "h1", "h2", "h3"} {
		if _, err := os.Stat("/run/netns/" + o.Namespace(role)); err == nil {
			t.Errorf("namespace %s still exists after lab down", o.Namespace(role))
		}
	}
	if out, _ := exec.Command("ip", "-o", "link").Output(); strings.Contains(string(out), " ife") {
		t.Errorf("mesh veths left in the root namespace:\n%s", out)
	}
	if procs, _ := exec.Command("pgrep", "-f", bin).Output(); len(strings.TrimSpace(string(procs))) > 0 {
		t.Errorf("processes of %s still running after lab down: %s", bin, procs)
	}
}

// TestLabClusterOption: --cluster outside 2 to MaxFEs, or with --fes, is a
// usage error before anything is made (no root needed).
func TestLabClusterOption(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", "1"}, "--cluster 1: 2 to 4"},
		{[]string{"--cluster", "5"}, "--cluster 5: 2 to 4"},
		{[]string{"--cluster", "3", "--fes", "2"}, "--cluster 3 and --fes 2: one or the other"},
	} {
		cmd := exec.Command(bin, append([]string{"lab", "up", "--name", "spx", "--dir", dir}, c.args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("lab up %v: %v, exit 2 wanted with %q:\n%s", c.args, err, c.want, out)
		}
	}
	if _, err := os.Stat("/run/netns/spx-rtr"); err == nil {
		t.Error("a refused lab up made namespace spx-rtr")
	}
}
