package fe

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// While the loop runs, requests wait for the one it is running: a Status
// asked during a long apply returns after it, with its result. Once the loop
// has stopped, requests run on their caller's goroutine.
func TestLoopSerialisesRequests(t *testing.T) {
	a, _ := testAgent(t, Config{})
	stop := a.startLoop()
	entered, release := make(chan struct{}), make(chan struct{})
	var applied bool
	go a.do(func() {
		close(entered)
		<-release
		a.applyNow(forces.ExecContinueOnFailure, nil, nil)
		applied = true
	})
	<-entered
	got := make(chan Status)
	go func() { got <- a.Status() }()
	select {
	case <-got:
		t.Fatal("Status returned while the loop was busy with another request")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-got
	var seen bool
	a.do(func() { seen = applied })
	if !seen {
		t.Fatal("a request after the busy one did not see its effect")
	}
	stop()
	resp, failed := a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1)))
	if failed {
		t.Fatalf("apply with the loop stopped: %v", results(t, resp))
	}
	if st := a.Status(); st.Routes != 1 || st.Programmed != 1 {
		t.Fatalf("after an apply with the loop stopped: %d routes, %d programmed", st.Routes, st.Programmed)
	}
}

// Concurrent appliers, status readers and link updates are serialised by
// the loop (the race detector checks that nothing else touches the state).
func TestLoopConcurrentRequests(t *testing.T) {
	a, _ := testAgent(t, Config{})
	defer a.startLoop()()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 25 {
				row := uint32(w*100 + i + 1)
				a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(row, fmt.Sprintf("10.%d.%d.0/24", w, i), 1)))
			}
		}()
		go func() {
			defer wg.Done()
			for range 25 {
				a.Status()
				a.portInfos()
			}
		}()
	}
	wg.Wait()
	if st := a.Status(); st.Routes != 100 || st.Programmed != 100 || st.Gateways != 1 {
		t.Fatalf("%d routes, %d programmed, %d gateways: want 100, 100, 1", st.Routes, st.Programmed, st.Gateways)
	}
}

// Without a gateway lookup the loop may call (the kernel's, in production),
// a new gateway's slot is made unresolved and the resolver, kicked, looks it
// up outside the loop and sends the answer in: the slot is then programmed.
func TestResolverResolvesOutsideTheLoop(t *testing.T) {
	a, dp := testAgent(t, Config{})
	a.prog.egressPort = nil
	lookups := make(chan netip.Addr, 16)
	a.lookupEgress = func(gw netip.Addr) int {
		lookups <- gw
		return 7
	}
	a.neighbors.m[neighKey{7, netip.MustParseAddr("192.0.2.1")}] = net.HardwareAddr{2, 0, 0, 0, 0, 1} // nothing to solicit
	defer a.startLoop()()
	if resp, failed := a.applyConfig(configMsg(t, setNH(1, "192.0.2.1"), setRoute(1, "198.51.100.0/24", 1))); failed {
		t.Fatal(results(t, resp))
	}
	if got, want := dp.String(), "route 198.51.100.0/24 to missing nexthop\n"; got != want {
		t.Fatalf("a nexthop programmed before the resolver looked its gateway up:\n%s", dp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.resolveLoop(ctx) }()
	defer func() { cancel(); <-done }()
	if gw := <-lookups; gw != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("looked up %s", gw)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Status().Resolved != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("gateway not resolved; datapath:\n%s", dp)
		}
		time.Sleep(time.Millisecond)
	}
	if got, want := dp.String(), "nexthop via 192.0.2.1 dev 7 src 02:00:00:00:00:07\nroute 198.51.100.0/24 via 192.0.2.1 dev 7\n"; got != want {
		t.Fatalf("datapath after resolution:\n%s", dp)
	}
}

// BenchmarkAgentFullSync is a first full sync of 100,000 routes through the
// agent with its loop running, in messages as the CE sends them, into the
// recording datapath.
func BenchmarkAgentFullSync(b *testing.B) {
	const n = 100_000
	ops := []forces.TableOp{setNH(1, "10.0.0.2")}
	for i := range n {
		ops = append(ops, setRoute(uint32(i+1), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32).String(), 1))
	}
	hdr := forces.Header{Type: forces.MsgConfig, Src: ceID, Dst: forces.FEID(1), Flags: forces.Flags{ACK: forces.AlwaysACK}}
	msgs, err := forces.BuildConfig(hdr, nil, ops)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		a, err := New(Config{Ports: []string{"unused0"}}, slog.New(slog.DiscardHandler), WithDatapath(newFake(), func(netip.Addr) int { return 7 }),
			WithPort("p7", 7))
		if err != nil {
			b.Fatal(err)
		}
		a.prog.dp = newFake()
		stop := a.startLoop()
		b.StartTimer()
		for _, m := range msgs {
			if _, failed := a.applyConfig(m); failed {
				b.Fatal("apply failed")
			}
		}
		b.StopTimer()
		stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}
