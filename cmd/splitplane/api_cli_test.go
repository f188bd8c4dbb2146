package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/forces"
)

// fakeAPI is the state behind an in-process fake of the splitplane API:
// canned answers, the requests it got, and the error each method returns.
type fakeAPI struct {
	mu       sync.Mutex
	errs     map[string]error // by method: "Add", "FEs.List", ...
	token    string           // if set, required as a bearer token
	calls    map[string]int
	added    []*splitplanev1.Route
	replaced []*splitplanev1.Route
	deleted  []string
	listReq  *splitplanev1.ListRoutesRequest
	watchReq *splitplanev1.WatchRoutesRequest

	routes    []*splitplanev1.Route
	events    []*splitplanev1.RouteEvent
	watchErr  error // ends the watch after the events
	watchHold bool  // keeps the watch open after the events
	fes       func(call int) []*splitplanev1.FE
	neighbors []*splitplanev1.Neighbor
	rules     []*splitplanev1.Rule
}

// enter counts a call and returns the error the method should fail with.
func (f *fakeAPI) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	return f.errs[method]
}

func (f *fakeAPI) called(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

type fakeRoutes struct {
	splitplanev1.UnimplementedRoutesServer
	*fakeAPI
}

func (f fakeRoutes) Add(_ context.Context, r *splitplanev1.AddRouteRequest) (*splitplanev1.AddRouteResponse, error) {
	if err := f.enter("Add"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, r.GetRoute())
	return &splitplanev1.AddRouteResponse{}, nil
}

func (f fakeRoutes) Replace(_ context.Context, r *splitplanev1.ReplaceRouteRequest) (*splitplanev1.ReplaceRouteResponse, error) {
	if err := f.enter("Replace"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replaced = append(f.replaced, r.GetRoute())
	return &splitplanev1.ReplaceRouteResponse{}, nil
}

func (f fakeRoutes) Delete(_ context.Context, r *splitplanev1.DeleteRouteRequest) (*splitplanev1.DeleteRouteResponse, error) {
	if err := f.enter("Delete"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, r.GetPrefix())
	return &splitplanev1.DeleteRouteResponse{}, nil
}

func (f fakeRoutes) List(r *splitplanev1.ListRoutesRequest, s grpc.ServerStreamingServer[splitplanev1.Route]) error {
	if err := f.enter("List"); err != nil {
		return err
	}
	f.mu.Lock()
	f.listReq = r
	routes := f.routes
	f.mu.Unlock()
	for _, rt := range routes {
		if err := s.Send(rt); err != nil {
			return err
		}
	}
	return nil
}

func (f fakeRoutes) Watch(r *splitplanev1.WatchRoutesRequest, s grpc.ServerStreamingServer[splitplanev1.RouteEvent]) error {
	if err := f.enter("Watch"); err != nil {
		return err
	}
	f.mu.Lock()
	f.watchReq = r
	events, werr, hold := f.events, f.watchErr, f.watchHold
	f.mu.Unlock()
	for _, e := range events {
		if err := s.Send(e); err != nil {
			return err
		}
	}
	if hold {
		<-s.Context().Done()
	}
	return werr
}

func (f fakeRoutes) Get(_ context.Context, r *splitplanev1.GetRouteRequest) (*splitplanev1.GetRouteResponse, error) {
	if err := f.enter("Get"); err != nil {
		return nil, err
	}
	return &splitplanev1.GetRouteResponse{Address: r.GetAddress(), Kind: "no_route"}, nil
}

type fakeFEs struct {
	splitplanev1.UnimplementedFEsServer
	*fakeAPI
}

func (f fakeFEs) List(context.Context, *splitplanev1.ListFEsRequest) (*splitplanev1.ListFEsResponse, error) {
	if err := f.enter("FEs.List"); err != nil {
		return nil, err
	}
	var fes []*splitplanev1.FE
	if f.fes != nil {
		fes = f.fes(f.called("FEs.List"))
	}
	return &splitplanev1.ListFEsResponse{Fes: fes}, nil
}

func (f fakeFEs) Verify(context.Context, *splitplanev1.VerifyFEsRequest) (*splitplanev1.VerifyFEsResponse, error) {
	if err := f.enter("Verify"); err != nil {
		return nil, err
	}
	return &splitplanev1.VerifyFEsResponse{}, nil
}

type fakeBGP struct {
	splitplanev1.UnimplementedBGPServer
	*fakeAPI
}

func (f fakeBGP) ResetNeighbor(_ context.Context, r *splitplanev1.ResetNeighborRequest) (*splitplanev1.ResetNeighborResponse, error) {
	if err := f.enter("ResetNeighbor"); err != nil {
		return nil, err
	}
	if r.GetAddress() != "192.0.2.2" {
		return nil, status.Errorf(codes.NotFound, "no such bgp neighbour: %s", r.GetAddress())
	}
	return &splitplanev1.ResetNeighborResponse{}, nil
}

func (f fakeBGP) Neighbors(context.Context, *splitplanev1.ListNeighborsRequest) (*splitplanev1.ListNeighborsResponse, error) {
	if err := f.enter("Neighbors"); err != nil {
		return nil, err
	}
	return &splitplanev1.ListNeighborsResponse{Neighbors: f.neighbors}, nil
}

type fakeClassifier struct {
	splitplanev1.UnimplementedClassifierServer
	*fakeAPI
}

func (f fakeClassifier) ListRules(context.Context, *splitplanev1.ListRulesRequest) (*splitplanev1.ListRulesResponse, error) {
	if err := f.enter("ListRules"); err != nil {
		return nil, err
	}
	return &splitplanev1.ListRulesResponse{Rules: f.rules}, nil
}

// checkToken refuses a call without the bearer token, if one is set.
func (f *fakeAPI) checkToken(ctx context.Context) error {
	f.mu.Lock()
	tok := f.token
	f.mu.Unlock()
	if tok == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+tok {
		return status.Error(codes.Unauthenticated, "missing or wrong bearer token")
	}
	return nil
}

// serve serves the fake on l until the test ends.
func (f *fakeAPI) serve(t *testing.T, l net.Listener, opts ...grpc.ServerOption) {
	t.Helper()
	opts = append(opts,
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := f.checkToken(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := f.checkToken(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}))
	s := grpc.NewServer(opts...)
	splitplanev1.RegisterRoutesServer(s, fakeRoutes{fakeAPI: f})
	splitplanev1.RegisterFEsServer(s, fakeFEs{fakeAPI: f})
	splitplanev1.RegisterBGPServer(s, fakeBGP{fakeAPI: f})
	splitplanev1.RegisterClassifierServer(s, fakeClassifier{fakeAPI: f})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
}

// startFake serves f on a unix socket in a temporary directory and returns
// the --api address.
func startFake(t *testing.T, f *fakeAPI) string {
	t.Helper()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t, l)
	return "unix:" + path
}

// run runs the splitplane command line as main does, returning what it
// printed and its exit code.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCtx(t, context.Background(), args...)
}

func runCtx(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := &cobra.Command{Use: "splitplane", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(feCmd())
	addAPICommands(root)
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(&errb, "splitplane:", err)
		code = exitCode(err)
	}
	return out.String(), errb.String(), code
}

func TestRouteAddDel(t *testing.T) {
	f := &fakeAPI{}
	api := startFake(t, f)

	if _, stderr, code := run(t, "route", "add", "198.51.100.0/24", "via", "192.0.2.1", "192.0.2.2", "--distance", "20", "--api", api); code != 0 {
		t.Fatalf("route add: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, "route", "add", "--api", api, "2001:db8::/32", "via", "2001:db8:ffff::1", "--replace"); code != 0 {
		t.Fatalf("route add --replace: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, "route", "del", "198.51.100.0/24", "--api", api); code != 0 {
		t.Fatalf("route del: exit %d, %s", code, stderr)
	}
	if len(f.added) != 1 || f.added[0].GetPrefix() != "198.51.100.0/24" || f.added[0].GetDistance() != 20 ||
		strings.Join(f.added[0].GetNextHops(), ",") != "192.0.2.1,192.0.2.2" {
		t.Errorf("Add got %v", f.added)
	}
	if len(f.replaced) != 1 || f.replaced[0].GetPrefix() != "2001:db8::/32" || f.replaced[0].GetDistance() != 0 {
		t.Errorf("Replace got %v", f.replaced)
	}
	if len(f.deleted) != 1 || f.deleted[0] != "198.51.100.0/24" {
		t.Errorf("Delete got %v", f.deleted)
	}
}

var cannedRoutes = []*splitplanev1.Route{
	{Prefix: "10.0.0.0/8", NextHops: []string{"192.0.2.1", "192.0.2.2"}, Distance: 5, Origin: splitplanev1.Origin_ORIGIN_API, Installed: true,
		ResolvedNextHops: []string{"192.0.2.1", "192.0.2.2"}},
	{Prefix: "10.0.0.0/8", NextHops: []string{"203.0.113.9"}, Distance: 20, Origin: splitplanev1.Origin_ORIGIN_BGP},
	{Prefix: "2001:db8::/32", NextHops: []string{"2001:db8:ffff::1"}, Distance: 1, Origin: splitplanev1.Origin_ORIGIN_STATIC, Installed: true,
		ResolvedNextHops: []string{"2001:db8:ffff::1"}},
}

func TestRouteList(t *testing.T) {
	f := &fakeAPI{routes: cannedRoutes}
	api := startFake(t, f)

	stdout, stderr, code := run(t, "route", "list", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `PREFIX         ORIGIN  DISTANCE  FIB  NEXT HOPS            RESOLVED
10.0.0.0/8     api     5         *    192.0.2.1,192.0.2.2  192.0.2.1,192.0.2.2
10.0.0.0/8     bgp     20             203.0.113.9          -
2001:db8::/32  static  1         *    2001:db8:ffff::1     2001:db8:ffff::1
`
	if stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", stdout, want)
	}

	stdout, stderr, code = run(t, "route", "list", "10.0.0.0/8", "--longer", "--table", "ipv4", "--origin", "bgp", "-o", "json", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	req := f.listReq
	if req.GetPrefix() != "10.0.0.0/8" || !req.GetLonger() || req.GetTable() != splitplanev1.Table_TABLE_IPV4 || req.GetOrigin() != splitplanev1.Origin_ORIGIN_BGP {
		t.Errorf("request %v", req)
	}
	var got []routeJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not one JSON array: %v\n%s", err, stdout)
	}
	if len(got) != 3 || got[0].Origin != "api" || !got[0].Installed || len(got[0].NextHops) != 2 || got[1].Origin != "bgp" ||
		got[1].Installed || got[1].ResolvedNextHops == nil || got[2].Origin != "static" || got[2].Distance != 1 {
		t.Errorf("json: %+v", got)
	}
	if !strings.Contains(stdout, `"resolved_next_hops": []`) {
		t.Errorf("empty lists should be [], not null:\n%s", stdout)
	}

	// An empty listing is still one JSON array.
	f.routes = nil
	if stdout, _, code = run(t, "route", "list", "-o", "json", "--api", api); code != 0 || stdout != "[]\n" {
		t.Errorf("empty json: exit %d, %q", code, stdout)
	}
}

var cannedFEs = []*splitplanev1.FE{{
	Id: "FE(1)", Name: "edge1", Remote: "192.0.2.10:6700", Synced: true,
	Ports: []*splitplanev1.Port{
		{Id: 2, Name: "eth0", Mac: "02:00:00:00:00:01", Up: true, Addresses: []string{"192.0.2.1/24"}},
		{Id: 3, Name: "eth1", Up: false},
	},
	Lanes:     []*splitplanev1.Lane{{Port: "eth0", Queue: 0, Cpu: 1}, {Port: "eth1", Queue: 0, Cpu: 2}},
	Counters:  &splitplanev1.Counters{RxPackets: 100, ForwardedPackets: 90, PassedPackets: 8, DroppedPackets: 2},
	RowsAcked: 12, HeartbeatRttP99Ms: 0.25,
}, {Id: "FE(2)", Synced: false}}

func TestFEList(t *testing.T) {
	f := &fakeAPI{fes: func(int) []*splitplanev1.FE { return cannedFEs }}
	api := startFake(t, f)
	stdout, stderr, code := run(t, "fe", "list", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `ID     NAME   REMOTE           SYNCED  ASSOCIATED  PORTS            LANES  RX   FORWARDED  PASSED  DROPPED  ROWS ACKED  FAILED  HB RTT P99
FE(1)  edge1  192.0.2.10:6700  yes     -           eth0,eth1(down)  2      100  90         8       2        12          0       0.25ms
FE(2)  -      -                no      -           -                0      -    -          -       -        0           0       0.00ms
`
	if stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", stdout, want)
	}
	stdout, _, code = run(t, "fe", "list", "-o", "json", "--api", api)
	var got []feJSON
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if len(got) != 2 || got[0].Counters.DroppedPackets != 2 || len(got[0].Ports) != 2 || got[0].Ports[0].Addresses[0] != "192.0.2.1/24" ||
		got[0].Lanes[1].CPU != 2 || got[1].Counters != nil || got[1].Ports == nil {
		t.Errorf("json: %+v", got)
	}
}

func TestBGPNeighbors(t *testing.T) {
	since := time.Now().Add(-90 * time.Minute).UnixMilli()
	f := &fakeAPI{neighbors: []*splitplanev1.Neighbor{
		{Address: "192.0.2.2", Asn: 65002, State: "established", SinceUnixMs: since, Bfd: "up", PrefixesReceived: 1000, PrefixesAccepted: 998},
		{Address: "2001:db8::2", Asn: 65003, State: "active", Warning: "eBGP neighbour without import policy: accepts no routes (RFC 8212)"},
	}}
	api := startFake(t, f)
	stdout, stderr, code := run(t, "bgp", "neighbors", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NEIGHBOR     ASN    STATE        FOR") ||
		!strings.HasPrefix(lines[1], "192.0.2.2    65002  established  1h30m") || !strings.HasSuffix(lines[1], "up   1000      998") ||
		lines[2] != "2001:db8::2  65003  active       -        -    0         0" ||
		lines[3] != "warning: 2001:db8::2: eBGP neighbour without import policy: accepts no routes (RFC 8212)" {
		t.Errorf("table:\n%s", stdout)
	}
	stdout, _, _ = run(t, "bgp", "neighbors", "-o", "json", "--api", api)
	var got []neighborJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 2 || got[0].SinceUnixMs != since || got[0].PrefixesAccepted != 998 || got[1].Warning == "" {
		t.Errorf("json %v: %+v", err, got)
	}
}

func TestClassifierRules(t *testing.T) {
	f := &fakeAPI{rules: []*splitplanev1.Rule{
		{Flow: "tcp 192.0.2.2:179 -> 192.0.2.1:40123", Port: "eth0", Steering: "ntuple queue 0", Packets: 42, PolicedDrops: 1, PassSteerBadCsum: 5},
	}}
	api := startFake(t, f)
	stdout, stderr, code := run(t, "classifier", "rules", "--api", api)
	want := `FLOW                                  PORT  STEERING        PACKETS  BAD CSUM  POLICED DROPS
tcp 192.0.2.2:179 -> 192.0.2.1:40123  eth0  ntuple queue 0  42       5         1
`
	if code != 0 || stdout != want {
		t.Errorf("exit %d %s:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
	stdout, _, _ = run(t, "classifier", "rules", "-o", "json", "--api", api)
	var got []ruleJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 1 || got[0].Steering != "ntuple queue 0" || got[0].PolicedDrops != 1 {
		t.Errorf("json %v: %+v", err, got)
	}
	if !strings.Contains(stdout, `"pass_steer_bad_csum": 5`) {
		t.Errorf("json without the rule's pass_steer_bad_csum 5:\n%s", stdout)
	}
}

func TestRouteWatch(t *testing.T) {
	f := &fakeAPI{events: []*splitplanev1.RouteEvent{
		{Kind: splitplanev1.RouteEvent_KIND_INSTALLED, Prefix: "10.0.0.0/8", NextHops: []string{"192.0.2.1"}},
		{Kind: splitplanev1.RouteEvent_KIND_SYNCED},
		{Kind: splitplanev1.RouteEvent_KIND_REMOVED, Prefix: "10.0.0.0/8"},
	}}
	api := startFake(t, f)

	stdout, stderr, code := run(t, "route", "watch", "--current", "--table", "ipv6", "--api", api)
	want := "installed  10.0.0.0/8          via 192.0.2.1\n" +
		"synced     (the current FIB has been sent)\n" +
		"removed    10.0.0.0/8\n"
	if code != 0 || stdout != want {
		t.Errorf("exit %d %s:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
	if !f.watchReq.GetCurrent() || f.watchReq.GetTable() != splitplanev1.Table_TABLE_IPV6 {
		t.Errorf("request %v", f.watchReq)
	}

	stdout, _, code = run(t, "route", "watch", "-o", "json", "--api", api)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for i, kind := range []string{"installed", "synced", "removed"} {
		var e routeEventJSON
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil || e.Kind != kind {
			t.Errorf("line %d %q: %v", i, lines[i], err)
		}
	}
	if lines[0] != `{"kind":"installed","prefix":"10.0.0.0/8","next_hops":["192.0.2.1"]}` {
		t.Errorf("line 0: %s", lines[0])
	}

	// The CE cuts the watch off: the events so far, then the error's code.
	f.watchErr = status.Error(codes.ResourceExhausted, "watcher fell behind")
	stdout, stderr, code = run(t, "route", "watch", "--api", api)
	if code != 1 || !strings.Contains(stderr, "watcher fell behind") || !strings.Contains(stdout, "removed") {
		t.Errorf("cut off: exit %d, %q, %q", code, stdout, stderr)
	}

	// Interrupted (the context ends, as on SIGINT): exit 0.
	f.watchErr, f.watchHold = nil, true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	stdout, stderr, code = runCtx(t, ctx, "route", "watch", "--api", api)
	if code != 0 || !strings.Contains(stdout, "removed") {
		t.Errorf("interrupted: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestExitCodes checks every command against every error code the server
// may send: the exit code and that the server's message is printed.
func TestExitCodes(t *testing.T) {
	commands := []struct {
		method string
		args   []string
	}{
		{"Add", []string{"route", "add", "10.0.0.0/8", "via", "192.0.2.1"}},
		{"Replace", []string{"route", "add", "10.0.0.0/8", "via", "192.0.2.1", "--replace"}},
		{"Delete", []string{"route", "del", "10.0.0.0/8"}},
		{"List", []string{"route", "list"}},
		{"Watch", []string{"route", "watch"}},
		{"FEs.List", []string{"fe", "list"}},
		{"Get", []string{"route", "get", "192.0.2.1"}},
		{"Verify", []string{"fe", "verify"}},
		{"Neighbors", []string{"bgp", "neighbors"}},
		{"ListRules", []string{"classifier", "rules", "-o", "json"}},
		{"FEs.List", []string{"top", "--once", "--interval", "1ms"}},
	}
	codesWant := []struct {
		code codes.Code
		exit int
	}{
		{codes.InvalidArgument, 2},
		{codes.NotFound, 3},
		{codes.AlreadyExists, 4},
		{codes.Unavailable, 1},
		{codes.FailedPrecondition, 1},
		{codes.Internal, 1},
		{codes.Unauthenticated, 1},
	}
	for _, c := range commands {
		for _, w := range codesWant {
			t.Run(strings.Join(c.args, "_")+"/"+w.code.String(), func(t *testing.T) {
				msg := fmt.Sprintf("route.prefix %q: the message of %s", "10.0.0.0/33", w.code)
				errs := map[string]error{c.method: status.Error(w.code, msg)}
				if c.args[0] == "top" { // top fails only if nothing can be read
					errs["Neighbors"], errs["List"] = errs[c.method], errs[c.method]
				}
				api := startFake(t, &fakeAPI{errs: errs})
				stdout, stderr, code := run(t, append(c.args, "--api", api)...)
				if code != w.exit {
					t.Errorf("exit %d, want %d; stderr %q", code, w.exit, stderr)
				}
				if !strings.Contains(stderr, msg) || !strings.Contains(stderr, w.code.String()) {
					t.Errorf("stderr %q does not carry the server's message", stderr)
				}
				if stdout != "" {
					t.Errorf("stdout %q", stdout)
				}
			})
		}
	}
}

// TestUsageErrors checks that bad flags and arguments exit with 2 and call
// nothing.
func TestUsageErrors(t *testing.T) {
	f := &fakeAPI{}
	api := startFake(t, f)
	for _, args := range [][]string{
		{"route", "add", "10.0.0.0/8", "192.0.2.1"},
		{"route", "add", "10.0.0.0/8", "via"},
		{"route", "add", "10.0.0.0/8", "via", "192.0.2.1", "--distance", "-1"},
		{"route", "del"},
		{"route", "del", "10.0.0.0/8", "10.1.0.0/16"},
		{"route", "list", "--longer"},
		{"route", "list", "-o", "yaml"},
		{"route", "list", "--table", "ipv5"},
		{"route", "list", "--origin", "ospf"},
		{"route", "list", "--bogus"},
		{"route", "lst"},
		{"route", "watch", "extra"},
		{"route", "watch", "-o", "xml"},
		{"fe", "list", "-o", "yaml"},
		{"fe", "list", "extra"},
		{"bgp", "neighbors", "--bogus"},
		{"classifier", "rules", "extra"},
		{"top", "--interval", "0s"},
		{"top", "--once", "extra"},
		{"route", "list", "--timeout", "0s"},
	} {
		_, stderr, code := run(t, append(args, "--api", api)...)
		if code != 2 || !strings.Contains(stderr, "usage") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	for _, args := range [][]string{
		{"route", "list", "--api", "localhost:50051"},
		{"route", "list", "--api", "tcp:nohostport"},
		{"route", "list", "--api", "unix:"},
		{"route", "list", "--api", api, "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem"},
		{"route", "list", "--api", "tcp:127.0.0.1:1", "--tls-cert", "c.pem"},
	} {
		_, stderr, code := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "usage") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	for m, n := range f.calls {
		t.Errorf("usage errors called %s %d times", m, n)
	}
}

func TestUnreachable(t *testing.T) {
	api := "unix:" + filepath.Join(t.TempDir(), "nobody.sock")
	_, stderr, code := run(t, "route", "list", "--api", api, "--timeout", "2s")
	if code != 1 || !strings.Contains(stderr, "Unavailable") || !strings.Contains(stderr, "is the CE running") {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

func TestBearerToken(t *testing.T) {
	f := &fakeAPI{token: "s3cret", routes: cannedRoutes}
	api := startFake(t, f)
	if _, stderr, code := run(t, "route", "list", "--api", api); code != 1 || !strings.Contains(stderr, "Unauthenticated") {
		t.Errorf("without a token: exit %d, %q", code, stderr)
	}
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := run(t, "route", "list", "--api", api, "--token-file", tok); code != 0 || !strings.Contains(stdout, "2001:db8::/32") {
		t.Errorf("with the token: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(t, "route", "list", "--api", api, "--token-file", tok+".missing"); code != 1 || !strings.Contains(stderr, "--token-file") {
		t.Errorf("missing token file: exit %d, %q", code, stderr)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	pki, err := forces.WritePKI(dir, time.Hour, "ce", "cli")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := pki["ce"].ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPI{calls: map[string]int{}, routes: cannedRoutes}
	f.serve(t, l, grpc.Creds(credentials.NewTLS(srv)))
	api := "tcp:" + l.Addr().String()
	cli := pki["cli"]

	stdout, stderr, code := run(t, "route", "list", "-o", "json", "--api", api, "--tls-cert", cli.Cert, "--tls-key", cli.Key, "--tls-ca", cli.CA)
	if code != 0 || !strings.Contains(stdout, `"prefix": "2001:db8::/32"`) {
		t.Errorf("mutual TLS: exit %d, %q, %q", code, stdout, stderr)
	}
	// Without a client certificate the server refuses the connection.
	if _, stderr, code := run(t, "route", "list", "--api", api, "--timeout", "2s"); code != 1 {
		t.Errorf("without TLS: exit %d, %q", code, stderr)
	}
}

func TestBGPReset(t *testing.T) {
	api := startFake(t, &fakeAPI{})
	stdout, stderr, code := run(t, "bgp", "reset", "192.0.2.2", "--api", api)
	if code != 0 || stdout != "neighbour 192.0.2.2 reset\n" {
		t.Fatalf("exit %d: %q %q", code, stdout, stderr)
	}
	_, stderr, code = run(t, "bgp", "reset", "192.0.2.9", "--api", api)
	if code == 0 || !strings.Contains(stderr, "192.0.2.9") {
		t.Fatalf("unknown neighbour: exit %d: %q", code, stderr)
	}
}
