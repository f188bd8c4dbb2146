// Package netnstest runs test code inside a fresh network namespace.
package netnstest

import (
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Run calls fn on a locked OS thread inside a new network namespace, with a
// netlink handle for it, and puts the thread back in its namespace afterwards.
// Sockets fn opens on that thread belong to the new namespace. It skips the
// test, saying why, unless running as root.
func Run(t *testing.T, fn func(h *netlink.Handle)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("current netns: %v", err)
	}
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and dies with the goroutine.
			t.Errorf("restore netns: %v", err)
			runtime.LockOSThread()
		}
		ns.Close()
	}()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	defer h.Close()
	fn(h)
}
