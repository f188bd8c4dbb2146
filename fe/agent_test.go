package fe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/fedptest"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

// fakeDatapath is the recording datapath the agent's tests program.
type fakeDatapath = fedptest.Datapath

func newFake() *fakeDatapath { return fedptest.New() }

func testAgent(t *testing.T, cfg Config) (*Agent, *fakeDatapath) {
	t.Helper()
	if cfg.Ports == nil {
		cfg.Ports = []string{"unused0"}
	}
	a, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dp := newFake()
	a.prog.dp = dp
	// Every gateway is reached through a port with ifindex 7.
	a.ports[7] = &port{Name: "p7", Ifindex: 7, mac: net.HardwareAddr{2, 0, 0, 0, 0, 7}}
	a.prog.egressPort = func(netip.Addr) int { return 7 }
	return a, dp
}

const ceID = forces.ID(0x40000000)

func configMsg(t *testing.T, ops ...forces.TableOp) *forces.Message {
	t.Helper()
	hdr := forces.Header{Type: forces.MsgConfig, Src: ceID, Dst: forces.FEID(1), Flags: forces.Flags{ACK: forces.AlwaysACK}}
	msgs, err := forces.BuildConfig(hdr, nil, ops)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("BuildConfig: %d messages, %v", len(msgs), err)
	}
	// Through the wire format, as the FE would receive it.
	b, err := msgs[0].MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m, err := forces.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func setNH(id uint32, ip string) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Path: []uint32{1, id},
		FullData: forces.IPv4NextHopInfo{NextHop: netip.MustParseAddr(ip)}.MarshalFullData()}
}

func setRoute(row uint32, p string, nh uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1, row},
		FullData: forces.IPv4PrefixInfo{Prefix: netip.MustParsePrefix(p), HopSelector: nh}.MarshalFullData()}
}

func del(class, row uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpDel, ClassID: class, InstanceID: 1, Path: []uint32{1, row}}
}

func results(t *testing.T, m *forces.Message) []forces.ResultCode {
	t.Helper()
	r, err := forces.ConfigResults(m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApplyConfig(t *testing.T) {
	a, dp := testAgent(t, Config{})

	resp, failed := a.applyConfig(configMsg(t,
		setNH(3, "192.0.2.1"),
		setRoute(1, "198.51.100.0/24", 3),
		setRoute(2, "203.0.113.0/24", 3),
	))
	if failed {
		t.Fatalf("valid config reported as failed: %v", results(t, resp))
	}
	if resp.Header.Type != forces.MsgConfigResponse || resp.Header.Dst != ceID {
		t.Fatalf("response header %+v", resp.Header)
	}
	for _, r := range results(t, resp) {
		if r != forces.ResultSuccess {
			t.Fatalf("results %v, want all success", results(t, resp))
		}
	}
	if gw := dp.Gateway("198.51.100.0/24"); gw != "192.0.2.1" {
		t.Fatalf("route 198.51.100.0/24 -> %q in the datapath, want gateway 192.0.2.1", gw)
	}

	// A row rewritten with another prefix replaces the old prefix; deletes
	// remove; bad rows get their own result code and change nothing else.
	resp, failed = a.applyConfig(configMsg(t,
		setRoute(2, "203.0.113.128/25", 3),
		del(forces.ClassIPv4UcastLPM, 1),
		setRoute(9, "192.0.2.0/24", 77), // no nexthop 77
		del(forces.ClassIPv4UcastLPM, 42),
		del(forces.ClassIPv4NextHop, 99),
		forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassEtherMACOut, InstanceID: 1, Path: []uint32{1, 1}},
	))
	want := []forces.ResultCode{forces.ResultSuccess, forces.ResultSuccess, forces.ResultNotFound,
		forces.ResultNotFound, forces.ResultNotFound, forces.ResultNotSupported}
	got := results(t, resp)
	if !failed || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results %v (failed=%v), want %v", got, failed, want)
	}
	if _, ok := dp.Route("203.0.113.0/24"); ok {
		t.Error("row 2's old prefix is still installed after the row was rewritten")
	}
	if _, ok := dp.Route("203.0.113.128/25"); !ok {
		t.Error("row 2's new prefix is not installed")
	}
	if _, ok := dp.Route("198.51.100.0/24"); ok {
		t.Error("deleted row 1 is still installed")
	}
	if _, ok := dp.Route("192.0.2.0/24"); ok {
		t.Error("a route to a missing nexthop was installed")
	}
	if st := a.Status(); st.Routes != 1 || st.Nexthops != 1 || st.Programmed != 1 || st.Gateways != 1 || st.Resolved != 1 {
		t.Errorf("status %+v, want 1 route, 1 nexthop, 1 programmed, 1 gateway resolved", st)
	}
}

// A CE route for a port's own subnet does not displace the connected route,
// and deleting it leaves the connected route in place.
func TestConnectedRouteWins(t *testing.T) {
	a, dp := testAgent(t, Config{})
	conn := netip.MustParsePrefix("10.10.1.0/24")
	a.prog.connected[prefix.FromV4(conn)] = forces.MaxNexthopID + 1
	dp.SetRoute(conn, forces.MaxNexthopID+1)
	a.applyConfig(configMsg(t, setNH(1, "10.10.2.2"), setRoute(1, "10.10.1.0/24", 1)))
	if nh, _ := dp.Route("10.10.1.0/24"); nh != forces.MaxNexthopID+1 {
		t.Fatalf("connected route now points at nexthop %d", nh)
	}
	a.applyConfig(configMsg(t, del(forces.ClassIPv4UcastLPM, 1)))
	if _, ok := dp.Route("10.10.1.0/24"); !ok {
		t.Fatal("deleting the CE's route removed the connected route")
	}
}

// fakeCE accepts one association on a real TCP connection.
func fakeCE(t *testing.T) (addr string, conns <-chan *forces.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan *forces.Conn, 4)
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			ch <- forces.NewConn(nc)
		}
	}()
	return l.Addr().String(), ch
}

func readType(t *testing.T, c *forces.Conn, want forces.MessageType) *forces.Message {
	t.Helper()
	for {
		m, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if m.Header.Type == want {
			return m
		}
		if m.Header.Type != forces.MsgHeartbeat {
			t.Fatalf("got %s, want %s", m.Header.Type, want)
		}
	}
}

// association is an agent associating with a fake CE: the CE's end of the
// connection, the Association Setup the agent sent on it, and where
// associate's result arrives. cancel stops the agent (as a shutdown does).
type association struct {
	a      *Agent
	dp     *fakeDatapath
	ce     *forces.Conn
	setup  *forces.Message
	cancel context.CancelFunc
	done   chan error
}

// startAssociation runs an agent with cfg against a fake CE up to the
// agent's Association Setup, which it reads.
func startAssociation(t *testing.T, cfg Config) *association {
	t.Helper()
	addr, conns := fakeCE(t)
	cfg.CEAddress = addr
	as := &association{done: make(chan error, 1)}
	as.a, as.dp = testAgent(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	as.cancel = cancel
	t.Cleanup(cancel)
	go func() { as.done <- as.a.associate(ctx) }()
	as.ce = <-conns
	t.Cleanup(func() { as.ce.Close() })
	as.setup = readType(t, as.ce, forces.MsgAssociationSetup)
	return as
}

// The FE associates, applies a Config and answers it, and when the CE falls
// silent tears the association down with "loss of heartbeats" while keeping
// its FIB (non-stop forwarding).
func TestAssociationAndHeartbeatLoss(t *testing.T) {
	as := startAssociation(t, Config{HeartbeatInterval: 50 * time.Millisecond})
	a, dp, c, setup, done := as.a, as.dp, as.ce, as.setup, as.done
	if setup.Header.Src != forces.FEID(1) || !setup.Header.Src.IsFE() {
		t.Fatalf("setup from %s", setup.Header.Src)
	}
	if err := c.WriteMessage(forces.NewAssociationSetupResponse(setup, uint32(forces.SetupSuccess))); err != nil {
		t.Fatal(err)
	}
	cfg := configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1))
	if err := c.WriteMessage(cfg); err != nil {
		t.Fatal(err)
	}
	resp := readType(t, c, forces.MsgConfigResponse)
	if resp.Header.Correlator != cfg.Header.Correlator {
		t.Errorf("response correlator %d, want %d", resp.Header.Correlator, cfg.Header.Correlator)
	}
	if r := results(t, resp); len(r) != 2 || r[0] != forces.ResultSuccess || r[1] != forces.ResultSuccess {
		t.Fatalf("results %v", r)
	}
	if !a.Status().Associated {
		t.Error("status does not show the association")
	}

	// Now the CE says nothing: within a few intervals the FE must give up.
	td := readType(t, c, forces.MsgAssociationTeardown)
	if td.ASTReason == nil || forces.TeardownReason(*td.ASTReason) != forces.TeardownLossOfHeartbeats {
		t.Fatalf("teardown reason %v, want loss of heartbeats", td.ASTReason)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("associate returned nil after losing the CE")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("associate did not return after the teardown")
	}
	if a.Status().Associated {
		t.Error("still associated after the teardown")
	}
	if _, ok := dp.Route("198.51.100.0/24"); !ok {
		t.Error("the FIB was flushed when the CE went away; the FE must keep forwarding")
	}
}

// An FE shutting down tears the association down with reason "normal",
// addressed to the CE its Setup Response came from (not the generic CE ID its
// Setup went to): a CE drops messages not addressed to it.
func TestShutdownTeardownAddressedToCE(t *testing.T) {
	as := startAssociation(t, Config{})
	a, c, cancel, done := as.a, as.ce, as.cancel, as.done
	resp := forces.NewAssociationSetupResponse(as.setup, uint32(forces.SetupSuccess))
	resp.Header.Src = forces.CEID(5)
	if err := c.WriteMessage(resp); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "associated", func() bool { return a.Status().Associated })
	cancel()
	td := readType(t, c, forces.MsgAssociationTeardown)
	if td.Header.Dst != forces.CEID(5) || td.Header.Src != forces.FEID(1) {
		t.Fatalf("teardown from %s to %s, want from %s to %s", td.Header.Src, td.Header.Dst, forces.FEID(1), forces.CEID(5))
	}
	if td.ASTReason == nil || forces.TeardownReason(*td.ASTReason) != forces.TeardownNormal {
		t.Fatalf("teardown reason %v, want normal", td.ASTReason)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("associate did not return after its context ended")
	}
}

// A CE that refuses the association gets no Config applied and a clear error.
func TestAssociationRefused(t *testing.T) {
	as := startAssociation(t, Config{})
	as.ce.WriteMessage(forces.NewAssociationSetupResponse(as.setup, uint32(forces.SetupPermissionDenied)))
	err := <-as.done
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("associate: %v, want a refusal", err)
	}
	t.Log(err)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "ports"},
		{Config{Ports: []string{"a", "a"}}, `ports[1] "a"`},
		{Config{Ports: []string{"a"}, XDPMode: "bogus"}, `xdp_mode "bogus"`},
		{Config{Ports: []string{"a"}, FIBGroups: 100}, `fib_groups 100: want 1024 to 4194304 groups`},
		{Config{Ports: []string{"a"}, IPv6FIBGroups: 1 << 23}, `ipv6_fib_groups 8388608: want 1024 to 4194304 groups`},
		{Config{Ports: []string{"a"}, HeartbeatInterval: time.Millisecond}, "heartbeat_interval 1ms"},
		{Config{Ports: []string{"a"}, ID: 1 << 30}, "id 1073741824"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an ErrConfig naming %q", tc.cfg, err, tc.want)
		}
	}
	good := Config{Ports: []string{"eth0"}}
	if err := good.Validate(); err != nil || good.CEAddress == "" || good.HeartbeatInterval == 0 {
		t.Errorf("Validate of a minimal config: %v, defaults %+v", err, good)
	}
}

func configWith(t *testing.T, flags forces.Flags, ops ...forces.TableOp) *forces.Message {
	t.Helper()
	m := configMsg(t, ops...)
	flags.ACK = forces.AlwaysACK
	m.Header.Flags = flags
	return m
}

func TestExecutionModes(t *testing.T) {
	bad := setRoute(9, "192.0.2.0/24", 77) // no nexthop 77
	t.Run("all-or-none", func(t *testing.T) {
		a, dp := testAgent(t, Config{})
		resp, failed := a.applyConfig(configWith(t, forces.Flags{ExecMode: forces.ExecAllOrNone},
			setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1), bad, setRoute(2, "203.0.113.0/24", 1)))
		if !failed {
			t.Fatal("not failed")
		}
		for _, r := range results(t, resp) {
			if r != forces.ResultNotFound {
				t.Fatalf("results %v, want NOT_FOUND for every row", results(t, resp))
			}
		}
		if st := a.Status(); st.Routes != 0 || st.Nexthops != 0 || dp.Writes() != 0 {
			t.Fatalf("all-or-none left %d routes, %d nexthops, %d datapath writes", st.Routes, st.Nexthops, dp.Writes())
		}
	})
	t.Run("until-failure", func(t *testing.T) {
		a, dp := testAgent(t, Config{})
		resp, _ := a.applyConfig(configWith(t, forces.Flags{ExecMode: forces.ExecUntilFailure},
			setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1), bad, setRoute(2, "203.0.113.0/24", 1)))
		want := fmt.Sprint([]forces.ResultCode{forces.ResultSuccess, forces.ResultSuccess, forces.ResultNotFound, forces.ResultUnspecifiedError})
		if got := fmt.Sprint(results(t, resp)); got != want {
			t.Fatalf("results %s, want %s", got, want)
		}
		if dp.Gateway("198.51.100.0/24") != "192.0.2.1" || dp.Gateway("203.0.113.0/24") != "" {
			t.Fatal("until-failure did not stop at the failing row")
		}
	})
	t.Run("continue-on-failure", func(t *testing.T) {
		a, dp := testAgent(t, Config{})
		a.applyConfig(configWith(t, forces.Flags{ExecMode: forces.ExecContinueOnFailure},
			setNH(1, "192.0.2.1"), bad, setRoute(2, "203.0.113.0/24", 1)))
		if dp.Gateway("203.0.113.0/24") != "192.0.2.1" {
			t.Fatal("continue-on-failure skipped the rows after the failing one")
		}
	})
}

// A transaction is staged, then made live at COMMIT with only the differences
// written to the datapath; a CE that renumbers rows and nexthops (as a
// restarted CE does) causes no datapath writes for unchanged routes.
func TestTransactionCommitAndAbort(t *testing.T) {
	a, dp := testAgent(t, Config{})
	a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"),
		setRoute(1, "198.51.100.0/24", 1), setRoute(2, "203.0.113.0/24", 2), setRoute(3, "192.0.2.128/25", 2)))
	writes := dp.Writes()

	at := func(tp forces.TransactionPhase) forces.Flags { return forces.Flags{Atomic: true, TP: tp} }
	// Full resync, renumbered: 198.51.100.0/24 unchanged (other row and
	// nexthop IDs, same gateway), 203.0.113.0/24 moves to 192.0.2.1,
	// 192.0.2.128/25 disappears.
	if _, failed := a.applyConfig(configWith(t, at(forces.PhaseSOT),
		forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1}},
		forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Path: []uint32{1}},
		setNH(5, "192.0.2.1"))); failed {
		t.Fatal("SOT failed")
	}
	if _, failed := a.applyConfig(configWith(t, at(forces.PhaseEOT),
		setRoute(10, "198.51.100.0/24", 5), setRoute(11, "203.0.113.0/24", 5))); failed {
		t.Fatal("EOT failed")
	}
	if dp.Writes() != writes || dp.Gateway("192.0.2.128/25") == "" {
		t.Fatal("staged rows reached the datapath before COMMIT")
	}
	if _, failed := a.applyConfig(forces.NewCommit(ceID, forces.FEID(1), 9)); failed {
		t.Fatal("COMMIT failed")
	}
	if dp.Gateway("198.51.100.0/24") != "192.0.2.1" || dp.Gateway("203.0.113.0/24") != "192.0.2.1" || dp.Gateway("192.0.2.128/25") != "" {
		t.Fatalf("after COMMIT: %q %q %q", dp.Gateway("198.51.100.0/24"), dp.Gateway("203.0.113.0/24"), dp.Gateway("192.0.2.128/25"))
	}
	// 203.0.113.0/24 rewritten, 192.0.2.128/25 deleted, gateway 192.0.2.2's
	// slot freed: three writes, none for the unchanged route.
	if got := dp.Writes() - writes; got != 3 {
		t.Errorf("COMMIT made %d datapath writes, want 3", got)
	}

	// Abort after COMMIT (before TRCOMP) rolls back.
	a.applyConfig(&forces.Message{Header: forces.Header{Type: forces.MsgConfig, Src: ceID, Dst: forces.FEID(1), Flags: at(forces.PhaseABT)}})
	if dp.Gateway("192.0.2.128/25") != "192.0.2.2" || dp.Gateway("203.0.113.0/24") != "192.0.2.2" {
		t.Fatal("ABT after COMMIT did not restore the previous table")
	}

	// A transaction with a bad row cannot be committed, and changes nothing.
	a.applyConfig(configWith(t, at(forces.PhaseSOT), setRoute(20, "100.64.0.0/10", 99)))
	if _, failed := a.applyConfig(forces.NewCommit(ceID, forces.FEID(1), 9)); !failed {
		t.Fatal("COMMIT of a failed transaction succeeded")
	}
	// Messages of a transaction that never started are refused.
	a.txn = nil
	if _, failed := a.applyConfig(configWith(t, at(forces.PhaseMOT), setNH(7, "192.0.2.7"))); !failed {
		t.Fatal("MOT without SOT accepted")
	}
	if a.Status().Nexthops != 2 {
		t.Fatalf("nexthops %d after refused transactions, want 2", a.Status().Nexthops)
	}
}

// A malformed message from the CE ends the association with a teardown, and
// is counted; the FIB stays.
func TestMalformedFromCE(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, _ := testAgent(t, Config{CEAddress: l.Addr().String()})
	done := make(chan error, 1)
	go func() { done <- a.associate(context.Background()) }()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := forces.NewConn(nc)
	setup := readType(t, c, forces.MsgAssociationSetup)
	c.WriteMessage(forces.NewAssociationSetupResponse(setup, uint32(forces.SetupSuccess)))
	// Version 2: not ForCES as this FE speaks it.
	nc.Write([]byte{0x20, 0x0f, 0x00, 0x06, 0, 0, 0, 1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	td := readType(t, c, forces.MsgAssociationTeardown)
	if td.ASTReason == nil {
		t.Fatal("teardown without reason")
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("associate: %v", err)
	}
	if a.Status().ProtocolErrors != 1 {
		t.Fatalf("protocol errors %d, want 1", a.Status().ProtocolErrors)
	}
}

func TestPrefix4(t *testing.T) {
	for _, s := range []string{"0.0.0.0/0", "198.51.100.0/24", "255.255.255.255/32", "10.0.0.0/8"} {
		p := netip.MustParsePrefix(s)
		if got := prefix.FromV4(p).Prefix(); got != p {
			t.Errorf("%s round-trips to %s", p, got)
		}
	}
	if prefix.FromV4(netip.MustParsePrefix("10.1.2.3/8")) != prefix.FromV4(netip.MustParsePrefix("10.0.0.0/8")) {
		t.Error("prefix.V4 does not mask")
	}
	if addr4(ip4(netip.MustParseAddr("192.0.2.1"))).String() != "192.0.2.1" {
		t.Error("ip4 round trip")
	}
}

func setNH6(id uint32, ip string) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6NextHop, InstanceID: 1, Path: []uint32{1, id},
		FullData: forces.IPv6NextHopInfo{NextHop: netip.MustParseAddr(ip)}.MarshalFullData()}
}

func setRoute6(row uint32, p string, nh uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1, Path: []uint32{1, row},
		FullData: forces.IPv6PrefixInfo{Prefix: netip.MustParsePrefix(p), HopSelector: nh}.MarshalFullData()}
}

// IPv6 rows have their own numbering: IPv4 and IPv6 row 1 coexist, and a
// deletion of one leaves the other.
func TestApplyIPv6(t *testing.T) {
	a, dp := testAgent(t, Config{})
	resp, failed := a.applyConfig(configMsg(t,
		setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1),
		setNH6(1, "2001:db8::1"), setRoute6(1, "2001:db8:100::/48", 1),
		// IPv4 rows sent to the IPv6 tables.
		forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1, Path: []uint32{1, 2},
			FullData: setRoute(2, "198.51.100.0/24", 1).FullData},
		forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv6NextHop, InstanceID: 1, Path: []uint32{1, 2},
			FullData: setNH(2, "192.0.2.2").FullData},
	))
	want := fmt.Sprint([]forces.ResultCode{forces.ResultSuccess, forces.ResultSuccess, forces.ResultSuccess, forces.ResultSuccess,
		forces.ResultInvalidParameters, forces.ResultInvalidParameters})
	if got := fmt.Sprint(results(t, resp)); !failed || got != want {
		t.Fatalf("results %s, want %s", got, want)
	}
	if dp.Gateway("198.51.100.0/24") != "192.0.2.1" || dp.Gateway("2001:db8:100::/48") != "2001:db8::1" {
		t.Fatalf("datapath: %q %q", dp.Gateway("198.51.100.0/24"), dp.Gateway("2001:db8:100::/48"))
	}
	a.applyConfig(configMsg(t, forces.TableOp{Op: forces.OpDel, ClassID: forces.ClassIPv6UcastLPM, InstanceID: 1, Path: []uint32{1, 1}}))
	if dp.Gateway("2001:db8:100::/48") != "" || dp.Gateway("198.51.100.0/24") != "192.0.2.1" {
		t.Fatal("deleting IPv6 row 1 did not remove exactly the IPv6 route")
	}
}

// A first full sync (a staged transaction into an empty datapath: indexed
// and programmed side by side) leaves the datapath, the programmed routes
// and the slots' references exactly as the same rows applied one by one
// do, including prefixes sent in two rows, rows set twice, and gateways
// that end with no route.
func TestFirstSyncMatchesRowByRow(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	at := func(tp forces.TransactionPhase) forces.Flags { return forces.Flags{Atomic: true, TP: tp} }
	for round := range 100 {
		ops := []forces.TableOp{setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"), setNH(3, "192.0.2.3")}
		for range 1 + r.IntN(80) {
			p := fmt.Sprintf("198.51.%d.0/24", r.IntN(30))
			ops = append(ops, setRoute(uint32(1+r.IntN(50)), p, uint32(1+r.IntN(3))))
		}
		staged, dpS := testAgent(t, Config{})
		// As the CE's full sync starts: the prefix table is emptied first.
		full := append([]forces.TableOp{{Op: forces.OpDel, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1}}}, ops...)
		if _, failed := staged.applyConfig(configWith(t, at(forces.PhaseSOT), full...)); failed {
			t.Fatalf("round %d: staging failed", round)
		}
		if _, failed := staged.applyConfig(forces.NewCommit(ceID, forces.FEID(1), 9)); failed {
			t.Fatalf("round %d: COMMIT failed", round)
		}
		direct, dpD := testAgent(t, Config{})
		for _, op := range ops {
			if _, failed := direct.applyConfig(configMsg(t, op)); failed {
				t.Fatalf("round %d: %v failed", round, op)
			}
		}
		if !maps.Equal(dpS.Gateways(), dpD.Gateways()) {
			t.Fatalf("round %d: datapath after the full sync %v, row by row %v", round, dpS.Gateways(), dpD.Gateways())
		}
		for _, a := range []*Agent{staged, direct} {
			refs := map[uint32]int{}
			for p, id := range a.prog.routes.all() {
				refs[id]++
				if got, _ := dpS.Route(p.String()); a == staged && got != id {
					t.Fatalf("round %d: %s programmed as %d, datapath has %d", round, p, id, got)
				}
			}
			for id, s := range a.prog.slotByID {
				if s.refs != refs[id] {
					t.Fatalf("round %d: slot %d (%s) counts %d references, %d routes use it", round, id, s.gw, s.refs, refs[id])
				}
			}
			if a.table.v4.len() != a.prog.routes.len() {
				t.Fatalf("round %d: %d routes in the table, %d programmed", round, a.table.v4.len(), a.prog.routes.len())
			}
		}
	}
}
