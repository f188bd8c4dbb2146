package fe

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// A port whose driver has no native XDP (a bridge) falls back to generic
// mode, and the status says so.
func TestNativeFallsBackToGeneric(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := h.LinkAdd(br); err != nil {
			t.Skipf("cannot create a bridge here: %v", err)
		}
		if err := h.LinkSetUp(br); err != nil {
			t.Fatal(err)
		}
		a, err := New(Config{Ports: []string{"br0"}, CEAddress: "127.0.0.1:1"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		// Run sets up the ports on this (locked) thread; stop it once they are.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go func() {
			for ctx.Err() == nil {
				if len(a.Status().Ports) == 1 {
					cancel()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		if err := a.Run(ctx); err != nil {
			t.Fatal(err)
		}
		st := a.Status()
		if len(st.Ports) != 1 || st.Ports[0].Mode != "generic" {
			t.Fatalf("ports %+v: want br0 attached in the generic fallback", st.Ports)
		}
	})
}
