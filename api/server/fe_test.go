package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/fe/datapath"
)

// fakeDatapath records the routes an FE programs.
type fakeDatapath struct {
	mu     sync.Mutex
	routes map[netip.Prefix]uint32
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
	delete(f.routes, p)
	return nil
}
func (f *fakeDatapath) SetRoutes(rs []datapath.Route) error {
	for _, r := range rs {
		f.SetRoute(r.Prefix, r.Nexthop)
	}
	return nil
}
func (f *fakeDatapath) DeleteRoutes(ps []netip.Prefix) error {
	for _, p := range ps {
		f.DeleteRoute(p)
	}
	return nil
}
func (f *fakeDatapath) SetNexthop(uint32, datapath.Nexthop) error           { return nil }
func (f *fakeDatapath) DeleteNexthop(uint32) error                          { return nil }
func (f *fakeDatapath) SetNexthopGroup(uint32, []uint32) error              { return nil }
func (f *fakeDatapath) DeleteNexthopGroup(uint32) error                     { return nil }
func (f *fakeDatapath) SetNeighbor(int, netip.Addr, net.HardwareAddr) error { return nil }
func (f *fakeDatapath) DeleteNeighbor(int, netip.Addr) error                { return nil }
func (f *fakeDatapath) SetLocalAddr(netip.Addr) error                       { return nil }
func (f *fakeDatapath) Counters() (datapath.Counters, error) {
	return datapath.Counters{"rx": 30, "forwarded": 20, "pass_no_route": 6, "pass_ttl": 4}, nil
}
func (f *fakeDatapath) PortCounters() (map[int]datapath.PortCounters, error) { return nil, nil }
func (f *fakeDatapath) CPUCounters() ([]datapath.Counters, error) {
	return []datapath.Counters{{"rx": 10, "forwarded": 10}, {"rx": 20, "forwarded": 10, "pass_no_route": 6, "pass_ttl": 4}}, nil
}
func (f *fakeDatapath) Close() error { return nil }

func (f *fakeDatapath) has(p string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.routes[netip.MustParsePrefix(p)]
	return ok
}

// runFE runs an FE with a fake datapath and one port, 10.0.0.1/8, against c.
func runFE(t *testing.T, c *ce.CE) *fakeDatapath {
	t.Helper()
	dp := &fakeDatapath{routes: map[netip.Prefix]uint32{}}
	cfg := fe.Config{ID: 1, Name: "fe-test", CEAddress: c.Addr().String(), CEAddressLow: c.LowAddr().String(), Ports: []string{"p7"},
		KernelRoutes: fe.KernelRoutesConnected, HeartbeatInterval: 50 * time.Millisecond}
	a, err := fe.New(cfg, slog.New(slog.DiscardHandler), fe.WithDatapath(dp, func(netip.Addr) int { return 7 }),
		fe.WithPort("p7", 7, netip.MustParsePrefix("10.0.0.1/8")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return dp
}

// A transaction with a synced FE: committed by the FE, the routes reach its
// datapath; FEs.List shows the FE.
func TestTransactionWithFE(t *testing.T) {
	c, s, rc := setup(t)
	dp := runFE(t, c)
	ctx := ctxT(t)
	fc := spv1.NewFEsClient(dial(t, s))
	waitUntil(t, "FE synced", func() bool {
		l, err := fc.List(ctx, &spv1.ListFEsRequest{})
		return err == nil && len(l.Fes) == 1 && l.Fes[0].Synced
	})
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
	waitUntil(t, "routes in the FE's datapath", func() bool { return dp.has("198.51.100.0/24") && dp.has("203.0.113.0/24") })
	resp, err = rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "198.51.100.0/24"}}}})
	if err != nil || resp.Fes != 1 {
		t.Fatalf("delete transaction: %v, %v", resp, err)
	}
	waitUntil(t, "route gone from the FE's datapath", func() bool { return !dp.has("198.51.100.0/24") && dp.has("203.0.113.0/24") })
	// A refused transaction changes nothing, with an FE too.
	_, err = rc.Transaction(ctx, &spv1.TransactionRequest{Ops: []*spv1.RouteOp{
		{Kind: spv1.RouteOp_KIND_REPLACE, Route: route("192.0.2.0/24", "10.0.0.2")},
		{Kind: spv1.RouteOp_KIND_DELETE, Route: &spv1.Route{Prefix: "198.51.100.0/24"}},
	}})
	wantCode(t, "delete of nothing", err, codes.NotFound, `ops[1].prefix "198.51.100.0/24"`)
	time.Sleep(100 * time.Millisecond)
	if dp.has("192.0.2.0/24") {
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
	// What the FE reported of itself over ForCES: its counters, in total
	// and per CPU, and its port's addresses.
	cs := f.Counters
	if cs == nil || cs.RxPackets != 30 || cs.ForwardedPackets != 20 || cs.PassedPackets != 10 || cs.ByReason["pass_ttl"] != 4 ||
		len(cs.Cpus) != 2 || cs.Cpus[1].PassedPackets != 10 || !slices.Equal(f.Ports[0].Addresses, []string{"10.0.0.1/8"}) {
		t.Fatalf("the FE's own report: %v", f)
	}
}
