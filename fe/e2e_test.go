package fe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/runtest"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// runCE starts a CE on loopback with BGP off and returns it.
func runCE(t *testing.T, cfg ce.Config) *ce.CE {
	t.Helper()
	cfg.ID, cfg.ASN, cfg.RouterID, cfg.BGPListenPort = 3, 65001, "192.0.2.1", -1
	if cfg.StaticRoutes == nil {
		// The fake FE's port has no addresses: say where next hops are.
		cfg.StaticRoutes = []ce.StaticRoute{{Prefix: "192.0.2.0/24", Connected: true}, {Prefix: "2001:db8::/64", Connected: true}}
	}
	cfg.ForCESListen, cfg.ForCESListenLow = "127.0.0.1:0", "127.0.0.1:0"
	c, err := ce.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, "CE", c.Run, func() bool { return c.Addr() != nil })
	return c
}

// runFE starts an agent with a fake datapath against the CE.
func runFE(t *testing.T, c *ce.CE, cfg Config) (*Agent, *fakeDatapath) {
	t.Helper()
	cfg.Ports = []string{"unused0"}
	cfg.CEAddress, cfg.CEAddressLow = c.Addr().String(), c.LowAddr().String()
	dp := newFake()
	a, err := New(cfg, slog.New(slog.DiscardHandler), WithDatapath(dp, func(netip.Addr) int { return 7 }))
	if err != nil {
		t.Fatal(err)
	}
	a.ports[7] = &port{Name: "p7", Ifindex: 7}
	runtest.Run(t, "FE", a.Run, func() bool { return true })
	return a, dp
}

// ceStatus is c's status; the test fails if the CE does not answer.
func ceStatus(t *testing.T, ctx context.Context, c *ce.CE) ce.Status {
	t.Helper()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A real CE and FE over mutual TLS on both channels: discovery, the
// heartbeat policy, the atomic full sync, incremental updates, and a pcap of
// the exchange; an FE with a certificate from another CA is refused.
func TestCEAndFEOverTLS(t *testing.T) {
	dir := t.TempDir()
	// The FE's certificate names its FE ID (fe-1), as the CE requires.
	pki, err := forces.WritePKI(dir, time.Hour, "ce", forces.FECertName(1))
	if err != nil {
		t.Fatal(err)
	}
	ceTLS, feTLS := pki["ce"], pki[forces.FECertName(1)]
	pcap := filepath.Join(dir, "ce.pcap")
	c := runCE(t, ce.Config{TLS: &ceTLS, ForCESPcap: pcap, HeartbeatInterval: 50 * time.Millisecond})
	ctx := context.Background()

	nh := netip.MustParseAddr("192.0.2.9")
	var us []ce.RouteUpdate
	for i := range 3000 {
		us = append(us, ce.RouteUpdate{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), NextHop: nh})
	}
	if err := c.Update(ctx, us); err != nil {
		t.Fatal(err)
	}
	a, dp := runFE(t, c, Config{TLS: &feTLS, Name: "fe-under-test"})
	waitUntil(t, "full sync", func() bool {
		st := ceStatus(t, ctx, c)
		return len(st.FEs) == 1 && st.FEs[0].Synced && a.Status().Routes == 3000
	})
	if gw := dp.Gateway(us[2999].Prefix.String()); gw != nh.String() {
		t.Fatalf("datapath has %q for a synced route", gw)
	}
	st := ceStatus(t, ctx, c).FEs[0]
	if st.Name != "fe-under-test" || !strings.Contains(strings.Join(st.LFBs, ","), "IPv4UcastLPM") {
		t.Fatalf("discovery: name %q, LFBs %v", st.Name, st.LFBs)
	}
	if a.policy().FEHI != 50 || a.policy().CEHDI != 150 {
		t.Fatalf("heartbeat policy in the FE Protocol LFB: %+v, want FEHI 50 ms and CEHDI 150 ms", a.policy())
	}
	waitUntil(t, "low-priority channel", func() bool { return ceStatus(t, ctx, c).FEs[0].LowChannel && a.Status().Low.Up })
	waitUntil(t, "heartbeat round trips", func() bool { return ceStatus(t, ctx, c).FEs[0].HeartbeatRTT.Samples >= 3 })

	// IPv6 goes the same way, through the IPv6UcastLPM and IPv6NextHop LFBs.
	v6 := ce.RouteUpdate{Prefix: netip.MustParsePrefix("2001:db8:100::/48"), NextHop: netip.MustParseAddr("2001:db8::9")}
	if err := c.Update(ctx, []ce.RouteUpdate{v6}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "IPv6 route in the datapath", func() bool { return dp.Gateway("2001:db8:100::/48") == "2001:db8::9" })
	if st := a.Status(); st.Routes != 3001 || st.Programmed != 3001 {
		t.Fatalf("FE status after the IPv6 route: %d routes, %d programmed", st.Routes, st.Programmed)
	}

	// An incremental change after the sync.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: us[0].Prefix, Withdraw: true}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "withdrawal applied", func() bool { return dp.Gateway(us[0].Prefix.String()) == "" })

	// An FE whose certificate comes from another CA never associates.
	rogue, err := forces.WritePKI(t.TempDir(), time.Hour, "fe")
	if err != nil {
		t.Fatal(err)
	}
	bad := rogue["fe"]
	bad.CA = ceTLS.CA
	b, _ := runFE(t, c, Config{ID: 2, TLS: &bad})
	time.Sleep(500 * time.Millisecond)
	if b.Status().Associated || len(ceStatus(t, ctx, c).FEs) != 1 {
		t.Fatal("an FE with a certificate from an unknown CA associated")
	}

	// The pcap holds the exchange; tshark, when installed, decodes it as ForCES.
	fi, err := os.Stat(pcap)
	if err != nil || fi.Size() < 1000 {
		t.Fatalf("pcap %s: %v, %d bytes", pcap, err, fi.Size())
	}
	if _, err := exec.LookPath("tshark"); err == nil {
		out, err := exec.Command("tshark", "-r", pcap, "-d", "tcp.port==6700,forces", "-T", "fields", "-e", "forces.messagetype").Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		for _, want := range []string{"1", "17", "3", "4", "20", "15"} { // setup, setup response, config, query, query response, heartbeat
			if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
				t.Errorf("tshark found no ForCES message of type %s in the pcap; types seen:\n%s", want, out)
			}
		}
	} else {
		t.Log("tshark not installed: pcap not decoded (make test installs it)")
	}
}

// ECMP end to end: a route with several equal-cost next hops fed to a real CE
// reaches the FE as an ECMP group, in the full sync and in updates, and
// leaves it when the set shrinks to one.
func TestCEAndFEECMP(t *testing.T) {
	c := runCE(t, ce.Config{HeartbeatInterval: 50 * time.Millisecond})
	ctx := context.Background()
	a1, b1, c1 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	pfx := netip.MustParsePrefix("198.51.100.0/24")
	pfx6 := netip.MustParsePrefix("2001:db8:100::/48")
	// Before the FE joins: the full sync carries the group.
	if err := c.Update(ctx, []ce.RouteUpdate{
		{Prefix: pfx, NextHop: a1, NextHops: []netip.Addr{a1, b1}},
		{Prefix: pfx6, NextHop: v6a, NextHops: []netip.Addr{v6a, v6b}},
	}); err != nil {
		t.Fatal(err)
	}
	_, dp := runFE(t, c, Config{ID: 1, HeartbeatInterval: 50 * time.Millisecond})
	waitUntil(t, "the ECMP routes in the datapath", func() bool {
		return dp.Gateway(pfx.String()) == "192.0.2.1,192.0.2.2" && dp.Gateway(pfx6.String()) == "2001:db8::1,2001:db8::2"
	})
	// An update: a third next hop joins.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: pfx, NextHop: a1, NextHops: []netip.Addr{c1, a1, b1}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "three next hops", func() bool { return dp.Gateway(pfx.String()) == "192.0.2.1,192.0.2.2,192.0.2.3" })
	// Down to one: a plain nexthop, and the group is gone from the datapath.
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: pfx, NextHop: b1}, {Prefix: pfx6, Withdraw: true}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "one next hop, no groups", func() bool {
		groups := len(dp.Groups())
		return dp.Gateway(pfx.String()) == "192.0.2.2" && dp.Gateway(pfx6.String()) == "" && groups == 0
	})
}

// The CE reads an FE's status (counters, ports, lanes) with a ForCES Query
// of the FE status component.
func TestCEQueriesFEStatus(t *testing.T) {
	c := runCE(t, ce.Config{HeartbeatInterval: 50 * time.Millisecond})
	ctx := context.Background()
	_, dp := runFE(t, c, Config{ID: 1, HeartbeatInterval: 50 * time.Millisecond})
	if err := c.Update(ctx, []ce.RouteUpdate{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: netip.MustParseAddr("192.0.2.1")}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the route in the datapath", func() bool { return dp.Gateway("198.51.100.0/24") == "192.0.2.1" })
	raw, err := c.FEDetails(ctx, forces.FEID(1))
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if st.ID != forces.FEID(1).String() || st.Routes != 1 || st.Programmed != 1 || !st.Associated || !st.Low.Up {
		t.Fatalf("FE status as the CE read it: %s", raw)
	}
	if _, err := c.FEDetails(ctx, forces.FEID(9)); !errors.Is(err, ce.ErrNoFE) {
		t.Fatalf("an FE that is not associated: %v", err)
	}
}
