package server

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/ce/bgp"
)

// silentCE is a Backend whose loop never answers Status.
type silentCE struct{ Backend }

func (silentCE) Status(ctx context.Context) (ce.Status, error) {
	<-ctx.Done()
	return ce.Status{}, fmt.Errorf("%w: %w", ce.ErrNoAnswer, ctx.Err())
}

// A caller that gives up before the CE answers gets its own context's code;
// the CE's not answering within the server's own bound is Unavailable (ErrNoAnswer
// wraps a deadline, but the CE's silence is what the caller must see).
func TestCEStatusNoAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := ceStatus(ctx, silentCE{})
	wantCode(t, "silent CE, caller's deadline", err, codes.DeadlineExceeded)

	gone, stop := context.WithCancel(context.Background())
	stop()
	_, err = ceStatus(gone, silentCE{})
	wantCode(t, "silent CE, caller canceled", err, codes.Canceled)

	wantCode(t, "no answer", toStatus(fmt.Errorf("%w: %w", ce.ErrNoAnswer, context.DeadlineExceeded)), codes.Unavailable, "no answer from the CE")
}

// resetCE is a Backend with one BGP neighbour, 192.0.2.2.
type resetCE struct {
	Backend
	reset *[]netip.Addr
}

func (r resetCE) ResetNeighbor(_ context.Context, a netip.Addr) error {
	if a != netip.MustParseAddr("192.0.2.2") {
		return fmt.Errorf("%w: %s", bgp.ErrUnknownNeighbor, a)
	}
	*r.reset = append(*r.reset, a)
	return nil
}

// ResetNeighbor passes the address on, and maps an unknown neighbour to
// NotFound and a bad address to InvalidArgument.
func TestResetNeighbor(t *testing.T) {
	var reset []netip.Addr
	s := &bgpService{b: resetCE{reset: &reset}}
	ctx := context.Background()
	if _, err := s.ResetNeighbor(ctx, &spv1.ResetNeighborRequest{Address: "192.0.2.2"}); err != nil || len(reset) != 1 {
		t.Fatalf("reset: %v, %v", err, reset)
	}
	_, err := s.ResetNeighbor(ctx, &spv1.ResetNeighborRequest{Address: "192.0.2.9"})
	wantCode(t, "unknown neighbour", err, codes.NotFound, "192.0.2.9")
	_, err = s.ResetNeighbor(ctx, &spv1.ResetNeighborRequest{Address: "nope"})
	wantCode(t, "bad address", err, codes.InvalidArgument, `address "nope"`)
}

func TestNeighborWarning(t *testing.T) {
	for _, tc := range []struct {
		n    bgp.NeighborStatus
		want string
	}{
		{bgp.NeighborStatus{}, ""},
		{bgp.NeighborStatus{Warning: "w"}, "w"},
		{bgp.NeighborStatus{MaxPrefixesStopped: true}, "stopped by max_prefixes: down until reset or its restart interval"},
		{bgp.NeighborStatus{Warning: "w", MaxPrefixesStopped: true}, "w; stopped by max_prefixes: down until reset or its restart interval"},
	} {
		if got := neighborWarning(tc.n); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.n, got, tc.want)
		}
	}
}
