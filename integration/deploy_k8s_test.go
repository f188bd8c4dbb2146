package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/forces"
)

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
