package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/splitplane/splitplane/fe"
)

// The fe command's reload returns an error for a file that is missing,
// malformed or invalid (reloadOnHUP logs it and the FE keeps running), and
// hands a valid one to the agent.
func TestFEReloadBadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "fe.yaml")
	if err := os.WriteFile(good, []byte("ports: [p0]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := fe.New(fe.Config{Ports: []string{"p0"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d := feDaemon{Agent: a, log: slog.New(slog.DiscardHandler)}
	for name, body := range map[string]string{"malformed": "ports: [p0\n", "unknown key": "ports: [p0]\nbogus: 1\n", "invalid": "ports: []\n"} {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.reload(context.Background(), p); err == nil {
			t.Errorf("%s config: reload succeeded", name)
		}
	}
	if err := d.reload(context.Background(), filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing config: reload succeeded")
	}
	// A valid file reaches the agent, which is not running yet.
	if err := d.reload(context.Background(), good); !errors.Is(err, fe.ErrNotRunning) {
		t.Errorf("valid config before Run: %v, want fe.ErrNotRunning", err)
	}
}
