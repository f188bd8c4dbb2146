package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

// topFE is an FE whose counters have grown by n times the per-second rates
// of the test.
func topFE(n uint64) []*splitplanev1.FE {
	return []*splitplanev1.FE{{
		Id: "FE(1)", Name: "edge1", Synced: true, HeartbeatRttP99Ms: 0.5,
		Ports: []*splitplanev1.Port{
			{Id: 2, Name: "eth0", Up: true, Addresses: []string{"192.0.2.1/24"},
				Counters: &splitplanev1.Counters{RxPackets: 1_000_000 * n, ForwardedPackets: 990_000 * n, PassedPackets: 9_000 * n, DroppedPackets: 1_000 * n}},
			{Id: 3, Name: "eth1", Up: false}, // no counters reported
		},
		Lanes: []*splitplanev1.Lane{{Port: "eth0", Queue: 0, Cpu: 1}, {Port: "eth0", Queue: 1, Cpu: 2}, {Port: "eth1", Queue: 0, Cpu: 1}},
		Counters: &splitplanev1.Counters{
			RxPackets: 1_000_000 * n, ForwardedPackets: 990_000 * n, PassedPackets: 9_000 * n, DroppedPackets: 1_000 * n,
			ByReason: map[string]uint64{"no_route": 1_000 * n, "to_host": 9_000 * n},
			Cpus: []*splitplanev1.CPUCounters{
				{Cpu: 1, RxPackets: 600_000 * n, ForwardedPackets: 600_000 * n},
				{Cpu: 2, RxPackets: 400_000 * n, ForwardedPackets: 390_000 * n, PassedPackets: 9_000 * n, DroppedPackets: 1_000 * n},
			},
		},
	}}
}

var topNeighbors = []*splitplanev1.Neighbor{{Address: "192.0.2.2", Asn: 65002, State: "established", PrefixesReceived: 10, PrefixesAccepted: 10}}

// TestTopRender draws a frame from two samples two seconds apart: the rates
// are the counters' differences over those seconds.
func TestTopRender(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	routes := &routeCount{fib4: 2, fib6: 1, byOrigin: map[string]int{"api": 1, "bgp": 2}}
	prev := &topSample{at: at, fes: topFE(1), neighbors: topNeighbors, routes: routes, routesAt: at}
	cur := &topSample{at: at.Add(2 * time.Second), fes: topFE(3), neighbors: topNeighbors, routes: routes, routesAt: at}
	got := string(renderTop(prev, cur, "unix:/x.sock", time.Second))
	want := `splitplane top  unix:/x.sock  12:00:02  every 1s  (Ctrl-C quits)

FIB  3 prefixes (ipv4 2, ipv6 1)   routes by origin: api 1, static 0, bgp 2   (counted 12:00:00)

FE     NAME   SYNCED     RX/s    FWD/s   PASS/s   DROP/s  HB RTT P99
FE(1)  edge1  yes       1.00M   990.0k     9.0k     1.0k  0.50ms

CORE            RX/s    FWD/s   PASS/s   DROP/s  QUEUES
FE(1)  cpu1   600.0k   600.0k        0        0  eth0:0 eth1:0
FE(1)  cpu2   400.0k   390.0k     9.0k     1.0k  eth0:1

PORT         UP       RX/s    FWD/s   PASS/s   DROP/s  ADDRESSES
FE(1)  eth0  up      1.00M   990.0k     9.0k     1.0k  192.0.2.1/24
FE(1)  eth1  down        -        -        -        -  -

EXCEPTION            PACKETS/s  TOTAL
FE(1)      no_route       1.0k  3000
FE(1)      to_host        9.0k  27000

NEIGHBOR   ASN    STATE        FOR  BFD  RECEIVED  ACCEPTED
192.0.2.2  65002  established  -    -    10        10
`
	if got != want {
		t.Errorf("frame:\n%s\nwant:\n%s", got, want)
	}

	// The first frame has no rates yet; a counter that went down (an FE
	// restarted) has none either.
	first := string(renderTop(nil, prev, "unix:/x.sock", time.Second))
	if !regexp.MustCompile(`FE\(1\)\s+edge1\s+yes\s+-\s+-\s+-\s+-\s+0.50ms`).MatchString(first) {
		t.Errorf("first frame:\n%s", first)
	}
	reset := string(renderTop(cur, prev, "unix:/x.sock", time.Second))
	if !regexp.MustCompile(`FE\(1\)\s+edge1\s+yes\s+-\s+-\s+-\s+-\s+0.50ms`).MatchString(reset) {
		t.Errorf("after a reset:\n%s", reset)
	}
}

// TestTopOnce runs top --once against the fake API: two samples, one frame
// with the rates between them.
func TestTopOnce(t *testing.T) {
	f := &fakeAPI{
		fes:       func(call int) []*splitplanev1.FE { return topFE(uint64(call) * 100) },
		neighbors: topNeighbors,
		routes:    cannedRoutes,
	}
	api := startFake(t, f)
	stdout, stderr, code := run(t, "top", "--once", "--interval", "100ms", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "\033") {
		t.Errorf("--once must not draw with escape sequences:\n%q", stdout)
	}
	// 100M packets in about 0.1s: around 1G/s, lower if the test is slow.
	if !regexp.MustCompile(`(?m)^FE\(1\)\s+edge1\s+yes\s+[0-9.]+[MG]\s+[0-9.]+[MG]\s+[0-9.]+[kM]\s+[0-9.]+[kM]\s+0.50ms$`).MatchString(stdout) {
		t.Errorf("no FE rates:\n%s", stdout)
	}
	for _, re := range []string{
		`(?m)^FE\(1\)\s+cpu2\s+[0-9.]+[MG]\s+`,
		`(?m)^FE\(1\)\s+eth0\s+up\s+[0-9.]+[MG]\s+`,
		`(?m)^FE\(1\)\s+no_route\s+[0-9.]+[kM]\s+200000$`,
		`(?m)^192\.0\.2\.2\s+65002\s+established`,
		`FIB  2 prefixes \(ipv4 1, ipv6 1\)   routes by origin: api 1, static 1, bgp 1`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("no %s in:\n%s", re, stdout)
		}
	}
	// The count of the first sample is younger than routesEvery: reused.
	if n := f.called("List"); n != 1 {
		t.Errorf("routes listed %d times, want 1", n)
	}
}

// TestTopPartial shows what the API offers when part of it fails: no FE yet,
// and BGP refused.
func TestTopPartial(t *testing.T) {
	f := &fakeAPI{errs: map[string]error{"Neighbors": status.Error(codes.FailedPrecondition, "BGP is off")}}
	api := startFake(t, f)
	stdout, stderr, code := run(t, "top", "--once", "--interval", "1ms", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "no FE associated") || !strings.Contains(stdout, "BGP: BGP.Neighbors: BGP is off (FailedPrecondition)") ||
		!strings.Contains(stdout, "FIB  0 prefixes") {
		t.Errorf("frame:\n%s", stdout)
	}
}

// TestTopLive runs the live view until it is interrupted: away from a
// terminal the frames follow each other, the later ones with rates.
func TestTopLive(t *testing.T) {
	f := &fakeAPI{fes: func(call int) []*splitplanev1.FE { return topFE(uint64(call)) }, neighbors: topNeighbors}
	api := startFake(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(250*time.Millisecond, cancel)
	stdout, stderr, code := runCtx(t, ctx, "top", "--interval", "50ms", "--api", api)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames := strings.Count(stdout, "splitplane top ")
	if frames < 3 || strings.Contains(stdout, "\033") {
		t.Errorf("%d frames:\n%q", frames, stdout)
	}
	if !regexp.MustCompile(`(?m)^FE\(1\)\s+edge1\s+yes\s+[0-9.]+[kM]\s`).MatchString(stdout) {
		t.Errorf("no rates in:\n%s", stdout)
	}
}

// Unresolved routes, counted from the listing, are shown by reason below
// the FIB's line.
func TestTopRenderUnresolved(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	routes := &routeCount{fib4: 1, byOrigin: map[string]int{"static": 4}, unresolved: map[string]int{"loop": 2, "no_route": 1}}
	cur := &topSample{at: at, routes: routes, routesAt: at}
	got := string(renderTop(nil, cur, "unix:/x.sock", time.Second))
	want := "FIB  1 prefixes (ipv4 1, ipv6 0)   routes by origin: api 0, static 4, bgp 0   (counted 12:00:00)\n" +
		"     3 routes unresolved, not installed: no_route 1, loop 2   (splitplane route list --unresolved)\n"
	if !strings.Contains(got, want) {
		t.Errorf("frame:\n%s\nwant it to hold:\n%s", got, want)
	}
}
