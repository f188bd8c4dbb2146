package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The CLI finds a running lab's API when the default socket is absent, says
// so, and leaves an explicit --api or $SPLITPLANE_API alone.
func TestResolveAPI(t *testing.T) {
	if isSocket(strings.TrimPrefix(defaultAPI, "unix:")) {
		t.Skipf("a CE serves %s on this machine: the fallback is not taken", defaultAPI)
	}
	t.Setenv("SPLITPLANE_API", "")
	os.Unsetenv("SPLITPLANE_API")
	dir := t.TempDir()
	old := labAPIGlob
	labAPIGlob = filepath.Join(dir, "lab-*", "api.sock")
	t.Cleanup(func() { labAPIGlob = old })
	listen := func(name string) string {
		p := filepath.Join(dir, "lab-"+name, "api.sock")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return p
	}
	newCmd := func(args ...string) (*cobra.Command, *apiFlags) {
		var f apiFlags
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		f.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return cmd, &f
	}

	var msg strings.Builder
	cmd, f := newCmd()
	if got, err := resolveAPI(cmd, f.addr, &msg); err != nil || got != defaultAPI || msg.Len() != 0 {
		t.Fatalf("no lab: %q, %v, %q; want the default, quietly", got, err, msg.String())
	}
	// A directory that is not a socket does not count.
	if err := os.MkdirAll(filepath.Join(dir, "lab-stale", "api.sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := listen("sp")
	got, err := resolveAPI(cmd, f.addr, &msg)
	if err != nil || got != "unix:"+sock {
		t.Fatalf("one lab: %q, %v; want unix:%s", got, err, sock)
	}
	if !strings.Contains(msg.String(), sock) || !strings.Contains(msg.String(), "--api") {
		t.Errorf("one lab: the CLI said %q, want the socket it took and how to choose", msg.String())
	}

	cmd, f = newCmd("--api", "unix:/elsewhere.sock")
	if got, _ := resolveAPI(cmd, f.addr, &msg); got != "unix:/elsewhere.sock" {
		t.Errorf("--api given: %q", got)
	}
	t.Setenv("SPLITPLANE_API", "unix:/env.sock")
	cmd, f = newCmd()
	if got, _ := resolveAPI(cmd, f.addr, &msg); got != "unix:/env.sock" {
		t.Errorf("$SPLITPLANE_API given: %q", got)
	}
	os.Unsetenv("SPLITPLANE_API")

	other := listen("two")
	cmd, f = newCmd()
	_, err = resolveAPI(cmd, f.addr, &msg)
	if err == nil || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), other) {
		t.Fatalf("two labs: %v; want an error naming both", err)
	}
}
