package server

import (
	"fmt"
	"testing"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
)

// BenchmarkBulk programs routes through Bulk over the unix socket into a
// CE (no FE): the API's own share of the cost, in routes per second.
func BenchmarkBulk(b *testing.B) {
	c := startCE(b, ce.Config{})
	rc := spv1.NewRoutesClient(dial(b, startServer(b, c, Config{})))
	const batch = 10_000
	batches := make([]*spv1.RouteBatch, 20)
	for i := range batches {
		ops := make([]*spv1.RouteOp, batch)
		for j := range ops {
			n := i*batch + j
			ops[j] = &spv1.RouteOp{Kind: spv1.RouteOp_KIND_REPLACE, Route: route(fmt.Sprintf("100.%d.%d.0/24", n>>8&0xff, n&0xff), "10.0.0.2")}
			if i%2 == 1 {
				ops[j].Route.NextHops[0] = "10.0.0.3"
			}
		}
		batches[i] = &spv1.RouteBatch{Id: uint64(i), Ops: ops}
	}
	b.ResetTimer()
	routes := 0
	for range b.N {
		stream, err := rc.Bulk(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for _, m := range batches {
				stream.Send(m)
			}
			stream.CloseSend()
		}()
		for range batches {
			if _, err := stream.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		routes += len(batches) * batch
	}
	b.ReportMetric(float64(routes)/b.Elapsed().Seconds(), "routes/s")
}
