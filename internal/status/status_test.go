package status

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A status socket never takes over another process's live socket, nor
// deletes a file that is not a socket; a stale socket (its process died)
// is replaced.
func TestServeSocketPath(t *testing.T) {
	dir := t.TempDir()
	value := func() any { return map[string]int{"routes": 1} }

	live := filepath.Join(dir, "live.sock")
	stop, err := Serve(live, value, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := Serve(live, value, nil); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("second Serve on a live socket: %v, want 'in use by another process'", err)
	}
	var got map[string]int
	if err := Get(live, "/", &got); err != nil || got["routes"] != 1 {
		t.Errorf("the first server no longer answers: %v %v", got, err)
	}

	file := filepath.Join(dir, "ce.yaml")
	if err := os.WriteFile(file, []byte("id: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(file, value, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Serve on a regular file: %v, want 'not a socket'", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "id: 1\n" {
		t.Errorf("the regular file was touched: %q %v", b, err)
	}

	stale := filepath.Join(dir, "sub", "stale.sock")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	stop2, err := Serve(stale, value, nil)
	if err != nil {
		t.Fatalf("Serve on a stale socket: %v", err)
	}
	defer stop2()
	if err := Get(stale, "/", &got); err != nil {
		t.Errorf("the new server does not answer: %v", err)
	}
}
