package fe

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A port whose driver has no native XDP (a bridge) falls back to generic
// mode, and the status says so.
func TestNativeFallsBackToGeneric(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads and attaches XDP programs in a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // the thread is now in a fresh namespace
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer netns.Set(orig)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Skipf("cannot create a bridge here: %v", err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}

	a, err := New(Config{Ports: []string{"br0"}, CEAddress: "127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Run sets up the ports on this (locked) thread before it starts any
	// goroutine that would need the namespace; watch for the result.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		cancel()
	}()
	go func() {
		for ctx.Err() == nil {
			if st := a.Status(); len(st.Ports) == 1 {
				if st.Ports[0].Mode != "generic" {
					t.Errorf("br0 attached in mode %q, want the generic fallback", st.Ports[0].Mode)
				}
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	done <- a.Run(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := a.Status(); len(st.Ports) != 1 {
		t.Fatalf("ports %+v: br0 was never set up", st.Ports)
	}
}
