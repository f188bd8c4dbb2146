package server

import (
	"errors"
	"io"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"context"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
)

// routes serves the Routes service.
type routes struct {
	spv1.UnimplementedRoutesServer
	b Backend
	s *Server
}

// Names of the limits in the ResourceExhausted errors of List and Watch.
const (
	limitWatches   = "api_max_watches"
	limitSnapshots = "api_max_snapshots"
)

func (r *routes) unary(ctx context.Context, kind ce.RouteOpKind, route *spv1.Route) error {
	p, hops, d, err := parseRoute("route", route)
	if err != nil {
		return err
	}
	_, err = r.b.ApplyRoutes(ctx, []ce.RouteOp{{Kind: kind, Prefix: p, NextHops: hops, Distance: d}})
	return unaryError(err, "route.prefix")
}

func (r *routes) Add(ctx context.Context, req *spv1.AddRouteRequest) (*spv1.AddRouteResponse, error) {
	if err := r.unary(ctx, ce.OpAdd, req.GetRoute()); err != nil {
		return nil, err
	}
	return &spv1.AddRouteResponse{}, nil
}

func (r *routes) Replace(ctx context.Context, req *spv1.ReplaceRouteRequest) (*spv1.ReplaceRouteResponse, error) {
	if err := r.unary(ctx, ce.OpReplace, req.GetRoute()); err != nil {
		return nil, err
	}
	return &spv1.ReplaceRouteResponse{}, nil
}

func (r *routes) Delete(ctx context.Context, req *spv1.DeleteRouteRequest) (*spv1.DeleteRouteResponse, error) {
	p, err := parsePrefix("prefix", req.GetPrefix())
	if err != nil {
		return nil, err
	}
	if _, err := r.b.ApplyRoutes(ctx, []ce.RouteOp{{Kind: ce.OpDelete, Prefix: p}}); err != nil {
		return nil, unaryError(err, "prefix")
	}
	return &spv1.DeleteRouteResponse{}, nil
}

func (r *routes) List(req *spv1.ListRoutesRequest, stream grpc.ServerStreamingServer[spv1.Route]) error {
	f := ce.RouteFilter{Longer: req.GetLonger(), Unresolved: req.GetUnresolved()}
	if s := req.GetPrefix(); s != "" {
		p, err := parsePrefix("prefix", s)
		if err != nil {
			return err
		}
		if p.Masked() != p {
			return fieldError("prefix", s, "host bits set (want "+p.Masked().String()+")")
		}
		f.Prefix = p
	}
	var err error
	if f.Family, err = family(req.GetTable()); err != nil {
		return err
	}
	switch o := req.GetOrigin(); o {
	case spv1.Origin_ORIGIN_UNSPECIFIED:
	case spv1.Origin_ORIGIN_API:
		f.Origin = "api"
	case spv1.Origin_ORIGIN_STATIC:
		f.Origin = "static"
	case spv1.Origin_ORIGIN_BGP:
		f.Origin = "bgp"
	default:
		return fieldError("origin", o.String(), "want ORIGIN_API, ORIGIN_STATIC, ORIGIN_BGP or unspecified (all)")
	}
	release, err := acquire(r.s.snapshots, "List or Watch(current) snapshots", limitSnapshots)
	if err != nil {
		return err
	}
	defer release()
	list, err := r.b.ListRoutes(stream.Context(), f)
	if err != nil {
		return toStatus(err)
	}
	for _, ri := range list {
		if err := stream.Send(toRoute(ri)); err != nil {
			return err
		}
	}
	return nil
}

// Summary counts the FIB's routes and the unresolved routes by reason,
// from the CE's status (no scan of the RIB's routes).
func (r *routes) Summary(ctx context.Context, _ *spv1.RouteSummaryRequest) (*spv1.RouteSummary, error) {
	st, err := ceStatus(ctx, r.b)
	if err != nil {
		return nil, err
	}
	out := &spv1.RouteSummary{FibRoutes: uint64(st.Routes), Unresolved: make(map[string]uint64, len(st.UnresolvedRoutes))}
	for reason, n := range st.UnresolvedRoutes {
		out.Unresolved[reason] = uint64(n)
	}
	return out, nil
}

// family converts a table selector to ce.RouteFilter.Family.
func family(t spv1.Table) (int, error) {
	switch t {
	case spv1.Table_TABLE_ALL:
		return 0, nil
	case spv1.Table_TABLE_IPV4:
		return 4, nil
	case spv1.Table_TABLE_IPV6:
		return 6, nil
	}
	return 0, fieldError("table", t.String(), "want TABLE_ALL, TABLE_IPV4 or TABLE_IPV6")
}

func (r *routes) Watch(req *spv1.WatchRoutesRequest, stream grpc.ServerStreamingServer[spv1.RouteEvent]) error {
	fam, err := family(req.GetTable())
	if err != nil {
		return err
	}
	ctx := stream.Context()
	release, err := acquire(r.s.watches, "Watch streams", limitWatches)
	if err != nil {
		return err
	}
	defer release()
	// A snapshot is held from its copy until it has been sent.
	releaseSnap := func() {}
	if req.GetCurrent() {
		if releaseSnap, err = acquire(r.s.snapshots, "List or Watch(current) snapshots", limitSnapshots); err != nil {
			return err
		}
		defer func() { releaseSnap() }()
	}
	w, err := r.b.WatchFIB(ctx, req.GetCurrent())
	if err != nil {
		return toStatus(err)
	}
	defer r.b.Unwatch(w)
	// The headers tell the client the watch is in place: changes from now
	// on reach it.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	// ended brings why the CE ended the watch, as soon as it did, so a
	// watcher cut off for falling behind is not fed what was still queued.
	ended := make(chan error, 1)
	go func() { ended <- w.Err() }()

	want := func(e ce.FIBEvent) bool {
		return fam == 0 || fam == 4 && e.Prefix.Addr().Is4() || fam == 6 && !e.Prefix.Addr().Is4()
	}
	if req.GetCurrent() {
		cur := w.Current
		slices.SortFunc(cur, func(a, b ce.FIBEvent) int {
			if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
				return c
			}
			return a.Prefix.Bits() - b.Prefix.Bits()
		})
		for _, e := range cur {
			if want(e) {
				if err := stream.Send(toEvent(e)); err != nil {
					return err
				}
			}
		}
		if err := stream.Send(&spv1.RouteEvent{Kind: spv1.RouteEvent_KIND_SYNCED}); err != nil {
			return err
		}
		w.Current, cur = nil, nil // the watch may go on for days
		releaseSnap()
		releaseSnap = func() {}
	}
	for {
		select {
		case err := <-ended:
			return watchEnd(err)
		case <-ctx.Done():
			return toStatus(ctx.Err())
		case e, ok := <-w.C:
			if !ok {
				return watchEnd(<-ended)
			}
			select {
			case err := <-ended:
				return watchEnd(err)
			default:
			}
			if !want(e) {
				continue
			}
			if err := stream.Send(toEvent(e)); err != nil {
				return err
			}
		}
	}
}

// watchEnd is the status of a watch the CE ended: ResourceExhausted for a
// watcher that fell behind (it should watch again with current), else the
// CE stopped.
func watchEnd(err error) error {
	if errors.Is(err, ce.ErrWatcherBehind) {
		return status.Error(codes.ResourceExhausted, "the watch fell behind the FIB's changes: watch again with current = true")
	}
	return status.Error(codes.Unavailable, "the CE stopped")
}

func toEvent(e ce.FIBEvent) *spv1.RouteEvent {
	if e.NextHops == nil {
		return &spv1.RouteEvent{Kind: spv1.RouteEvent_KIND_REMOVED, Prefix: e.Prefix.String()}
	}
	return &spv1.RouteEvent{Kind: spv1.RouteEvent_KIND_INSTALLED, Prefix: e.Prefix.String(), NextHops: addrStrings(e.NextHops)}
}

// bulkQueue is how many parsed batches may wait for the CE, so parsing the
// next batches overlaps applying this one.
const bulkQueue = 4

func (r *routes) Bulk(stream grpc.BidiStreamingServer[spv1.RouteBatch, spv1.BatchAck]) error {
	type batch struct {
		id   uint64
		ops  []ce.RouteOp
		nOps int // of ops, how many came from RouteBatch.ops
		err  error
	}
	ctx := stream.Context()
	in := make(chan batch, bulkQueue)
	go func() {
		defer close(in)
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			var b batch
			if err != nil {
				b.err = err
			} else {
				b.id = m.GetId()
				b.ops, b.err = parseBatch(m.GetOps(), m.GetPackedOps())
				b.nOps = len(m.GetOps())
				if b.err != nil {
					b.err = status.Errorf(codes.InvalidArgument, "batch %d: %s", b.id, status.Convert(b.err).Message())
				}
			}
			select {
			case in <- b:
			case <-ctx.Done():
				return
			}
			if b.err != nil {
				return
			}
		}
	}()
	for b := range in {
		if b.err != nil {
			return b.err
		}
		n, err := r.b.ApplyRoutes(ctx, b.ops)
		if err != nil {
			st := status.Convert(batchError(err, b.nOps))
			return status.Errorf(st.Code(), "batch %d: %s", b.id, st.Message())
		}
		if err := stream.Send(&spv1.BatchAck{Id: b.id, Applied: uint32(len(b.ops)), FibChanges: uint32(n)}); err != nil {
			return err
		}
	}
	return nil
}

func (r *routes) Transaction(ctx context.Context, req *spv1.TransactionRequest) (*spv1.TransactionResponse, error) {
	ops, err := parseBatch(req.GetOps(), req.GetPackedOps())
	if err != nil {
		return nil, err
	}
	n, fes, err := r.b.Transaction(ctx, ops)
	if err != nil {
		return nil, batchError(err, len(req.GetOps()))
	}
	return &spv1.TransactionResponse{Applied: uint32(len(ops)), FibChanges: uint32(n), Fes: uint32(fes)}, nil
}
