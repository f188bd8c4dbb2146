package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The router binary: --binary first, then the one that handed the command
// over ($SPLITPLANE_BINARY), then $PATH (the test binary has none beside it).
func TestRouterBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv(binaryEnv, "")
	if _, err := routerBinary(""); !errors.Is(err, errNoRouter) {
		t.Fatalf("none: %v, want errNoRouter", err)
	}
	onPath := filepath.Join(dir, routerProgram)
	if err := os.WriteFile(onPath, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := routerBinary(""); err != nil || got != onPath {
		t.Fatalf("on $PATH: %q, %v", got, err)
	}
	t.Setenv(binaryEnv, "/opt/sp/splitplane")
	if got, err := routerBinary(""); err != nil || got != "/opt/sp/splitplane" {
		t.Fatalf("from the environment: %q, %v", got, err)
	}
	if got, err := routerBinary("/usr/local/bin/splitplane"); err != nil || got != "/usr/local/bin/splitplane" {
		t.Fatalf("--binary: %q, %v", got, err)
	}
}
