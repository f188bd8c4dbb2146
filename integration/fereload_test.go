package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/internal/logtest"
	"github.com/splitplane/splitplane/internal/status"
)

// SIGHUP makes `splitplane fe` read its configuration again: the
// classifier's policer changes at run time, a changed port is logged as
// needing a restart, and an invalid file is logged and changes nothing,
// the FE running on. The FE runs in a namespace of its own with one veth
// port and no CE.
func TestFEReloadOnSIGHUP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the FE attaches XDP")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	ns := fmt.Sprintf("sp-fereload-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run("-n", ns, "link", "add", "fr0", "type", "veth", "peer", "name", "fr1")
	run("-n", ns, "link", "set", "fr0", "up")
	run("-n", ns, "link", "set", "fr1", "up")
	run("-n", ns, "link", "set", "lo", "up")

	sock := filepath.Join(dir, "fe.sock")
	cfgPath := filepath.Join(dir, "fe.yaml")
	config := func(ports string, pps int) {
		t.Helper()
		body := fmt.Sprintf("ce_address: 127.0.0.1:1\nports: [%s]\nxdp_mode: generic\nkernel_routes: connected\nstatus_socket: %s\nclassifier: {control_cpu: -1, police_pps: %d}\n", ports, sock, pps)
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config("fr0", 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logtest.Buffer
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, bin, "fe", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("FE log:\n%s", logs.String())
		}
	})
	police := func() (uint64, error) {
		var st fe.Status
		if err := status.Get(sock, "/", &st); err != nil {
			return 0, err
		}
		if st.Classifier == nil {
			return 0, fmt.Errorf("no classifier in the status")
		}
		return st.Classifier.PolicePPS, nil
	}
	eventually(t, 30*time.Second, "the FE serving its status", func() error { _, err := police(); return err })

	config("fr0, fr1", 5000)
	cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the policer reloaded", func() error {
		if pps, err := police(); err != nil || pps != 5000 {
			return fmt.Errorf("police_pps %d, %v", pps, err)
		}
		return nil
	})
	eventually(t, 10*time.Second, "the reload logged", func() error {
		l := logs.String()
		if !strings.Contains(l, "configuration reloaded") || !strings.Contains(l, "needs_restart=[ports]") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})

	if err := os.WriteFile(cfgPath, []byte("ports: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the refused reload logged", func() error {
		if !strings.Contains(logs.String(), "configuration not applied") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})
	select {
	case err := <-exited:
		t.Fatalf("the FE exited after a bad reload: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if pps, err := police(); err != nil || pps != 5000 {
		t.Fatalf("after a refused reload: police_pps %d, %v", pps, err)
	}
}
