package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/splitplane/splitplane/ce"
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
