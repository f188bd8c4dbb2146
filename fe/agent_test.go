package fe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// fakeDatapath records what the agent told it, as the real one would hold it.
type fakeDatapath struct {
	mu       sync.Mutex
	routes   map[netip.Prefix]uint32
	nexthops map[uint32]datapath.Nexthop
}

func newFake() *fakeDatapath {
	return &fakeDatapath{routes: map[netip.Prefix]uint32{}, nexthops: map[uint32]datapath.Nexthop{}}
}

func (f *fakeDatapath) Attach(int, datapath.Mode) error { return nil }
func (f *fakeDatapath) SetRoute(p netip.Prefix, nh uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[p] = nh
	return nil
}
func (f *fakeDatapath) DeleteRoute(p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.routes[p]; !ok {
		return datapath.ErrNotFound
	}
	delete(f.routes, p)
	return nil
}
func (f *fakeDatapath) SetNexthop(id uint32, nh datapath.Nexthop) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nexthops[id] = nh
	return nil
}
func (f *fakeDatapath) DeleteNexthop(id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nexthops, id)
	return nil
}
func (f *fakeDatapath) SetNeighbor(int, netip.Addr, net.HardwareAddr) error { return nil }
func (f *fakeDatapath) DeleteNeighbor(int, netip.Addr) error                { return nil }
func (f *fakeDatapath) SetLocalAddr(netip.Addr) error                       { return nil }
func (f *fakeDatapath) Counters() (datapath.Counters, error)                { return datapath.Counters{}, nil }
func (f *fakeDatapath) Close() error                                        { return nil }

func (f *fakeDatapath) route(p string) (uint32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nh, ok := f.routes[netip.MustParsePrefix(p)]
	return nh, ok
}

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
	a.dp = dp
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
	if nh, ok := dp.route("198.51.100.0/24"); !ok || nh != 3 {
		t.Fatalf("route 198.51.100.0/24 -> %d (%v), want nexthop 3", nh, ok)
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
	if _, ok := dp.route("203.0.113.0/24"); ok {
		t.Error("row 2's old prefix is still installed after the row was rewritten")
	}
	if _, ok := dp.route("203.0.113.128/25"); !ok {
		t.Error("row 2's new prefix is not installed")
	}
	if _, ok := dp.route("198.51.100.0/24"); ok {
		t.Error("deleted row 1 is still installed")
	}
	if _, ok := dp.route("192.0.2.0/24"); ok {
		t.Error("a route to a missing nexthop was installed")
	}
	if st := a.Status(); st.Routes != 1 || st.Nexthops != 1 {
		t.Errorf("status routes %d nexthops %d, want 1 and 1", st.Routes, st.Nexthops)
	}
}

// A CE route for a port's own subnet does not displace the connected route,
// and deleting it leaves the connected route in place.
func TestConnectedRouteWins(t *testing.T) {
	a, dp := testAgent(t, Config{})
	conn := netip.MustParsePrefix("10.10.1.0/24")
	a.connected[conn] = MaxCENexthopID + 1
	dp.routes[conn] = MaxCENexthopID + 1
	a.applyConfig(configMsg(t, setNH(1, "10.10.2.2"), setRoute(1, "10.10.1.0/24", 1)))
	if nh, _ := dp.route("10.10.1.0/24"); nh != MaxCENexthopID+1 {
		t.Fatalf("connected route now points at nexthop %d", nh)
	}
	a.applyConfig(configMsg(t, del(forces.ClassIPv4UcastLPM, 1)))
	if _, ok := dp.route("10.10.1.0/24"); !ok {
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

// The FE associates, applies a Config and answers it, and when the CE falls
// silent tears the association down with "loss of heartbeats" while keeping
// its FIB (non-stop forwarding).
func TestAssociationAndHeartbeatLoss(t *testing.T) {
	addr, conns := fakeCE(t)
	a, dp := testAgent(t, Config{CEAddress: addr, HeartbeatInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.associate(ctx) }()

	c := <-conns
	defer c.Close()
	setup := readType(t, c, forces.MsgAssociationSetup)
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
	if _, ok := dp.route("198.51.100.0/24"); !ok {
		t.Error("the FIB was flushed when the CE went away; the FE must keep forwarding")
	}
}

// A CE that refuses the association gets no Config applied and a clear error.
func TestAssociationRefused(t *testing.T) {
	addr, conns := fakeCE(t)
	a, _ := testAgent(t, Config{CEAddress: addr})
	done := make(chan error, 1)
	go func() { done <- a.associate(context.Background()) }()
	c := <-conns
	defer c.Close()
	setup := readType(t, c, forces.MsgAssociationSetup)
	c.WriteMessage(forces.NewAssociationSetupResponse(setup, uint32(forces.SetupPermissionDenied)))
	err := <-done
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
