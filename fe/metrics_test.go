package fe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/fe/fedptest"
	"github.com/splitplane/splitplane/forces"
)

// countingDatapath is the fake datapath with counters the test sets.
type countingDatapath struct {
	*fedptest.Datapath
	mu    sync.Mutex
	cpus  []datapath.Counters
	ports map[int]datapath.PortCounters
	err   error // returned by the counter reads when set
}

func (d *countingDatapath) set(cpus []datapath.Counters, ports map[int]datapath.PortCounters, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cpus, d.ports, d.err = cpus, ports, err
}

func (d *countingDatapath) CPUCounters() ([]datapath.Counters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]datapath.Counters, len(d.cpus))
	for i, c := range d.cpus {
		out[i] = maps.Clone(c)
	}
	return out, d.err
}

func (d *countingDatapath) PortCounters() (map[int]datapath.PortCounters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	return maps.Clone(d.ports), nil
}

// cpuCounters returns a full set of datapath counters, zero but for set.
func cpuCounters(set map[string]uint64) datapath.Counters {
	c := datapath.Counters{}
	for _, name := range datapath.CounterNames() {
		c[name] = set[name]
	}
	return c
}

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

// value returns the value of the series of name with exactly the given
// labels (pairs of name and value), and whether it exists.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			match = match && found
		}
		if !match {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

type series struct {
	name   string
	labels []string
	value  float64
}

func checkSeries(t *testing.T, what string, mfs map[string]*dto.MetricFamily, want []series) {
	t.Helper()
	for _, w := range want {
		if v, ok := value(mfs, w.name, w.labels...); !ok || v != w.value {
			t.Errorf("%s: %s%v = %v (present: %v), want %v", what, w.name, w.labels, v, ok, w.value)
		}
	}
}

// A CE and an FE, both serving /metrics: routes fed to the CE show in both
// FIB gauges, the association on both sides, and the fake datapath's
// per-CPU and per-port counters with their labels, read at each scrape.
func TestMetricsCEAndFE(t *testing.T) {
	c := runCE(t, ce.Config{MetricsListen: "127.0.0.1:0"})
	dp := &countingDatapath{Datapath: newFake()}
	a, err := New(Config{Ports: []string{"unused0"}, CEAddress: c.Addr().String(), CEAddressLow: c.LowAddr().String(), MetricsListen: "127.0.0.1:0"},
		slog.New(slog.DiscardHandler), WithDatapath(dp, func(netip.Addr) int { return 7 }))
	if err != nil {
		t.Fatal(err)
	}
	a.ports[7] = &port{Name: "p7", Ifindex: 7, Up: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitUntil(t, "FE metrics listening", func() bool { return a.MetricsAddr() != nil })
	feAddr, ceAddr := a.MetricsAddr().String(), c.MetricsAddr().String()

	nh4, nh6 := netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("2001:db8::9")
	us := []ce.RouteUpdate{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: nh4},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24"), NextHop: nh4},
		{Prefix: netip.MustParsePrefix("100.64.0.0/10"), NextHop: nh4},
		{Prefix: netip.MustParsePrefix("2001:db8:100::/48"), NextHop: nh6},
	}
	if err := c.Update(ctx, us); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "routes in the FE", func() bool {
		st := ceStatus(t, ctx, c)
		return len(st.FEs) == 1 && st.FEs[0].Synced && a.Status().Programmed == 4
	})
	dp.set([]datapath.Counters{
		cpuCounters(map[string]uint64{"rx": 10, "forwarded": 7, "forwarded_bytes": 7000, "forwarded_ipv6": 2, "pass_no_route": 3}),
		cpuCounters(nil), // idle: left out
		cpuCounters(map[string]uint64{"rx": 5, "pass_ttl": 5}),
	}, map[int]datapath.PortCounters{7: {RxPackets: 15, RxBytes: 9000, TxPackets: 7, TxBytes: 7000, Passed: 8}}, nil)

	mfs := scrape(t, feAddr)
	checkSeries(t, "FE", mfs, []series{
		{"splitplane_fe_forces_associated", nil, 1},
		{"splitplane_fe_fib_routes", []string{"family", "ipv4"}, 3},
		{"splitplane_fe_fib_routes", []string{"family", "ipv6"}, 1},
		{"splitplane_fe_fib_nexthops", []string{"family", "ipv4"}, 1},
		{"splitplane_fe_fib_nexthops", []string{"family", "ipv6"}, 1},
		{"splitplane_fe_fib_ecmp_groups", []string{"family", "ipv4"}, 0},
		{"splitplane_fe_datapath_routes", []string{"family", "ipv4"}, 3},
		{"splitplane_fe_datapath_routes", []string{"family", "ipv6"}, 1},
		{"splitplane_fe_datapath_gateways", nil, 2},
		{"splitplane_fe_datapath_gateways_resolved", nil, 2},
		{"splitplane_fe_datapath_errors_total", nil, 0},
		{"splitplane_fe_forces_protocol_errors_total", nil, 0},
		{"splitplane_fe_datapath_rx_packets_total", []string{"cpu", "0"}, 10},
		{"splitplane_fe_datapath_rx_packets_total", []string{"cpu", "2"}, 5},
		{"splitplane_fe_datapath_packets_total", []string{"cpu", "0", "action", "forward", "reason", "forwarded"}, 7},
		{"splitplane_fe_datapath_packets_total", []string{"cpu", "0", "action", "pass", "reason", "pass_no_route"}, 3},
		{"splitplane_fe_datapath_packets_total", []string{"cpu", "0", "action", "pass", "reason", "pass_ttl"}, 0},
		{"splitplane_fe_datapath_packets_total", []string{"cpu", "2", "action", "pass", "reason", "pass_ttl"}, 5},
		{"splitplane_fe_datapath_forwarded_bytes_total", []string{"cpu", "0"}, 7000},
		{"splitplane_fe_datapath_forwarded_ipv6_packets_total", []string{"cpu", "0"}, 2},
		{"splitplane_fe_port_up", []string{"port", "p7"}, 1},
		{"splitplane_fe_port_rx_packets_total", []string{"port", "p7"}, 15},
		{"splitplane_fe_port_rx_bytes_total", []string{"port", "p7"}, 9000},
		{"splitplane_fe_port_tx_packets_total", []string{"port", "p7"}, 7},
		{"splitplane_fe_port_tx_bytes_total", []string{"port", "p7"}, 7000},
		{"splitplane_fe_port_passed_packets_total", []string{"port", "p7"}, 8},
	})
	if _, ok := value(mfs, "splitplane_fe_datapath_rx_packets_total", "cpu", "1"); ok {
		t.Errorf("a CPU that saw no packet has series")
	}
	// Every packet counts once under an action and reason.
	var sum float64
	for _, m := range mfs["splitplane_fe_datapath_packets_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	if sum != 15 {
		t.Errorf("splitplane_fe_datapath_packets_total sums to %v, want the 15 received", sum)
	}
	for name, mf := range mfs {
		if strings.HasPrefix(name, "splitplane_") && mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}

	// Counters are read at the scrape, not cached.
	dp.set([]datapath.Counters{cpuCounters(map[string]uint64{"rx": 11, "forwarded": 8, "pass_no_route": 3})}, map[int]datapath.PortCounters{7: {RxPackets: 16}}, nil)
	checkSeries(t, "FE, second scrape", scrape(t, feAddr), []series{
		{"splitplane_fe_datapath_rx_packets_total", []string{"cpu", "0"}, 11},
		{"splitplane_fe_port_rx_packets_total", []string{"port", "p7"}, 16},
	})

	// A datapath that cannot be read fails its series, not the scrape.
	dp.set(nil, nil, errors.New("map lookup: no such device"))
	mfs = scrape(t, feAddr)
	if _, ok := value(mfs, "splitplane_fe_fib_routes", "family", "ipv4"); !ok || mfs["splitplane_fe_datapath_rx_packets_total"] != nil {
		t.Errorf("with the datapath's counters unreadable: fib routes present %v, rx series %v", ok, mfs["splitplane_fe_datapath_rx_packets_total"])
	}

	id := forces.FEID(1).String()
	checkSeries(t, "CE", scrape(t, ceAddr), []series{
		{"splitplane_ce_fib_routes", nil, 4},
		{"splitplane_ce_fes_associated", nil, 1},
		{"splitplane_ce_fe_associated", []string{"fe", id}, 1},
		{"splitplane_ce_fe_synced", []string{"fe", id}, 1},
		{"splitplane_ce_fe_pending_changes", []string{"fe", id}, 0},
		{"splitplane_ce_fe_failed_changes_total", []string{"fe", id}, 0},
		{"splitplane_ce_forces_protocol_errors_total", nil, 0},
	})
}

func TestMetricsListenValidate(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9102", true}, {":9102", true}, {"[::1]:0", true}, {"fe-1.example:9102", true},
		{"9102", false}, {"127.0.0.1", false}, {"127.0.0.1:metrics", false}, {"127.0.0.1:70000", false},
		{"http://127.0.0.1:9102", false}, {"unix:/run/fe-metrics.sock", false}, {"a b:9102", false},
	} {
		cfg := Config{Ports: []string{"eth0"}, MetricsListen: tc.addr}
		err := cfg.Validate()
		if tc.ok && err != nil {
			t.Errorf("metrics_listen %q: %v", tc.addr, err)
		}
		if !tc.ok && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("metrics_listen %q", tc.addr))) {
			t.Errorf("metrics_listen %q: Validate = %v, want an ErrConfig naming the field and value", tc.addr, err)
		}
	}
}
