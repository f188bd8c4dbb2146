package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The man pages and the shell completion come from the commands through
// the real binary: a page per command, with its flags; completion scripts
// that name the subcommands.
func TestManAndCompletion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "splitplane")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command(bin, "man", dir).CombinedOutput(); err != nil {
		t.Fatalf("man: %v\n%s", err, out)
	}
	for page, want := range map[string]string{
		"splitplane.1":            ".TH \"SPLITPLANE\" \"1\"",
		"splitplane-route-list.1": `\fB--api\fP`,
		"splitplane-ce.1":         "control element",
		"splitplane-fe.1":         "forwarding element",
	} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", page, want)
		}
	}
	if out, err := exec.Command(bin, "man").CombinedOutput(); err == nil || exitCode2(err) != 2 {
		t.Errorf("man without DIR: %v, want a usage error (exit 2): %s", err, out)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(bin, "completion", sh).Output()
		if err != nil {
			t.Fatalf("completion %s: %v", sh, err)
		}
		if !strings.Contains(string(out), "splitplane") {
			t.Errorf("completion %s does not name the command", sh)
		}
	}
	// The completion itself: what the shell gets for "splitplane ro".
	out, err := exec.Command(bin, "__complete", "ro").Output()
	if err != nil || !strings.Contains(string(out), "route") {
		t.Errorf("completing \"ro\": %q, %v; want route", out, err)
	}
}

func exitCode2(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
