package integration_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/splitplane/splitplane/integration/lab"
)

// checkRouteCheck runs `route get` and `fe verify` against the running lab
// o (its peer announcing 198.51.100.0/24 via host B), then changes one
// entry of the FE's datapath behind the FE's back (the range table's
// direct entry of 198.51.0.0/16, made "no route") and sees both report it,
// the verify metric with them, and both agree again once it is put back.
func checkRouteCheck(t *testing.T, o lab.Options, cli func(...string) (string, error)) {
	t.Helper()
	type hop struct {
		Gateway  string `json:"gateway"`
		PortName string `json:"port_name"`
		DstMAC   string `json:"dst_mac"`
		FE       string `json:"fe"`
	}
	type get struct {
		Kind   string `json:"kind"`
		Prefix string `json:"prefix"`
		Routes []struct {
			Origin    string `json:"origin"`
			Installed bool   `json:"installed"`
		} `json:"routes"`
		Hops []hop `json:"hops"`
		FEs  []struct {
			FE      string `json:"fe"`
			Kind    string `json:"kind"`
			Hops    []hop  `json:"hops"`
			Differs string `json:"differs"`
		} `json:"fes"`
	}
	routeGet := func(addr string) (get, int) {
		t.Helper()
		out, err := cli("route", "get", addr, "-o", "json")
		var g get
		if jerr := json.NewDecoder(strings.NewReader(out)).Decode(&g); jerr != nil { // stderr follows
			t.Fatalf("route get %s: %v %v\n%s", addr, err, jerr, out)
		}
		return g, exitCode(err)
	}
	// A BGP route (the peer's next hop, whichever peer it is), and an IPv6
	// address on host B's link (connected).
	for _, c := range []struct{ addr, kind, prefix, origin string }{
		{lab.HostBAddr().String(), "route", lab.HostBNet().String(), "ORIGIN_BGP"},
		{lab.HostB6().String(), "connected", "fd00:10:2::/64", ""},
	} {
		g, code := routeGet(c.addr)
		switch {
		case code != 0 || g.Kind != c.kind || g.Prefix != c.prefix:
			t.Errorf("route get %s: exit %d, %s %s; want %s %s", c.addr, code, g.Kind, g.Prefix, c.kind, c.prefix)
		case c.origin != "" && (len(g.Routes) != 1 || g.Routes[0].Origin != c.origin || !g.Routes[0].Installed):
			t.Errorf("route get %s: routes %+v, want the installed BGP route", c.addr, g.Routes)
		case len(g.Hops) != 1 || g.Hops[0].PortName == "" || g.Hops[0].FE != "FE(1)":
			t.Errorf("route get %s: next hops %+v, want one behind a port of FE(1)", c.addr, g.Hops)
		case len(g.FEs) != 1 || g.FEs[0].Kind != "route" || g.FEs[0].Differs != "" || len(g.FEs[0].Hops) != 1 ||
			g.FEs[0].Hops[0].Gateway != g.Hops[0].Gateway || g.FEs[0].Hops[0].PortName != g.Hops[0].PortName || (c.origin != "" && g.FEs[0].Hops[0].DstMAC == ""):
			t.Errorf("route get %s: FEs %+v, want FE(1) forwarding by %+v with a MAC", c.addr, g.FEs, g.Hops[0])
		}
	}
	if g, code := routeGet("192.0.2.200"); code != 0 || g.Kind != "no_route" || len(g.FEs) != 1 || g.FEs[0].Kind != "no_route" {
		t.Errorf("route get 192.0.2.200: exit %d %+v, want no route on both", code, g)
	}
	if g, _ := routeGet("10.10.1.1"); g.Kind != "local" || len(g.FEs) != 1 || g.FEs[0].Kind != "local" || g.FEs[0].Differs != "" {
		t.Errorf("route get 10.10.1.1 (the router's): %+v, want local on both", g)
	}
	if out, err := cli("route", "get", "198.51.100.300"); exitCode(err) != 2 || !strings.Contains(out, "198.51.100.300") {
		t.Errorf("route get of a bad address: exit %d\n%s", exitCode(err), out)
	}

	verifyArgs := func(want int, args ...string) string {
		t.Helper()
		out, err := cli(append([]string{"fe", "verify"}, args...)...)
		if code := exitCode(err); code != want {
			t.Fatalf("fe verify: exit %d, want %d\n%s", code, want, out)
		}
		return out
	}
	verify := func(want int) string { t.Helper(); return verifyArgs(want) }
	routes := o.RouteCount() + 1 // the peer's and the API route the test added
	if out := verify(0); !strings.Contains(out, fmt.Sprintf("%d routes in the FIB", routes)) || !strings.Contains(out, "all as the FIB says") {
		t.Errorf("fe verify, all well (want %d routes):\n%s", routes, out)
	}
	if out := verifyArgs(0, "--samples", "50"); !strings.Contains(out, "50 addresses checked") {
		t.Errorf("fe verify, all well:\n%s", out)
	}
	metric := func() string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^splitplane_ce_fe_verify_differences\{fe="FE\(1\)"\} (\S+)$`).FindStringSubmatch(
			getInNetns(t, o.Namespace("rtr"), "http://127.0.0.1:9101/metrics"))
		if m == nil {
			t.Fatal("no splitplane_ce_fe_verify_differences for FE(1) in the CE's metrics")
		}
		return m[1]
	}
	if v := metric(); v != "0" {
		t.Errorf("verify metric after a clean check: %s", v)
	}

	// 198.51.0.0/16 made "no route" in the FE's range table, behind its back.
	direct := feMap(t, o.Namespace("rtr"), "to-b", "dxr_direct")
	key, idx := uint32(198), 51
	var row [256]uint32
	if err := direct.Lookup(key, &row); err != nil {
		t.Fatal(err)
	}
	saved := row[idx]
	row[idx] = 0
	if err := direct.Update(key, &row, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		row[idx] = saved
		if err := direct.Update(key, &row, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	out := verify(5)
	if !strings.Contains(out, "DIFFER") || !regexp.MustCompile(`198\.51\.100\.(0|255): CE: 198\.51\.100\.0/24 via \S+; FE: no_route`).MatchString(out) {
		restore()
		t.Fatalf("fe verify with the entry changed: want 198.51.100.0/24 reported as no route on the FE:\n%s", out)
	}
	if g, code := routeGet("198.51.100.10"); code != 5 || len(g.FEs) != 1 || g.FEs[0].Kind != "no_route" || !strings.Contains(g.FEs[0].Differs, "no_route") {
		t.Errorf("route get 198.51.100.10 with the entry changed: exit %d, %+v", code, g.FEs)
	}
	if v := metric(); v == "0" {
		t.Errorf("verify metric after a check that found differences: %s", v)
	}
	restore()
	verify(0)
	if v := metric(); v != "0" {
		t.Errorf("verify metric after the entry was put back: %s", v)
	}
}

// feMap opens the map called name of the XDP program attached to port dev
// in namespace ns.
func feMap(t *testing.T, ns, dev, name string) *ebpf.Map {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached {
		t.Fatalf("%s in %s has no XDP program", dev, ns)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		if mi, err := m.Info(); err == nil && mi.Name == name {
			t.Cleanup(func() { m.Close() })
			return m
		}
		m.Close()
	}
	t.Fatalf("the XDP program on %s has no map %s", dev, name)
	return nil
}
