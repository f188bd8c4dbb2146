package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/splitplane/splitplane/api/packed"
	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/ce/bgp"
)

// fieldError is a request field that cannot be parsed; like a
// ce.RouteError it names the field and the value.
func fieldError(field, value, why string) error {
	return status.Errorf(codes.InvalidArgument, "%s %q: %s", field, value, why)
}

// parseRoute converts a route of a request; field is its name there
// ("route").
func parseRoute(field string, r *spv1.Route) (netip.Prefix, []netip.Addr, uint8, error) {
	p, hops, d, _, bad := convRoute(r, nil)
	if bad != nil {
		return netip.Prefix{}, nil, 0, bad.status(field)
	}
	return p, hops, d, nil
}

// badField is a field of a route that cannot be parsed, named relative to
// the route ("prefix", "next_hops[1]"; "" when the route is missing). The
// full name is put together only for an error: a bulk batch parses tens of
// thousands of routes.
type badField struct {
	field, value, why string
}

func (b *badField) status(route string) error {
	if b.field == "" {
		return status.Errorf(codes.InvalidArgument, "%s: missing", route)
	}
	return fieldError(route+"."+b.field, b.value, b.why)
}

// convRoute converts r. Its next hops are appended to buf, which it
// returns grown, so the routes of a batch share one array.
func convRoute(r *spv1.Route, buf []netip.Addr) (netip.Prefix, []netip.Addr, uint8, []netip.Addr, *badField) {
	if r == nil {
		return netip.Prefix{}, nil, 0, buf, &badField{}
	}
	p, bad := convPrefix(r.GetPrefix())
	if bad != nil {
		return netip.Prefix{}, nil, 0, buf, bad
	}
	start := len(buf)
	for i, s := range r.GetNextHops() {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, nil, 0, buf, &badField{fmt.Sprintf("next_hops[%d]", i), s, "not an IP address"}
		}
		buf = append(buf, a)
	}
	if r.GetDistance() > math.MaxUint8 {
		return netip.Prefix{}, nil, 0, buf, &badField{"distance", fmt.Sprint(r.GetDistance()), "want 1 to 255 (0: the API's default)"}
	}
	return p, buf[start:len(buf):len(buf)], uint8(r.GetDistance()), buf, nil
}

func convPrefix(s string) (netip.Prefix, *badField) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, &badField{"prefix", s, "not a prefix (want e.g. 198.51.100.0/24 or 2001:db8::/32)"}
	}
	return p, nil
}

// parsePrefix converts a request's prefix field named field.
func parsePrefix(field, s string) (netip.Prefix, error) {
	p, bad := convPrefix(s)
	if bad != nil {
		return netip.Prefix{}, fieldError(field, s, bad.why)
	}
	return p, nil
}

// parseOps converts the operations of a Bulk batch or a Transaction; the
// CE checks them further (ce.CheckRouteOp). The routes' next hops share one
// array.
func parseOps(ops []*spv1.RouteOp) ([]ce.RouteOp, error) {
	out := make([]ce.RouteOp, len(ops))
	n := 0
	for _, op := range ops {
		n += len(op.GetRoute().GetNextHops())
	}
	hops := make([]netip.Addr, 0, n)
	for i, op := range ops {
		switch op.GetKind() {
		case spv1.RouteOp_KIND_REPLACE:
			p, h, d, buf, bad := convRoute(op.GetRoute(), hops)
			if bad != nil {
				return nil, bad.status(fmt.Sprintf("ops[%d].route", i))
			}
			hops = buf
			out[i] = ce.RouteOp{Kind: ce.OpReplace, Prefix: p, NextHops: h, Distance: d}
		case spv1.RouteOp_KIND_DELETE:
			if op.GetRoute() == nil {
				return nil, status.Errorf(codes.InvalidArgument, "ops[%d].route: missing (a delete needs route.prefix)", i)
			}
			p, bad := convPrefix(op.GetRoute().GetPrefix())
			if bad != nil {
				return nil, bad.status(fmt.Sprintf("ops[%d].route", i))
			}
			out[i] = ce.RouteOp{Kind: ce.OpDelete, Prefix: p}
		default:
			return nil, fieldError(fmt.Sprintf("ops[%d].kind", i), op.GetKind().String(), "want KIND_REPLACE or KIND_DELETE")
		}
	}
	return out, nil
}

// parseBatch converts a batch's operations: ops, then packedOps (see
// package packed), in one list.
func parseBatch(ops []*spv1.RouteOp, packedOps []byte) ([]ce.RouteOp, error) {
	out, err := parseOps(ops)
	if err != nil || len(packedOps) == 0 {
		return out, err
	}
	more, err := packed.Decode(packedOps)
	if err != nil {
		var e *packed.Error
		if errors.As(err, &e) {
			field := fmt.Sprintf("packed_ops[%d].%s (byte %d)", e.Index, e.Field, e.Offset)
			if e.Value == "" {
				return nil, status.Errorf(codes.InvalidArgument, "%s: %s", field, e.Why)
			}
			return nil, fieldError(field, e.Value, e.Why)
		}
		return nil, status.Errorf(codes.InvalidArgument, "packed_ops: %v", err)
	}
	out = slices.Grow(out, len(more))
	for _, op := range more {
		kind := ce.OpReplace
		if op.Kind == packed.Delete {
			kind = ce.OpDelete
		}
		out = append(out, ce.RouteOp{Kind: kind, Prefix: op.Prefix, NextHops: op.NextHops, Distance: op.Distance})
	}
	return out, nil
}

// batchError maps an error of a batch of operations, of which the first
// nOps came from ops and the rest from packed_ops, to a status; a
// ce.RouteError becomes "ops[i].FIELD "VALUE": why" (or packed_ops[j], whose
// fields are named without "route.").
func batchError(err error, nOps int) error {
	var re *ce.RouteError
	if errors.As(err, &re) {
		if re.Index >= nOps {
			return routeStatus(re, fmt.Sprintf("packed_ops[%d]", re.Index-nOps), strings.TrimPrefix(re.Field, "route."))
		}
		return routeStatus(re, fmt.Sprintf("ops[%d]", re.Index), re.Field)
	}
	return toStatus(err)
}

// unaryError maps an error of a single-route call (Add, Replace, Delete),
// whose request field is field; the operation's own index means nothing
// there. prefixField renames route.prefix (Delete's request has prefix).
func unaryError(err error, prefixField string) error {
	var re *ce.RouteError
	if errors.As(err, &re) {
		f := re.Field
		if f == "route.prefix" || f == "prefix" {
			f = prefixField
		}
		return routeStatus(re, "", f)
	}
	return toStatus(err)
}

func routeStatus(re *ce.RouteError, where, field string) error {
	code := code(re.Err)
	switch {
	case field == "" && where == "":
		return status.Error(code, re.Err.Error())
	case field == "":
		return status.Errorf(code, "%s: %v", where, re.Err)
	case where != "":
		field = where + "." + field
	}
	return status.Errorf(code, "%s %q: %v", field, re.Value, re.Err)
}

// toStatus maps an error of the CE to a status: the codes the API's
// documentation promises for each of the CE's errors.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(code(err), err.Error())
}

func code(err error) codes.Code {
	switch {
	case errors.Is(err, ce.ErrInvalidRoute):
		return codes.InvalidArgument
	case errors.Is(err, ce.ErrRouteNotFound), errors.Is(err, bgp.ErrUnknownNeighbor):
		return codes.NotFound
	case errors.Is(err, ce.ErrRouteExists):
		return codes.AlreadyExists
	case errors.Is(err, ce.ErrTableFull), errors.Is(err, ce.ErrTxnBusy), errors.Is(err, ce.ErrWatcherBehind):
		return codes.ResourceExhausted
	case errors.Is(err, ce.ErrTxnAborted):
		return codes.Aborted
	case errors.Is(err, ce.ErrNoFE), errors.Is(err, ce.ErrNoAnswer):
		// ErrNoAnswer wraps its context's error: matched before the
		// context cases, since the CE not answering is what the caller sees.
		return codes.Unavailable
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

func toRoute(r ce.RouteInfo) *spv1.Route {
	return &spv1.Route{
		Prefix: r.Prefix.String(), NextHops: addrStrings(r.NextHops), Distance: uint32(r.Distance),
		Origin: origin(r.Origin), Installed: r.Installed, ResolvedNextHops: addrStrings(r.Resolved),
		UnresolvedReason: r.Unresolved(),
	}
}

func origin(s string) spv1.Origin {
	switch s {
	case "api":
		return spv1.Origin_ORIGIN_API
	case "static":
		return spv1.Origin_ORIGIN_STATIC
	case "bgp":
		return spv1.Origin_ORIGIN_BGP
	}
	return spv1.Origin_ORIGIN_UNSPECIFIED
}

func addrStrings(as []netip.Addr) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
