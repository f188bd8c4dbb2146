package fe

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnableKernelForwarding(t *testing.T) {
	dir := t.TempDir()
	off, on := filepath.Join(dir, "off"), filepath.Join(dir, "on")
	os.WriteFile(off, []byte("0\n"), 0o644)
	os.WriteFile(on, []byte("1\n"), 0o644)
	var logs bytes.Buffer
	a := &Agent{log: slog.New(slog.NewTextHandler(&logs, nil))}
	a.enableKernelForwarding([]string{off, on, filepath.Join(dir, "missing")})
	for _, f := range []string{off, on} {
		if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) != "1" {
			t.Errorf("%s: %q, want 1", f, b)
		}
	}
	for _, want := range []string{"kernel forwarding turned on", "sysctl=" + off, "kernel forwarding unknown"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "sysctl="+on+" ") {
		t.Errorf("a sysctl already on was logged:\n%s", logs.String())
	}
}
