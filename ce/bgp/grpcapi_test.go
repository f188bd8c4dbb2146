package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// GoBGP's own gRPC API answers on APIListen (what the gobgp CLI uses), for
// this speaker; a port in use is an error of Start.
func TestGoBGPAPI(t *testing.T) {
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(freePort(t, "127.0.0.1")))
	sp, err := Start(context.Background(), Config{ASN: 65010, RouterID: netip.MustParseAddr("192.0.2.10"), ListenPort: -1, APIListen: addr, Logger: slog.New(slog.DiscardHandler)}, func([]Update) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := api.NewGoBgpServiceClient(conn).GetBgp(ctx, &api.GetBgpRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.GetGlobal(); g.GetAsn() != 65010 || g.GetRouterId() != "192.0.2.10" {
		t.Fatalf("GetBgp: %v", g)
	}

	_, err = Start(context.Background(), Config{ASN: 65011, RouterID: netip.MustParseAddr("192.0.2.11"), ListenPort: -1, APIListen: addr, Logger: slog.New(slog.DiscardHandler)}, func([]Update) {})
	if err == nil || !strings.Contains(err.Error(), "bgp_api_listen") {
		t.Fatalf("a second speaker on the same API address: %v", err)
	}
}
