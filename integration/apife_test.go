package integration_test

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/splitplane/splitplane/api/server"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/fe/fedptest"
)

// The API with a CE and an FE in process (the FE on the recording fake
// datapath; no namespaces): a transaction committed by the FE reaches its
// datapath, a refused one changes nothing, and FEs.List shows the FE with
// what it reports of itself over ForCES (counters in total and per CPU, its
// port's addresses).
func TestAPITransactionWithFE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not in time", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	run := func(name string, r func(context.Context) error) {
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r(rctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}

	c, err := ce.New(ce.Config{ID: 1, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1,
		ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0", HeartbeatInterval: 50 * time.Millisecond, SyncHold: time.Millisecond,
		StaticRoutes: []ce.StaticRoute{{Prefix: "10.0.0.0/8", Connected: true}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	run("CE", c.Run)
	wait("CE listening", func() bool { return c.Addr() != nil })
	s, err := server.Start(c, server.Config{Listen: "unix:" + filepath.Join(t.TempDir(), "api.sock"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, fc := spv1.NewRoutesClient(conn), spv1.NewFEsClient(conn)

	dp := fedptest.New()
	dp.SetCounters([]datapath.Counters{{"rx": 10, "forwarded": 10}, {"rx": 20, "forwarded": 10, "pass_no_route": 6, "pass_ttl": 4}}, nil)
	a, err := fe.New(fe.Config{ID: 1, Name: "fe-test", CEAddress: c.Addr().String(), CEAddressLow: c.LowAddr().String(), Ports: []string{"p7"},
		KernelRoutes: fe.KernelRoutesConnected, HeartbeatInterval: 50 * time.Millisecond}, slog.New(slog.DiscardHandler),
		fe.WithDatapath(dp, func(netip.Addr) int { return 7 }), fe.WithPort("p7", 7, netip.MustParsePrefix("10.0.0.1/8")))
	if err != nil {
		t.Fatal(err)
	}
	run("FE", a.Run)
	wait("FE synced", func() bool {
		l, err := fc.List(ctx, &spv1.ListFEsRequest{})
		return err == nil && len(l.Fes) == 1 && l.Fes[0].Synced
	})

	route := func(p string, hops ...string) *spv1.Route { return &spv1.Route{Prefix: p, NextHops: hops} }
	has := func(p string) bool { _, ok := dp.Route(p); return ok }
	resp, err := rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("198.51.100.0/24", "10.0.0.2")},
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("203.0.113.0/24", "10.0.0.3", "10.0.0.4")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Applied != 2 || resp.Fes != 1 || resp.FibChanges == 0 {
		t.Fatalf("transaction: %v", resp)
	}
	wait("routes in the FE's datapath", func() bool { return has("198.51.100.0/24") && has("203.0.113.0/24") })
	resp, err = rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "198.51.100.0/24"}}}})
	if err != nil || resp.Fes != 1 {
		t.Fatalf("delete transaction: %v, %v", resp, err)
	}
	wait("route gone from the FE's datapath", func() bool { return !has("198.51.100.0/24") && has("203.0.113.0/24") })
	// A refused transaction changes nothing, with an FE too.
	_, err = rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("192.0.2.0/24", "10.0.0.2")},
		{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "198.51.100.0/24"}},
	}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("delete of nothing: %v, want NotFound", err)
	}
	time.Sleep(100 * time.Millisecond)
	if has("192.0.2.0/24") {
		t.Fatal("a refused transaction reached the FE")
	}

	l, err := fc.List(ctx, &spv1.ListFEsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f := l.Fes[0]
	if f.Id != "FE(1)" || f.Name != "fe-test" || f.Remote == "" || f.AssociatedUnixMs == 0 || f.RowsAcked == 0 || f.RowsFailed != 0 ||
		len(f.Ports) != 1 || f.Ports[0].Id != 7 || f.Ports[0].Name != "p7" || !f.Ports[0].Up {
		t.Fatalf("FE: %v", f)
	}
	cs := f.Counters
	if cs == nil || cs.RxPackets != 30 || cs.ForwardedPackets != 20 || cs.PassedPackets != 10 || cs.ByReason["pass_ttl"] != 4 ||
		len(cs.Cpus) != 2 || cs.Cpus[1].PassedPackets != 10 || !slices.Equal(f.Ports[0].Addresses, []string{"10.0.0.1/8"}) {
		t.Fatalf("the FE's own report: %v", f)
	}
}
