package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/lab"
)

// unit is a parsed systemd unit file: section -> key -> values, in order.
type unit map[string]map[string][]string

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func (u unit) words(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func parseUnit(t *testing.T, file string) unit {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: %q: want KEY=VALUE inside a section, on one line", file, n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

// caps lists a unit's capability names without CAP_, as Kubernetes spells them.
func caps(names []string) []string {
	var out []string
	for _, c := range names {
		out = append(out, strings.TrimPrefix(c, "CAP_"))
	}
	slices.Sort(out)
	return out
}

// The systemd units: what they run matches the examples' files and
// settings, the CE is pinned to its control core, both restart, the FE
// holds the capabilities the Kubernetes manifest gives it, and systemd
// itself accepts the files (systemd-analyze verify, where installed).
func TestDeploySystemdUnits(t *testing.T) {
	dir := filepath.Join(deployDir, "systemd")
	ceU := parseUnit(t, filepath.Join(dir, "splitplane-ce.service"))
	feU := parseUnit(t, filepath.Join(dir, "splitplane-fe.service"))
	target := parseUnit(t, filepath.Join(dir, "splitplane.target"))

	var ceCfg ce.Config
	var feCfg fe.Config
	for name, v := range map[string]any{"ce.yaml": &ceCfg, "fe.yaml": &feCfg} {
		b, err := os.ReadFile(filepath.Join(deployDir, "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		decodeYAML(t, b, v)
	}
	for _, c := range []struct {
		daemon string
		u      unit
		cpus   []int
		status string
	}{
		{"ce", ceU, ceCfg.ControlCores, ceCfg.StatusSocket},
		{"fe", feU, []int{feCfg.Classifier.ControlCPU}, feCfg.StatusSocket},
	} {
		want := fmt.Sprintf("/usr/local/bin/splitplane %s --config /etc/splitplane/%s.yaml", c.daemon, c.daemon)
		if got := c.u.get("Service", "ExecStart"); got != want {
			t.Errorf("%s: ExecStart %q, want %q (the example's file, installed)", c.daemon, got, want)
		}
		if got := c.u.get("Service", "Restart"); got != "always" {
			t.Errorf("%s: Restart=%s, want always", c.daemon, got)
		}
		var cpus []string
		for _, cpu := range c.cpus {
			cpus = append(cpus, fmt.Sprint(cpu))
		}
		if got := c.u.get("Service", "CPUAffinity"); got != strings.Join(cpus, " ") {
			t.Errorf("%s: CPUAffinity=%s, want the control core(s) %v", c.daemon, got, c.cpus)
		}
		if rd := c.u.get("Service", "RuntimeDirectory"); "/run/"+rd != filepath.Dir(c.status) || c.u.get("Service", "RuntimeDirectoryPreserve") != "yes" {
			t.Errorf("%s: RuntimeDirectory=%s (preserved: %s), status_socket %s", c.daemon, rd, c.u.get("Service", "RuntimeDirectoryPreserve"), c.status)
		}
		if !slices.Contains(c.u.words("Unit", "PartOf"), "splitplane.target") ||
			!slices.Contains(target.words("Unit", "Wants"), "splitplane-"+c.daemon+".service") {
			t.Errorf("%s: not part of splitplane.target, the appliance", c.daemon)
		}
		// Either may start first: the FE reconnects.
		for _, k := range []string{"After", "Requires", "BindsTo"} {
			for _, w := range c.u.words("Unit", k) {
				if strings.HasPrefix(w, "splitplane-") {
					t.Errorf("%s: %s=%s: the CE and the FE must not depend on each other", c.daemon, k, w)
				}
			}
		}
	}
	// The CE: a user of its own, with only port 179 and SOCK_DESTROY.
	if ceU.get("Service", "User") == "" || ceU.get("Service", "User") == "root" {
		t.Errorf("ce: User=%q, want an unprivileged user", ceU.get("Service", "User"))
	}
	ceCaps := caps(ceU.words("Service", "CapabilityBoundingSet"))
	if !slices.Equal(ceCaps, []string{"NET_ADMIN", "NET_BIND_SERVICE"}) || !slices.Equal(caps(ceU.words("Service", "AmbientCapabilities")), ceCaps) {
		t.Errorf("ce: capabilities %v, ambient %v", ceCaps, ceU.words("Service", "AmbientCapabilities"))
	}
	// The FE: the same capabilities as its DaemonSet.
	feCaps := caps(feU.words("Service", "CapabilityBoundingSet"))
	if k8s := k8sWorkloadCaps(t, "fe"); !slices.Equal(feCaps, k8s) {
		t.Errorf("fe: systemd capabilities %v, Kubernetes %v", feCaps, k8s)
	}
	if ceK8s := k8sWorkloadCaps(t, "ce"); !slices.Equal(ceCaps, ceK8s) {
		t.Errorf("ce: systemd capabilities %v, Kubernetes %v", ceCaps, ceK8s)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed (%v): the units were checked by this test only", err)
		return
	}
	// systemd checks that ExecStart's program exists: point the copies at
	// a file that does.
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "splitplane")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "splitplane*"))
	var units []string
	for _, f := range files {
		if strings.HasSuffix(f, ".conf") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(tmp, filepath.Base(f))
		if err := os.WriteFile(dst, bytes.ReplaceAll(b, []byte("/usr/local/bin/splitplane "), []byte(fake+" ")), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, dst)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The daemons run with only the capabilities their systemd units give
// them: the lab's CE and FE started under the units' bounding sets (as
// root, as the FE's unit runs it; the CE's runs as its own user with
// these as ambient capabilities) and the FE forwards through XDP.
func TestDeployUnitCapabilities(t *testing.T) {
	requireLab(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("needs setpriv (util-linux): %v", err)
	}
	bin := buildBinary(t)
	dir := filepath.Join(deployDir, "systemd")
	bounding := func(daemon string) string {
		var out []string
		for _, c := range caps(parseUnit(t, filepath.Join(dir, "splitplane-"+daemon+".service")).words("Service", "CapabilityBoundingSet")) {
			out = append(out, "+"+strings.ToLower(c))
		}
		return "-all," + strings.Join(out, ",")
	}
	// The lab runs Binary for every daemon: a wrapper, named like the
	// binary (the lab finds its processes by name), that drops the
	// capabilities of ce and fe.
	wrapper := filepath.Join(t.TempDir(), "splitplane")
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
ce) exec %[1]s --bounding-set=%[2]s --inh-caps=-all --no-new-privs -- %[4]s "$@" ;;
fe) exec %[1]s --bounding-set=%[3]s --inh-caps=-all --no-new-privs -- %[4]s "$@" ;;
*) exec %[4]s "$@" ;;
esac
`, setpriv, bounding("ce"), bounding("fe"), bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := lab.Options{Name: "spcap", Dir: filepath.Join(t.TempDir(), "lab"), Binary: wrapper, Routes: 200}
	t.Cleanup(func() {
		if err := lab.Down(o); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	logsOnFailure(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lab.Up(ctx, o); err != nil {
		logs, _ := os.ReadFile(filepath.Join(o.Dir, "fe.log"))
		t.Fatalf("lab up with the units' capabilities: %v\nfe.log:\n%s", err, logs)
	}
	for _, d := range []string{"ce", "fe"} {
		pid := daemonPid(t, o.Dir, d)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "CapBnd:\t"+capMask(t, bounding(d))) {
			t.Fatalf("%s (pid %d) does not run with the unit's capabilities:\n%s", d, pid, status)
		}
	}
	eventually(t, 30*time.Second, "ping A -> B", func() error { return pingB(o, 1) })
	kernelBefore := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
	if err := pingB(o, 5); err != nil {
		t.Fatal(err)
	}
	if k := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the kernel forwarded %d packets: the FE's XDP path should", k)
	}
	for _, d := range []string{"ce", "fe"} {
		logs, _ := os.ReadFile(filepath.Join(o.Dir, d+".log"))
		for _, bad := range []string{"operation not permitted", "permission denied"} {
			if strings.Contains(strings.ToLower(string(logs)), bad) {
				t.Errorf("%s.log: %q with the unit's capabilities:\n%s", d, bad, logs)
			}
		}
	}
}

// daemonPid reads the pid of one of the lab's daemons from its state file.
func daemonPid(t *testing.T, dir, name string) int {
	t.Helper()
	var s struct {
		Processes map[string]int `json:"processes"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	decodeYAML(t, b, &s) // JSON is YAML
	if s.Processes[name] == 0 {
		t.Fatalf("lab state %s: no %s", b, name)
	}
	return s.Processes[name]
}

// capMask is the /proc/PID/status mask of a setpriv capability list.
func capMask(t *testing.T, list string) string {
	t.Helper()
	out, err := exec.Command("setpriv", "--bounding-set="+list, "--", "grep", "CapBnd", "/proc/self/status").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "CapBnd:"))
}
