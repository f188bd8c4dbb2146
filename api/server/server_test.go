package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/runtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/splitplane/splitplane/api/packed"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
)

// startCE runs a CE with BGP off whose next hops in 10.0.0.0/8 and
// 2001:db8::/64 are directly connected.
func startCE(t testing.TB, cfg ce.Config) *ce.CE {
	t.Helper()
	cfg.ID, cfg.ASN, cfg.RouterID, cfg.BGPListenPort = 1, 65001, "192.0.2.1", -1
	cfg.ForCESListen, cfg.ForCESListenLow = "127.0.0.1:0", "127.0.0.1:0"
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.SyncHold = time.Millisecond
	cfg.StaticRoutes = append(cfg.StaticRoutes, ce.StaticRoute{Prefix: "10.0.0.0/8", Connected: true}, ce.StaticRoute{Prefix: "2001:db8::/64", Connected: true})
	c, err := ce.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, "CE", c.Run, func() bool { return c.Addr() != nil })
	return c
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startServer serves b's API; a Listen of "" takes a unix socket in a
// temporary directory.
func startServer(t testing.TB, b Backend, cfg Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "unix:" + filepath.Join(t.TempDir(), "run", "ce-api.sock")
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := Start(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func target(s *Server) string {
	if s.Addr().Network() == "unix" {
		return "unix://" + s.Addr().String()
	}
	return s.Addr().String()
}

func dial(t testing.TB, s *Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(target(s), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// setup is a CE, its API on a unix socket and a client of it.
func setup(t *testing.T) (*ce.CE, *Server, spv1.RoutesClient) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{})
	return c, s, spv1.NewRoutesClient(dial(t, s))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func route(p string, hops ...string) *spv1.Route { return &spv1.Route{Prefix: p, NextHops: hops} }

// wantCode fails unless err has code and its message contains every part.
func wantCode(t *testing.T, what string, err error, code codes.Code, parts ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("%s: %q does not say %q", what, st.Message(), p)
		}
	}
}

func listAll(t *testing.T, rc spv1.RoutesClient, req *spv1.ListRoutesRequest) []*spv1.Route {
	t.Helper()
	stream, err := rc.List(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []*spv1.Route
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("list %v: %v", req, err)
		}
		out = append(out, r)
	}
}

func prefixes(rs []*spv1.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Prefix+" "+r.Origin.String())
	}
	return out
}

// Add, Replace and Delete, and every way a single route can be refused;
// a refused call changes nothing.
func TestRoutesUnary(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	_, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.3")})
	wantCode(t, "duplicate add", err, codes.AlreadyExists, `route.prefix "198.51.100.0/24"`)
	if _, err := rc.Replace(ctx, &spv1.ReplaceRouteRequest{Route: route("198.51.100.0/24", "10.0.0.3", "10.0.0.4")}); err != nil {
		t.Fatal(err)
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = fmt.Sprintf("10.0.0.%d", i+2)
	}
	for _, tc := range []struct {
		name  string
		route *spv1.Route
		code  codes.Code
		parts []string
	}{
		{"no route", nil, codes.InvalidArgument, []string{"route: missing"}},
		{"bad prefix", route("198.51.100.0/33", "10.0.0.2"), codes.InvalidArgument, []string{`route.prefix "198.51.100.0/33"`}},
		{"not a prefix", route("x", "10.0.0.2"), codes.InvalidArgument, []string{`route.prefix "x"`}},
		{"host bits", route("198.51.100.1/24", "10.0.0.2"), codes.InvalidArgument, []string{`route.prefix "198.51.100.1/24"`, "host bits"}},
		{"wrong family", route("203.0.113.0/24", "2001:db8::2"), codes.InvalidArgument, []string{`route.next_hops[0] "2001:db8::2"`}},
		{"bad next hop", route("203.0.113.0/24", "10.0.0.2", "10.0.0.300"), codes.InvalidArgument, []string{`route.next_hops[1] "10.0.0.300"`}},
		{"no next hop", route("203.0.113.0/24"), codes.InvalidArgument, []string{`route.next_hops "0"`}},
		{"17 next hops", route("203.0.113.0/24", seventeen...), codes.InvalidArgument, []string{`route.next_hops "17"`, "1 to 16"}},
		{"distance", &spv1.Route{Prefix: "203.0.113.0/24", NextHops: []string{"10.0.0.2"}, Distance: 256}, codes.InvalidArgument, []string{`route.distance "256"`}},
	} {
		_, err := rc.Replace(ctx, &spv1.ReplaceRouteRequest{Route: tc.route})
		wantCode(t, tc.name, err, tc.code, tc.parts...)
		if strings.HasPrefix(status.Convert(err).Message(), "ops[") {
			t.Errorf("%s: %q names a batch operation in a single-route call", tc.name, status.Convert(err).Message())
		}
	}
	_, err = rc.Delete(ctx, &spv1.DeleteRouteRequest{Prefix: "203.0.113.0/24"})
	wantCode(t, "delete of nothing", err, codes.NotFound, `prefix "203.0.113.0/24"`)
	_, err = rc.Delete(ctx, &spv1.DeleteRouteRequest{Prefix: "203.0.113.0"})
	wantCode(t, "delete of no prefix", err, codes.InvalidArgument, `prefix "203.0.113.0"`)

	got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API})
	if len(got) != 1 || !slices.Equal(got[0].NextHops, []string{"10.0.0.3", "10.0.0.4"}) || !got[0].Installed ||
		got[0].Distance != 5 || len(got[0].ResolvedNextHops) != 2 {
		t.Fatalf("after the refused calls the API's routes are %v", got)
	}
	if _, err := rc.Delete(ctx, &spv1.DeleteRouteRequest{Prefix: "198.51.100.0/24"}); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API}); len(got) != 0 {
		t.Fatalf("after delete: %v", got)
	}
}

// List's filters: prefix, longer, table, origin; and the routes of other
// origins with their distances.
func TestRoutesList(t *testing.T) {
	c := startCE(t, ce.Config{StaticRoutes: []ce.StaticRoute{{Prefix: "198.51.100.0/24", NextHops: []string{"10.0.0.9"}}}})
	s := startServer(t, c, Config{})
	rc := spv1.NewRoutesClient(dial(t, s))
	ctx := ctxT(t)
	for _, r := range []*spv1.Route{
		route("198.51.100.0/24", "10.0.0.2"), route("198.51.100.128/25", "10.0.0.2"), route("203.0.113.0/24", "10.0.0.3"),
		route("2001:db8:1::/48", "2001:db8::2"), {Prefix: "2001:db8:1:2::/64", NextHops: []string{"2001:db8::3"}, Distance: 250},
	} {
		if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: r}); err != nil {
			t.Fatal(err)
		}
	}
	all := listAll(t, rc, &spv1.ListRoutesRequest{})
	want := []string{"198.51.100.0/24 ORIGIN_API", "198.51.100.0/24 ORIGIN_STATIC", "198.51.100.128/25 ORIGIN_API", "203.0.113.0/24 ORIGIN_API",
		"2001:db8:1::/48 ORIGIN_API", "2001:db8:1:2::/64 ORIGIN_API"}
	if got := prefixes(all); !slices.Equal(got, want) {
		t.Fatalf("all: %v, want %v", got, want)
	}
	// The static route (distance 1) wins over the API's (5).
	if all[0].Installed || !all[1].Installed || all[1].Distance != 1 {
		t.Fatalf("198.51.100.0/24: api installed %v, static installed %v (distance %d)", all[0].Installed, all[1].Installed, all[1].Distance)
	}
	if all[5].Distance != 250 || !all[5].Installed {
		t.Fatalf("distance 250 route: %v", all[5])
	}
	for _, tc := range []struct {
		req  *spv1.ListRoutesRequest
		want []string
	}{
		{&spv1.ListRoutesRequest{Prefix: "198.51.100.0/24"}, want[:2]},
		{&spv1.ListRoutesRequest{Prefix: "198.51.100.0/24", Longer: true}, want[:3]},
		{&spv1.ListRoutesRequest{Prefix: "198.51.100.0/24", Origin: spv1.Origin_ORIGIN_STATIC}, want[1:2]},
		{&spv1.ListRoutesRequest{Prefix: "2001:db8::/32", Longer: true}, want[4:]},
		{&spv1.ListRoutesRequest{Table: spv1.Table_TABLE_IPV4, Origin: spv1.Origin_ORIGIN_API}, []string{want[0], want[2], want[3]}},
		{&spv1.ListRoutesRequest{Table: spv1.Table_TABLE_IPV6}, want[4:]},
		{&spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_BGP}, nil},
	} {
		if got := prefixes(listAll(t, rc, tc.req)); !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.req, got, tc.want)
		}
	}
	for _, tc := range []struct {
		req  *spv1.ListRoutesRequest
		part string
	}{
		{&spv1.ListRoutesRequest{Prefix: "198.51.100.0"}, `prefix "198.51.100.0"`},
		{&spv1.ListRoutesRequest{Prefix: "198.51.100.1/24"}, `prefix "198.51.100.1/24"`},
		{&spv1.ListRoutesRequest{Table: 7}, `table "7"`},
		{&spv1.ListRoutesRequest{Origin: 9}, `origin "9"`},
	} {
		stream, err := rc.List(ctx, tc.req)
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, fmt.Sprint(tc.req), err, codes.InvalidArgument, tc.part)
	}
}

func recvEvent(t *testing.T, w spv1.Routes_WatchClient) string {
	t.Helper()
	e, err := w.Recv()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(e.Kind.String(), "KIND_") + " " + e.Prefix + " " + strings.Join(e.NextHops, ","))
}

// Watch with current: the FIB, SYNCED, then every change; the table filter.
func TestRoutesWatch(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	for _, r := range []*spv1.Route{route("203.0.113.0/24", "10.0.0.3"), route("198.51.100.0/24", "10.0.0.2", "10.0.0.4"), route("2001:db8:1::/48", "2001:db8::2")} {
		if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: r}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{Current: true})
	if err != nil {
		t.Fatal(err)
	}
	w4, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{Table: spv1.Table_TABLE_IPV6})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w4.Header(); err != nil { // the watch is in place
		t.Fatal(err)
	}
	for _, want := range []string{"INSTALLED 198.51.100.0/24 10.0.0.2,10.0.0.4", "INSTALLED 203.0.113.0/24 10.0.0.3", "INSTALLED 2001:db8:1::/48 2001:db8::2", "SYNCED"} {
		if got := recvEvent(t, w); got != want {
			t.Fatalf("current: %q, want %q", got, want)
		}
	}
	rc.Delete(ctx, &spv1.DeleteRouteRequest{Prefix: "203.0.113.0/24"})
	rc.Replace(ctx, &spv1.ReplaceRouteRequest{Route: route("2001:db8:1::/48", "2001:db8::3")})
	for _, want := range []string{"REMOVED 203.0.113.0/24", "INSTALLED 2001:db8:1::/48 2001:db8::3"} {
		if got := recvEvent(t, w); got != want {
			t.Fatalf("change: %q, want %q", got, want)
		}
	}
	if got := recvEvent(t, w4); got != "INSTALLED 2001:db8:1::/48 2001:db8::3" {
		t.Fatalf("IPv6 watch: %q", got)
	}
	bad, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{Table: 5})
	if err == nil {
		_, err = bad.Recv()
	}
	wantCode(t, "bad table", err, codes.InvalidArgument, `table "5"`)
}

// A watcher that does not read falls behind and is ended with
// ResourceExhausted.
func TestRoutesWatchBehind(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{})
	// A small window, so the server blocks on the unread stream.
	conn := dial(t, s, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	rc := spv1.NewRoutesClient(conn)
	ctx := ctxT(t)
	w, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Header(); err != nil {
		t.Fatal(err)
	}
	const n = 100_000 // beyond the CE's queue of 65536 and what the window holds
	for start := 0; start < n; start += 10_000 {
		ops := make([]ce.RouteOp, 0, 10_000)
		for i := start; i < start+10_000; i++ {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
			ops = append(ops, ce.RouteOp{Kind: ce.OpReplace, Prefix: p, NextHops: []netip.Addr{netip.MustParseAddr("10.0.0.2")}})
		}
		if _, err := c.ApplyRoutes(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for {
		_, err := w.Recv()
		if err != nil {
			wantCode(t, "watcher behind", err, codes.ResourceExhausted, "fell behind")
			break
		}
		got++
	}
	if got >= n {
		t.Fatalf("received all %d events: never behind", got)
	}
}

// Bulk: one ack per batch, in order; a batch with one bad operation ends the
// stream naming it and changes nothing, the batches before it stay.
func TestRoutesBulk(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	b, err := rc.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 20; id++ {
		var ops []*spv1.RouteOp
		for i := range 100 {
			ops = append(ops, &spv1.RouteOp{Kind: spv1.RouteOp_KIND_REPLACE, Route: route(fmt.Sprintf("100.%d.%d.0/24", id, i), "10.0.0.2")})
		}
		if err := b.Send(&spv1.RouteBatch{Id: id * 10, Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 20; id++ {
		ack, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ack.Id != id*10 || ack.Applied != 100 || ack.FibChanges < 100 {
			t.Fatalf("ack %d: %v", id, ack)
		}
	}
	// Deletes and an empty batch.
	b.Send(&spv1.RouteBatch{Id: 1000, Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "100.1.0.0/24"}}}})
	b.Send(&spv1.RouteBatch{Id: 1001})
	for _, want := range []uint64{1000, 1001} {
		if ack, err := b.Recv(); err != nil || ack.Id != want {
			t.Fatalf("ack %v, %v; want id %d", ack, err, want)
		}
	}
	// A batch whose third operation is bad: nothing of it is applied.
	b.Send(&spv1.RouteBatch{Id: 1002, Ops: []*spv1.RouteOp{
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.113.0/24", "10.0.0.2")},
		{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "100.2.0.0/24"}},
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.114.0/24", "2001:db8::1")},
	}})
	_, err = b.Recv()
	wantCode(t, "bad batch", err, codes.InvalidArgument, "batch 1002", `ops[2].route.next_hops[0] "2001:db8::1"`)
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API}); len(got) != 20*100-1 {
		t.Fatalf("after the bad batch the API has %d routes, want %d", len(got), 20*100-1)
	}
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Prefix: "100.2.0.0/24"}); len(got) != 1 {
		t.Fatalf("the bad batch's delete was applied: %v", got)
	}

	// Errors the CE finds in its table, and malformed operations.
	for _, tc := range []struct {
		ops   []*spv1.RouteOp
		code  codes.Code
		parts []string
	}{
		{[]*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "203.0.113.0/24"}}}, codes.NotFound, []string{`ops[0].prefix "203.0.113.0/24"`}},
		{[]*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.113.0/24", "10.0.0.2")}, {Route: route("203.0.113.0/24")}}, codes.InvalidArgument, []string{`ops[1].kind "KIND_UNSPECIFIED"`}},
		{[]*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_DELETE}}, codes.InvalidArgument, []string{"ops[0].route: missing"}},
		{[]*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.113.0/24", "10.0.0.2")}, {Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.113.1/24", "10.0.0.2")}}, codes.InvalidArgument, []string{`ops[1].route.prefix "203.0.113.1/24"`}},
	} {
		b, err := rc.Bulk(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Send(&spv1.RouteBatch{Id: 7, Ops: tc.ops})
		_, err = b.Recv()
		wantCode(t, fmt.Sprint(tc.ops), err, tc.code, tc.parts...)
	}
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Prefix: "203.0.113.0/24"}); len(got) != 0 {
		t.Fatalf("a refused batch was applied: %v", got)
	}
	// A client that closes its side gets the stream ended cleanly.
	b, _ = rc.Bulk(ctx)
	b.Send(&spv1.RouteBatch{Id: 1})
	b.CloseSend()
	if _, err := b.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v", err)
	}
}

// Bulk with packed operations: applied after the batch's ops, in order, as
// ops are; a malformed packed operation or one the CE refuses is named by
// its index in packed_ops, and its batch changes nothing.
func TestRoutesBulkPacked(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	gw := []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	pack := func(ps ...string) []byte {
		var b []byte
		for _, p := range ps {
			var err error
			if q, ok := strings.CutPrefix(p, "-"); ok {
				b, err = packed.AppendDelete(b, netip.MustParsePrefix(q))
			} else {
				b, err = packed.AppendReplace(b, netip.MustParsePrefix(p), gw, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	b, err := rc.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// ops first, then packed_ops: the packed delete finds the route ops added.
	b.Send(&spv1.RouteBatch{Id: 1, Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("198.51.100.0/24", "10.0.0.3")}},
		PackedOps: pack("203.0.113.0/24", "-198.51.100.0/24", "192.0.2.128/25")})
	if ack, err := b.Recv(); err != nil || ack.Id != 1 || ack.Applied != 4 {
		t.Fatalf("ack %v, %v; want id 1, 4 applied", ack, err)
	}
	got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API})
	var ps []string
	for _, r := range got {
		ps = append(ps, r.Prefix+" "+strings.Join(r.NextHops, ","))
	}
	if want := []string{"192.0.2.128/25 10.0.0.2", "203.0.113.0/24 10.0.0.2"}; !slices.Equal(ps, want) {
		t.Fatalf("routes %v, want %v", ps, want)
	}
	for _, tc := range []struct {
		name   string
		packed []byte
		code   codes.Code
		parts  []string
	}{
		{"malformed", append(pack("100.64.0.0/24"), 1, 4, 33, 0, 0, 0, 0), codes.InvalidArgument, []string{`packed_ops[1].length (byte 13) "33"`, "want 0 to 32"}},
		{"truncated", pack("100.64.0.0/24")[:10], codes.InvalidArgument, []string{"packed_ops[0].next_hops[0] (byte 0): the bytes end inside it"}},
		{"not found", pack("100.64.0.0/24", "-100.65.0.0/24"), codes.NotFound, []string{`packed_ops[1].prefix "100.65.0.0/24"`}},
		{"unusable next hop", append(pack("100.64.0.0/24"), 1, 4, 24, 100, 67, 0, 0, 0, 1, 0, 0, 0, 0), codes.InvalidArgument, []string{`packed_ops[1].next_hops[0] "0.0.0.0"`}},
	} {
		b, err := rc.Bulk(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Send(&spv1.RouteBatch{Id: 9, Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("100.66.0.0/24", "10.0.0.2")}}, PackedOps: tc.packed})
		_, err = b.Recv()
		wantCode(t, tc.name, err, tc.code, append([]string{"batch 9"}, tc.parts...)...)
	}
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API}); len(got) != 2 {
		t.Fatalf("refused batches were applied: %v", got)
	}
	// A transaction takes packed operations too, named the same way.
	_, err = rc.Transaction(ctx, &spv1.TransactionRequest{PackedOps: append(pack("100.64.0.0/24"), 7)})
	wantCode(t, "transaction", err, codes.InvalidArgument, `packed_ops[1].kind (byte 13) "7"`)
}

// A transaction needs a synced FE; its operations are checked like Bulk's.
func TestTransactionWithoutFE(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	_, err := rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("198.51.100.0/24", "10.0.0.2")}}})
	wantCode(t, "no FE", err, codes.Unavailable, "FE")
	_, err = rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("198.51.100.0/24", "10.0.0.2")},
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("198.51.100.0/24", seventeen()...)}}})
	wantCode(t, "17 next hops", err, codes.InvalidArgument, `ops[1].route.next_hops "17"`)
	if got := listAll(t, rc, &spv1.ListRoutesRequest{Origin: spv1.Origin_ORIGIN_API}); len(got) != 0 {
		t.Fatalf("a refused transaction was applied: %v", got)
	}
}

func seventeen() []string {
	var out []string
	for i := range 17 {
		out = append(out, fmt.Sprintf("10.0.0.%d", i+2))
	}
	return out
}

// FEs, BGP and Classifier without an FE or neighbours; the error mapping of
// the CE's sentinel errors.
func TestInfoAndCodes(t *testing.T) {
	_, s, _ := setup(t)
	conn := dial(t, s)
	ctx := ctxT(t)
	fl, err := spv1.NewFEsClient(conn).List(ctx, &spv1.ListFEsRequest{})
	if err != nil || len(fl.Fes) != 0 {
		t.Fatalf("FEs: %v, %v", fl, err)
	}
	nl, err := spv1.NewBGPClient(conn).Neighbors(ctx, &spv1.ListNeighborsRequest{})
	if err != nil || len(nl.Neighbors) != 0 {
		t.Fatalf("neighbours: %v, %v", nl, err)
	}
	rl, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{})
	if err != nil || len(rl.Rules) != 0 {
		t.Fatalf("rules: %v, %v", rl, err)
	}
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{&ce.RouteError{Index: 3, Field: "route.prefix", Value: "x", Err: ce.ErrRouteExists}, codes.AlreadyExists},
		{&ce.RouteError{Err: fmt.Errorf("%w: no room", ce.ErrTableFull)}, codes.ResourceExhausted},
		{fmt.Errorf("%w: FE(1) refused", ce.ErrTxnAborted), codes.Aborted},
		{fmt.Errorf("%w: FE(1)", ce.ErrTxnBusy), codes.ResourceExhausted},
		{fmt.Errorf("%w: none", ce.ErrNoFE), codes.Unavailable},
		{fmt.Errorf("%w: %w", ce.ErrNoAnswer, context.DeadlineExceeded), codes.Unavailable},
		{context.Canceled, codes.Canceled},
		{errors.New("surprise"), codes.Internal},
	} {
		if got := status.Code(batchError(tc.err, 10)); got != tc.code {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.code)
		}
	}
	wantCode(t, "batch", batchError(&ce.RouteError{Index: 3, Field: "route.prefix", Value: "x", Err: ce.ErrRouteExists}, 10), codes.AlreadyExists, `ops[3].route.prefix "x"`)
	wantCode(t, "table full", batchError(&ce.RouteError{Err: ce.ErrTableFull}, 10), codes.ResourceExhausted, "ops[0]: table full")
	wantCode(t, "packed", batchError(&ce.RouteError{Index: 12, Field: "route.prefix", Value: "x", Err: ce.ErrRouteExists}, 10), codes.AlreadyExists, `packed_ops[2].prefix "x"`)
}

// The unix socket: directory created, mode 0660, a stale socket replaced, a
// live one refused, removed on Stop.
func TestUnixSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "api.sock")
	c := startCE(t, ce.Config{})
	s, err := Start(c, Config{Listen: "unix:" + path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v, %v", fi, err)
	}
	if _, err := Start(c, Config{Listen: "unix:" + path}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server on a live socket: %v", err)
	}
	s.Stop()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket after Stop: %v", err)
	}
	// A stale socket (its server died without removing it).
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	s = startServer(t, c, Config{Listen: "unix:" + path})
	if _, err := spv1.NewClassifierClient(dial(t, s)).ListRules(ctxT(t), &spv1.ListRulesRequest{}); err != nil {
		t.Fatal(err)
	}
	// Not a socket: left alone.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Start(c, Config{Listen: "unix:" + file}); err == nil {
		t.Fatal("listening over a regular file")
	}
	for _, bad := range []string{"tcp:127.0.0.1:0", "udp:127.0.0.1:53", "/run/x.sock"} {
		if _, err := Start(c, Config{Listen: bad}); err == nil {
			t.Errorf("listen %q: no error", bad)
		}
	}
}

// The interceptors count calls per method and code.
func TestStats(t *testing.T) {
	_, s, rc := setup(t)
	ctx := ctxT(t)
	rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")})
	rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")})
	listAll(t, rc, &spv1.ListRoutesRequest{})
	snap := s.Stats().Snapshot()
	var add, list *MethodStats
	for i := range snap {
		switch snap[i].Method {
		case spv1.Routes_Add_FullMethodName:
			add = &snap[i]
		case spv1.Routes_List_FullMethodName:
			list = &snap[i]
		}
	}
	if add == nil || add.Count != 2 || add.Codes["OK"] != 1 || add.Codes["AlreadyExists"] != 1 || add.Sum <= 0 {
		t.Fatalf("Add: %+v", add)
	}
	if len(add.Buckets) != len(LatencyBounds()) || add.Buckets[len(add.Buckets)-1] != 2 {
		t.Fatalf("Add's buckets: %v", add.Buckets)
	}
	waitUntil(t, "List counted", func() bool {
		for _, m := range s.Stats().Snapshot() {
			if m.Method == spv1.Routes_List_FullMethodName {
				return m.Count == 1
			}
		}
		return false
	})
	_ = list
}

// An API route whose next hop nothing covers, and a static one that loops
// through itself, are listed with their reason; unresolved lists only
// them, and Summary counts them by reason.
func TestRoutesUnresolved(t *testing.T) {
	c := startCE(t, ce.Config{StaticRoutes: []ce.StaticRoute{{Prefix: "198.51.100.0/24", NextHops: []string{"198.51.100.1"}}}})
	s := startServer(t, c, Config{})
	rc := spv1.NewRoutesClient(dial(t, s))
	ctx := ctxT(t)
	for _, r := range []*spv1.Route{route("203.0.113.0/24", "192.0.2.9"), route("192.0.2.128/25", "10.0.0.2")} {
		if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: r}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range listAll(t, rc, &spv1.ListRoutesRequest{}) {
		got = append(got, r.GetPrefix()+" "+r.GetOrigin().String()+" "+r.GetUnresolvedReason())
	}
	want := []string{"192.0.2.128/25 ORIGIN_API ", "198.51.100.0/24 ORIGIN_STATIC loop", "203.0.113.0/24 ORIGIN_API no_route"}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if got := prefixes(listAll(t, rc, &spv1.ListRoutesRequest{Unresolved: true})); !slices.Equal(got, []string{"198.51.100.0/24 ORIGIN_STATIC", "203.0.113.0/24 ORIGIN_API"}) {
		t.Fatalf("unresolved: %v", got)
	}
	sum, err := rc.Summary(ctx, &spv1.RouteSummaryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if u := sum.GetUnresolved(); sum.GetFibRoutes() != 1 || len(u) != 4 || u["loop"] != 1 || u["no_route"] != 1 || u["depth"] != 0 || u["work"] != 0 {
		t.Fatalf("summary: %v", sum)
	}
}
