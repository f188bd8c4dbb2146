package integration_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/integration/lab"
)

// The monitoring files of deploy/monitoring.
const (
	rulesFile     = "../deploy/monitoring/splitplane-rules.yaml"
	dashboardFile = "../deploy/monitoring/splitplane-dashboard.json"
)

var metricName = regexp.MustCompile(`splitplane_[a-z0-9_]+`)

// monitoringMetrics returns every metric name the alerting rules and the
// dashboard's queries use.
func monitoringMetrics(t *testing.T) []string {
	t.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := []string{}
	for _, line := range strings.Split(string(rules), "\n") {
		if !strings.Contains(line, "summary:") && !strings.Contains(line, "description:") {
			exprs = append(exprs, line)
		}
	}
	if len(dash.Panels) == 0 {
		t.Fatalf("%s: no panels", dashboardFile)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			seen[m] = true
		}
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// checkMonitoring: every metric name the rules and the dashboard use is in
// a scrape of the running lab o (CE and FE 1), and promtool accepts the
// rules.
func checkMonitoring(t *testing.T, o lab.Options) {
	t.Helper()
	scrape := getInNetns(t, o.Namespace("rtr"), "http://127.0.0.1:9101/metrics") +
		getInNetns(t, o.Namespace("rtr"), fmt.Sprintf("http://127.0.0.1:%d/metrics", lab.FEMetricsPort(1)))
	have := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		if m := metricName.FindString(line); m != "" && strings.HasPrefix(line, m) {
			have[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")] = true
			have[m] = true
		}
	}
	names := monitoringMetrics(t)
	if len(names) < 10 {
		t.Fatalf("rules and dashboard use only %v", names)
	}
	for _, m := range names {
		if !have[m] {
			t.Errorf("%s is used by deploy/monitoring but not in a scrape of the lab", m)
		}
	}
	checkPromtool(t)
}

// checkPromtool runs `promtool check rules` on the rules: promtool from
// PATH, or from Debian's prometheus package unpacked (not installed, so no
// server starts); skipped with a message when neither is to be had.
func checkPromtool(t *testing.T) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		dir := t.TempDir()
		dl := exec.Command("apt-get", "download", "prometheus")
		dl.Dir = dir
		if out, err := dl.CombinedOutput(); err != nil {
			t.Logf("promtool not found and apt-get download prometheus failed (%v: %s): rules not checked by promtool", err, out)
			return
		}
		debs, _ := filepath.Glob(filepath.Join(dir, "prometheus_*.deb"))
		if len(debs) != 1 {
			t.Logf("apt-get download prometheus left %v: rules not checked by promtool", debs)
			return
		}
		if out, err := exec.Command("dpkg-deb", "-x", debs[0], filepath.Join(dir, "root")).CombinedOutput(); err != nil {
			t.Logf("dpkg-deb -x: %v: %s: rules not checked by promtool", err, out)
			return
		}
		promtool = filepath.Join(dir, "root", "usr", "bin", "promtool")
	}
	out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules: %s", out)
	}
}
