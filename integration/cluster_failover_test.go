package integration_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/status"
)

// The lab's FEs probe their inter-FE links with the defaults.
const (
	probeInterval = 100 * time.Millisecond
	probeMisses   = 3
	detection     = probeInterval * probeMisses
)

// feLink returns FE n's status of its inter-FE link to peer.
func feLink(o lab.Options, n int, peer uint32) (forces.FEInterFELinkStatus, error) {
	name, _ := lab.FEName(n)
	var st fe.Status
	if err := status.Get(o.Socket(name), "/", &st); err != nil {
		return forces.FEInterFELinkStatus{}, err
	}
	for _, l := range st.InterFELinks {
		if l.PeerFE == peer {
			return l, nil
		}
	}
	return forces.FEInterFELinkStatus{}, fmt.Errorf("FE %d has no link to FE %d: %+v", n, peer, st.InterFELinks)
}

// waitAlive polls FE n's link to peer until its liveness is alive, and
// returns how long that took.
func waitAlive(t *testing.T, o lab.Options, n int, peer uint32, alive bool, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last forces.FEInterFELinkStatus
	for time.Since(start) < timeout {
		l, err := feLink(o, n, peer)
		if err != nil {
			t.Fatal(err)
		}
		if l.Alive == alive && l.Declared {
			return time.Since(start)
		}
		last = l
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("FE %d's link to FE %d not alive=%t within %s: %+v", n, peer, alive, timeout, last)
	return 0
}

var pingReceived = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// TestClusterFailover: in a --cluster 3 lab, FE 3's process killed (its
// link's carrier stays up, its XDP program goes) is seen dead by FE 1's
// probes of ife3 within a few probe intervals, long before the CE's
// heartbeats notice; once the CE does, it withdraws the routes through
// FE 3's ports at once (cluster_fe_hold_time 0) rather than after
// fe_hold_time. Started again, FE 3 answers and the link is alive again,
// the routes back. FE 2 killed while host 1 pings host 3's site at 50 ms
// intervals over the direct link 1-3: no more echoes lost than the
// detection time holds, and FE 1 marks ife2 not alive.
func TestClusterFailover(t *testing.T) {
	requireLab(t)
	o := upCluster(t, "spf", 3, 0)
	h1, h3 := o.ClusterHost(1), o.ClusterHost(3)
	site3 := h3.SiteAddr.String()
	eventually(t, 15*time.Second, "host 1 reaches host 3's site", func() error { return pingFromHost(h1.Namespace, site3, 1, 0) })
	for _, peer := range []uint32{2, 3} {
		waitAlive(t, o, 1, peer, true, 5*time.Second)
	}
	l, err := feLink(o, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if l.ProbesAnswered == 0 || l.PeerMAC == "" || !l.Up {
		t.Fatalf("FE 1's link to FE 3 before the kill: %+v; want up, a peer MAC, probes answered", l)
	}
	t.Logf("FE 1's link to FE 3: %d probes sent, %d answered, last RTT %.0f µs", l.ProbesSent, l.ProbesAnswered, l.LastRTTMicros)
	routes := func() int {
		st, err := lab.GetStatus(o)
		if err != nil {
			t.Fatal(err)
		}
		return st.CERoutes
	}
	before := routes()

	// FE 3 crashes: FE 1's link to it stays up (the veth's carrier), but
	// the probes go unanswered.
	if err := lab.Stop(o, "fe3", true); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	took := waitAlive(t, o, 1, 3, false, 2*time.Second)
	t.Logf("FE 1 took ife3 down %s after FE 3 was killed (probe interval %s x %d misses)", took.Round(time.Millisecond), probeInterval, probeMisses)
	if l, _ := feLink(o, 1, 3); !l.Up {
		t.Errorf("ife3's port went down with FE 3: %+v; the test wants a carrier that stays up", l)
	}
	// The CE sees FE 3 gone after its heartbeats (3 s in the lab) and
	// withdraws the routes to host 3's site (IPv4 and IPv6) then, not 30 s
	// later.
	eventually(t, 10*time.Second, "the CE withdraws the routes through FE 3's ports", func() error {
		if n := routes(); n != before-2 {
			return fmt.Errorf("%d routes, want %d", n, before-2)
		}
		return nil
	})
	t.Logf("the CE withdrew the routes through FE 3's ports %s after the kill", time.Since(killed).Round(time.Millisecond))

	// FE 3 back: it answers, the link is alive again, the routes return.
	if err := lab.Start(o, "fe3"); err != nil {
		t.Fatal(err)
	}
	waitAlive(t, o, 1, 3, true, 15*time.Second)
	eventually(t, 15*time.Second, "the routes through FE 3's ports back", func() error {
		if n := routes(); n != before {
			return fmt.Errorf("%d routes, want %d", n, before)
		}
		return pingFromHost(h1.Namespace, site3, 1, 0)
	})

	// FE 2 killed while host 1 pings host 3's site over the direct link.
	const interval, count = 50 * time.Millisecond, 60
	ping := exec.Command("nsenter", "--net=/run/netns/"+h1.Namespace, "ping", "-c", strconv.Itoa(count), "-i", "0.05", "-W", "1", site3)
	out := make(chan []byte, 1)
	go func() {
		b, _ := ping.CombinedOutput()
		out <- b
	}()
	time.Sleep(time.Second)
	if err := lab.Stop(o, "fe2", true); err != nil {
		t.Fatal(err)
	}
	took = waitAlive(t, o, 1, 2, false, 2*time.Second)
	res := <-out
	m := pingReceived.FindSubmatch(res)
	if m == nil {
		t.Fatalf("ping output: %s", res)
	}
	sent, _ := strconv.Atoi(string(m[1]))
	got, _ := strconv.Atoi(string(m[2]))
	lost := sent - got
	t.Logf("FE 2 killed: FE 1 took ife2 down after %s; host 1 to host 3's site: %d echoes, %d lost", took.Round(time.Millisecond), sent, lost)
	if limit := int(detection/interval) + 2; sent != count || lost > limit {
		t.Errorf("FE 2 killed: %d of %d echoes lost, want at most %d:\n%s", lost, sent, limit, res)
	}
	if l, _ := feLink(o, 1, 3); !l.Alive {
		t.Errorf("FE 1's link to FE 3 not alive with FE 2 dead: %+v", l)
	}
	if err := lab.Start(o, "fe2"); err != nil {
		t.Fatal(err)
	}
	waitAlive(t, o, 1, 2, true, 15*time.Second)
}

// transitOf returns FE n's ife_transit counter.
func transitOf(t *testing.T, o lab.Options, n int) uint64 {
	t.Helper()
	name, _ := lab.FEName(n)
	var st fe.Status
	if err := status.Get(o.Socket(name), "/", &st); err != nil {
		t.Fatal(err)
	}
	return st.Counters["ife_transit"]
}

// TestClusterFailoverIntermediate: in a --cluster 4 lab with the direct
// link between FE 1 and FE 3 down, host 1's pings to host 3's site cross
// an intermediate FE (2 or 4, by the flow's hash); that FE killed while
// pings flow at 50 ms intervals, FE 1 and FE 3 see it dead by its probes
// and send the flow through the other intermediate: no more echoes lost
// than the detection time holds, long before the CE could have said.
func TestClusterFailoverIntermediate(t *testing.T) {
	requireLab(t)
	o := upCluster(t, "spv", 4, 0)
	h1, h3 := o.ClusterHost(1), o.ClusterHost(3)
	site3 := h3.SiteAddr.String()
	eventually(t, 15*time.Second, "host 1 reaches host 3's site", func() error { return pingFromHost(h1.Namespace, site3, 1, 0) })
	if err := lab.SetMeshLink(o, 1, 3, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "ife-1-3 down at both ends", func() error {
		for _, e := range [][2]int{{1, 3}, {3, 1}} {
			l, err := feLink(o, e[0], uint32(e[1]))
			if err != nil {
				return err
			}
			if l.Up {
				return fmt.Errorf("FE %d's link to FE %d up", e[0], e[1])
			}
		}
		return nil
	})
	for _, n := range []int{1, 3} {
		for _, peer := range []uint32{2, 4} {
			waitAlive(t, o, n, peer, true, 5*time.Second)
		}
	}
	// Which intermediate the echoes (and the answers) cross.
	before := map[int]uint64{2: transitOf(t, o, 2), 4: transitOf(t, o, 4)}
	if err := pingFromHost(h1.Namespace, site3, 10, 0); err != nil {
		t.Fatal(err)
	}
	victim, other := 2, 4
	if d2, d4 := transitOf(t, o, 2)-before[2], transitOf(t, o, 4)-before[4]; d4 > d2 {
		victim, other = 4, 2
	} else if d2 == 0 {
		t.Fatalf("neither FE 2 nor FE 4 carried host 1's echoes to host 3 with ife-1-3 down")
	}
	t.Logf("host 1 to host 3 with ife-1-3 down crosses FE %d", victim)

	const interval, count = 50 * time.Millisecond, 60
	ping := exec.Command("nsenter", "--net=/run/netns/"+h1.Namespace, "ping", "-c", strconv.Itoa(count), "-i", "0.05", "-W", "1", site3)
	out := make(chan []byte, 1)
	go func() {
		b, _ := ping.CombinedOutput()
		out <- b
	}()
	time.Sleep(time.Second)
	otherBefore := transitOf(t, o, other)
	victimName, _ := lab.FEName(victim)
	if err := lab.Stop(o, victimName, true); err != nil {
		t.Fatal(err)
	}
	took1 := waitAlive(t, o, 1, uint32(victim), false, 2*time.Second)
	took3 := waitAlive(t, o, 3, uint32(victim), false, 2*time.Second)
	res := <-out
	m := pingReceived.FindSubmatch(res)
	if m == nil {
		t.Fatalf("ping output: %s", res)
	}
	sent, _ := strconv.Atoi(string(m[1]))
	got, _ := strconv.Atoi(string(m[2]))
	lost := sent - got
	t.Logf("FE %d killed: FE 1 took its link down after %s, FE 3 after %s; host 1 to host 3's site: %d echoes, %d lost, now through FE %d",
		victim, took1.Round(time.Millisecond), took3.Round(time.Millisecond), sent, lost, other)
	if limit := int(detection/interval) + 2; sent != count || lost > limit {
		t.Errorf("FE %d killed: %d of %d echoes lost, want at most %d:\n%s", victim, lost, sent, limit, res)
	}
	if moved := transitOf(t, o, other) - otherBefore; moved == 0 {
		t.Errorf("FE %d carried nothing after FE %d was killed", other, victim)
	}
	// ife-1-3 up again: its probes, which went unanswered while it was
	// down, are answered again.
	if err := lab.SetMeshLink(o, 1, 3, true); err != nil {
		t.Fatal(err)
	}
	l, err := feLink(o, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "FE 1's probes of ife3 answered again", func() error {
		now, err := feLink(o, 1, 3)
		if err != nil {
			return err
		}
		if !now.Up || !now.Alive || now.ProbesAnswered < l.ProbesAnswered+5 {
			return fmt.Errorf("FE 1's link to FE 3 %+v, answered before %d", now, l.ProbesAnswered)
		}
		return nil
	})
}
