package ce

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/splitplane/splitplane/forces"
)

// The CE's Prometheus metrics. Everything is read when scraped, from one
// Status snapshot of the loop; nothing is polled or kept. Each CE has its
// own registry, so several CEs in one process (tests) never share series.

// metricsStatusTimeout bounds how long a scrape waits for the loop's
// snapshot; a loop busy longer than that (a full table arriving) fails the
// CE's series of that scrape, not the scrape.
const metricsStatusTimeout = 5 * time.Second

// RegisterMetrics adds col to the metrics the CE serves on metrics_listen
// (the gRPC API server's per-method stats, say); it fails if col's series
// collide with others.
func (c *CE) RegisterMetrics(col prometheus.Collector) error { return c.prom.Register(col) }

// MetricsHandler serves the CE's metrics, as /metrics of metrics_listen
// does.
func (c *CE) MetricsHandler() http.Handler { return c.prom.Handler() }

// MetricsAddr is the address metrics are served on, nil until Run listens
// there or without metrics_listen.
func (c *CE) MetricsAddr() net.Addr { return c.prom.Addr() }

// ceCollector turns one Status snapshot per scrape into metrics.
type ceCollector struct{ c *CE }

var bgpStates = [...]string{"idle", "connect", "active", "opensent", "openconfirm", "established"}

var (
	ceStatusDesc = prometheus.NewDesc("splitplane_ce_status_errors", "Error reading the CE's status for this scrape.", nil, nil)

	ceFIBRoutes = prometheus.NewDesc("splitplane_ce_fib_routes",
		"Routes in the CE's FIB (IPv4 and IPv6), the table every synced FE holds.", nil, nil)
	ceConnected = prometheus.NewDesc("splitplane_ce_connected_prefixes",
		"Connected prefixes next hops resolve through (the FEs' port subnets and configured ones).", nil, nil)
	ceUnresolved = prometheus.NewDesc("splitplane_ce_rib_unresolved_routes",
		"Routes of every origin whose next hops resolve to no directly connected one, so are not forwarded with, by reason (no_route, depth, loop, work).", []string{"reason"}, nil)
	ceFwdPreserved = prometheus.NewDesc("splitplane_ce_bgp_forwarding_preserved",
		"1 if the CE claimed at start, to its graceful-restart neighbours, its forwarding state preserved (every FE kept its FIB).", nil, nil)
	ceProtocolErrors = prometheus.NewDesc("splitplane_ce_forces_protocol_errors_total",
		"Malformed or misaddressed ForCES messages the CE received.", nil, nil)
	ceRefused = prometheus.NewDesc("splitplane_ce_forces_refused_total",
		"ForCES connections, association setups, messages and FE port addresses the CE refused, by reason.", []string{"reason"}, nil)

	ceBGPState = prometheus.NewDesc("splitplane_ce_bgp_neighbor_state",
		"BGP session state of each configured neighbour: 1 for its current state, 0 for the others.", []string{"neighbor", "state"}, nil)
	ceBGPSince = prometheus.NewDesc("splitplane_ce_bgp_neighbor_state_change_timestamp_seconds",
		"When the neighbour's BGP session last changed state (Unix time).", []string{"neighbor"}, nil)
	ceBGPPrefixes = prometheus.NewDesc("splitplane_ce_bgp_neighbor_prefixes",
		"Prefixes in the neighbour's Adj-RIB-In, every family: received (before import policy) and accepted (after).", []string{"neighbor", "kind"}, nil)
	ceBGPBFDUp = prometheus.NewDesc("splitplane_ce_bgp_neighbor_bfd_up",
		"1 when the neighbour's BFD session is up (neighbours with BFD only).", []string{"neighbor"}, nil)

	ceFEs = prometheus.NewDesc("splitplane_ce_fes_associated",
		"Forwarding elements associated with the CE over ForCES.", nil, nil)
	ceFEInfo = prometheus.NewDesc("splitplane_ce_fe_info",
		"An associated FE: its name and remote address as labels, value 1.", []string{"fe", "name", "remote"}, nil)
	ceFEAssociated = prometheus.NewDesc("splitplane_ce_fe_associated",
		"1 for each FE associated with the CE (an FE that leaves disappears).", []string{"fe"}, nil)
	ceFESince = prometheus.NewDesc("splitplane_ce_fe_associated_since_timestamp_seconds",
		"When the FE's current association began (Unix time).", []string{"fe"}, nil)
	ceFESynced = prometheus.NewDesc("splitplane_ce_fe_synced",
		"1 once the FE has acknowledged its full sync of the FIB.", []string{"fe"}, nil)
	ceFEPending = prometheus.NewDesc("splitplane_ce_fe_pending_changes",
		"FIB changes queued for the FE and not yet sent.", []string{"fe"}, nil)
	ceFEAcked = prometheus.NewDesc("splitplane_ce_fe_acked_changes_total",
		"FIB changes (ForCES rows) the FE acknowledged in this association.", []string{"fe"}, nil)
	ceFEEgress = prometheus.NewDesc("splitplane_ce_fe_egress_nexthops",
		"Nexthops whose gateway is behind one of the FE's ports: the FE is their egress (the nexthop egress rows every FE gets).", []string{"fe"}, nil)
	ceFELinkUp = prometheus.NewDesc("splitplane_ce_fe_inter_fe_link_up",
		"1 when the FE's inter-FE link (its port to peer_fe) is up, 0 when down.", []string{"fe", "port", "peer_fe"}, nil)
	ceFEFailed = prometheus.NewDesc("splitplane_ce_fe_failed_changes_total",
		"FIB changes (ForCES rows) the FE refused in this association.", []string{"fe"}, nil)
	ceFELastHB = prometheus.NewDesc("splitplane_ce_fe_last_heartbeat_timestamp_seconds",
		"When the CE last heard from the FE (Unix time).", []string{"fe"}, nil)
	ceFERTT = prometheus.NewDesc("splitplane_ce_fe_heartbeat_rtt_seconds",
		"Heartbeat round trip CE-FE-CE over the last 256 heartbeats, by quantile (1: the maximum).", []string{"fe", "quantile"}, nil)
	ceFERTTSamples = prometheus.NewDesc("splitplane_ce_fe_heartbeat_rtt_samples",
		"Heartbeat round trips the RTT quantiles are computed from.", []string{"fe"}, nil)
	ceFEPortUp = prometheus.NewDesc("splitplane_ce_fe_port_up",
		"1 when the FE reports the port up.", []string{"fe", "port"}, nil)
	ceFELow = prometheus.NewDesc("splitplane_ce_fe_low_channel_up",
		"1 when the FE's low-priority ForCES channel (redirects, events) is up.", []string{"fe"}, nil)
	ceFERedirected = prometheus.NewDesc("splitplane_ce_fe_redirected_packets_total",
		"Packets the FE redirected to the CE over the current low-priority channel.", []string{"fe"}, nil)
	ceFEInjected = prometheus.NewDesc("splitplane_ce_fe_injected_packets_total",
		"Packets the CE sent out of the FE's ports over the current low-priority channel.", []string{"fe"}, nil)
	ceFEEvents = prometheus.NewDesc("splitplane_ce_fe_events_total",
		"Event notifications from the FE over the current low-priority channel.", []string{"fe"}, nil)
)

// Describe implements prometheus.Collector.
func (cc *ceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ceStatusDesc, ceFIBRoutes, ceConnected, ceUnresolved, ceFwdPreserved, ceProtocolErrors, ceRefused, ceBGPState, ceBGPSince, ceBGPPrefixes, ceBGPBFDUp,
		ceFEs, ceFEInfo, ceFEAssociated, ceFESince, ceFESynced, ceFEPending, ceFEAcked, ceFEFailed, ceFELastHB, ceFERTT, ceFERTTSamples,
		ceFEPortUp, ceFELow, ceFERedirected, ceFEInjected, ceFEEvents, ceFEEgress, ceFELinkUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Status snapshot from the
// loop, turned into metrics.
func (cc *ceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsStatusTimeout)
	defer cancel()
	st, err := cc.c.Status(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(ceStatusDesc, fmt.Errorf("ce status within %s: %w", metricsStatusTimeout, err))
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(ceFIBRoutes, float64(st.Routes))
	gauge(ceConnected, float64(len(st.Connected)))
	for reason, n := range st.UnresolvedRoutes {
		gauge(ceUnresolved, float64(n), reason)
	}
	gauge(ceFwdPreserved, b2f(st.ForwardingPreserved))
	counter(ceProtocolErrors, st.ProtocolErrors)
	for r := range nRefusals {
		counter(ceRefused, st.ForCESRefused[r.String()], r.String())
	}

	for _, n := range st.Neighbors {
		known := false
		for _, s := range bgpStates {
			gauge(ceBGPState, b2f(n.State == s), n.Address, s)
			known = known || n.State == s
		}
		if !known && n.State != "" {
			gauge(ceBGPState, 1, n.Address, n.State)
		}
		if !n.Since.IsZero() {
			gauge(ceBGPSince, unixSeconds(n.Since), n.Address)
		}
		gauge(ceBGPPrefixes, float64(n.Received), n.Address, "received")
		gauge(ceBGPPrefixes, float64(n.Accepted), n.Address, "accepted")
		if n.BFD != "" {
			gauge(ceBGPBFDUp, b2f(n.BFD == "up"), n.Address)
		}
	}

	gauge(ceFEs, float64(len(st.FEs)))
	for _, fe := range st.FEs {
		id := fe.ID
		gauge(ceFEInfo, 1, id, fe.Name, fe.Remote)
		gauge(ceFEAssociated, 1, id)
		if !fe.AssociatedAt.IsZero() {
			gauge(ceFESince, unixSeconds(fe.AssociatedAt), id)
		}
		gauge(ceFESynced, b2f(fe.Synced), id)
		gauge(ceFEPending, float64(fe.Pending), id)
		counter(ceFEAcked, fe.Acked, id)
		counter(ceFEFailed, fe.Failed, id)
		if fe.LastHeartbeat.UnixNano() > 0 {
			gauge(ceFELastHB, unixSeconds(fe.LastHeartbeat), id)
		}
		gauge(ceFERTTSamples, float64(fe.HeartbeatRTT.Samples), id)
		if fe.HeartbeatRTT.Samples > 0 {
			gauge(ceFERTT, fe.HeartbeatRTT.P50/1000, id, "0.5")
			gauge(ceFERTT, fe.HeartbeatRTT.P99/1000, id, "0.99")
			gauge(ceFERTT, fe.HeartbeatRTT.Max/1000, id, "1")
		}
		for _, p := range fe.Ports {
			gauge(ceFEPortUp, b2f(p.Up), id, p.Name)
		}
		gauge(ceFELow, b2f(fe.LowChannel), id)
		gauge(ceFEEgress, float64(fe.EgressOf), id)
		for _, l := range fe.InterFELinks {
			gauge(ceFELinkUp, b2f(l.Up), id, l.PortName, forces.FEID(l.PeerFE).String())
		}
		if fe.LowChannel {
			counter(ceFERedirected, fe.Redirected, id)
			counter(ceFEInjected, fe.Injected, id)
			counter(ceFEEvents, fe.Events, id)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// APIMethodStats is one gRPC method's request counts and latencies as the
// API server keeps them; api/server.MethodStats converts to it directly.
type APIMethodStats struct {
	Method string            // "/splitplane.v1.Routes/Add"
	Codes  map[string]uint64 // calls by status code ("OK", "InvalidArgument")
	// Count and Sum are the number of calls and their total duration in
	// seconds; Buckets[i] counts the calls that took at most the i-th
	// bound (cumulative).
	Count   uint64
	Sum     float64
	Buckets []uint64
}

// APIStatsCollector makes the API server's per-method stats, read by
// snapshot at each scrape, into splitplane_api_requests_total (by service,
// method and status code) and the histogram
// splitplane_api_request_duration_seconds, whose buckets end at bounds (in
// seconds). Add it with RegisterMetrics; the CE need not know the server.
func APIStatsCollector(bounds []float64, snapshot func() []APIMethodStats) prometheus.Collector {
	return &apiCollector{bounds: bounds, snapshot: snapshot}
}

type apiCollector struct {
	bounds   []float64
	snapshot func() []APIMethodStats
}

var (
	apiRequests = prometheus.NewDesc("splitplane_api_requests_total",
		"gRPC API calls handled, by service, method and status code.", []string{"service", "method", "code"}, nil)
	apiDuration = prometheus.NewDesc("splitplane_api_request_duration_seconds",
		"How long gRPC API calls took (a stream: its whole life), by service and method.", []string{"service", "method"}, nil)
)

// Describe implements prometheus.Collector.
func (ac *apiCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- apiRequests
	ch <- apiDuration
}

// Collect implements prometheus.Collector.
func (ac *apiCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range ac.snapshot() {
		service, method := splitMethod(m.Method)
		for code, n := range m.Codes {
			ch <- prometheus.MustNewConstMetric(apiRequests, prometheus.CounterValue, float64(n), service, method, code)
		}
		buckets := make(map[float64]uint64, len(ac.bounds))
		for i := range min(len(ac.bounds), len(m.Buckets)) {
			buckets[ac.bounds[i]] = m.Buckets[i]
		}
		h, err := prometheus.NewConstHistogram(apiDuration, m.Count, m.Sum, buckets, service, method)
		if err != nil {
			h = prometheus.NewInvalidMetric(apiDuration, err)
		}
		ch <- h
	}
}

// splitMethod splits a gRPC full method name, "/pkg.Service/Method", into
// service and method.
func splitMethod(full string) (service, method string) {
	s, m, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return "", full
	}
	return s, m
}
