//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"net/netip"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
	"github.com/splitplane/splitplane/internal/routegen"
)

// edge measures, with the big table, what Forward adds to the suite's
// forwarding figures: the router against the lookup-only redirect on the
// same table, and the router with the edge-shaped table (the same prefixes
// over four upstreams), its destinations uniform over the prefixes and
// Zipf, against the bare redirect, and the router with a full-shaped IPv6
// table against the bare redirect of IPv6 frames; all taking turns in every
// round.
func (s *fwdSuite) edge(ctx context.Context) (err error) {
	o := s.opts
	prefixes := routegen.Generate(o.BigRoutes, o.Seed)
	// The plain table again, in the benchmarks' object, for the
	// lookup-only redirect; the suite's own datapath is the router.
	_, b, err := s.t.loadDatapath(prefixes, true)
	if err != nil {
		return fmt.Errorf("datapath with baselines: %w", err)
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	routes, err := fibbench.EdgeRoutes(o.BigRoutes, o.Seed)
	if err != nil {
		return err
	}
	de, be, err := s.t.loadDatapathRoutes(routes, true)
	if err != nil {
		return fmt.Errorf("edge datapath: %w", err)
	}
	defer func() { err = errors.Join(err, be.Close()) }()
	zipf, err := zipfDestinations(routes, o.Seed)
	if err != nil {
		return err
	}
	routes6 := forward6Routes(o.Seed)
	d6, err := s.t.loadDatapath6(routes6)
	if err != nil {
		return fmt.Errorf("IPv6 datapath: %w", err)
	}
	defer func() { err = errors.Join(err, d6.Close()) }()
	dsts6, err := destinations6(routes6, o.Seed)
	if err != nil {
		return err
	}
	ipv6 := func(run func() (float64, error)) func() (float64, error) {
		return func() (float64, error) {
			if err := s.g.SetTraffic6(gen6Header(), dsts6); err != nil {
				return 0, err
			}
			return run()
		}
	}
	uniform := destinations(prefixes, o.Seed)
	defer func() { err = errors.Join(err, s.g.SetTraffic(genHeader(), s.bigDsts)) }()
	type mode struct {
		name string
		run  func() (float64, error)
	}
	with := func(dsts []netip.Addr, run func() (float64, error)) func() (float64, error) {
		return func() (float64, error) {
			if err := s.g.SetTraffic(genHeader(), dsts); err != nil {
				return 0, err
			}
			return run()
		}
	}
	dur := o.ForwardDuration
	modes := []mode{
		{"splitplane", with(uniform, func() (float64, error) { return s.t.measureDatapath(ctx, s.g, s.d, dur) })},
		{"lookup + redirect", with(uniform, func() (float64, error) { return s.t.measureLookupRedirect(ctx, s.g, b, dur) })},
		{"bare redirect", with(uniform, func() (float64, error) { return s.t.measureBare(ctx, s.g, dur) })},
		{"splitplane, edge table", with(uniform, func() (float64, error) { return s.t.measureDatapath(ctx, s.g, de, dur) })},
		{"splitplane, edge table, zipf", with(zipf, func() (float64, error) { return s.t.measureDatapath(ctx, s.g, de, dur) })},
		{"splitplane, IPv6 full table", ipv6(func() (float64, error) { return s.t.measureDatapath(ctx, s.g, d6, dur) })},
		{"bare redirect, IPv6 frames", ipv6(func() (float64, error) { return s.t.measureBare(ctx, s.g, dur) })},
	}
	rates := make([][]float64, len(modes))
	for r := range o.Rounds {
		var line []string
		for i, m := range modes {
			if err := ctx.Err(); err != nil {
				return err
			}
			pps, err := m.run()
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", m.name, r+1, err)
			}
			rates[i] = append(rates[i], pps)
			line = append(line, fmt.Sprintf("%s %.2f Mpps", m.name, pps/1e6))
		}
		s.progress("edge, %d routes, round %d/%d: %s", o.BigRoutes, r+1, o.Rounds, strings.Join(line, ", "))
	}
	router, lookup, limit, edge, edgeZipf := median(rates[0]), median(rates[1]), median(rates[2]), median(rates[3]), median(rates[4])
	fwd6, limit6 := median(rates[5]), median(rates[6])
	lookupName, _ := LookupRedirectMetrics(o.BigRoutes)
	edgeName, zipfName, vsLookup := EdgeForwardMetrics(o.BigRoutes)
	s.rep.Edge = &EdgeRow{Routes: o.BigRoutes, Router: router, Lookup: lookup, Limit: limit, Edge: edge, EdgeZipf: edgeZipf, IPv6: fwd6, Limit6: limit6}
	if st, err := de.FIBStats(); err == nil {
		s.rep.Edge.FIBBytes, s.rep.Edge.DIR24_8Bytes = st.LookupBytes, st.DIR24_8Bytes
	}
	s.rep.Metrics = append(s.rep.Metrics,
		Result{Metric: lookupName, Value: lookup, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		Result{Metric: vsLookup, Value: router, Unit: "pps", Baseline: lookupName, BaselineValue: lookup},
		Result{Metric: edgeName, Value: edge, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		Result{Metric: zipfName, Value: edgeZipf, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit},
		Result{Metric: MetricForward6PPSFull, Value: fwd6, Unit: "pps", Baseline: MetricRedirect6LimitPPS, BaselineValue: limit6},
		Result{Metric: MetricRedirect6LimitPPS, Value: limit6, Unit: "pps", Baseline: MetricRedirectLimitPPS, BaselineValue: limit})
	return nil
}

// EdgeRow is the suite's edge-table step: pps of the router and of the
// lookup-only redirect with the plain big table, of the bare redirect, and
// of the router with the edge-shaped table (uniform and Zipf traffic), and
// the bytes its FIB lookups read against DIR-24-8's.
type EdgeRow struct {
	Routes   int     `json:"routes"`
	Router   float64 `json:"splitplane_pps"`
	Lookup   float64 `json:"lookup_redirect_pps"`
	Limit    float64 `json:"redirect_limit_pps"`
	Edge     float64 `json:"edge_pps"`
	EdgeZipf float64 `json:"edge_zipf_pps"`
	// IPv6 is the router with the full-shaped IPv6 table, Limit6 the bare
	// redirect of the same IPv6 frames.
	IPv6                   float64 `json:"ipv6_pps"`
	Limit6                 float64 `json:"redirect6_limit_pps"`
	FIBBytes, DIR24_8Bytes int     `json:"-"`
}
