package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// splitplane-lab is found beside splitplane first, then on $PATH; a file
// that is not executable is not taken for it.
func TestFindLab(t *testing.T) {
	beside, onPath := t.TempDir(), t.TempDir()
	self := filepath.Join(beside, "splitplane")
	t.Setenv("PATH", onPath)

	if _, err := findLab(self); !errors.Is(err, errNoLab) {
		t.Fatalf("nothing there: %v, want errNoLab", err)
	}
	if err := os.WriteFile(filepath.Join(beside, labProgram), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findLab(self); !errors.Is(err, errNoLab) {
		t.Fatalf("not executable: %v, want errNoLab", err)
	}
	path := filepath.Join(onPath, labProgram)
	if err := os.WriteFile(path, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findLab(self); err != nil || got != path {
		t.Fatalf("on $PATH: %q, %v; want %q", got, err, path)
	}
	if err := os.Chmod(filepath.Join(beside, labProgram), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findLab(self); err != nil || got != filepath.Join(beside, labProgram) {
		t.Fatalf("beside and on $PATH: %q, %v; want the one beside", got, err)
	}
}

// Without splitplane-lab, `splitplane lab` fails saying how to get it.
func TestExternalWithoutLab(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, c := range externalCmds() {
		if !c.DisableFlagParsing {
			t.Errorf("%s parses flags: splitplane-lab's would be refused", c.Name())
		}
		// The test binary has no splitplane-lab beside it.
		err := c.RunE(c, []string{"--help"})
		if err == nil || !strings.Contains(err.Error(), "make build builds both") {
			t.Errorf("%s without splitplane-lab: %v", c.Name(), err)
		}
	}
}
