package ce

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestReload(t *testing.T) {
	cfg := Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		StaticRoutes: []StaticRoute{
			{Prefix: "10.0.0.0/24", Connected: true},
			{Prefix: "198.51.100.0/24", NextHops: []string{"10.0.0.2"}},
			{Prefix: "203.0.113.0/24", NextHops: []string{"10.0.0.3"}},
		}}
	c, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, func() bool { return c.Status(ctx).Routes == 2 })

	// One route changed, one removed, one added, a connected prefix added.
	next := cfg
	next.StaticRoutes = []StaticRoute{
		{Prefix: "10.0.0.0/24", Connected: true},
		{Prefix: "10.9.0.0/16", Connected: true},
		{Prefix: "198.51.100.0/24", NextHops: []string{"10.0.0.2", "10.9.0.9"}},
		{Prefix: "192.0.2.0/25", NextHops: []string{"10.9.1.1"}},
		{Prefix: "192.0.2.128/25", NextHops: []string{"10.9.1.2"}},
	}
	rep, err := c.Reload(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Statics != 5 || len(rep.NeedRestart) != 0 || len(rep.Neighbors) != 0 {
		t.Fatalf("report %+v", rep)
	}
	waitFor(t, func() bool { return c.Status(ctx).Routes == 3 })
	st := c.Status(ctx)
	if !slices.ContainsFunc(st.Connected, func(p netip.Prefix) bool { return p.String() == "10.9.0.0/16" }) {
		t.Fatalf("connected %v", st.Connected)
	}

	// An invalid configuration changes nothing; restart-only settings are
	// reported and kept.
	bad := next
	bad.StaticRoutes = append(slices.Clone(next.StaticRoutes), StaticRoute{Prefix: "nonsense"})
	if _, err := c.Reload(ctx, bad); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad config: %v", err)
	}
	restart := next
	restart.HeartbeatInterval = 2 * time.Second
	restart.ASN = 65009
	rep, err = c.Reload(ctx, restart)
	if err != nil || !slices.Equal(rep.NeedRestart, []string{"asn", "heartbeat_interval"}) || rep.Statics != 0 {
		t.Fatalf("restart-only changes: %+v %v", rep, err)
	}
	if c.Status(ctx).Routes != 3 {
		t.Fatal("routes changed")
	}
}
