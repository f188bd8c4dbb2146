package integration_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad configuration and bad arguments are refused at start with an error that
// names the field and the value, and exit codes scripts can rely on: 1 for a
// bad configuration or failure, 2 for a bad command line.
func TestCLIBadInput(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"good ce config", []string{"ce", "--check", "--config", write("ok.yaml", "asn: 65001\nrouter_id: 192.0.2.1\n")}, 0, []string{"config ok"}},
		{"unknown field", []string{"ce", "--check", "--config", write("unknown.yaml", "asn: 65001\nrouter_id: 192.0.2.1\nneighbours: []\n")}, 1, []string{"neighbours", "not found"}},
		{"bad router id", []string{"ce", "--check", "--config", write("rid.yaml", "asn: 65001\nrouter_id: 300.1.1.1\n")}, 1, []string{"router_id", "300.1.1.1"}},
		{"bad neighbour", []string{"ce", "--check", "--config", write("nb.yaml", "asn: 65001\nrouter_id: 192.0.2.1\nneighbors:\n  - {address: 10.0.0.1}\n")}, 1, []string{"neighbors[0].asn"}},
		{"not yaml", []string{"ce", "--check", "--config", write("junk.yaml", "asn: [\n")}, 1, []string{"junk.yaml"}},
		{"no such control core", []string{"ce", "--check", "--config", write("core.yaml", "asn: 65001\nrouter_id: 192.0.2.1\ncontrol_cores: [4096]\n")}, 1, []string{"control_cores", "4096"}},
		{"bad static next hop", []string{"ce", "--check", "--config", write("st.yaml", "asn: 65001\nrouter_id: 192.0.2.1\nstatic_routes:\n  - {prefix: 10.0.0.0/8, next_hops: [2001:db8::1]}\n")}, 1, []string{"static_routes[0].next_hops[0]", "2001:db8::1"}},
		{"static without next hop", []string{"ce", "--check", "--config", write("st0.yaml", "asn: 65001\nrouter_id: 192.0.2.1\nstatic_routes:\n  - {prefix: 10.0.0.0/8}\n")}, 1, []string{"static_routes[0].next_hops"}},
		{"good statics", []string{"ce", "--check", "--config", write("st1.yaml", "asn: 65001\nrouter_id: 192.0.2.1\ncontrol_cores: [0]\nstatic_routes:\n  - {prefix: 0.0.0.0/0, next_hops: [10.0.0.1, 10.0.0.2]}\n  - {prefix: 10.0.0.0/24, connected: true}\n")}, 0, []string{"config ok"}},
		{"missing file", []string{"ce", "--check", "--config", filepath.Join(dir, "nope.yaml")}, 1, []string{"nope.yaml", "no such file"}},
		{"fe bad mode", []string{"fe", "--check", "--config", write("fe.yaml", "ports: [eth0]\nxdp_mode: turbo\n")}, 1, []string{"xdp_mode", "turbo"}},
		{"fe no ports", []string{"fe", "--check", "--config", write("fe0.yaml", "id: 2\n")}, 1, []string{"ports"}},
		{"unknown flag", []string{"ce", "--bogus"}, 2, []string{"unknown flag", "--bogus"}},
		{"unknown subcommand", []string{"lab", "nope"}, 2, []string{"unknown command", "nope"}},
		{"typo after fe", []string{"fe", "lst"}, 2, []string{"unknown command", "lst"}},
		{"fe unknown interface", []string{"fe", "--config", write("fe1.yaml", "ports: [nosuchif0]\nce_address: 127.0.0.1:1\n")}, 1, []string{`ports[0] "nosuchif0"`, "no such interface"}},
		{"peer bad next hop", []string{"peer", "--router-id", "192.0.2.2", "--neighbor", "192.0.2.1", "--next-hop", "x"}, 2, []string{"--next-hop", `"x"`}},
		{"lab status of no lab", []string{"lab", "status", "--name", "nolab", "--dir", filepath.Join(dir, "nolab")}, 1, []string{"nolab", "is it up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
		})
	}
}

// A daemon whose address is taken refuses to start, naming the setting and
// the address, with exit code 1.
func TestCLIAddressInUse(t *testing.T) {
	bin := buildBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	dir := t.TempDir()
	for _, tc := range []struct{ name, conf, want string }{
		{"forces_listen", "forces_listen: " + taken + "\n", "forces_listen " + taken},
		{"metrics_listen", "forces_listen: 127.0.0.1:0\nforces_listen_low: 127.0.0.1:0\nmetrics_listen: " + taken + "\n", "metrics_listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			conf := "asn: 65001\nrouter_id: 192.0.2.1\nbgp_listen_port: -1\napi_listen: \"off\"\n" + tc.conf
			if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "ce", "--config", path).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "address already in use") {
				t.Fatalf("exit %v, output:\n%s", err, out)
			}
		})
	}
}
