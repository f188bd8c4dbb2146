package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/splitplane/splitplane/internal/routegen"
)

const (
	peerAddr = "127.0.0.1" // the Peer under test
	recvAddr = "127.0.0.2" // the plain GoBGP server receiving its routes
	peerASN  = 65010
	recvASN  = 65001
	nRoutes  = 1000
	waitFor  = 20 * time.Second
)

var (
	nextHop = netip.MustParseAddr("192.0.2.10")        // a host behind the receiver, not the Peer
	extra   = netip.MustParsePrefix("198.51.100.0/24") // the lab's extra prefix
)

func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// freePort returns a TCP port that was free on addr a moment ago.
func freePort(t *testing.T, addr string) int32 {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("find a free port on %s: %v", addr, err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// startReceiver starts a plain GoBGP server listening on recvAddr:port that
// accepts a passive session from peerAddr.
func startReceiver(t *testing.T, port int32) *server.BgpServer {
	t.Helper()
	s := server.NewBgpServer(server.LoggerOption(testLogger(t).With("side", "receiver"), nil))
	go s.Serve()
	ctx := context.Background()
	err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: recvASN, RouterId: "10.255.0.2", ListenPort: port, ListenAddresses: []string{recvAddr},
	}})
	if err != nil {
		s.Stop()
		t.Fatalf("start receiver: %v", err)
	}
	err = s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: peerAddr, PeerAsn: peerASN},
		Transport: &api.Transport{PassiveMode: true, LocalAddress: recvAddr},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 9, KeepaliveInterval: 3, ConnectRetry: 1}},
	}})
	if err != nil {
		s.Stop()
		t.Fatalf("receiver add peer: %v", err)
	}
	return s
}

// received returns the receiver's best IPv4 routes and their NEXT_HOPs.
func received(t *testing.T, s *server.BgpServer) map[netip.Prefix]netip.Addr {
	t.Helper()
	out := make(map[netip.Prefix]netip.Addr)
	err := s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC},
		func(nlri bgp.NLRI, paths []*apiutil.Path) {
			n, ok := nlri.(*bgp.IPAddrPrefix)
			if !ok || len(paths) == 0 {
				return
			}
			var nh netip.Addr
			for _, a := range paths[0].Attrs {
				switch a := a.(type) {
				case *bgp.PathAttributeNextHop:
					nh = a.Value
				case *bgp.PathAttributeMpReachNLRI:
					nh = a.Nexthop
				}
			}
			out[n.Prefix] = nh
		})
	if err != nil {
		t.Fatalf("receiver ListPath: %v", err)
	}
	return out
}

// eventually polls cond every 50 ms until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitFor, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settledGoroutines waits until the goroutine count has been the same for
// 200 ms and returns it.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for same < 4 {
		time.Sleep(50 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// waitGoroutines waits up to timeout for the goroutine count to drop to max
// and otherwise returns a dump of all goroutines.
func waitGoroutines(max int, timeout time.Duration) (leftover string, ok bool) {
	deadline := time.Now().Add(timeout)
	for runtime.NumGoroutine() > max {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			return string(buf[:runtime.Stack(buf, true)]), false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", true
}

func TestPeerAnnouncesTableWithThirdPartyNextHop(t *testing.T) {
	initialGoroutines := runtime.NumGoroutine()

	port := freePort(t, recvAddr)
	recv := startReceiver(t, port)
	recvStopped := false
	defer func() {
		if !recvStopped {
			recv.Stop()
		}
	}()
	// The receiver's own goroutines (listener, FSM waiting in Active) are
	// part of the baseline the Peer's Stop must return to.
	baseGoroutines := settledGoroutines()

	p, err := Start(context.Background(), Config{
		ASN: peerASN, RouterID: netip.MustParseAddr("10.255.0.1"), ListenPort: -1,
		LocalAddress: netip.MustParseAddr(peerAddr),
		Neighbor:     netip.MustParseAddr(recvAddr), NeighborASN: recvASN, NeighborPort: uint32(port),
		Routes: nRoutes, Seed: 1, NextHop: nextHop, Extra: []netip.Prefix{extra},
		Logger: testLogger(t).With("side", "peer"),
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	peerStopped := false
	defer func() {
		if !peerStopped {
			p.Stop()
		}
	}()

	want := append(routegen.Generate(nRoutes, 1), extra)
	if got := p.Status().Announced; got != len(want) {
		t.Fatalf("Status().Announced = %d right after Start, want %d", got, len(want))
	}
	eventually(t, "the session to be established", func() bool { return p.Status().State == "established" })

	// The receiver has every route, each with the configured next hop rather
	// than the Peer's session address.
	var rib map[netip.Prefix]netip.Addr
	eventually(t, fmt.Sprintf("%d routes at the receiver", len(want)), func() bool {
		rib = received(t, recv)
		return len(rib) >= len(want)
	})
	if len(rib) != len(want) {
		t.Errorf("receiver has %d routes, want %d", len(rib), len(want))
	}
	for _, q := range want {
		nh, ok := rib[q]
		switch {
		case !ok:
			t.Errorf("receiver lacks %v", q)
		case nh != nextHop:
			t.Errorf("receiver has %v with NEXT_HOP %v, want %v", q, nh, nextHop)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Withdraw one prefix and announce it again.
	victim := want[len(want)/2]
	if err := p.Withdraw(victim); err != nil {
		t.Fatalf("Withdraw(%v): %v", victim, err)
	}
	eventually(t, fmt.Sprintf("%v to be withdrawn at the receiver", victim), func() bool {
		_, ok := received(t, recv)[victim]
		return !ok
	})
	if got := p.Status().Announced; got != len(want)-1 {
		t.Errorf("Announced after Withdraw = %d, want %d", got, len(want)-1)
	}
	if err := p.Withdraw(victim); err != nil { // idempotent
		t.Errorf("second Withdraw(%v): %v", victim, err)
	}
	if err := p.Announce(victim); err != nil {
		t.Fatalf("Announce(%v): %v", victim, err)
	}
	eventually(t, fmt.Sprintf("%v to return at the receiver", victim), func() bool {
		nh, ok := received(t, recv)[victim]
		return ok && nh == nextHop
	})
	if got := p.Status().Announced; got != len(want) {
		t.Errorf("Announced after re-Announce = %d, want %d", got, len(want))
	}

	testControl(t, p, recv)

	st := p.Status()
	if st.State != "established" || st.Established != 1 || st.Uptime <= 0 || st.EstablishedAt.IsZero() {
		t.Errorf("Status = %+v, want established once with a positive uptime", st)
	}

	// Stop both speakers; every goroutine GoBGP started must end.
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	peerStopped = true
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if got := p.Status().State; got != "stopped" {
		t.Errorf("State after Stop = %q, want stopped", got)
	}
	if err := p.Announce(victim); !errors.Is(err, ErrStopped) {
		t.Errorf("Announce after Stop = %v, want ErrStopped", err)
	}
	// Every goroutine the Peer's GoBGP started has ended once the
	// receiver's side of the session is back to Active.
	if dump, ok := waitGoroutines(baseGoroutines, 10*time.Second); !ok {
		t.Fatalf("%d goroutines 10s after Stop, %d before Start:\n%s", runtime.NumGoroutine(), baseGoroutines, dump)
	}
	t.Logf("goroutines: %d before Start, %d after Stop", baseGoroutines, runtime.NumGoroutine())

	// The plain receiver is not the unit under test: GoBGP v4.8.0's
	// cleanInfiniteChannel drains an FSM's outgoing queue without blocking,
	// so a server stopped with messages still queued can leak that queue's
	// goroutine. Report it without failing.
	recv.Stop()
	recvStopped = true
	if dump, ok := waitGoroutines(initialGoroutines, 2*time.Second); !ok {
		t.Logf("receiver (plain GoBGP) left %d goroutines after Stop:\n%s", runtime.NumGoroutine()-initialGoroutines, dump)
	}
}

// testControl exercises ServeControl over a unix socket.
func testControl(t *testing.T, p *Peer, recv *server.BgpServer) {
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.ServeControl(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeControl returned %v after cancel, want nil", err)
		}
	}()

	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	do := func(method, path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://peer"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: read body: %v", method, path, err)
		}
		return resp.StatusCode, body
	}
	decode := func(body []byte) Status {
		t.Helper()
		var st Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("decode status %q: %v", body, err)
		}
		return st
	}

	code, body := do("GET", "/status")
	if code != http.StatusOK {
		t.Fatalf("GET /status = %d %s", code, body)
	}
	st := decode(body)
	if st.State != "established" || st.Announced != nRoutes+1 || st.Neighbor != recvAddr || st.Uptime <= 0 {
		t.Errorf("GET /status = %+v", st)
	}
	for _, key := range []string{`"state"`, `"announced"`, `"uptime_seconds"`} {
		if !bytes.Contains(body, []byte(key)) {
			t.Errorf("GET /status body lacks %s: %s", key, body)
		}
	}

	for _, bad := range []string{"bogus", "10.0.0.1%2F24", "%3A%3Affff%3A192.0.2.0%2F120", "300.0.0.0%2F8"} {
		code, body := do("POST", "/withdraw?prefix="+bad)
		if code != http.StatusBadRequest {
			t.Errorf("POST /withdraw?prefix=%s = %d %s, want 400", bad, code, body)
		}
		if first, _, _ := strings.Cut(bad, "%"); !bytes.Contains(body, []byte(first)) {
			t.Errorf("POST /withdraw?prefix=%s: message %q does not name the value", bad, body)
		}
	}
	if code, body := do("POST", "/withdraw"); code != http.StatusBadRequest {
		t.Errorf("POST /withdraw without prefix = %d %s, want 400", code, body)
	}
	if code, _ := do("GET", "/withdraw?prefix="+extra.String()); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /withdraw = %d, want 405", code)
	}

	code, body = do("POST", "/withdraw?prefix="+extra.String())
	if code != http.StatusOK || decode(body).Announced != nRoutes {
		t.Errorf("POST /withdraw?prefix=%v = %d %s, want 200 and %d announced", extra, code, body, nRoutes)
	}
	eventually(t, fmt.Sprintf("%v to be withdrawn at the receiver", extra), func() bool {
		_, ok := received(t, recv)[extra]
		return !ok
	})
	code, body = do("POST", "/announce?prefix="+extra.String())
	if code != http.StatusOK || decode(body).Announced != nRoutes+1 {
		t.Errorf("POST /announce?prefix=%v = %d %s, want 200 and %d announced", extra, code, body, nRoutes+1)
	}
	eventually(t, fmt.Sprintf("%v to return at the receiver", extra), func() bool {
		nh, ok := received(t, recv)[extra]
		return ok && nh == nextHop
	})
}

func TestAnnounceRejectsBadPrefixes(t *testing.T) {
	p, err := Start(context.Background(), Config{
		ASN: peerASN, RouterID: netip.MustParseAddr("10.255.0.1"), ListenPort: -1,
		Neighbor: netip.MustParseAddr("127.0.0.3"), NeighborASN: recvASN, NeighborPort: 1,
		Routes: 10, NextHop: nextHop, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Stop()
	good := netip.MustParsePrefix("203.0.114.0/24")
	for _, bad := range []netip.Prefix{{}, netip.MustParsePrefix("10.0.0.1/8"), netip.MustParsePrefix("::ffff:192.0.2.0/120")} {
		if err := p.Announce(good, bad); !errors.Is(err, ErrInvalidPrefix) {
			t.Errorf("Announce(%v) = %v, want ErrInvalidPrefix", bad, err)
		}
		if err := p.Withdraw(bad); !errors.Is(err, ErrInvalidPrefix) {
			t.Errorf("Withdraw(%v) = %v, want ErrInvalidPrefix", bad, err)
		}
	}
	if got := p.Status().Announced; got != 10 {
		t.Errorf("Announced = %d after rejected calls, want 10 (nothing applied)", got)
	}
	if err := p.Announce(good, good); err != nil {
		t.Fatalf("Announce(%v twice): %v", good, err)
	}
	if got := p.Status().Announced; got != 11 {
		t.Errorf("Announced = %d, want 11", got)
	}
	if st := p.Status().State; st == "established" || st == "" {
		t.Errorf("State = %q with no neighbour listening", st)
	}
}

func TestConfigValidation(t *testing.T) {
	valid := func() Config {
		return Config{
			ASN: 65010, RouterID: netip.MustParseAddr("10.0.0.1"),
			Neighbor: netip.MustParseAddr("10.0.0.2"), NeighborASN: 65001,
			Routes: 10, NextHop: netip.MustParseAddr("10.0.0.3"),
		}
	}
	if err := valid().withDefaults().validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	d := valid().withDefaults()
	if d.ListenPort != 179 || d.NeighborPort != 179 || d.HoldTime != 9*time.Second ||
		d.Keepalive != 3*time.Second || d.ConnectRetry != time.Second || d.Logger == nil {
		t.Errorf("defaults = %+v", d)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error: field and value
	}{
		{"asn", func(c *Config) { c.ASN = 0 }, []string{"ASN", "0"}},
		{"router id missing", func(c *Config) { c.RouterID = netip.Addr{} }, []string{"RouterID", "invalid IP"}},
		{"router id v6", func(c *Config) { c.RouterID = netip.MustParseAddr("2001:db8::1") }, []string{"RouterID", "2001:db8::1"}},
		{"listen port", func(c *Config) { c.ListenPort = 70000 }, []string{"ListenPort", "70000"}},
		{"listen port negative", func(c *Config) { c.ListenPort = -2 }, []string{"ListenPort", "-2"}},
		{"listen addr", func(c *Config) { c.ListenAddrs = []string{"1.2.3.4", "nope"} }, []string{"ListenAddrs", `"nope"`}},
		{"neighbor", func(c *Config) { c.Neighbor = netip.Addr{} }, []string{"Neighbor", "invalid IP"}},
		{"neighbor unspecified", func(c *Config) { c.Neighbor = netip.IPv4Unspecified() }, []string{"Neighbor", "0.0.0.0"}},
		{"local address family", func(c *Config) { c.LocalAddress = netip.MustParseAddr("::1") }, []string{"LocalAddress", "::1"}},
		{"neighbor asn", func(c *Config) { c.NeighborASN = 0 }, []string{"NeighborASN", "0"}},
		{"neighbor port", func(c *Config) { c.NeighborPort = 65536 }, []string{"NeighborPort", "65536"}},
		{"passive without listening", func(c *Config) { c.Passive, c.ListenPort = true, -1 }, []string{"Passive", "true"}},
		{"routes negative", func(c *Config) { c.Routes = -1 }, []string{"Routes", "-1"}},
		{"routes too many", func(c *Config) { c.Routes = MaxRoutes + 1 }, []string{"Routes", "10000001"}},
		{"next hop missing", func(c *Config) { c.NextHop = netip.Addr{} }, []string{"NextHop", "invalid IP"}},
		{"next hop unspecified", func(c *Config) { c.NextHop = netip.IPv4Unspecified() }, []string{"NextHop", "0.0.0.0"}},
		{"next hop v6", func(c *Config) { c.NextHop = netip.MustParseAddr("2001:db8::1") }, []string{"NextHop", "2001:db8::1"}},
		{"extra unmasked", func(c *Config) { c.Extra = []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")} }, []string{"Extra", "198.51.100.1/24", "198.51.100.0/24"}},
		{"extra v6 without NextHop6", func(c *Config) { c.Extra = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")} }, []string{"Extra", "2001:db8::/32", "NextHop6"}},
		{"bad NextHop6", func(c *Config) { c.NextHop6 = netip.MustParseAddr("192.0.2.1") }, []string{"NextHop6", "192.0.2.1"}},
		{"hold time short", func(c *Config) { c.HoldTime = 2 * time.Second }, []string{"HoldTime", "2s"}},
		{"hold time fraction", func(c *Config) { c.HoldTime = 4500 * time.Millisecond }, []string{"HoldTime", "4.5s"}},
		{"keepalive not below hold", func(c *Config) { c.HoldTime, c.Keepalive = 6*time.Second, 6*time.Second }, []string{"Keepalive", "6s"}},
		{"keepalive fraction", func(c *Config) { c.Keepalive = 1500 * time.Millisecond }, []string{"Keepalive", "1.5s"}},
		{"connect retry negative", func(c *Config) { c.ConnectRetry = -time.Second }, []string{"ConnectRetry", "-1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			_, err := Start(context.Background(), c)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Start = %v, want ErrInvalidConfig", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestStartFailsCleanlyOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_, err = Start(context.Background(), Config{
		ASN: peerASN, RouterID: netip.MustParseAddr("10.255.0.1"),
		ListenPort: port, ListenAddrs: []string{"127.0.0.1"},
		Neighbor: netip.MustParseAddr("127.0.0.3"), NeighborASN: recvASN,
		NextHop: nextHop, Logger: testLogger(t),
	})
	if !errors.Is(err, ErrGoBGP) || !strings.Contains(err.Error(), fmt.Sprint(port)) {
		t.Fatalf("Start on a busy port = %v, want an ErrGoBGP error naming port %d", err, port)
	}
}

func TestSecondsJSON(t *testing.T) {
	b, err := json.Marshal(Status{Uptime: Seconds(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"uptime_seconds":1.5`)) {
		t.Errorf("marshalled %s, want uptime_seconds 1.5", b)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil || st.Uptime != Seconds(1500*time.Millisecond) {
		t.Errorf("round trip = %v, %v", st.Uptime, err)
	}
	if slices.Contains(strings.Split(string(b), ","), `"established_at"`) {
		t.Errorf("zero EstablishedAt marshalled: %s", b)
	}
}

// BenchmarkStart measures Start with n routes and no session: generating
// the table and inserting it into GoBGP's RIB with batched AddPath calls.
func BenchmarkStart(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				p, err := Start(context.Background(), Config{
					ASN: peerASN, RouterID: netip.MustParseAddr("10.255.0.1"), ListenPort: -1,
					Neighbor: netip.MustParseAddr("127.0.0.3"), NeighborASN: recvASN, NeighborPort: 1,
					Routes: n, NextHop: nextHop,
				})
				if err != nil {
					b.Fatal(err)
				}
				p.Stop()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
		})
	}
}

// Status.Received follows the routes the neighbour announces and withdraws;
// the Peer's own routes do not count.
func TestReceivedCountsTheNeighboursRoutes(t *testing.T) {
	port := freePort(t, recvAddr)
	b, err := Start(context.Background(), Config{
		ASN: recvASN, RouterID: netip.MustParseAddr("10.255.0.2"), ListenPort: port, ListenAddrs: []string{recvAddr},
		Neighbor: netip.MustParseAddr(peerAddr), NeighborASN: peerASN, Routes: 0, NextHop: nextHop,
		Extra: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}, Logger: testLogger(t).With("side", "b"),
	})
	if err != nil {
		t.Fatalf("Start b: %v", err)
	}
	defer b.Stop()
	a, err := Start(context.Background(), Config{
		ASN: peerASN, RouterID: netip.MustParseAddr("10.255.0.1"), ListenPort: -1, LocalAddress: netip.MustParseAddr(peerAddr),
		Neighbor: netip.MustParseAddr(recvAddr), NeighborASN: recvASN, NeighborPort: uint32(port),
		Routes: 50, Seed: 1, NextHop: nextHop, Logger: testLogger(t).With("side", "a"),
	})
	if err != nil {
		t.Fatalf("Start a: %v", err)
	}
	defer a.Stop()
	eventually(t, "b to receive a's 50 routes", func() bool { return b.Status().Received == 50 })
	eventually(t, "a to receive b's one route", func() bool { return a.Status().Received == 1 })
	if err := a.Withdraw(routegen.Generate(50, 1)[:10]...); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b to see 10 withdrawn", func() bool { return b.Status().Received == 40 })
	time.Sleep(200 * time.Millisecond)
	if got := b.Status().Received; got != 40 {
		t.Fatalf("b received %d, want 40", got)
	}
}
