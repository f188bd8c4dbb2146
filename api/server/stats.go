package server

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// latencyBounds are the upper bounds, in seconds, of the latency
// histogram's buckets (Prometheus' defaults, with a finer low end).
var latencyBounds = [...]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// LatencyBounds returns the upper bounds, in seconds, of the buckets of
// MethodStats.Buckets.
func LatencyBounds() []float64 { return slices.Clone(latencyBounds[:]) }

// Stats counts the API's calls and their latencies per method; the
// interceptors update it and Snapshot reads it. A stream's latency is its
// whole duration.
type Stats struct {
	mu      sync.Mutex
	methods map[string]*methodStats
}

type methodStats struct {
	codes   map[codes.Code]uint64
	buckets [len(latencyBounds)]uint64 // not cumulative
	count   uint64
	sum     time.Duration
}

// MethodStats is one method's figures, shaped for a Prometheus counter
// (by code) and histogram.
type MethodStats struct {
	Method string            // "/splitplane.v1.Routes/Add"
	Codes  map[string]uint64 // calls by status code ("OK", "InvalidArgument")
	// Count and Sum are the number of calls and their total duration, in
	// seconds; Buckets[i] counts the calls that took at most
	// LatencyBounds()[i] (cumulative, as Prometheus' "le").
	Count   uint64
	Sum     float64
	Buckets []uint64
}

func newStats() *Stats { return &Stats{methods: map[string]*methodStats{}} }

func (s *Stats) record(method string, err error, d time.Duration) {
	code := status.Code(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.methods[method]
	if m == nil {
		m = &methodStats{codes: map[codes.Code]uint64{}}
		s.methods[method] = m
	}
	m.codes[code]++
	m.count++
	m.sum += d
	if i, _ := slices.BinarySearch(latencyBounds[:], d.Seconds()); i < len(m.buckets) {
		m.buckets[i]++
	}
}

// Snapshot returns every called method's figures, sorted by method.
func (s *Stats) Snapshot() []MethodStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]MethodStats, 0, len(s.methods))
	for name, m := range s.methods {
		ms := MethodStats{Method: name, Codes: map[string]uint64{}, Count: m.count, Sum: m.sum.Seconds(), Buckets: make([]uint64, len(m.buckets))}
		for c, n := range m.codes {
			ms.Codes[c.String()] = n
		}
		var cum uint64
		for i, n := range m.buckets {
			cum += n
			ms.Buckets[i] = cum
		}
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b MethodStats) int { return strings.Compare(a.Method, b.Method) })
	return out
}

func (s *Stats) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	s.record(info.FullMethod, err, time.Since(start))
	return resp, err
}

func (s *Stats) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	s.record(info.FullMethod, err, time.Since(start))
	return err
}
