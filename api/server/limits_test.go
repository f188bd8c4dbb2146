package server

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/splitplane/splitplane/api/packed"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// countingCodec is the proto codec, counting the messages it decodes.
type countingCodec struct {
	encoding.CodecV2
	decoded *atomic.Int64
}

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.decoded.Add(1)
	return c.CodecV2.Unmarshal(data, v)
}

// bigTransaction is a Transaction request of at least size bytes.
func bigTransaction(size int) *spv1.TransactionRequest {
	req := &spv1.TransactionRequest{}
	for i := 0; size > 0; i++ {
		op := &spv1.RouteOp{Kind: spv1.RouteOp_KIND_REPLACE, Route: route(fmt.Sprintf("198.%d.%d.0/24", 18+(i>>8)%2, i%256), "10.0.0.2")}
		req.Ops = append(req.Ops, op)
		size -= 32
	}
	return req
}

// The token is checked before a request is read: an unauthenticated
// client's 4 MiB request is refused Unauthenticated (not for its size) and
// never decoded; an authenticated one is.
func TestAuthBeforeDecode(t *testing.T) {
	var decoded atomic.Int64
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Token: "s3cret",
		extra: []grpc.ServerOption{grpc.ForceServerCodecV2(countingCodec{encoding.GetCodecV2("proto"), &decoded})}})
	ctx := ctxT(t)
	for name, opts := range map[string][]grpc.DialOption{
		"no token":    {grpc.WithTransportCredentials(insecure.NewCredentials())},
		"wrong token": {grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("guess"))},
	} {
		rc := spv1.NewRoutesClient(dial(t, s, opts...))
		_, err := rc.Transaction(ctx, bigTransaction(4<<20))
		wantCode(t, name+", 4 MiB", err, codes.Unauthenticated, "authorization")
		bulk, err := rc.Bulk(ctx)
		if err == nil {
			// A Send to a stream the server ended is io.EOF; Recv says why.
			_ = bulk.Send(&spv1.RouteBatch{Id: 1, Ops: bigTransaction(1 << 10).Ops})
			_, err = bulk.Recv()
		}
		wantCode(t, name+", bulk", err, codes.Unauthenticated)
	}
	if n := decoded.Load(); n != 0 {
		t.Fatalf("%d unauthenticated requests decoded", n)
	}
	rc := spv1.NewRoutesClient(dial(t, s, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("s3cret"))))
	if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	if decoded.Load() == 0 {
		t.Fatal("the codec hook saw no request: the test proves nothing")
	}
}

// A request above the message limit (1 MiB by default) is refused with
// ResourceExhausted; one below it goes through.
func TestMaxMessage(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{})
	rc := spv1.NewRoutesClient(dial(t, s))
	ctx := ctxT(t)
	_, err := rc.Transaction(ctx, bigTransaction(2<<20))
	wantCode(t, "2 MiB", err, codes.ResourceExhausted, "larger than max")
	_, err = rc.Transaction(ctx, bigTransaction(256<<10))
	wantCode(t, "256 KiB", err, codes.Unavailable, "synced FE") // parsed and applied: no FE here
	s2 := startServer(t, c, Config{Limits: Limits{MaxMessage: 4 << 20}})
	_, err = spv1.NewRoutesClient(dial(t, s2)).Transaction(ctx, bigTransaction(2<<20))
	wantCode(t, "2 MiB, limit 4 MiB", err, codes.Unavailable, "synced FE")
}

// Watch streams are bounded: beyond api_max_watches a Watch is refused
// with ResourceExhausted naming the limit; a closed one frees its place.
func TestWatchLimit(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Limits: Limits{MaxWatches: 2}})
	rc := spv1.NewRoutesClient(dial(t, s))
	ctx := ctxT(t)
	open := func() (spv1.Routes_WatchClient, context.CancelFunc, error) {
		wctx, cancel := context.WithCancel(ctx)
		w, err := rc.Watch(wctx, &spv1.WatchRoutesRequest{})
		if err == nil {
			_, err = w.Header() // the watch is in place, or refused
		}
		if err == nil {
			return w, cancel, nil
		}
		cancel()
		return nil, nil, err
	}
	var cancels []context.CancelFunc
	for range 2 {
		_, cancel, err := open()
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	w, _, err := open()
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "third watch", err, codes.ResourceExhausted, "2 Watch streams", "api_max_watches")
	cancels[0]()
	waitUntil(t, "a place freed", func() bool {
		_, cancel, err := open()
		if err == nil {
			cancel()
		}
		return err == nil
	})
	cancels[1]()
}

// blockingList is a CE whose ListRoutes waits for release.
type blockingList struct {
	*ce.CE
	in      chan struct{}
	release chan struct{}
}

func (b *blockingList) ListRoutes(ctx context.Context, f ce.RouteFilter) ([]ce.RouteInfo, error) {
	b.in <- struct{}{}
	<-b.release
	return b.CE.ListRoutes(ctx, f)
}

// List calls and Watch(current) snapshots in progress are bounded
// (api_max_snapshots): while one List is copying, another, or a
// Watch(current), is refused with ResourceExhausted; a Watch without
// current is not a snapshot.
func TestSnapshotLimit(t *testing.T) {
	b := &blockingList{CE: startCE(t, ce.Config{}), in: make(chan struct{}), release: make(chan struct{})}
	s := startServer(t, b, Config{Limits: Limits{MaxSnapshots: 1}})
	rc := spv1.NewRoutesClient(dial(t, s))
	ctx := ctxT(t)
	first := make(chan error, 1)
	go func() {
		stream, err := rc.List(ctx, &spv1.ListRoutesRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		first <- err
	}()
	<-b.in
	stream, err := rc.List(ctx, &spv1.ListRoutesRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "second List", err, codes.ResourceExhausted, "api_max_snapshots")
	w, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{Current: true})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "Watch(current)", err, codes.ResourceExhausted, "api_max_snapshots")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if w, err = rc.Watch(wctx, &spv1.WatchRoutesRequest{}); err == nil {
		_, err = w.Header()
	}
	if err != nil {
		t.Fatalf("Watch without current: %v", err)
	}
	close(b.release)
	if err := <-first; err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("first List: %v", err)
	}
	// Freed: Watch(current) gets its snapshot.
	if w, err = rc.Watch(ctx, &spv1.WatchRoutesRequest{Current: true}); err == nil {
		_, err = w.Recv()
	}
	if err != nil {
		t.Fatalf("Watch(current) after the List: %v", err)
	}
}

// A martian prefix is refused with InvalidArgument naming it; a route the
// FIB cannot take (here: one next hop more than its next-hop table holds)
// with ResourceExhausted saying which table, and is not listed.
func TestRoutesRefusedMartianAndTableFull(t *testing.T) {
	_, _, rc := setup(t)
	ctx := ctxT(t)
	_, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: route("127.0.0.0/8", "10.0.0.2")})
	wantCode(t, "martian", err, codes.InvalidArgument, `route.prefix "127.0.0.0/8"`, "martian", "api_allow_martians")

	var b []byte
	for i := range forces.MaxNexthopID {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64 + byte(i>>16), byte(i >> 8), byte(i)}), 32)
		hop := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(1 + i)})
		if hop.As4()[3] == 0 {
			hop = netip.AddrFrom4([4]byte{10, 200 + byte(i>>16), byte(i >> 8), 0})
		}
		var err error
		if b, err = packed.AppendReplace(b, p, []netip.Addr{hop}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.Transaction(ctx, &spv1.TransactionRequest{PackedOps: b}); status.Code(err) != codes.Unavailable {
		// No FE: a transaction is refused before anything is applied.
		t.Fatalf("transaction without FE: %v", err)
	}
	bulk, err := rc.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bulk.Send(&spv1.RouteBatch{Id: 1, PackedOps: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := bulk.Recv(); err != nil {
		t.Fatalf("filling the next-hop table: %v", err)
	}
	bulk.CloseSend()
	_, err = rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.250.0.1")})
	wantCode(t, "one next hop too many", err, codes.ResourceExhausted, `route.prefix "198.51.100.0/24"`, "next-hop table", "full")
	for _, r := range listAll(t, rc, &spv1.ListRoutesRequest{Prefix: "198.51.100.0/24"}) {
		t.Fatalf("the refused route is listed: %v", r)
	}
	// Through a next hop the table has, it fits.
	if _, err := rc.Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
}

// One connection may have at most api_max_streams calls in progress: with a
// limit of one, a call waits while a Watch holds the connection's stream;
// another connection is not held up.
func TestMaxStreams(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Limits: Limits{MaxStreams: 1}})
	ctx := ctxT(t)
	conn := dial(t, s)
	rc := spv1.NewRoutesClient(conn)
	w, err := rc.Watch(ctx, &spv1.WatchRoutesRequest{})
	if err == nil {
		_, err = w.Header()
	}
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = rc.Add(short, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")})
	wantCode(t, "a second call on the connection", err, codes.DeadlineExceeded)
	if _, err := spv1.NewRoutesClient(dial(t, s)).Add(ctx, &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatalf("another connection: %v", err)
	}
}

// A call's headers are bounded (they are read before the token is
// checked): 64 KiB of metadata is refused, 1 KiB is not.
func TestMaxHeaderList(t *testing.T) {
	c := startCE(t, ce.Config{})
	s := startServer(t, c, Config{Token: "s3cret"})
	rc := spv1.NewRoutesClient(dial(t, s, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("s3cret"))))
	ctx := ctxT(t)
	if _, err := rc.Add(metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("a", 64<<10)), &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err == nil {
		t.Fatal("64 KiB of headers accepted")
	}
	if _, err := rc.Add(metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("a", 1<<10)), &spv1.AddRouteRequest{Route: route("198.51.100.0/24", "10.0.0.2")}); err != nil {
		t.Fatalf("1 KiB of headers: %v", err)
	}
}

// The CE's api_max_* keys reach the server.
func TestFromCELimits(t *testing.T) {
	cfg := ce.Config{ASN: 65001, RouterID: "192.0.2.1", APIMaxMessage: 2 << 20, APIMaxStreams: 8, APIMaxWatches: 3, APIMaxSnapshots: 2}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c, ok, err := FromCE(cfg, nil)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if want := (Limits{MaxMessage: 2 << 20, MaxStreams: 8, MaxWatches: 3, MaxSnapshots: 2}); c.Limits != want {
		t.Fatalf("limits %+v, want %+v", c.Limits, want)
	}
}
