package ce

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runCE starts a CE on cfg and returns it with a function that stops it and
// waits until Run has returned.
func runCE(t *testing.T, cfg Config) (*CE, func()) {
	t.Helper()
	c, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	<-c.ready
	return c, stop
}

func apiRouteList(t *testing.T, c *CE) []string {
	t.Helper()
	rs, err := c.ListRoutes(context.Background(), RouteFilter{Origin: "api"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Prefix.String()+" "+strings.Join(addrStrings(r.NextHops), ",")+" "+strconv.Itoa(int(r.Distance)))
	}
	return out
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// api_routes_file: the API's routes survive the CE, changes included, and
// are back before anything else happens; a broken file stops the CE at
// start, naming the line.
func TestAPIRoutesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "api-routes")
	cfg := Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		APIRoutesFile: file}
	c, stop := runCE(t, cfg)
	ctx := context.Background()
	ops := []RouteOp{
		{Kind: OpAdd, Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHops: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}},
		{Kind: OpAdd, Prefix: netip.MustParsePrefix("2001:db8:100::/48"), NextHops: []netip.Addr{netip.MustParseAddr("fd00::2")}, Distance: 7},
		{Kind: OpAdd, Prefix: netip.MustParsePrefix("203.0.113.0/24"), NextHops: []netip.Addr{netip.MustParseAddr("10.0.0.4")}},
	}
	if _, err := c.ApplyRoutes(ctx, ops); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyRoutes(ctx, []RouteOp{{Kind: OpDelete, Prefix: netip.MustParsePrefix("203.0.113.0/24")}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"198.51.100.0/24 10.0.0.2,10.0.0.3 5", "2001:db8:100::/48 fd00::2 7"}
	if got := apiRouteList(t, c); !slices.Equal(got, want) {
		t.Fatalf("API routes %v, want %v", got, want)
	}
	// Saved within a second, while the CE runs (a crash after that loses
	// nothing).
	waitFor(t, func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), "198.51.100.0/24 10.0.0.2,10.0.0.3 5\n2001:db8:100::/48 fd00::2 7\n")
	})
	// One more change, then a clean stop: saved on the way out.
	if _, err := c.ApplyRoutes(ctx, []RouteOp{{Kind: OpReplace, Prefix: netip.MustParsePrefix("192.0.2.0/24"), NextHops: []netip.Addr{netip.MustParseAddr("10.0.0.9")}}}); err != nil {
		t.Fatal(err)
	}
	stop()

	c2, _ := runCE(t, cfg)
	want = []string{"192.0.2.0/24 10.0.0.9 5", "198.51.100.0/24 10.0.0.2,10.0.0.3 5", "2001:db8:100::/48 fd00::2 7"}
	if got := apiRouteList(t, c2); !slices.Equal(got, want) {
		t.Fatalf("after a restart: API routes %v, want %v", got, want)
	}

	// A broken file: the CE refuses to start, naming the file and line.
	runErr := func(cfg Config) error {
		c, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		return c.Run(ctx)
	}
	for _, c := range []struct{ body, want string }{
		{"# comment\n198.51.100.0/24 10.0.0.2\n", `line 2 "198.51.100.0/24 10.0.0.2": want PREFIX NEXTHOP[,NEXTHOP...] DISTANCE`},
		{"198.51.100.0/24 10.0.0.x 5\n", `line 1 "198.51.100.0/24 10.0.0.x 5": next hop "10.0.0.x": not an IP address`},
		{"198.51.100.0/24 fd00::1 5\n", `line 1`},
		{"198.51.100.0/24 10.0.0.2 5\n198.51.100.0/24 10.0.0.3 5\n", `line 2 "198.51.100.0/24 10.0.0.3 5": 198.51.100.0/24 again (line 1 has it)`},
		{"198.51.100.0/24 10.0.0.2 0\n", `distance "0": want 1 to 255`},
	} {
		bad := filepath.Join(dir, "bad")
		if err := os.WriteFile(bad, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		next := cfg
		next.APIRoutesFile = bad
		if err := runErr(next); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), bad) {
			t.Errorf("file %q: Run = %v, want an error naming %q", c.body, err, c.want)
		}
	}
	next := cfg
	next.APIRoutesFile = filepath.Join(dir, "none", "api-routes")
	if err := runErr(next); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "its directory does not exist") {
		t.Errorf("missing directory: %v", err)
	}
}

// A save that cost much puts the next one off (five times the cost), so
// that saving a big table never takes more than a fifth of a core; a cheap
// one leaves the next a second away.
func TestAPIRoutesSavePacing(t *testing.T) {
	p := startAPIPersister(filepath.Join(t.TempDir(), "api-routes"), slog.New(slog.DiscardHandler))
	defer p.close()
	rib := NewRIB(fibs{v4: NewFIB(), v6: NewFIB()}, Distances{})
	last, every := p.saveFrom(rib, time.Time{}, 0)
	if last.IsZero() || every != persistInterval {
		t.Fatalf("first save: at %v, next after %v; want now, and %v", last, every, persistInterval)
	}
	if again, _ := p.saveFrom(rib, last, every); again != last {
		t.Fatal("saved again within the interval")
	}
	p.lastWrite.Store(int64(2 * time.Second)) // as a million routes might
	if _, every = p.saveFrom(rib, time.Time{}, 0); every < 10*time.Second {
		t.Fatalf("after a 2 s write the next save may come after %v, want 10 s or more", every)
	}
}
