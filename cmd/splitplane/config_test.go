package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
)

// A typo in an operator's config file is an error naming the key, wherever
// it is; so is anything the loader would otherwise skip without reading.
func TestLoadYAMLStrict(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		cfg              any
	}{
		{"top-level typo", "asn: 1\nmetrics_listn: 127.0.0.1:9101\n", "field metrics_listn not found", &ce.Config{}},
		{"nested typo", "neighbors:\n  - {address: 192.0.2.2, asn: 2, pasword: x}\n", "field pasword not found", &ce.Config{}},
		{"typo in a policy", "neighbors:\n  - address: 192.0.2.2\n    import: {prefix_list: [{prefix: 10.0.0.0/8, lee: 24}]}\n", "field lee not found", &ce.Config{}},
		{"typo in tls", "ports: [eth0]\ntls: {cert: a, key: b, ca: c, cafile: d}\n", "field cafile not found", &fe.Config{}},
		{"typo in the classifier", "ports: [eth0]\nclassifier: {control_cpu: 0, polic_pps: 5}\n", "field polic_pps not found", &fe.Config{}},
		{"wrong case", "ports: [eth0]\nXDP_MODE: generic\n", "field XDP_MODE not found", &fe.Config{}},
		{"key twice", "asn: 1\nasn: 2\n", `mapping key "asn" already defined`, &ce.Config{}},
		{"duration without a unit", "ports: [eth0]\nheartbeat_interval: 5\n", "into time.Duration", &fe.Config{}},
		{"second document", "asn: 1\n---\nasn: 2\nbogus: 1\n", "line 3: a second YAML document", &ce.Config{}},
		{"empty second document", "ports: [eth0]\n---\n# the end\n", "", &fe.Config{}},
		{"third document", "ports: [eth0]\n---\n---\nxdp_mode: generic\n", "line 4: a second YAML document", &fe.Config{}},
		{"empty file", "", "holds no configuration", &ce.Config{}},
		{"only a comment", "# nothing yet\n", "holds no configuration", &fe.Config{}},
		{"not a mapping", "- a\n- b\n", "cannot unmarshal", &ce.Config{}},
		{"valid", "id: 1\nasn: 65001\nneighbors:\n  - {address: 192.0.2.2, asn: 65002, password: x}\n", "", &ce.Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			err := loadYAML(path, tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("loadYAML: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("loadYAML: %v, want an error with %q", err, tc.want)
			case err != nil && !strings.Contains(err.Error(), path):
				t.Errorf("loadYAML: %v does not name the file", err)
			}
		})
	}
}
