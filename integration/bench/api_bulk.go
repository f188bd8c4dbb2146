package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/integration/harness"
)

// bulkResult is the outcome of the Bulk stream: when its last
// acknowledgement came (since the first batch), or why it failed.
type bulkResult struct {
	done  chan struct{}
	after time.Duration
	err   error
}

// failure returns the stream's error if it has ended with one, without
// waiting.
func (b *bulkResult) failure() error {
	select {
	case <-b.done:
		return b.err
	default:
		return nil
	}
}

func (b *bulkResult) wait(ctx context.Context) (time.Duration, error) {
	select {
	case <-b.done:
		return b.after, b.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// bulk opens a Bulk stream and sends every batch, at most Window of them
// unacknowledged, in the background. It returns when the first batch went
// out, with the time it did.
func (a *apiRun) bulk(ctx context.Context, rc spv1.RoutesClient, batches []*spv1.RouteBatch) (time.Time, *bulkResult, error) {
	res := &bulkResult{done: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := rc.Bulk(sctx)
	if err != nil {
		cancel()
		return time.Time{}, nil, fmt.Errorf("bulk stream: %w", err)
	}
	window := make(chan struct{}, a.opts.Window)
	started := make(chan time.Time, 1)
	sendErr := make(chan error, 1)
	go func() {
		for i, b := range batches {
			select {
			case window <- struct{}{}:
			case <-sctx.Done():
				sendErr <- sctx.Err()
				return
			}
			if i == 0 {
				started <- time.Now()
			}
			if err := stream.Send(b); err != nil {
				sendErr <- err // the reason comes with Recv
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	var start time.Time
	select {
	case start = <-started:
	case err := <-sendErr:
		cancel()
		return time.Time{}, nil, fmt.Errorf("bulk stream: %w", err)
	}
	go func() {
		defer close(res.done)
		defer cancel()
		applied := 0
		for i := range batches {
			ack, err := stream.Recv()
			if err != nil {
				res.err = fmt.Errorf("%w: Bulk: batch %d of %d: %v", ErrIncomplete, i+1, len(batches), err)
				return
			}
			applied += int(ack.GetApplied())
			<-window
		}
		res.after = time.Since(start)
		if applied != a.opts.Routes {
			res.err = fmt.Errorf("%w: Bulk: the CE applied %d of %d operations", ErrIncomplete, applied, a.opts.Routes)
		}
	}()
	return start, res, nil
}

// adds times the single adds: for each destination, the generator switches
// to it, the sink must not have seen it after a few frames, then Add; the
// time until the sink first sees it is the figure.
func (a *apiRun) adds(ctx context.Context, rc spv1.RoutesClient, f *apiFigures, daemons []*harness.Proc) error {
	tr := a.traffic
	tr.forget() // the last round's adds
	via := []string{fwdAddr(roleSink).String()}
	sent0, t0 := tr.sent.Load(), time.Now()
	for i, dst := range a.dsts {
		if err := ctx.Err(); err != nil {
			return err
		}
		mark := tr.sent.Load()
		tr.send(dst)
		// A frame already being built may still carry the last destination.
		for tr.sent.Load() < mark+3 {
			if err := tr.failed(); err != nil {
				return err
			}
			time.Sleep(a.opts.Interval)
		}
		if at, ok := tr.seen(dst); ok {
			return fmt.Errorf("%s arrived at the sink (%s) before its route was added", dst, at.Format(time.StampMicro))
		}
		route := &spv1.Route{Prefix: netip.PrefixFrom(dst, 32).String(), NextHops: via}
		cctx, cancel := context.WithTimeout(ctx, a.opts.AddTimeout)
		start := time.Now()
		_, err := rc.Add(cctx, &spv1.AddRouteRequest{Route: route})
		returned := time.Now()
		cancel()
		if err != nil {
			return fmt.Errorf("%w: add %d of %d (%s): %v", ErrIncomplete, i+1, len(a.dsts), route.Prefix, err)
		}
		at, err := tr.wait(ctx, dst, start.Add(a.opts.AddTimeout))
		if err != nil {
			if xerr := exitedErr(daemons); xerr != nil {
				err = xerr
			}
			return fmt.Errorf("%w: add %d of %d (%s): %v", ErrIncomplete, i+1, len(a.dsts), route.Prefix, err)
		}
		f.toForward = append(f.toForward, at.Sub(start))
		f.call = append(f.call, returned.Sub(start))
	}
	tr.send(netip.Addr{})
	if n := tr.sent.Load() - sent0; n > 0 {
		f.interval = time.Since(t0) / time.Duration(n)
	}
	return nil
}
