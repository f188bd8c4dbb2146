package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/lab"
)

// deployDir is the repository's deploy/ seen from this package.
const deployDir = "../deploy"

// deployPKI makes the certificates that the deploy configurations name,
// with deploy/pki/make-certs.sh as an operator would (ce.crt for the names
// the examples dial, fe.crt, ca.crt), or with forces.WritePKI where
// openssl is missing. It returns the directory.
func deployPKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Logf("no openssl (%v): certificates from forces.WritePKI instead of deploy/pki/make-certs.sh", err)
		if _, err := forces.WritePKI(dir, time.Hour, "ce", "fe"); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	script := filepath.Join(deployDir, "pki", "make-certs.sh")
	for _, c := range [][]string{
		{"ce", "DNS:ce.splitplane,DNS:splitplane-ce.splitplane.svc.cluster.local,IP:127.0.0.1"},
		{"fe", "DNS:edge-1.fe.splitplane"},
	} {
		if out, err := exec.Command("sh", script, dir, c[0], c[1], "2").CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", script, c[0], err, out)
		}
	}
	return dir
}

// checkConfig runs `splitplane DAEMON --check` on a configuration, with
// every path under one of the prefixes moved into pki: the real loader,
// strict about keys, and the real validation.
func checkConfig(t *testing.T, bin, daemon, name, body, pki string, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		body = strings.ReplaceAll(body, p, pki+"/")
	}
	path := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := splitplane(t, bin, daemon, "--check", "--config", path)
	if err != nil || !strings.Contains(out, "config ok") {
		t.Errorf("%s --check %s: %v\n%s", daemon, name, err, out)
	}
}

// daemonOf tells which daemon a configuration file is for, by its name:
// ce.yaml, ce-*.yaml, fe.yaml, fe-*.yaml.
func daemonOf(name string) string {
	base := filepath.Base(name)
	for _, d := range []string{"ce", "fe"} {
		if base == d+".yaml" || strings.HasPrefix(base, d+"-") {
			return d
		}
	}
	return ""
}

// decodeYAML decodes a YAML document loosely (for cross-checks; the
// binary's --check is the strict reading).
func decodeYAML(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := yaml.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}

// The example configurations in deploy/examples are valid for the binary
// (--check: every key exists, every value passes validation), with the
// certificates they name made by deploy/pki/make-certs.sh; the CE's and
// the FE's agree with each other.
func TestDeployExamples(t *testing.T) {
	bin := buildBinary(t)
	pki := deployPKI(t)
	files, _ := filepath.Glob(filepath.Join(deployDir, "examples", "*.yaml"))
	if len(files) < 2 {
		t.Fatalf("examples: %v", files)
	}
	var ceCfg ce.Config
	var feCfg fe.Config
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := daemonOf(f)
		switch d {
		case "ce":
			decodeYAML(t, b, &ceCfg)
		case "fe":
			decodeYAML(t, b, &feCfg)
		default:
			t.Errorf("%s: name it ce*.yaml or fe*.yaml, so it is checked for its daemon", f)
			continue
		}
		checkConfig(t, bin, d, f, string(b), pki, "/etc/splitplane/")
	}

	// The FE associates to the CE, over TLS that the certificates satisfy.
	if feCfg.CEAddress != ceCfg.ForCESListen {
		t.Errorf("fe ce_address %q, ce forces_listen %q", feCfg.CEAddress, ceCfg.ForCESListen)
	}
	if (feCfg.TLS == nil) != (ceCfg.TLS == nil) {
		t.Error("TLS on one side of ForCES only")
	}
	if feCfg.TLS != nil {
		handshake(t, pki, feCfg.TLSServerName)
	}
	// GTSM: the CE's ttl_security neighbours are the FE's GTSM peers, and
	// the classifier steers to the CE's control core.
	var gtsm []string
	for _, n := range ceCfg.Neighbors {
		if n.TTLSecurity {
			gtsm = append(gtsm, n.Address)
		}
	}
	if feCfg.Classifier == nil || !slices.Equal(gtsm, feCfg.Classifier.GTSMPeers) {
		t.Errorf("CE neighbours with ttl_security %v, FE gtsm_peers %+v", gtsm, feCfg.Classifier)
	} else if !slices.Equal(ceCfg.ControlCores, []int{feCfg.Classifier.ControlCPU}) {
		t.Errorf("CE control_cores %v, FE classifier control_cpu %d", ceCfg.ControlCores, feCfg.Classifier.ControlCPU)
	}
}

// handshake checks that certificates in pki (ce.crt, fe.crt, ca.crt) make
// a ForCES TLS session: the FE verifies the CE for serverName, the CE the
// FE.
func handshake(t *testing.T, pki, serverName string) {
	t.Helper()
	tc := func(name string) forces.TLSConfig {
		return forces.TLSConfig{Cert: filepath.Join(pki, name+".crt"), Key: filepath.Join(pki, name+".key"), CA: filepath.Join(pki, "ca.crt")}
	}
	srv, err := tc("ce").ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if serverName == "" {
		serverName = "127.0.0.1"
	}
	cli, err := tc("fe").ClientTLS(serverName)
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() { errc <- tls.Server(a, srv).Handshake() }()
	if err := tls.Client(b, cli).Handshake(); err != nil {
		t.Errorf("TLS handshake FE -> CE (%s): %v", serverName, err)
		return
	}
	if err := <-errc; err != nil {
		t.Errorf("TLS handshake, the CE's side: %v", err)
	}
}

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

// The Kubernetes manifests, as far as splitplane uses them. Decoding is
// strict: a field these types do not have (a typo, or one at the wrong
// level) fails the test. The field names are Kubernetes' own (k8s.io/api's
// JSON names).
type (
	k8sMeta struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	}
	k8sHead struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
	}
	k8sNamespace struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
	}
	k8sConfigMap struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   k8sMeta           `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
	}
	k8sService struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       struct {
			ClusterIP string            `yaml:"clusterIP"`
			Selector  map[string]string `yaml:"selector"`
			Ports     []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort int    `yaml:"targetPort"`
				Protocol   string `yaml:"protocol"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sWorkload struct { // Deployment or DaemonSet
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       struct {
			Replicas *int `yaml:"replicas"` // Deployment
			Strategy *struct {
				Type string `yaml:"type"`
			} `yaml:"strategy"` // Deployment
			UpdateStrategy *struct {
				Type          string `yaml:"type"`
				RollingUpdate *struct {
					MaxUnavailable int `yaml:"maxUnavailable"`
				} `yaml:"rollingUpdate"`
			} `yaml:"updateStrategy"` // DaemonSet
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata k8sMeta `yaml:"metadata"`
				Spec     k8sPod  `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	k8sPod struct {
		HostNetwork                   bool              `yaml:"hostNetwork"`
		DNSPolicy                     string            `yaml:"dnsPolicy"`
		NodeSelector                  map[string]string `yaml:"nodeSelector"`
		TerminationGracePeriodSeconds int               `yaml:"terminationGracePeriodSeconds"`
		Containers                    []k8sContainer    `yaml:"containers"`
		Volumes                       []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name        string `yaml:"name"`
				DefaultMode int    `yaml:"defaultMode"`
			} `yaml:"configMap"`
			Secret *struct {
				SecretName  string `yaml:"secretName"`
				DefaultMode int    `yaml:"defaultMode"`
			} `yaml:"secret"`
			EmptyDir *struct {
				Medium    string `yaml:"medium"`
				SizeLimit string `yaml:"sizeLimit"`
			} `yaml:"emptyDir"`
		} `yaml:"volumes"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port int    `yaml:"port"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int `yaml:"initialDelaySeconds"`
		PeriodSeconds       int `yaml:"periodSeconds"`
		FailureThreshold    int `yaml:"failureThreshold"`
	}
	k8sContainer struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Env   []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
			Protocol      string `yaml:"protocol"`
		} `yaml:"ports"`
		SecurityContext struct {
			RunAsUser                *int  `yaml:"runAsUser"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			Privileged               bool  `yaml:"privileged"`
			Capabilities             struct {
				Add  []string `yaml:"add"`
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	k8sKustomization struct {
		APIVersion      string   `yaml:"apiVersion"`
		Kind            string   `yaml:"kind"`
		Namespace       string   `yaml:"namespace"`
		Resources       []string `yaml:"resources"`
		SecretGenerator []struct {
			Name  string   `yaml:"name"`
			Type  string   `yaml:"type"`
			Files []string `yaml:"files"`
		} `yaml:"secretGenerator"`
	}
)

// k8sManifests is every object of deploy/kubernetes, decoded strictly.
type k8sManifests struct {
	files         []string
	namespaces    []k8sNamespace
	configMaps    map[string]k8sConfigMap
	services      map[string]k8sService
	workloads     map[string]k8sWorkload // by the daemon they run: ce, fe
	kustomization *k8sKustomization
}

func loadK8s(t *testing.T) *k8sManifests {
	t.Helper()
	m := &k8sManifests{configMaps: map[string]k8sConfigMap{}, services: map[string]k8sService{}, workloads: map[string]k8sWorkload{}}
	files, _ := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	for _, f := range files {
		m.files = append(m.files, filepath.Base(f))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var doc yaml.Node
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			var head k8sHead
			if err := doc.Decode(&head); err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			strict := func(v any) {
				t.Helper()
				// yaml.Node.Decode has no strict mode: re-encode the
				// document and decode it with KnownFields.
				raw, err := yaml.Marshal(&doc)
				if err != nil {
					t.Fatal(err)
				}
				d := yaml.NewDecoder(bytes.NewReader(raw))
				d.KnownFields(true)
				if err := d.Decode(v); err != nil {
					t.Fatalf("%s: %s (document %d): %v", f, head.Kind, i, err)
				}
			}
			want := map[string]string{"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "DaemonSet": "apps/v1",
				"Kustomization": "kustomize.config.k8s.io/v1beta1"}[head.Kind]
			if want == "" || head.APIVersion != want {
				t.Fatalf("%s: document %d: kind %q, apiVersion %q: not one of the kinds splitplane ships", f, i, head.Kind, head.APIVersion)
			}
			switch head.Kind {
			case "Namespace":
				var o k8sNamespace
				strict(&o)
				m.namespaces = append(m.namespaces, o)
			case "ConfigMap":
				var o k8sConfigMap
				strict(&o)
				m.configMaps[o.Metadata.Name] = o
			case "Service":
				var o k8sService
				strict(&o)
				m.services[o.Metadata.Name] = o
			case "Deployment", "DaemonSet":
				var o k8sWorkload
				strict(&o)
				if c := o.Spec.Template.Spec.Containers; len(c) != 1 || len(c[0].Args) == 0 {
					t.Fatalf("%s: %s %s: want one container running splitplane DAEMON", f, head.Kind, o.Metadata.Name)
				}
				m.workloads[o.Spec.Template.Spec.Containers[0].Args[0]] = o
			case "Kustomization":
				var o k8sKustomization
				strict(&o)
				m.kustomization = &o
			}
		}
	}
	return m
}

// k8sWorkloadCaps returns the capabilities the manifests give a daemon.
func k8sWorkloadCaps(t *testing.T, daemon string) []string {
	t.Helper()
	w, ok := loadK8s(t).workloads[daemon]
	if !ok {
		t.Fatalf("no workload runs splitplane %s", daemon)
	}
	c := slices.Clone(w.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add)
	slices.Sort(c)
	return c
}

// The Kubernetes manifests: every document parses strictly as a kind
// splitplane ships; the FEs run as a DaemonSet with host networking and
// the CE as a single Deployment; every splitplane configuration in a
// ConfigMap loads with the real loader (--check); every file a
// configuration names is mounted from the Secret that holds it; the FEs
// dial the CE through a headless Service on its ForCES port.
func TestDeployKubernetes(t *testing.T) {
	m := loadK8s(t)
	bin := buildBinary(t)
	pki := deployPKI(t)

	// Kustomize applies every manifest and makes the Secrets.
	k := m.kustomization
	if k == nil {
		t.Fatal("no kustomization.yaml")
	}
	for _, f := range m.files {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml: %s is not among its resources", f)
		}
	}
	secrets := map[string][]string{} // name -> file names
	for _, g := range k.SecretGenerator {
		for _, f := range g.Files {
			secrets[g.Name] = append(secrets[g.Name], path.Base(f))
		}
	}
	if len(m.namespaces) != 1 || k.Namespace != m.namespaces[0].Metadata.Name {
		t.Fatalf("namespaces %+v, kustomization namespace %q", m.namespaces, k.Namespace)
	}
	ns := k.Namespace

	var ceCfg ce.Config
	var feAddrs []string
	for _, daemon := range []string{"ce", "fe"} {
		w, ok := m.workloads[daemon]
		if !ok {
			t.Fatalf("no workload runs splitplane %s", daemon)
		}
		name := w.Metadata.Name
		if w.Metadata.Namespace != ns {
			t.Errorf("%s: namespace %q, want %q", name, w.Metadata.Namespace, ns)
		}
		wantKind := map[string]string{"ce": "Deployment", "fe": "DaemonSet"}[daemon]
		if w.Kind != wantKind {
			t.Errorf("%s: a %s, want a %s", name, w.Kind, wantKind)
		}
		if daemon == "ce" && (w.Spec.Replicas == nil || *w.Spec.Replicas != 1 || w.Spec.Strategy == nil || w.Spec.Strategy.Type != "Recreate") {
			t.Errorf("%s: want exactly one replica, replaced with Recreate: two CEs would both program the FEs", name)
		}
		for k, v := range w.Spec.Selector.MatchLabels {
			if w.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("%s: the selector %s=%s does not select its own pods", name, k, v)
			}
		}
		pod := w.Spec.Template.Spec
		if !pod.HostNetwork || pod.DNSPolicy != "ClusterFirstWithHostNet" {
			t.Errorf("%s: hostNetwork %v, dnsPolicy %q: want the host's network, and cluster DNS from it", name, pod.HostNetwork, pod.DNSPolicy)
		}
		c := pod.Containers[0]
		sc := c.SecurityContext
		if sc.Privileged || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: securityContext %+v: want capabilities dropped but the ones added, no escalation", name, sc)
		}
		if len(c.Args) != 3 || c.Args[1] != "--config" {
			t.Fatalf("%s: args %q, want [%s --config FILE]", name, c.Args, daemon)
		}
		// The volumes, by mount path.
		type source struct{ configMap, secret string }
		mounts := map[string]source{}
		for _, vm := range c.VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name != vm.Name {
					continue
				}
				switch {
				case v.ConfigMap != nil:
					mounts[vm.MountPath] = source{configMap: v.ConfigMap.Name}
				case v.Secret != nil:
					mounts[vm.MountPath] = source{secret: v.Secret.SecretName}
					if _, ok := secrets[v.Secret.SecretName]; !ok {
						t.Errorf("%s: Secret %s: kustomization.yaml does not make it", name, v.Secret.SecretName)
					}
				case v.EmptyDir != nil:
					mounts[vm.MountPath] = source{}
				}
			}
			if _, ok := mounts[vm.MountPath]; !ok {
				t.Errorf("%s: volumeMount %s: no such volume", name, vm.Name)
			}
		}
		// The configuration: one file, or one per node (fe-$(NODE_NAME).yaml).
		cfgPath := c.Args[2]
		src, ok := mounts[path.Dir(cfgPath)]
		cm, cmOK := m.configMaps[src.configMap]
		if !ok || !cmOK {
			t.Fatalf("%s: --config %s: not in a mounted ConfigMap", name, cfgPath)
		}
		pattern := path.Base(cfgPath)
		if strings.Contains(pattern, "$(NODE_NAME)") {
			var fromNode bool
			for _, e := range c.Env {
				fromNode = fromNode || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
			}
			if !fromNode {
				t.Errorf("%s: --config %s without NODE_NAME from spec.nodeName", name, cfgPath)
			}
			pattern = strings.ReplaceAll(pattern, "$(NODE_NAME)", "*")
		}
		var keys []string
		for key := range cm.Data {
			if ok, _ := path.Match(pattern, key); ok {
				keys = append(keys, key)
			} else if strings.HasSuffix(key, ".yaml") {
				t.Errorf("ConfigMap %s: %s is no daemon's configuration (%s reads %s)", cm.Metadata.Name, key, name, pattern)
			}
		}
		slices.Sort(keys)
		if len(keys) == 0 {
			t.Fatalf("%s: ConfigMap %s has no %s", name, cm.Metadata.Name, pattern)
		}
		ids := map[uint32]string{}
		for _, key := range keys {
			body := cm.Data[key]
			// Every file the configuration names is in a mounted Secret.
			var prefixes []string
			var files []string
			var metricsListen string
			switch daemon {
			case "ce":
				decodeYAML(t, []byte(body), &ceCfg)
				for _, tc := range []*forces.TLSConfig{ceCfg.TLS, ceCfg.APITLS} {
					if tc != nil {
						files = append(files, tc.Cert, tc.Key, tc.CA)
					}
				}
				// MD5 keys too: the check reads them from the test's pki.
				for _, n := range ceCfg.Neighbors {
					if n.PasswordFile != "" {
						files = append(files, n.PasswordFile)
						if err := os.WriteFile(filepath.Join(pki, path.Base(n.PasswordFile)), []byte("test-key\n"), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
				metricsListen = ceCfg.MetricsListen
				ids[ceCfg.ID] = key
			case "fe":
				var feCfg fe.Config
				decodeYAML(t, []byte(body), &feCfg)
				if feCfg.TLS == nil {
					t.Errorf("%s: ForCES without TLS across hosts", key)
				} else {
					files = append(files, feCfg.TLS.Cert, feCfg.TLS.Key, feCfg.TLS.CA)
				}
				feAddrs = append(feAddrs, feCfg.CEAddress)
				metricsListen = feCfg.MetricsListen
				if other, dup := ids[feCfg.ID]; dup {
					t.Errorf("%s and %s: the same FE id %d", key, other, feCfg.ID)
				}
				ids[feCfg.ID] = key
			}
			if len(files) == 0 {
				t.Errorf("%s: ForCES without TLS across hosts", key)
			}
			for _, f := range files {
				s := mounts[path.Dir(f)]
				if s.secret == "" || !slices.Contains(secrets[s.secret], path.Base(f)) {
					t.Errorf("%s: %s is not a file of a mounted Secret", key, f)
				}
				if p := path.Dir(f) + "/"; !slices.Contains(prefixes, p) {
					prefixes = append(prefixes, p)
				}
			}
			// The probes ask the daemon's own metrics server.
			_, port, _ := net.SplitHostPort(metricsListen)
			for _, p := range []*k8sProbe{c.ReadinessProbe, c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || fmt.Sprint(p.HTTPGet.Port) != port || p.HTTPGet.Path != "/metrics" {
					t.Errorf("%s: probe %+v, want GET /metrics on metrics_listen's port %s", key, p, port)
				}
			}
			checkConfig(t, bin, daemon, key, body, pki, prefixes...)
		}
	}

	// The FEs reach the CE through a headless Service (no NAT: the FE's
	// classifier must see the CE's packets as the ones of its socket).
	_, cePort, _ := net.SplitHostPort(ceCfg.ForCESListen)
	ceW := m.workloads["ce"]
	var svcOK bool
	for _, s := range m.services {
		selects := len(s.Spec.Selector) > 0
		for k, v := range s.Spec.Selector {
			selects = selects && ceW.Spec.Template.Metadata.Labels[k] == v
		}
		if !selects {
			continue
		}
		if s.Spec.ClusterIP != "None" {
			t.Errorf("Service %s: clusterIP %q, want None (headless)", s.Metadata.Name, s.Spec.ClusterIP)
		}
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprint(p.Port))
		}
		low, _ := ce.LowPriorityAddress(ceCfg.ForCESListen)
		_, lowPort, _ := net.SplitHostPort(low)
		if !slices.Contains(ports, cePort) || !slices.Contains(ports, lowPort) {
			t.Errorf("Service %s: ports %v, want ForCES %s and %s", s.Metadata.Name, ports, cePort, lowPort)
		}
		for _, a := range feAddrs {
			if want := net.JoinHostPort(s.Metadata.Name+"."+ns+".svc.cluster.local", cePort); a != want {
				t.Errorf("an FE dials %s, want %s", a, want)
			}
		}
		svcOK = true
	}
	if !svcOK {
		t.Error("no Service selects the CE's pods")
	}
}

// The container recipe builds the static binary: its build command, run
// here, makes an executable with no dynamic loader, and the image runs
// what it copied.
func TestDeployContainerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build, from, entry string
	var stages int
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			stages++
		case strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build"):
			build = strings.TrimPrefix(line, "RUN ")
		case strings.HasPrefix(line, "COPY --from="):
			from = line
		case strings.HasPrefix(line, "ENTRYPOINT "):
			entry = line
		}
	}
	if stages != 2 || build == "" || from == "" || entry == "" {
		t.Fatalf("Containerfile: %d stages, build %q, copy %q, entrypoint %q: want a build stage and a runtime stage", stages, build, from, entry)
	}
	f := strings.Fields(from) // COPY --from=build SRC DST
	if len(f) != 4 || !strings.Contains(build, "-o "+f[2]+" ") || !strings.Contains(entry, `"`+f[3]+`"`) {
		t.Fatalf("Containerfile: builds %q, copies %q, runs %q", build, from, entry)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.HasSuffix(build, " ./cmd/splitplane") {
		t.Fatalf("Containerfile: %q: want CGO_ENABLED=0 go build ... ./cmd/splitplane", build)
	}
	if testing.Short() {
		t.Skip("builds the binary as the Containerfile does: skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "splitplane")
	cmd := exec.Command("sh", "-c", strings.Replace(build, "-o "+f[2]+" ", "-o "+out+" ", 1))
	cmd.Dir = ".."
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, o)
	}
	e, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s: not static (program header %v)", out, p.Type)
		}
	}
	if o, err := exec.Command(out, "--help").CombinedOutput(); err != nil || !strings.Contains(string(o), "splitplane") {
		t.Fatalf("the image's binary: %v\n%s", err, o)
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
