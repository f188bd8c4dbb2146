package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/logtest"
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
	_, port, _ := net.SplitHostPort(taken)
	dir := t.TempDir()
	for _, tc := range []struct{ name, conf, want string }{
		{"forces_listen", "forces_listen: " + taken + "\n", "forces_listen " + taken},
		{"metrics_listen", "forces_listen: 127.0.0.1:0\nforces_listen_low: 127.0.0.1:0\nmetrics_listen: " + taken + "\n", "metrics_listen"},
		{"bgp_listen_port", "forces_listen: 127.0.0.1:0\nbgp_listen_port: " + port + "\n", "listen port " + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			conf := "asn: 65001\nrouter_id: 192.0.2.1\napi_listen: \"off\"\n" + tc.conf
			if !strings.Contains(conf, "bgp_listen_port") {
				conf += "bgp_listen_port: -1\n"
			}
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

// testNetns makes a network namespace with lo up and a veth pair (pv0, pv1,
// both up) for daemons started by a test, and deletes it when the test
// ends.
func testNetns(t *testing.T, name string) string {
	t.Helper()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	for _, c := range [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", "pv0", "type", "veth", "peer", "name", "pv1"},
		{"-n", name, "link", "set", "pv0", "up"},
		{"-n", name, "link", "set", "pv1", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", c, err, out)
		}
	}
	return name
}

// proc is a daemon a test started.
type proc struct {
	cmd  *exec.Cmd
	out  logtest.Buffer
	done chan struct{} // closed when it has exited
}

// startDaemon starts a command and, when the test ends, stops it (SIGTERM,
// then SIGKILL) if it still runs.
func startDaemon(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	return p
}

// running reports whether the daemon has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop stops the daemon with SIGTERM (SIGKILL after 10s) and returns its
// exit code.
func (p *proc) stop() int {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.cmd.ProcessState.ExitCode()
}

// The daemons run as an unprivileged user (nobody, no capabilities) stop at
// once with an error that names every capability they lack and what it is
// for (not an EPERM from deep inside), exit code 1; given exactly the
// capabilities named, they start.
func TestCLIMissingPrivileges(t *testing.T) {
	requireLab(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("needs setpriv (util-linux): %v", err)
	}
	// A directory nobody can read, with the binary, the configs and the
	// sockets.
	dir, err := os.MkdirTemp("", "splitplane-priv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "splitplane")
	if b, err := os.ReadFile(buildBinary(t)); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ns := testNetns(t, fmt.Sprintf("sppriv%d", os.Getpid()%10000))
	ceConf := write("ce.yaml", "asn: 65001\nrouter_id: 192.0.2.1\nforces_listen: 127.0.0.1:0\napi_listen: \"off\"\nstatus_socket: "+filepath.Join(dir, "ce.sock")+"\n")
	feConf := write("fe.yaml", "ports: [pv0]\nce_address: 127.0.0.1:1\nstatus_socket: "+filepath.Join(dir, "fe.sock")+"\n")
	asNobody := func(caps string, args ...string) []string {
		a := []string{"--net=/run/netns/" + ns, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
		if caps != "" {
			a = append(a, "--inh-caps="+caps, "--ambient-caps="+caps)
		}
		return append(append(a, bin), args...)
	}

	for _, tc := range []struct {
		name, caps string
		args       []string
		want       []string
	}{
		{"ce", "", []string{"ce", "--config", ceConf}, []string{"ce: missing privileges", "CAP_NET_BIND_SERVICE", "bgp_listen_port 179"}},
		{"fe", "", []string{"fe", "--config", feConf}, []string{"fe: missing privileges", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF and CAP_PERFMON or CAP_SYS_ADMIN", "XDP"}},
		{"fe without perfmon", "+net_admin,+net_raw,+bpf", []string{"fe", "--config", feConf}, []string{"CAP_BPF and CAP_PERFMON", "AmbientCapabilities=CAP_PERFMON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("nsenter", asNobody(tc.caps, tc.args...)...).CombinedOutput()
			if exitCode(err) != 1 {
				t.Fatalf("exit code %d (%v), want 1; output:\n%s", exitCode(err), err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "operation not permitted") {
				t.Errorf("a bare EPERM in the output:\n%s", out)
			}
		})
	}

	// With the capabilities the errors name, both start: the CE listens on
	// BGP's port, the FE attaches XDP; SIGTERM stops them cleanly.
	ceProc := startDaemon(t, "nsenter", asNobody("+net_bind_service", "ce", "--config", ceConf)...)
	feProc := startDaemon(t, "nsenter", asNobody("+net_admin,+net_raw,+bpf,+perfmon", "fe", "--config", feConf)...)
	eventually(t, 20*time.Second, "the CE on port 179 and the FE's XDP program on pv0, both run by nobody", func() error {
		ss, _ := exec.Command("nsenter", "--net=/run/netns/"+ns, "ss", "-Htln", "sport", "=", "179").CombinedOutput()
		link, _ := exec.Command("ip", "-n", ns, "link", "show", "pv0").CombinedOutput()
		if !strings.Contains(string(ss), ":179") || !strings.Contains(string(link), "xdp") {
			return fmt.Errorf("listening: %q; pv0: %q; CE:\n%s\nFE:\n%s", ss, link, ceProc.out.String(), feProc.out.String())
		}
		return nil
	})
	for _, d := range []*proc{ceProc, feProc} {
		if code := d.stop(); code != 0 {
			t.Errorf("%v: exit code %d after SIGTERM; output:\n%s", d.cmd.Args, code, d.out.String())
		}
	}
	if link, _ := exec.Command("ip", "-n", ns, "link", "show", "pv0").CombinedOutput(); strings.Contains(string(link), "xdp") {
		t.Errorf("XDP still attached to pv0 after the FE stopped: %s", link)
	}
}

// An FE given a port that another FE already drives refuses to start,
// naming the port and the XDP program in the way, and leaves the first FE
// alone; so does one whose metrics address is taken.
func TestCLIFEPortInUse(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	ns := testNetns(t, fmt.Sprintf("spport%d", os.Getpid()%10000))
	conf := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := startDaemon(t, "nsenter", "--net=/run/netns/"+ns, bin, "fe", "--config",
		conf("fe1.yaml", "id: 1\nports: [pv0]\nce_address: 127.0.0.1:1\nmetrics_listen: 127.0.0.1:9309\nstatus_socket: "+filepath.Join(dir, "fe1.sock")+"\n"))
	eventually(t, 20*time.Second, "the first FE's XDP program on pv0", func() error {
		if link, _ := exec.Command("ip", "-n", ns, "link", "show", "pv0").CombinedOutput(); !strings.Contains(string(link), "xdp") {
			return fmt.Errorf("pv0: %s; FE:\n%s", link, first.out.String())
		}
		return nil
	})
	for _, tc := range []struct {
		name, conf string
		want       []string
	}{
		{"same port", "id: 2\nports: [pv0]\nce_address: 127.0.0.1:1\n", []string{`ports[0] "pv0"`, "already attached", "another FE"}},
		{"metrics address", "id: 3\nports: [pv1]\nce_address: 127.0.0.1:1\nmetrics_listen: 127.0.0.1:9309\n", []string{"metrics_listen 127.0.0.1:9309", "address already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+ns, bin, "fe", "--config", conf(tc.name+".yaml", tc.conf)).CombinedOutput()
			if exitCode(err) != 1 {
				t.Fatalf("exit code %d (%v), want 1; output:\n%s", exitCode(err), err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
		})
	}
	if !first.running() {
		t.Fatalf("the first FE exited:\n%s", first.out.String())
	}
	if link, _ := exec.Command("ip", "-n", ns, "link", "show", "pv0").CombinedOutput(); !strings.Contains(string(link), "xdp") {
		t.Fatalf("the first FE lost its XDP program: %s", link)
	}
}
