package ce

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

func baseConfig() Config {
	return Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", StaticRoutes: testConnected}
}

// Without TLS the CE listens for FEs on loopback only, unless the
// configuration says it accepts unauthenticated FEs; forces_allowed_fes
// takes FE numbers and ranges from 1 to 0x3FFFFFFF.
func TestConfigForCESAdmission(t *testing.T) {
	bad := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.ForCESListen = "0.0.0.0:6700" }, `forces_listen "0.0.0.0:6700": without tls`},
		{func(c *Config) { c.ForCESListen = ":6700" }, `forces_listen ":6700": without tls`},
		{func(c *Config) { c.ForCESListen = "192.0.2.1:6700" }, "forces_accept_unauthenticated_fes: true"},
		{func(c *Config) { c.ForCESListenLow = "[::]:6702" }, `forces_listen_low "[::]:6702"`},
		{func(c *Config) { c.ForCESAllowedFEs = []string{"0"} }, `forces_allowed_fes: "0": FE ID 0: must be 1 to 0x3FFFFFFF`},
		{func(c *Config) { c.ForCESAllowedFEs = []string{"1", "x"} }, `forces_allowed_fes: "x": "x" is not a number`},
		{func(c *Config) { c.ForCESAllowedFEs = []string{"9-3"} }, `forces_allowed_fes: "9-3": range ends before it starts`},
		{func(c *Config) { c.ForCESAllowedFEs = []string{"1-0x40000000"} }, "forces_allowed_fes"},
	}
	for _, b := range bad {
		c := baseConfig()
		b.mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Validate: %v, want an error with %q", err, b.want)
		}
	}
	good := []func(*Config){
		func(c *Config) { c.ForCESListen = "[::1]:6700" },
		func(c *Config) { c.ForCESListen = "localhost:6700" },
		func(c *Config) { c.ForCESListen, c.ForCESAcceptUnauthenticatedFEs = "0.0.0.0:6700", true },
		func(c *Config) { c.ForCESAllowedFEs = []string{"1", "2", "10-20", "0x3FFFFFFF"} },
	}
	for i, mod := range good {
		c := baseConfig()
		mod(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("good config %d: %v", i, err)
		}
	}
	c := baseConfig()
	c.ForCESAllowedFEs = []string{"1", "10-20"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[uint32]bool{0: false, 1: true, 2: false, 10: true, 15: true, 20: true, 21: false} {
		if got := c.feAllowed(forces.FEID(n)); got != want {
			t.Errorf("FE %d allowed: %v, want %v", n, got, want)
		}
	}
	if c.feAllowed(forces.CEID(1)) {
		t.Error("a CE ID allowed as an FE")
	}
}

// setupTo sends an Association Setup from src to dst on a new connection to
// addr and returns the CE's result (or an error when it closed instead).
func setupTo(t *testing.T, addr string, src, dst forces.ID) (forces.SetupResult, *forces.Conn, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return setupOn(t, nc, src, dst)
}

func setupOn(t *testing.T, nc net.Conn, src, dst forces.ID) (forces.SetupResult, *forces.Conn, error) {
	t.Helper()
	conn := forces.NewConn(nc)
	t.Cleanup(func() { conn.Close() })
	if err := conn.WriteMessage(forces.NewAssociationSetup(src, dst, 1)); err != nil {
		return 0, conn, err
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	m, err := conn.ReadMessage()
	if err != nil {
		return 0, conn, err
	}
	nc.SetReadDeadline(time.Time{})
	if m.Header.Type != forces.MsgAssociationSetupResponse || m.ASResult == nil {
		t.Fatalf("answer to the setup: %s", m.Header.Type)
	}
	return forces.SetupResult(*m.ASResult), conn, nil
}

// Setups from FE ID 0, from a non-FE ID, to another CE, or from an FE ID
// outside forces_allowed_fes are refused with the RFC 5810 result, and
// counted by reason.
func TestSetupAdmission(t *testing.T) {
	c := startCEWith(t, time.Second, nil, func(cfg *Config) { cfg.ForCESAllowedFEs = []string{"1-2"} })
	addr := c.Addr().String()
	cases := []struct {
		name     string
		src, dst forces.ID
		want     forces.SetupResult
		reason   string
	}{
		{"FE ID 0", forces.FEID(0), forces.CEID(0), forces.SetupFEIDInvalid, "fe_id_invalid"},
		{"a CE ID", forces.CEID(3), forces.CEID(0), forces.SetupFEIDInvalid, "fe_id_invalid"},
		{"a broadcast ID", forces.AllFEsBroadcast, forces.CEID(0), forces.SetupFEIDInvalid, "fe_id_invalid"},
		{"to another CE", forces.FEID(1), forces.CEID(9), forces.SetupFEIDInvalid, "wrong_destination"},
		{"to an FE", forces.FEID(1), forces.FEID(2), forces.SetupFEIDInvalid, "wrong_destination"},
		{"not allowed", forces.FEID(3), forces.CEID(0), forces.SetupPermissionDenied, "fe_id_not_allowed"},
	}
	for _, k := range cases {
		got, _, err := setupTo(t, addr, k.src, k.dst)
		if err != nil || got != k.want {
			t.Errorf("%s: result %v, %v; want %v", k.name, got, err, k.want)
		}
		if n := statusOf(t, c).ForCESRefused[k.reason]; n == 0 {
			t.Errorf("%s: not counted as %s", k.name, k.reason)
		}
	}
	if st := statusOf(t, c); len(st.FEs) != 0 {
		t.Fatalf("FEs associated: %+v", st.FEs)
	}
	// To this CE by its own ID, or to CE 0 as FEs do: admitted.
	for i, dst := range []forces.ID{forces.CEID(7), forces.CEID(0)} {
		if got, _, err := setupTo(t, addr, forces.FEID(uint32(i+1)), dst); err != nil || got != forces.SetupSuccess {
			t.Fatalf("FE %d to %s: %v, %v", i+1, dst, got, err)
		}
	}
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 2 })
}

// dialFrom connects to addr from the local address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("dial from %s: %v", ip, err)
	}
	return nc
}

// The low-priority channel is accepted only for an associated FE, from the
// address its association came from (no TLS).
func TestLowChannelIdentity(t *testing.T) {
	c := startCE(t, time.Second)
	f, _ := dialFE(t, c, 1)
	go f.serve()
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 1 })
	low := c.LowAddr().String()
	if got, _, err := setupTo(t, low, forces.FEID(2), forces.CEID(7)); err != nil || got != forces.SetupFEIDInvalid {
		t.Fatalf("low channel of an FE that is not associated: %v, %v", got, err)
	}
	if got, _, err := setupOn(t, dialFrom(t, "127.0.0.2", low), forces.FEID(1), forces.CEID(7)); err != nil || got != forces.SetupPermissionDenied {
		t.Fatalf("low channel of FE 1 from another address: %v, %v", got, err)
	}
	st := statusOf(t, c)
	if st.ForCESRefused["low_not_associated"] != 1 || st.ForCESRefused["low_identity_mismatch"] != 1 || st.FEs[0].LowChannel {
		t.Fatalf("refusals %v, low channel %v", st.ForCESRefused, st.FEs[0].LowChannel)
	}
	if got, _, err := setupOn(t, dialFrom(t, "127.0.0.1", low), forces.FEID(1), forces.CEID(7)); err != nil || got != forces.SetupSuccess {
		t.Fatalf("low channel of FE 1 from its address: %v, %v", got, err)
	}
	waitFor(t, func() bool { return statusOf(t, c).FEs[0].LowChannel })
}

// With TLS, an FE is admitted only with a certificate that names its FE ID
// (fe-N), and its low-priority channel only with the same certificate
// subject.
func TestTLSIdentity(t *testing.T) {
	dir := t.TempDir()
	pki, err := forces.WritePKICerts(dir, time.Hour, forces.PKICert{Name: "ce"}, forces.PKICert{Name: "fe-1"},
		forces.PKICert{Name: "other", DNS: []string{"fe-1.example.net", "fe-2"}}, forces.PKICert{Name: "fe-10"})
	if err != nil {
		t.Fatal(err)
	}
	ceTLS := pki["ce"]
	c := startCEWith(t, time.Second, nil, func(cfg *Config) { cfg.TLS = &ceTLS })
	dial := func(addr, name string) net.Conn {
		tc, err := pki[name].ClientTLS("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		nc, err := tls.Dial("tcp", addr, tc)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	// fe-10 names FE 10, not FE 1 (no prefix match).
	for _, name := range []string{"fe-10", "ce"} {
		if got, _, err := setupOn(t, dial(c.Addr().String(), name), forces.FEID(1), forces.CEID(0)); err != nil || got != forces.SetupPermissionDenied {
			t.Fatalf("FE 1 with certificate %s: %v, %v", name, got, err)
		}
	}
	if n := statusOf(t, c).ForCESRefused["certificate_mismatch"]; n != 2 {
		t.Fatalf("%d certificate mismatches counted, want 2", n)
	}
	got, conn, err := setupOn(t, dial(c.Addr().String(), "fe-1"), forces.FEID(1), forces.CEID(0))
	if err != nil || got != forces.SetupSuccess {
		t.Fatalf("FE 1 with certificate fe-1: %v, %v", got, err)
	}
	go func() {
		for {
			if _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 1 })
	// "other" names FE 1 too (fe-1.example.net), but is not the
	// certificate the association came with.
	if got, _, err := setupOn(t, dial(c.LowAddr().String(), "other"), forces.FEID(1), forces.CEID(7)); err != nil || got != forces.SetupPermissionDenied {
		t.Fatalf("low channel of FE 1 with another certificate: %v, %v", got, err)
	}
	if got, _, err := setupOn(t, dial(c.LowAddr().String(), "fe-1"), forces.FEID(1), forces.CEID(7)); err != nil || got != forces.SetupSuccess {
		t.Fatalf("low channel of FE 1 with its certificate: %v, %v", got, err)
	}
}

// An FE cannot claim a configured neighbour's address, a static route's
// next hop, loopback, or a huge prefix as a port's: those never reach the
// RIB as connected prefixes, and each is counted.
func TestPortAddressesVetted(t *testing.T) {
	c := startCEWith(t, time.Second, nil, func(cfg *Config) {
		cfg.StaticRoutes = append(slices.Clone(testConnected), StaticRoute{Prefix: "198.51.100.0/24", NextHops: []string{"10.1.1.1"}})
	})
	f, _ := dialFE(t, c, 1)
	f.ports = []forces.PortInfo{{ID: 1, Name: "p1", Up: true, Addrs: []netip.Prefix{
		netip.MustParsePrefix("10.1.1.1/24"),   // the static route's next hop
		netip.MustParsePrefix("127.0.0.1/8"),   // loopback
		netip.MustParsePrefix("0.0.0.0/0"),     // everything
		netip.MustParsePrefix("100.64.0.1/4"),  // too short
		netip.MustParsePrefix("224.0.0.1/24"),  // multicast
		netip.MustParsePrefix("172.16.5.1/24"), // fine
	}}}
	go f.serve()
	waitFor(t, func() bool { return slices.Contains(statusOf(t, c).Connected, netip.MustParsePrefix("172.16.5.0/24")) })
	st := statusOf(t, c)
	for _, p := range st.Connected {
		if p.Bits() < 8 || p.Addr().IsLoopback() || p.Addr().IsMulticast() || p == netip.MustParsePrefix("10.1.1.0/24") {
			t.Errorf("connected prefix %s from a refused port address", p)
		}
	}
	if n := st.ForCESRefused["port_address"]; n != 5 {
		t.Fatalf("%d port addresses refused, want 5", n)
	}
	// A configured neighbour's address is refused too.
	cfg := baseConfig()
	cfg.Neighbors = []NeighborConfig{{Address: "198.51.100.2", ASN: 65002}}
	c2, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if why := c2.portAddrProblem(netip.MustParsePrefix("198.51.100.2/30")); !strings.Contains(why, "neighbour") {
		t.Fatalf("a neighbour's address as a port's: %q", why)
	}
	if why := c2.portAddrProblem(netip.MustParsePrefix("198.51.100.1/30")); why != "" {
		t.Fatalf("the router's own address beside the neighbour: %q", why)
	}
}

// A COMMIT-RESPONSE that answers no COMMIT awaited (a wrong correlator) is
// dropped: it cannot complete the full sync, whose own COMMIT the FE then
// refuses, so the CE aborts the transaction.
func TestStrayCommitResponse(t *testing.T) {
	c := startCE(t, time.Second)
	f, resp := dialFE(t, c, 1)
	stray, err := forces.NewCommitResponse(forces.NewCommit(resp.Header.Src, f.id, 987654), forces.ResultSuccess)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.conn.WriteMessage(stray); err != nil {
		t.Fatal(err)
	}
	for {
		m := f.next(forces.MsgConfig)
		if len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 && m.LFBs[0].Ops[0].Type == forces.OpCommit {
			no, err := forces.NewCommitResponse(m, forces.ResultUnspecifiedError)
			if err != nil {
				t.Fatal(err)
			}
			f.conn.WriteMessage(no)
			break
		}
	}
	after := f.next(forces.MsgConfig)
	if after.Header.Flags.TP != forces.PhaseABT {
		t.Fatalf("after the FE refused the COMMIT: a Config with phase %s, want ABT (the stray answer completed the sync)", after.Header.Flags.TP)
	}
	if n := statusOf(t, c).ForCESRefused["stray_response"]; n != 1 {
		t.Fatalf("%d stray responses counted, want 1", n)
	}
}

// flakyListener fails Accept with EMFILE a number of times, then hands out
// its connections.
type flakyListener struct {
	mu     sync.Mutex
	fails  int
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.fails > 0 {
		l.fails--
		l.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *flakyListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6700} }

// The accept loop survives Accept errors (out of file descriptors): it
// backs off, counts them and goes on serving once they stop.
func TestAcceptSurvivesErrors(t *testing.T) {
	cfg := baseConfig()
	c, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l := &flakyListener{fails: 5, conns: make(chan net.Conn, 1), closed: make(chan struct{})}
	a, b := net.Pipe()
	defer a.Close()
	l.conns <- b
	served := make(chan net.Conn, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.accept(ctx, l, &wg, func(_ context.Context, nc net.Conn, release func()) { served <- nc })
	}()
	select {
	case <-served:
	case <-done:
		t.Fatal("the accept loop returned on an Accept error")
	case <-time.After(10 * time.Second):
		t.Fatal("no connection served after the Accept errors")
	}
	if n := c.refused.counts[refuseAcceptError].Load(); n != 5 {
		t.Fatalf("%d accept errors counted, want 5", n)
	}
	cancel()
	<-done
	wg.Wait()
}

// Connections that have not sent their setup are capped per source address
// and in total: beyond the caps a new one is closed at once, and counted;
// others are still served.
func TestPendingConnectionCaps(t *testing.T) {
	c := startCE(t, time.Second)
	addr := c.Addr().String()
	closedAtOnce := func(nc net.Conn) bool {
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for range maxPendingPerSource {
		held = append(held, dialFrom(t, "127.0.0.1", addr))
	}
	waitFor(t, func() bool {
		c.pending.mu.Lock()
		defer c.pending.mu.Unlock()
		return c.pending.total == maxPendingPerSource
	})
	if !closedAtOnce(dialFrom(t, "127.0.0.1", addr)) {
		t.Fatal("a connection beyond the per-source cap was kept")
	}
	// Other sources fill the global cap.
	for i := 0; len(held) < maxPendingConns; i++ {
		ip := netip.AddrFrom4([4]byte{127, 0, 1, byte(i/maxPendingPerSource + 1)}).String()
		held = append(held, dialFrom(t, ip, addr))
	}
	waitFor(t, func() bool {
		c.pending.mu.Lock()
		defer c.pending.mu.Unlock()
		return c.pending.total == maxPendingConns
	})
	if !closedAtOnce(dialFrom(t, "127.0.2.1", addr)) {
		t.Fatal("a connection beyond the global cap was kept")
	}
	st := statusOf(t, c)
	if st.ForCESRefused["pending_per_source"] == 0 || st.ForCESRefused["pending_limit"] == 0 {
		t.Fatalf("refusals %v", st.ForCESRefused)
	}
	// Once they go, an FE associates.
	for _, nc := range held {
		nc.Close()
	}
	held = nil
	waitFor(t, func() bool { c.pending.mu.Lock(); defer c.pending.mu.Unlock(); return c.pending.total == 0 })
	if got, _, err := setupTo(t, addr, forces.FEID(1), forces.CEID(0)); err != nil || got != forces.SetupSuccess {
		t.Fatalf("setup after the flood: %v, %v", got, err)
	}
}

// An FE that stops reading (its heartbeats still coming) is torn down
// within the dead interval, its writes failing their deadline, and its FE
// ID is free again.
func TestStalledReaderTornDown(t *testing.T) {
	c := startCE(t, 50*time.Millisecond)
	c.updates <- routeUpdates(30000, netip.MustParseAddr("192.0.2.9"))
	f, resp := dialFE(t, c, 1)
	f.next(forces.MsgConfig) // the first of the full sync; then it reads no more
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if f.conn.WriteMessage(forces.NewHeartbeat(f.id, resp.Header.Src, 1, forces.NoACK)) != nil {
					return
				}
			}
		}
	}()
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
	g, r := dialFE(t, c, 1)
	if r.ASResult == nil || forces.SetupResult(*r.ASResult) != forces.SetupSuccess {
		t.Fatalf("FE 1 again after the stalled one: %v", r.ASResult)
	}
	_ = g
}

// serve plays a live FE until its connection ends: it answers queries,
// heartbeats and COMMITs, and nothing else.
func (f *fakeFE) serve() {
	for {
		m, err := f.conn.ReadMessage()
		if err != nil {
			return
		}
		switch {
		case m.Header.Type == forces.MsgQuery:
			f.answer(m)
		case m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK:
			f.conn.WriteMessage(forces.NewHeartbeat(f.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
		case m.Header.Type == forces.MsgConfig && len(m.LFBs) == 1 && len(m.LFBs[0].Ops) == 1 && m.LFBs[0].Ops[0].Type == forces.OpCommit:
			if r, err := forces.NewCommitResponse(m, forces.ResultSuccess); err == nil {
				f.conn.WriteMessage(r)
			}
		}
	}
}
