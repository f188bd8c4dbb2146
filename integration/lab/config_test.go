package lab

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/fe/datapath"

	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
)

// A big table gets the usual BGP timers and no full copy in the kernel: a
// GoBGP peer holding a million prefixes sends nothing, a keepalive
// included, for longer than the quick 9 s hold time while it builds its
// first UPDATEs, and the FE's copy of a million routes into the kernel
// would cost the two cores ~13 s of CPU and the kernel its memory.
func TestConfigsFollowTableSize(t *testing.T) {
	for _, c := range []struct {
		routes          int
		hold, keepalive string
		kernel          string
	}{
		{10_000, "9s", "3s", "kernel_routes: all "},
		{bigTable, "9s", "3s", "kernel_routes: all "},
		{1_000_000, "90s", "30s", "kernel_routes: default "},
	} {
		o := Options{Name: "cfg", Dir: t.TempDir(), Routes: c.routes, Binary: "/bin/true"}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		if err := o.writeConfigs(); err != nil {
			t.Fatal(err)
		}
		ce, err := os.ReadFile(filepath.Join(o.Dir, "ce.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "hold_time: " + c.hold + "\n    keepalive: " + c.keepalive + "\n"; !strings.Contains(string(ce), want) {
			t.Errorf("%d routes: ce.yaml lacks %q:\n%s", c.routes, want, ce)
		}
		fes, _ := filepath.Glob(filepath.Join(o.Dir, "fe*.yaml"))
		if len(fes) == 0 {
			t.Fatalf("%d routes: no FE config written", c.routes)
		}
		for _, f := range fes {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), c.kernel) {
				t.Errorf("%d routes: %s lacks %q:\n%s", c.routes, filepath.Base(f), c.kernel, b)
			}
		}
		args := o.peerArgs(o.peers()[0])
		if i := slices.Index(args, "--hold-time"); i < 0 || i+1 == len(args) || args[i+1] != c.hold {
			t.Errorf("%d routes: peer arguments %v, want --hold-time %s", c.routes, args, c.hold)
		}
	}
}

// A cluster lab of N FEs: each FE's config declares a link to every other
// FE, on ports ifeM it also lists among its ports, beside its own host's
// port; the CE admits every FE and routes each host's site through the
// host; both configs are valid for the daemons (unknown keys refused).
func TestClusterConfigs(t *testing.T) {
	for _, n := range []int{2, 4} {
		o := Options{Name: "cfg", Dir: t.TempDir(), Routes: 10, Binary: "/bin/true", Cluster: n}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		if o.FEs != n {
			t.Fatalf("cluster %d: FEs %d", n, o.FEs)
		}
		if err := o.writeConfigs(); err != nil {
			t.Fatal(err)
		}
		var c ce.Config
		readYAML(t, filepath.Join(o.Dir, "ce.yaml"), &c)
		if err := c.Validate(); err != nil {
			t.Fatalf("cluster %d: ce.yaml: %v", n, err)
		}
		if want := []string{fmt.Sprintf("1-%d", n)}; !slices.Equal(c.ForCESAllowedFEs, want) {
			t.Errorf("cluster %d: forces_allowed_fes %v, want %v", n, c.ForCESAllowedFEs, want)
		}
		if len(c.StaticRoutes) != 2*n {
			t.Errorf("cluster %d: %d static routes, want %d: %+v", n, len(c.StaticRoutes), 2*n, c.StaticRoutes)
		}
		seen := map[string]bool{}
		for m := 1; m <= n; m++ {
			h := o.ClusterHost(m)
			for _, r := range c.StaticRoutes {
				if (r.Prefix == h.Site.String() && slices.Equal(r.NextHops, []string{h.Addr.String()})) ||
					(r.Prefix == h.Site6.String() && slices.Equal(r.NextHops, []string{h.Addr6.String()})) {
					seen[r.Prefix] = true
				}
			}
			if !seen[h.Site.String()] || !seen[h.Site6.String()] {
				t.Errorf("cluster %d: no static routes %s via %s and %s via %s: %+v", n, h.Site, h.Addr, h.Site6, h.Addr6, c.StaticRoutes)
			}
			for _, a := range []netip.Addr{h.Addr, h.Addr6, h.SiteAddr, h.SiteAddr6} {
				if seen[a.String()] {
					t.Errorf("cluster %d: host %d's %s is another host's too", n, m, a)
				}
				seen[a.String()] = true
			}
			if a := h.Addr; a.As4()[1] == 10 || netip.MustParsePrefix("10.10.0.0/16").Contains(a) {
				t.Errorf("cluster %d: host %d's %s collides with the lab's 10.10.0.0/16", n, m, a)
			}

			name, _ := FEName(m)
			var f fe.Config
			readYAML(t, filepath.Join(o.Dir, name+".yaml"), &f)
			if err := f.Validate(); err != nil {
				t.Fatalf("cluster %d: %s.yaml: %v", n, name, err)
			}
			if f.ID != uint32(m) {
				t.Errorf("cluster %d: %s.yaml id %d", n, name, f.ID)
			}
			var links []fe.InterFELink
			for p := 1; p <= n; p++ {
				if p != m {
					links = append(links, fe.InterFELink{Port: "ife" + strconv.Itoa(p), PeerFE: uint32(p)})
				}
			}
			if !slices.Equal(f.InterFELinks, links) {
				t.Errorf("cluster %d: FE %d inter_fe_links %+v, want %+v", n, m, f.InterFELinks, links)
			}
			for _, l := range links {
				if !slices.Contains(f.Ports, l.Port) {
					t.Errorf("cluster %d: FE %d ports %v lack its link %s", n, m, f.Ports, l.Port)
				}
			}
			want := []string{h.Port}
			if m == 1 {
				want = []string{"to-a", "to-b", "to-peer", h.Port}
			}
			if got := f.Ports[:len(f.Ports)-len(links)]; !slices.Equal(got, want) {
				t.Errorf("cluster %d: FE %d ports %v, want %v and the links", n, m, f.Ports, want)
			}
		}
		if got, want := len(o.namespaces()), 5+2*(n-1); got != want {
			t.Errorf("cluster %d: namespaces %v, want %d (rtr, peer, a, b, h1, and rtrN, hN for the others)", n, o.namespaces(), want)
		}
		if got, want := o.RouteCount(), 10+2+2*n; got != want {
			t.Errorf("cluster %d: route count %d, want %d", n, got, want)
		}
	}
}

// --cluster is 2 to MaxFEs and excludes --fes; mesh link names read back.
func TestClusterOptions(t *testing.T) {
	for _, c := range []struct {
		fes, cluster int
		err          string
	}{
		{0, 1, "cluster 1: 2 to 4"},
		{0, 5, "cluster 5: 2 to 4"},
		{2, 3, "fes 2 and cluster 3: one or the other"},
		{0, 3, ""},
		{3, 3, ""},
	} {
		o := Options{Binary: "/bin/true", FEs: c.fes, Cluster: c.cluster}
		err := o.defaults()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("fes %d cluster %d: %v, want %q", c.fes, c.cluster, err, c.err)
		}
	}
	for _, c := range []struct {
		name string
		i, j int
	}{{"ife-1-3", 1, 3}, {"ife-3-1", 1, 3}, {"ife-2-4", 2, 4}, {"ife-1-1", 0, 0}, {"ife-0-2", 0, 0}, {"ife-1-5", 0, 0}, {"ife-1", 0, 0}, {"eth-1-2", 0, 0}} {
		i, j, err := ParseMeshLink(c.name)
		if i != c.i || j != c.j || (err == nil) != (c.i != 0) {
			t.Errorf("ParseMeshLink(%q) = %d, %d, %v; want %d, %d", c.name, i, j, err, c.i, c.j)
		}
		if err == nil && MeshLinkName(j, i) != fmt.Sprintf("ife-%d-%d", c.i, c.j) {
			t.Errorf("MeshLinkName(%d, %d) = %q", j, i, MeshLinkName(j, i))
		}
	}
	// Room for an inner 1500-byte packet with the overhead the datapath
	// adds (its Ethernet header and four metadata, docs/cluster.md).
	if want := 1500 + datapath.IFEOverhead; MeshMTU() != want {
		t.Errorf("MeshMTU() = %d, want %d", MeshMTU(), want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(path), err, b)
	}
}
