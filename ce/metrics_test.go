package ce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// scrape fetches http://addr/metrics and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// metricValue returns the value of the series of name with exactly the
// given labels (pairs of name and value), and whether it exists.
func metricValue(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// The CE's /metrics follows what happens: routes fed to the FIB, an FE
// that associates and syncs, its heartbeats, a protocol error, the BGP
// neighbours' states and a collector registered from outside (as the API
// server registers its own).
func TestCEMetrics(t *testing.T) {
	c, err := New(Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0",
		HeartbeatInterval: 20 * time.Millisecond, StaticRoutes: testConnected, MetricsListen: "127.0.0.1:0", SyncHold: 50 * time.Millisecond,
		// Never reachable: the session stays short of established.
		Neighbors: []NeighborConfig{{Address: "192.0.2.200", ASN: 65002, Passive: true}}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// As the API server's Stats().Snapshot() would say.
	apiStats := func() []APIMethodStats {
		return []APIMethodStats{{Method: "/splitplane.v1.Routes/Add", Codes: map[string]uint64{"OK": 3, "InvalidArgument": 1},
			Count: 4, Sum: 0.004, Buckets: []uint64{2, 4}}}
	}
	if err := c.RegisterMetrics(APIStatsCollector([]float64{0.001, 0.01}, apiStats)); err != nil {
		t.Fatal(err)
	}
	startRun(t, c)
	addr := c.MetricsAddr().String()

	mfs := scrape(t, addr)
	if v, ok := metricValue(mfs, "splitplane_ce_fib_routes"); !ok || v != 0 {
		t.Fatalf("splitplane_ce_fib_routes = %v, %v before any route; want 0", v, ok)
	}
	if v, ok := metricValue(mfs, "splitplane_api_requests_total", "service", "splitplane.v1.Routes", "method", "Add", "code", "OK"); !ok || v != 3 {
		t.Errorf("API stats: splitplane_api_requests_total{service=splitplane.v1.Routes,method=Add,code=OK} = %v, %v; want 3", v, ok)
	}
	if hs := mfs["splitplane_api_request_duration_seconds"].GetMetric(); len(hs) != 1 || hs[0].GetHistogram().GetSampleCount() != 4 ||
		len(hs[0].GetHistogram().GetBucket()) != 3 || // 0.001, 0.01 and +Inf
		hs[0].GetHistogram().GetBucket()[0].GetCumulativeCount() != 2 {
		t.Errorf("API stats: splitplane_api_request_duration_seconds = %v, want 4 calls, 2 of them within 1ms", hs)
	}
	var states []string
	for _, s := range bgpStates {
		if v, ok := metricValue(mfs, "splitplane_ce_bgp_neighbor_state", "neighbor", "192.0.2.200", "state", s); !ok {
			t.Errorf("no splitplane_ce_bgp_neighbor_state for state %s", s)
		} else if v == 1 {
			states = append(states, s)
		}
	}
	if len(states) != 1 || states[0] == "established" {
		t.Errorf("neighbour in states %v, want one state short of established", states)
	}
	if mfs["go_goroutines"] == nil || mfs["process_cpu_seconds_total"] == nil {
		t.Errorf("no Go runtime or process metrics")
	}
	for name, mf := range mfs {
		if strings.HasPrefix(name, "splitplane_ce_") && mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}

	nh4, nh6 := netip.MustParseAddr("10.10.2.2"), netip.MustParseAddr("2001:db8::2")
	us := routeUpdates(300, nh4)
	us = append(us, bgp.Update{Prefix: netip.MustParsePrefix("2001:db8:1::/48"), NextHop: nh6})
	if err := c.Update(context.Background(), us); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return statusOf(t, c).Routes == 301 })
	if v, _ := metricValue(scrape(t, addr), "splitplane_ce_fib_routes"); v != 301 {
		t.Fatalf("splitplane_ce_fib_routes = %v, want 301", v)
	}

	fe, _ := dialFE(t, c, 4)
	fe.fullSync()
	waitFor(t, func() bool {
		st := statusOf(t, c)
		return len(st.FEs) == 1 && st.FEs[0].Synced
	})
	// The fake FE answers heartbeats only while it reads.
	go func() {
		for {
			m, err := fe.conn.ReadMessage()
			if err != nil {
				return
			}
			if m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK {
				fe.conn.WriteMessage(forces.NewHeartbeat(fe.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
			}
		}
	}()
	waitFor(t, func() bool { return statusOf(t, c).FEs[0].HeartbeatRTT.Samples >= 3 })
	fe.conn.WriteMessage(forces.NewHeartbeat(forces.FEID(9), forces.CEID(0), 1, forces.NoACK)) // someone else's ID
	waitFor(t, func() bool { return statusOf(t, c).ProtocolErrors == 1 })

	mfs = scrape(t, addr)
	id := forces.FEID(4).String()
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"splitplane_ce_fes_associated", nil, 1},
		{"splitplane_ce_fe_associated", []string{"fe", id}, 1},
		{"splitplane_ce_fe_synced", []string{"fe", id}, 1},
		{"splitplane_ce_fe_info", []string{"fe", id, "name", "fake", "remote", fe.nc.LocalAddr().String()}, 1},
		{"splitplane_ce_forces_protocol_errors_total", nil, 1},
		{"splitplane_ce_fib_routes", nil, 301},
		{"splitplane_ce_bgp_forwarding_preserved", nil, 0}, // no graceful restart: nothing claimed
	} {
		if v, ok := metricValue(mfs, want.name, want.labels...); !ok || v != want.value {
			t.Errorf("%s%v = %v (present: %v), want %v", want.name, want.labels, v, ok, want.value)
		}
	}
	if v, _ := metricValue(mfs, "splitplane_ce_fe_acked_changes_total", "fe", id); v < 301 {
		t.Errorf("splitplane_ce_fe_acked_changes_total = %v, want at least the 301 routes", v)
	}
	if v, _ := metricValue(mfs, "splitplane_ce_fe_heartbeat_rtt_samples", "fe", id); v < 3 {
		t.Errorf("splitplane_ce_fe_heartbeat_rtt_samples = %v, want at least 3", v)
	}
	p50, ok50 := metricValue(mfs, "splitplane_ce_fe_heartbeat_rtt_seconds", "fe", id, "quantile", "0.5")
	p99, ok99 := metricValue(mfs, "splitplane_ce_fe_heartbeat_rtt_seconds", "fe", id, "quantile", "0.99")
	if !ok50 || !ok99 || p50 > p99 || p99 > 1 {
		t.Errorf("heartbeat RTT p50 %v (%v), p99 %v (%v): want 0 <= p50 <= p99 < 1s", p50, ok50, p99, ok99)
	}
	since, _ := metricValue(mfs, "splitplane_ce_fe_associated_since_timestamp_seconds", "fe", id)
	if d := time.Since(time.Unix(int64(since), 0)); d < -time.Second || d > time.Minute {
		t.Errorf("splitplane_ce_fe_associated_since_timestamp_seconds %v: %v ago", since, d)
	}

	// Once the FE leaves, its series go.
	fe.conn.Close()
	waitFor(t, func() bool { return len(statusOf(t, c).FEs) == 0 })
	mfs = scrape(t, addr)
	if _, ok := metricValue(mfs, "splitplane_ce_fe_associated", "fe", id); ok {
		t.Errorf("splitplane_ce_fe_associated still there after the FE left")
	}
	if v, _ := metricValue(mfs, "splitplane_ce_fes_associated"); v != 0 {
		t.Errorf("splitplane_ce_fes_associated = %v after the FE left", v)
	}
}

// A collector whose series collide with the CE's own is refused.
func TestCERegisterMetricsCollision(t *testing.T) {
	c, err := New(Config{ASN: 65001, RouterID: "192.0.2.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dup := prometheus.NewGauge(prometheus.GaugeOpts{Name: "splitplane_ce_fib_routes", Help: "again"})
	if err := c.RegisterMetrics(dup); err == nil {
		t.Fatal("a second splitplane_ce_fib_routes was registered")
	}
}

func TestMetricsListenValidate(t *testing.T) {
	for _, bad := range []string{"9101", "localhost", "127.0.0.1:http", "127.0.0.1:65536", "http://127.0.0.1:9101", "unix:/run/m.sock", "a/b:9101", "[::1]:-1"} {
		cfg := Config{ASN: 65001, RouterID: "192.0.2.1", MetricsListen: bad}
		err := cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("metrics_listen %q", bad)) {
			t.Errorf("metrics_listen %q: Validate = %v, want an ErrConfig naming the field and value", bad, err)
		}
	}
	for _, good := range []string{"127.0.0.1:9101", ":9101", "[::1]:0", "localhost:9101", "router-1.example:9101"} {
		cfg := Config{ASN: 65001, RouterID: "192.0.2.1", MetricsListen: good}
		if err := cfg.Validate(); err != nil {
			t.Errorf("metrics_listen %q: %v", good, err)
		}
	}
}

// A port in use is reported by Run, naming the field.
func TestMetricsListenInUse(t *testing.T) {
	first := startCEWithMetrics(t)
	c, err := New(Config{ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0",
		MetricsListen: first.MetricsAddr().String()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); err == nil || !strings.Contains(err.Error(), "metrics_listen") {
		t.Fatalf("Run with metrics_listen in use: %v", err)
	}
}

func startCEWithMetrics(t *testing.T) *CE {
	t.Helper()
	c, err := New(Config{ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0", ForCESListenLow: "127.0.0.1:0",
		MetricsListen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c)
	return c
}
