package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAllQuick runs `splitplane bench all --quick --json` end to end, as
// `make bench` runs the full suite: every required figure must be printed,
// positive, with its baseline; the report, the plots and the raw JSON must
// be written; no namespace may be left behind.
func TestAllQuick(t *testing.T) {
	bin := benchBinary(t, "bird", "nsenter", "ip", "ethtool")
	requireFRR(t)
	dir := filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "bench", "all", "--quick", "--json", "--out", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("took %s\n%s", time.Since(start).Round(time.Millisecond), stderr.String())
	if err != nil {
		t.Fatalf("bench all: %v", err)
	}
	noNamespacesOf(t, cmd.Process.Pid)

	var results []Result
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		results = append(results, r)
	}
	req, err := RequiredMetrics(AllOptions{Quick: true, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	checkRequired(t, results, req)
	names := map[string]bool{}
	for _, r := range results {
		names[r.Metric] = true
	}
	for _, n := range []string{MetricPayload1400Mbps, MetricKernelPayload1400Mbps, MetricOverheadP50, MetricOverheadP90, MetricForcesTransfer, MetricAPIBulkRoutesPerSecond} {
		if !names[n] {
			t.Errorf("%s not printed", n)
		}
	}

	md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range req {
		if !strings.Contains(string(md), "`"+r.Metric+"`") {
			t.Errorf("report.md lacks %s", r.Metric)
		}
	}
	if !strings.Contains(string(md), "Skipped: this machine has 2 CPUs") && !strings.Contains(string(md), "| forwarding cores |") {
		t.Error("report.md says nothing about scaling with cores")
	}
	for _, name := range []string{PlotForward, PlotPayloadPPS, PlotPayloadMbps, PlotOverhead, PlotLatency, PlotLookup, PlotProgramming} {
		checkPNG(t, filepath.Join(dir, name))
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Metrics) != len(results) || !rep.Settings.Quick || len(rep.Errors) > 0 {
		t.Errorf("results.json: %d metrics (printed %d), quick %v, errors %v", len(rep.Metrics), len(results), rep.Settings.Quick, rep.Errors)
	}
}

// TestAllScaling forces the scaling section on a machine of two CPUs: a
// figure per core count, splitplane's against the bare redirect's.
func TestAllScaling(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and attaches XDP")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := All(ctx, AllOptions{Quick: true, Only: []string{SectionScaling}, Scaling: true, Binary: "unused", Progress: &progress})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scaling) < 2 {
		t.Fatalf("%d scaling rows, want one per CPU", len(rep.Scaling))
	}
	var req []Required
	for _, row := range rep.Scaling {
		sp, lim := ScalingMetrics(row.Cores)
		req = append(req, Required{sp, lim}, Required{lim, ""})
	}
	checkRequired(t, rep.Metrics, req)
	noNamespacesOf(t, os.Getpid())
}

// benchBinary skips the test unless it runs as root with the programs
// progs, and builds the splitplane binary that runs the CE and the FE.
func benchBinary(t *testing.T, progs ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and attaches XDP")
	}
	for _, prog := range progs {
		if _, err := exec.LookPath(prog); err != nil {
			if prog == "bird" {
				t.Skip("needs BIRD 2 as the sender and the baseline (apt-get install bird2)")
			}
			t.Skipf("needs %s (apt-get install iproute2 util-linux ethtool)", prog)
		}
	}
	// splitplane-lab beside it: splitplane hands bench and peer to it.
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/splitplane/splitplane/cmd/splitplane", "github.com/splitplane/splitplane/cmd/splitplane-lab").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "splitplane")
}

// noNamespacesOf fails the test if a namespace of the benchmarks of process
// pid is still there.
func noNamespacesOf(t *testing.T, pid int) {
	t.Helper()
	for _, prefix := range []string{"spb", "bapi", "cvg"} {
		left, _ := filepath.Glob(fmt.Sprintf("/run/netns/%s-%d-*", prefix, pid))
		if len(left) > 0 {
			t.Errorf("namespaces left behind: %v", left)
		}
	}
}
