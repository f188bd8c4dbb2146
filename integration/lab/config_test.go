package lab

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A big table gets the usual BGP timers and no full copy in the kernel: a
// GoBGP peer holding a million prefixes sends nothing, a keepalive
// included, for longer than the quick 9 s hold time while it builds its
// first UPDATEs, and the FE's copy of a million routes into the kernel
// would cost the two cores ~13 s of CPU and the kernel its memory.
func TestConfigsFollowTableSize(t *testing.T) {
	for _, c := range []struct {
		routes          int
		hold, keepalive string
		kernel          string
	}{
		{10_000, "9s", "3s", "kernel_routes: all "},
		{bigTable, "9s", "3s", "kernel_routes: all "},
		{1_000_000, "90s", "30s", "kernel_routes: default "},
	} {
		o := Options{Name: "cfg", Dir: t.TempDir(), Routes: c.routes, Binary: "/bin/true"}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		if err := o.writeConfigs(); err != nil {
			t.Fatal(err)
		}
		ce, err := os.ReadFile(filepath.Join(o.Dir, "ce.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "hold_time: " + c.hold + "\n    keepalive: " + c.keepalive + "\n"; !strings.Contains(string(ce), want) {
			t.Errorf("%d routes: ce.yaml lacks %q:\n%s", c.routes, want, ce)
		}
		fes, _ := filepath.Glob(filepath.Join(o.Dir, "fe*.yaml"))
		if len(fes) == 0 {
			t.Fatalf("%d routes: no FE config written", c.routes)
		}
		for _, f := range fes {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), c.kernel) {
				t.Errorf("%d routes: %s lacks %q:\n%s", c.routes, filepath.Base(f), c.kernel, b)
			}
		}
		args := o.peerArgs(o.peers()[0])
		if i := slices.Index(args, "--hold-time"); i < 0 || i+1 == len(args) || args[i+1] != c.hold {
			t.Errorf("%d routes: peer arguments %v, want --hold-time %s", c.routes, args, c.hold)
		}
	}
}
