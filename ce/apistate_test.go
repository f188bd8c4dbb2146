package ce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/logtest"
)

// runCE starts a CE on cfg and returns it with a function that stops it and
// waits until Run has returned.
func runCE(t *testing.T, cfg Config) (*CE, func()) {
	t.Helper()
	return runCELog(t, cfg, slog.New(slog.DiscardHandler))
}

// runCELog is runCE logging to log.
func runCELog(t *testing.T, cfg Config, log *slog.Logger) (*CE, func()) {
	t.Helper()
	c, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	stop := startRun(t, c)
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
// are back before anything else happens; a broken file is moved aside and
// the CE starts without them, naming the file and line.
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

	// A broken file: the CE starts without the API's routes, the file moved
	// aside (kept for the operator), the log naming it and the line, the
	// metric saying the routes were not restored.
	for _, c := range []struct{ body, want string }{
		{"# comment\n198.51.100.0/24 10.0.0.2\n", `line 2 "198.51.100.0/24 10.0.0.2": want PREFIX NEXTHOP[,NEXTHOP...] DISTANCE`},
		{"198.51.100.0/24 10.0.0.x 5\n", `line 1 "198.51.100.0/24 10.0.0.x 5": next hop "10.0.0.x": not an IP address`},
		{"198.51.100.0/24 fd00::1 5\n", `line 1`},
		{"198.51.100.0/24 10.0.0.2 5\n198.51.100.0/24 10.0.0.3 5\n", `line 2 "198.51.100.0/24 10.0.0.3 5": 198.51.100.0/24 again (line 1 has it)`},
		{"198.51.100.0/24 10.0.0.2 0\n", `distance "0": want 1 to 255`},
		{"\x00\xff\xfe garbage " + strings.Repeat("x", 2<<20) + "\n", "api_routes_file"},
	} {
		bad := filepath.Join(t.TempDir(), "api-routes")
		if err := os.WriteFile(bad, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		next := cfg
		next.APIRoutesFile = bad
		var logs logtest.Recorder
		ce, stop := runCELog(t, next, slog.New(&logs))
		if got := apiRouteList(t, ce); len(got) != 0 {
			t.Errorf("file %q: restored %v", c.body, got)
		}
		if !ce.apiFile.restoreFailed.Load() {
			t.Errorf("file %q: splitplane_api_routes_restore_failed not set", c.body)
		}
		stop()
		aside, _ := filepath.Glob(bad + ".corrupt-*")
		if len(aside) != 1 {
			t.Fatalf("file %q: moved aside as %v", c.body, aside)
		}
		if b, _ := os.ReadFile(aside[0]); string(b) != c.body {
			t.Errorf("file %q: the file moved aside holds %q", c.body, b)
		}
		log := logs.String()
		if !logs.Has("ERROR", "the API's routes were NOT restored", c.want, aside[0]) {
			t.Errorf("file %q: log does not say what happened, naming %q and %s:\n%s", c.body, c.want, aside[0], log)
		}
	}
	runErr := func(cfg Config) error {
		c, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		return c.Run(ctx)
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
	p := startAPIPersister(filepath.Join(t.TempDir(), "api-routes"), slog.New(slog.DiscardHandler), &persistStats{})
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

// flakyWrite fails until ok is set, counting its calls.
type flakyWrite struct {
	ok    atomic.Bool
	calls atomic.Int64
}

func (f *flakyWrite) write(path string, routes []RouteOp) error {
	f.calls.Add(1)
	if !f.ok.Load() {
		return errors.New("disk full")
	}
	return writeAPIRoutes(path, routes)
}

// A failed save is tried again (with backoff) until it succeeds, counted
// and logged; the metric says the file is behind meanwhile.
func TestAPIRoutesSaveRetried(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-routes")
	var logs logtest.Recorder
	var stats persistStats
	w := &flakyWrite{}
	p := startPersister(file, slog.New(&logs), &stats, w.write, time.Millisecond, 4*time.Millisecond)
	defer p.close()
	p.save([]RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2")})
	waitFor(t, func() bool { return w.calls.Load() >= 3 })
	if !stats.saveFailing.Load() || stats.saveErrors.Load() < 3 {
		t.Fatalf("after failed saves: failing %v, errors %d", stats.saveFailing.Load(), stats.saveErrors.Load())
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("a file appeared from failed saves")
	}
	w.ok.Store(true)
	waitFor(t, func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), "198.51.100.0/24 10.0.0.2 0\n")
	})
	waitFor(t, func() bool { return !stats.saveFailing.Load() })
	if log := logs.String(); !strings.Contains(log, "could not save the API's routes; retrying in") || !strings.Contains(log, "disk full") ||
		!strings.Contains(log, "routes saved again") {
		t.Fatalf("log:\n%s", log)
	}
}

// A save still failing when the CE stops is tried once more on the way
// out; a newer snapshot replaces one that failed.
func TestAPIRoutesSaveAtStop(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-routes")
	w := &flakyWrite{}
	p := startPersister(file, slog.New(slog.DiscardHandler), &persistStats{}, w.write, time.Hour, time.Hour)
	p.save([]RouteOp{replaceOp("198.51.100.0/24", "10.0.0.2")})
	waitFor(t, func() bool { return w.calls.Load() == 1 })
	p.save([]RouteOp{replaceOp("198.51.100.0/24", "10.0.0.3")})
	waitFor(t, func() bool { return w.calls.Load() == 2 }) // the newer one, at once
	w.ok.Store(true)
	p.close() // long before the hour's retry
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "198.51.100.0/24 10.0.0.3 0\n") {
		t.Fatalf("after the stop: %q, %v", b, err)
	}
}

// A restored file whose routes the FIB cannot take is not half restored:
// none are, the file is moved aside, and the CE runs.
func TestAPIRoutesRestoreDoesNotFit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-routes")
	var b strings.Builder
	for i := range forces.MaxNexthopID + 1 {
		fmt.Fprintf(&b, "100.%d.%d.%d/32 10.%d.%d.%d 5\n", 64+i>>16, byte(i>>8), byte(i), 200+i>>16, byte(i>>8), byte(i))
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Recorder
	c, stop := runCELog(t, Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		APIRoutesFile: file, StaticRoutes: testConnected}, slog.New(&logs))
	if got := apiRouteList(t, c); len(got) != 0 {
		t.Fatalf("%d routes restored", len(got))
	}
	if st := statusOf(t, c); st.Routes != 0 || !c.apiFile.restoreFailed.Load() {
		t.Fatalf("FIB %d routes, restore failed %v", st.Routes, c.apiFile.restoreFailed.Load())
	}
	stop()
	if aside, _ := filepath.Glob(file + ".corrupt-*"); len(aside) != 1 || !strings.Contains(logs.String(), "next-hop table") {
		t.Fatalf("moved aside as %v; log:\n%s", aside, logs.String())
	}
}
