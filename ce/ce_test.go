package ce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/runtest"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/logtest"
)

// startCE runs a CE with BGP not listening and no neighbours, so routes come
// only from the test through the same channel GoBGP's watcher uses.
func startCE(t *testing.T, hb time.Duration) *CE {
	t.Helper()
	return startCELog(t, hb, slog.New(slog.DiscardHandler))
}

// startCELog is startCE logging to log.
func startCELog(t *testing.T, hb time.Duration, log *slog.Logger) *CE {
	t.Helper()
	return startCEWith(t, hb, log, nil)
}

// startCEWith is startCELog with the configuration changed by mod.
func startCEWith(t *testing.T, hb time.Duration, log *slog.Logger, mod func(*Config)) *CE {
	t.Helper()
	cfg := Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", HeartbeatInterval: hb,
		StaticRoutes: testConnected}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c)
	return c
}

// testConnected makes the tests' next hops directly connected (the fake
// FEs report no ports).
var testConnected = []StaticRoute{
	{Prefix: "10.0.0.0/8", Connected: true}, {Prefix: "192.0.2.0/24", Connected: true}, {Prefix: "2001:db8::/64", Connected: true},
}

// fakeFE associates with the CE over a real TCP connection.
type fakeFE struct {
	t     *testing.T
	nc    net.Conn
	conn  *forces.Conn
	id    forces.ID
	lfbs  []forces.SupportedLFB // what it answers discovery with
	ports []forces.PortInfo     // and its ports
	// fibKept, if set, is its answer on whether it kept its FIB
	// (forces.FIBKeptComponent); nil: it does not know the component.
	fibKept *bool
	// links are its inter-FE links (forces.InterFELinksComponent); nil:
	// it does not know the component.
	links []forces.InterFELink
	// linksRaw, if set, is answered instead of links, as it is.
	linksRaw []byte
}

var routingLFBs = []forces.SupportedLFB{
	{Name: "IPv4UcastLPM", ClassID: forces.ClassIPv4UcastLPM, Version: "1.0"},
	{Name: "IPv4NextHop", ClassID: forces.ClassIPv4NextHop, Version: "1.0"},
}

func dialFE(t *testing.T, c *CE, n uint32) (*fakeFE, *forces.Message) {
	t.Helper()
	nc, err := net.Dial("tcp", c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFE{t: t, nc: nc, conn: forces.NewConn(nc), id: forces.FEID(n), lfbs: routingLFBs}
	t.Cleanup(func() { f.conn.Close() })
	if err := f.conn.WriteMessage(forces.NewAssociationSetup(f.id, forces.CEID(0), 1)); err != nil {
		t.Fatal(err)
	}
	return f, f.next(forces.MsgAssociationSetupResponse)
}

// next returns the next message of type want, answering heartbeats on the way.
func (f *fakeFE) next(want forces.MessageType) *forces.Message {
	f.t.Helper()
	for {
		m, err := f.conn.ReadMessage()
		if err != nil {
			f.t.Fatalf("waiting for %s: %v", want, err)
		}
		if m.Header.Type == forces.MsgConfig && len(m.LFBs) > 0 && m.LFBs[0].ClassID == forces.ClassFEProtocol {
			continue // the heartbeat policy
		}
		if m.Header.Type == want {
			return m
		}
		if m.Header.Type == forces.MsgQuery {
			f.answer(m)
			continue
		}
		if m.Header.Type != forces.MsgHeartbeat {
			f.t.Fatalf("got %s, want %s", m.Header.Type, want)
		}
		if m.Header.Flags.ACK == forces.AlwaysACK {
			f.conn.WriteMessage(forces.NewHeartbeat(f.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
		}
	}
}

// answer answers the CE's discovery query.
func (f *fakeFE) answer(q *forces.Message) {
	resp, err := forces.NewQueryResponse(q, func(it forces.Item) ([]byte, forces.ResultCode) {
		if it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectSupportedLFBs {
			b, err := forces.MarshalSupportedLFBs(f.lfbs)
			if err != nil {
				f.t.Error(err)
			}
			return b, forces.ResultSuccess
		}
		if it.ClassID == forces.ClassFEObject && it.Path[0] == forces.FEObjectFEName {
			return []byte("fake"), forces.ResultSuccess
		}
		if it.ClassID == forces.PortTableClass && it.Path[0] == forces.FIBKeptComponent && f.fibKept != nil {
			return forces.BoolFullData(*f.fibKept), forces.ResultSuccess
		}
		if it.ClassID == forces.PortTableClass && it.Path[0] == forces.InterFELinksComponent && f.linksRaw != nil {
			return f.linksRaw, forces.ResultSuccess
		}
		if it.ClassID == forces.PortTableClass && it.Path[0] == forces.InterFELinksComponent && f.links != nil {
			b, err := forces.MarshalInterFELinks(f.links)
			if err != nil {
				f.t.Error(err)
			}
			return b, forces.ResultSuccess
		}
		if it.ClassID == forces.PortTableClass && it.Path[0] == forces.PortTableComponent && len(f.ports) > 0 {
			b, err := forces.MarshalPortInfos(f.ports)
			if err != nil {
				f.t.Error(err)
			}
			return b, forces.ResultSuccess
		}
		return nil, forces.ResultComponentDoesNotExist
	})
	if err != nil {
		f.t.Error(err)
		return
	}
	f.conn.WriteMessage(resp)
}

// rows reads Config messages, answers each with success, and returns the rows
// until n have arrived.
func (f *fakeFE) rows(n int) []forces.Item {
	f.t.Helper()
	var items []forces.Item
	for len(items) < n {
		m := f.next(forces.MsgConfig)
		if m.Header.Dst != f.id || !m.Header.Src.IsCE() {
			f.t.Fatalf("config from %s to %s", m.Header.Src, m.Header.Dst)
		}
		items = append(items, forces.Items(m)...)
		resp, err := forces.NewConfigResponse(m)
		if err != nil {
			f.t.Fatal(err)
		}
		f.conn.WriteMessage(resp)
	}
	if len(items) != n {
		f.t.Fatalf("got %d rows, want %d", len(items), n)
	}
	return items
}

// fullSync plays the FE's side of the CE's full-sync transaction: staged
// Config messages up to a COMMIT, answered with success, then TRCOMP. It
// returns the staged rows.
func (f *fakeFE) fullSync() []forces.Item {
	f.t.Helper()
	var items []forces.Item
	for {
		m := f.next(forces.MsgConfig)
		if !m.Header.Flags.Atomic {
			f.t.Fatalf("full sync message without the atomic flag: %+v", m.Header)
		}
		if len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 && m.LFBs[0].Ops[0].Type == forces.OpCommit {
			resp, err := forces.NewCommitResponse(m, forces.ResultSuccess)
			if err != nil {
				f.t.Fatal(err)
			}
			if err := f.conn.WriteMessage(resp); err != nil {
				f.t.Fatal(err)
			}
			tr := f.next(forces.MsgConfig)
			if len(tr.LFBs) != 1 || tr.LFBs[0].Ops[0].Type != forces.OpTRComp {
				f.t.Fatalf("after COMMIT: %+v, want TRCOMP", tr)
			}
			return items
		}
		want := forces.PhaseMOT
		if len(items) == 0 {
			want = forces.PhaseSOT
		}
		if m.Header.Flags.TP != want {
			f.t.Fatalf("transaction phase %s, want %s", m.Header.Flags.TP, want)
		}
		items = append(items, forces.Items(m)...)
	}
}

func routeUpdates(n int, nh netip.Addr) []bgp.Update {
	u := make([]bgp.Update, n)
	for i := range u {
		u[i] = bgp.Update{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), NextHop: nh}
	}
	return u
}

func TestFullSyncAndDiffs(t *testing.T) {
	c := startCE(t, time.Second)
	nh := netip.MustParseAddr("10.10.2.2")
	c.updates <- routeUpdates(10000, nh)

	// An FE that joins later gets the whole FIB: the nexthop, then every route.
	waitFor(t, func() bool { return statusOf(t, c).Routes == 10000 })
	fe, resp := dialFE(t, c, 1)
	if resp.ASResult == nil || forces.SetupResult(*resp.ASResult) != forces.SetupSuccess {
		t.Fatalf("setup result %v", resp.ASResult)
	}
	items := fe.fullSync()
	// The sync first clears both tables, so the FE drops what the CE no
	// longer has, then fills them.
	if len(items) != 10003 || items[0].Op != forces.OpDel || len(items[0].Path) != 1 || items[1].Op != forces.OpDel || len(items[1].Path) != 1 {
		t.Fatalf("%d rows, starting %+v %+v; want two table DELs and 10001 rows", len(items), items[0], items[1])
	}
	items = items[2:]
	if items[0].ClassID != forces.ClassIPv4NextHop || items[0].Op != forces.OpSet {
		t.Fatalf("first row %+v, want the nexthop", items[0])
	}
	info, err := forces.ParseIPv4NextHopInfo(items[0].FullData)
	if err != nil || info.NextHop != nh {
		t.Fatalf("nexthop row %+v %v", info, err)
	}
	seen := map[netip.Prefix]bool{}
	for _, it := range items[1:] {
		p, err := forces.ParseIPv4PrefixInfo(it.FullData)
		if err != nil || it.ClassID != forces.ClassIPv4UcastLPM || p.HopSelector != items[0].Path[1] {
			t.Fatalf("route row %+v: %+v %v", it, p, err)
		}
		seen[p.Prefix] = true
	}
	if len(seen) != 10000 {
		t.Fatalf("%d distinct prefixes in the full sync, want 10000", len(seen))
	}

	// A withdrawal reaches the FE as a DEL of that prefix's row.
	c.updates <- []bgp.Update{{Prefix: routeUpdates(1, nh)[0].Prefix, Withdraw: true}}
	del := fe.rows(1)[0]
	if del.Op != forces.OpDel || del.ClassID != forces.ClassIPv4UcastLPM {
		t.Fatalf("withdrawal sent as %+v", del)
	}
	waitFor(t, func() bool {
		st := statusOf(t, c)
		return len(st.FEs) == 1 && st.FEs[0].Acked == 10002
	})

	// A second FE with the same ID is refused; the first keeps its association.
	_, resp2 := dialFE(t, c, 1)
	if resp2.ASResult == nil || forces.SetupResult(*resp2.ASResult) == forces.SetupSuccess {
		t.Fatalf("duplicate FE ID accepted: %v", resp2.ASResult)
	}
	if st := statusOf(t, c); len(st.FEs) != 1 {
		t.Fatalf("%d FEs after a refused duplicate", len(st.FEs))
	}
}

// An FE that cannot hold routes (discovered by Query) is refused.
func TestDiscoveryRefusesFEWithoutRouting(t *testing.T) {
	c := startCE(t, time.Second)
	nc, err := net.Dial("tcp", c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFE{t: t, conn: forces.NewConn(nc), id: forces.FEID(4), lfbs: routingLFBs[1:]}
	defer f.conn.Close()
	f.conn.WriteMessage(forces.NewAssociationSetup(f.id, forces.CEID(0), 1))
	f.next(forces.MsgAssociationSetupResponse)
	td := f.next(forces.MsgAssociationTeardown)
	if td.ASTReason == nil {
		t.Fatal("teardown without a reason")
	}
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
}

// An FE that stops talking is torn down with reason "loss of heartbeats".
func TestHeartbeatLoss(t *testing.T) {
	c := startCE(t, 30*time.Millisecond)
	fe, _ := dialFE(t, c, 2)
	var td *forces.Message
	for td == nil { // ignore the full sync: this FE is dead
		m, err := fe.conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Type == forces.MsgAssociationTeardown {
			td = m
		}
	}
	if td.ASTReason == nil || forces.TeardownReason(*td.ASTReason) != forces.TeardownLossOfHeartbeats {
		t.Fatalf("teardown reason %v", td.ASTReason)
	}
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
}

// A connection that does not start with an Association Setup is dropped.
func TestNoSetupDropped(t *testing.T) {
	c := startCE(t, time.Second)
	nc, err := net.Dial("tcp", c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	conn := forces.NewConn(nc)
	conn.WriteMessage(forces.NewHeartbeat(forces.FEID(3), forces.CEID(0), 1, forces.NoACK))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.ReadMessage(); err == nil {
		t.Fatal("CE answered a connection that skipped the association setup")
	}
	// Garbage too.
	nc2, _ := net.Dial("tcp", c.Addr().String())
	defer nc2.Close()
	nc2.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	nc2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := forces.NewConn(nc2).ReadMessage(); err == nil {
		t.Fatal("CE answered garbage")
	}
	if st := statusOf(t, c); len(st.FEs) != 0 {
		t.Fatalf("FEs associated: %+v", st.FEs)
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config { return Config{ASN: 65001, RouterID: "192.0.2.1"} }
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.RouterID = "x" }, `router_id "x"`},
		{func(c *Config) { c.RouterID = "2001:db8::1" }, `router_id "2001:db8::1"`},
		{func(c *Config) { c.ASN = 0 }, "asn"},
		{func(c *Config) { c.Neighbors = []NeighborConfig{{Address: "10.0.0.300", ASN: 1}} }, `neighbors[0].address "10.0.0.300"`},
		{func(c *Config) { c.Neighbors = []NeighborConfig{{Address: "10.0.0.1"}} }, "neighbors[0].asn"},
		{func(c *Config) {
			c.Neighbors = []NeighborConfig{{Address: "10.0.0.1", ASN: 1}, {Address: "10.0.0.1", ASN: 2}}
		}, "neighbors[1].address 10.0.0.1"},
		{func(c *Config) {
			c.Neighbors = []NeighborConfig{{Address: "10.0.0.1", ASN: 1, HoldTime: 9 * time.Second, Keepalive: 30 * time.Second}}
		}, "neighbors[0].keepalive 30s: must be less than neighbors[0].hold_time 9s"},
		{func(c *Config) {
			c.Neighbors = []NeighborConfig{{Address: "10.0.0.1", ASN: 1, MaxPrefixes: &MaxPrefixesConfig{Limit: 5, Action: "warn", Restart: time.Minute}}}
		}, "neighbors[0].max_prefixes.restart 1m0s"},
		{func(c *Config) { c.HeartbeatInterval = time.Microsecond }, "heartbeat_interval"},
		{func(c *Config) { c.GracefulRestartFEWait = -time.Second }, "graceful_restart_fe_wait -1s: must not be negative"},
		{func(c *Config) { c.BGPListenAddrs = []string{"10.0.0.1", "nope"} }, `bgp_listen_addresses[1] "nope"`},
	} {
		cfg := base()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want an ErrConfig naming %q", err, tc.want)
		}
	}
	cfg := base()
	if err := cfg.Validate(); err != nil || cfg.ForCESListen != DefaultForCESListen {
		t.Fatalf("minimal config: %v, forces_listen %q", err, cfg.ForCESListen)
	}
}

// statusOf is c's status; the test fails if the CE does not answer within 10 s.
func statusOf(t *testing.T, c *CE) Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A CE whose loop does not run answers Status with ErrNoAnswer wrapping the
// context's error, not with a zero Status.
func TestStatusNoAnswer(t *testing.T) {
	c, err := New(Config{ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Status(ctx); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Status of a CE not running: %v, want ErrNoAnswer and DeadlineExceeded", err)
	}

	c = startCE(t, time.Second)
	st, err := c.Status(context.Background())
	if err != nil || st.ID == "" {
		t.Fatalf("Status of a running CE: %+v, %v", st, err)
	}
}

// startRun runs c until the test ends or stop is called, and returns once
// its ForCES listener is up.
func startRun(t *testing.T, c *CE) (stop func()) {
	t.Helper()
	return runtest.Run(t, "CE", c.Run, func() bool { return c.Addr() != nil })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A malformed message ends the association with a teardown and is counted;
// a message with the wrong IDs is dropped and counted.
func TestMalformedFromFE(t *testing.T) {
	c := startCE(t, time.Second)
	fe, _ := dialFE(t, c, 5)
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 1 })

	hb := forces.NewHeartbeat(forces.FEID(6), forces.CEID(0), 1, forces.NoACK) // someone else's ID
	fe.conn.WriteMessage(hb)
	waitFor(t, func() bool { return statusOf(t, c).ProtocolErrors == 1 })

	// Config, 7 words, from FE 5 to CE 0, holding a TLV that claims 16 bytes of 4.
	bad := []byte{0x10, 0x03, 0x00, 0x07, 0, 0, 0, 5, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x10, 0x00, 0x00, 0x10}
	if _, err := fe.nc.Write(bad); err != nil {
		t.Fatal(err)
	}
	var td *forces.Message
	for td == nil {
		m, err := fe.conn.ReadMessage()
		if err != nil {
			t.Fatalf("no teardown before the connection closed: %v", err)
		}
		if m.Header.Type == forces.MsgAssociationTeardown {
			td = m
		}
	}
	waitFor(t, func() bool {
		st := statusOf(t, c)
		return st.ProtocolErrors == 2 && len(st.FEs) == 0
	})
}

// IPv6 routes reach an FE that has the IPv6 LFBs, as IPv6UcastLPM and
// IPv6NextHop rows with their own numbering, and never one that has not.
func TestIPv6Rows(t *testing.T) {
	c := startCE(t, time.Second)
	nh4, nh6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	c.updates <- []bgp.Update{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: nh4},
		{Prefix: netip.MustParsePrefix("2001:db8:100::/48"), NextHop: nh6},
		{Prefix: netip.MustParsePrefix("2001:db8:200::/48"), NextHop: nh4}, // wrong family: refused
	}
	waitFor(t, func() bool { return statusOf(t, c).Routes == 2 })

	v6 := append(slices.Clone(routingLFBs),
		forces.SupportedLFB{Name: "IPv6UcastLPM", ClassID: forces.ClassIPv6UcastLPM, Version: "1.0"},
		forces.SupportedLFB{Name: "IPv6NextHop", ClassID: forces.ClassIPv6NextHop, Version: "1.0"})
	for _, tc := range []struct {
		name string
		lfbs []forces.SupportedLFB
		want []string
	}{
		{"with IPv6", v6, []string{"DEL IPv4UcastLPM [1]", "DEL IPv4NextHop [1]", "DEL IPv6UcastLPM [1]", "DEL IPv6NextHop [1]",
			"SET IPv4NextHop [1 1]", "SET IPv4UcastLPM [1 1]", "SET IPv6NextHop [1 1]", "SET IPv6UcastLPM [1 1]"}},
		{"without IPv6", routingLFBs, []string{"DEL IPv4UcastLPM [1]", "DEL IPv4NextHop [1]", "SET IPv4NextHop [1 1]", "SET IPv4UcastLPM [1 1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", c.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeFE{t: t, nc: nc, conn: forces.NewConn(nc), id: forces.FEID(uint32(10 + len(tc.lfbs))), lfbs: tc.lfbs}
			defer f.conn.Close()
			f.conn.WriteMessage(forces.NewAssociationSetup(f.id, forces.CEID(0), 1))
			f.next(forces.MsgAssociationSetupResponse)
			var got []string
			for _, it := range f.fullSync() {
				got = append(got, fmt.Sprintf("%s %s %v", it.Op, forces.ClassName(it.ClassID), it.Path))
				if it.ClassID == forces.ClassIPv6UcastLPM && it.Op == forces.OpSet {
					p, err := forces.ParseIPv6PrefixInfo(it.FullData)
					if err != nil || p.Prefix.String() != "2001:db8:100::/48" {
						t.Errorf("IPv6 route row %+v %v", p, err)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("full sync\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// An ECMP route reaches an FE with the ECMP LFB as a group row and an ECMP
// prefix row; an FE without it gets the route through the group's first
// member, and no group rows.
func TestECMPRows(t *testing.T) {
	c := startCE(t, time.Second)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	c.updates <- []bgp.Update{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: b, NextHops: []netip.Addr{b, a}}}
	waitFor(t, func() bool { return statusOf(t, c).Routes == 1 })

	ecmp := append(slices.Clone(routingLFBs), forces.SupportedLFB{Name: "SplitplaneIPv4ECMP", ClassID: forces.ClassIPv4ECMP, Version: "1.0"})
	for _, tc := range []struct {
		name string
		lfbs []forces.SupportedLFB
		want []string
	}{
		{"with ECMP", ecmp, []string{"DEL IPv4UcastLPM [1]", "DEL IPv4NextHop [1]", "DEL SplitplaneIPv4ECMP [1]",
			"SET IPv4NextHop [1 1]", "SET IPv4NextHop [1 2]", "SET SplitplaneIPv4ECMP [1 1] [1 2]", "SET IPv4UcastLPM [1 1] ecmp 1"}},
		{"without ECMP", routingLFBs, []string{"DEL IPv4UcastLPM [1]", "DEL IPv4NextHop [1]",
			"SET IPv4NextHop [1 1]", "SET IPv4NextHop [1 2]", "SET IPv4UcastLPM [1 1] via 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", c.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeFE{t: t, nc: nc, conn: forces.NewConn(nc), id: forces.FEID(uint32(20 + len(tc.lfbs))), lfbs: tc.lfbs}
			defer f.conn.Close()
			f.conn.WriteMessage(forces.NewAssociationSetup(f.id, forces.CEID(0), 1))
			f.next(forces.MsgAssociationSetupResponse)
			var got []string
			for _, it := range f.fullSync() {
				s := fmt.Sprintf("%s %s %v", it.Op, forces.ClassName(it.ClassID), it.Path)
				switch {
				case it.ClassID == forces.ClassIPv4ECMP && it.Op == forces.OpSet:
					g, err := forces.ParseECMPGroupInfo(it.FullData)
					if err != nil {
						t.Fatal(err)
					}
					s += fmt.Sprintf(" %v", g.Members)
				case it.ClassID == forces.ClassIPv4UcastLPM && it.Op == forces.OpSet:
					p, err := forces.ParseIPv4PrefixInfo(it.FullData)
					if err != nil {
						t.Fatal(err)
					}
					if p.ECMP {
						s += fmt.Sprintf(" ecmp %d", p.HopSelector)
					} else {
						s += fmt.Sprintf(" via %d", p.HopSelector)
					}
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("full sync\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// An FE that shuts down tears the association down with reason "normal",
// addressed to this CE: the CE ends the association without counting a
// protocol error or warning; any other reason is a warning.
func TestFETeardown(t *testing.T) {
	logs := &logtest.Recorder{}
	c := startCELog(t, time.Second, slog.New(logs))
	for i, reason := range []forces.TeardownReason{forces.TeardownNormal, forces.TeardownLossOfHeartbeats} {
		f, resp := dialFE(t, c, uint32(i+1))
		waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 1 })
		if err := f.conn.WriteMessage(forces.NewAssociationTeardown(f.id, resp.Header.Src, uint32(reason))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
		if reason == forces.TeardownNormal {
			waitFor(t, func() bool { return logs.Has("INFO forces: FE association ended") })
			if logs.Has("WARN forces: FE association ended") {
				t.Fatal("an FE's normal teardown was logged as a warning")
			}
		} else {
			waitFor(t, func() bool { return logs.Has("WARN forces: FE association ended") })
		}
		if n := statusOf(t, c).ProtocolErrors; n != 0 {
			t.Fatalf("%d protocol errors after the FE's teardown (%s)", n, reason)
		}
	}
}

// An FE whose association ends keeps its connected prefixes for
// fe_hold_time: the routes through its ports stay in the FIB, and an FE
// that comes back in time finds them there; one that does not has them
// withdrawn when the hold runs out.
func TestFEHoldTime(t *testing.T) {
	const hold = 500 * time.Millisecond
	c := startCEWith(t, time.Second, slog.New(slog.DiscardHandler), func(cfg *Config) { cfg.FEHoldTime = hold })
	// 198.18.0.2 is reachable only through the FE's port.
	c.updates <- routeUpdates(10, netip.MustParseAddr("198.18.0.2"))
	port := []forces.PortInfo{{ID: 1, Name: "p1", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")}}}
	routes := func() int { return statusOf(t, c).Routes }
	associate := func() (*fakeFE, *forces.Message) {
		f, resp := dialFE(t, c, 1)
		f.ports = port
		if items := f.fullSync(); len(items) != 2+1+10 {
			t.Fatalf("full sync of %d rows, want the two table DELs, the nexthop and 10 routes", len(items))
		}
		return f, resp
	}
	leave := func(f *fakeFE, resp *forces.Message) time.Time {
		if err := f.conn.WriteMessage(forces.NewAssociationTeardown(f.id, resp.Header.Src, uint32(forces.TeardownNormal))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
		return time.Now()
	}

	f, resp := associate()
	waitFor(t, func() bool { return routes() == 10 })
	// The FE goes and comes back within the hold: the routes never leave.
	left := leave(f, resp)
	for time.Since(left) < hold/2 {
		if n := routes(); n != 10 {
			t.Fatalf("%d routes %s after the FE left, within fe_hold_time", n, time.Since(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.conn.Close()
	f, resp = associate()
	for time.Since(left) < 2*hold {
		if n := routes(); n != 10 {
			t.Fatalf("%d routes %s after the FE left and came back", n, time.Since(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The FE goes for good: its prefixes and the routes through them go
	// once the hold runs out, not before.
	left = leave(f, resp)
	waitFor(t, func() bool { return routes() == 0 })
	if took := time.Since(left); took < hold-50*time.Millisecond {
		t.Fatalf("routes withdrawn %s after the FE left, before fe_hold_time %s", took, hold)
	}
}
