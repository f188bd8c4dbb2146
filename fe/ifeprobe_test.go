package fe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/splitplane/splitplane/forces/ife"
	"github.com/splitplane/splitplane/internal/logtest"
)

// fakePeer is the other end of an inter-FE link as the probe socket sees
// it: while answering, it turns each probe request around as the peer's
// datapath does (ife_probe); while not, it is an FE whose process died.
type fakePeer struct {
	fe        uint32
	answering atomic.Bool
	responder atomic.Uint32 // 0: fe
	replies   chan []byte
	closed    chan struct{}
	once      sync.Once
	requests  atomic.Uint64
	readErr   atomic.Pointer[error] // returned once by Read
}

func newFakePeer(fe uint32) *fakePeer {
	p := &fakePeer{fe: fe, replies: make(chan []byte, 16), closed: make(chan struct{})}
	p.answering.Store(true)
	return p
}

func (p *fakePeer) Write(b []byte) (int, error) {
	h, pr, err := ife.DecodeProbe(b)
	if err != nil || pr.Reply {
		return 0, errors.New("fake peer: not a probe request")
	}
	p.requests.Add(1)
	if !p.answering.Load() {
		return len(b), nil
	}
	pr.Reply, pr.Responder = true, p.fe
	if r := p.responder.Load(); r != 0 {
		pr.Responder = r
	}
	reply, err := ife.EncodeProbe(nil, ife.Header{Dst: h.Src, Src: h.Dst}, pr)
	if err != nil {
		return 0, err
	}
	select {
	case p.replies <- reply:
	default:
	}
	return len(b), nil
}

func (p *fakePeer) Read(b []byte) (int, error) {
	if err := p.readErr.Swap(nil); err != nil {
		return 0, *err
	}
	select {
	case r := <-p.replies:
		return copy(b, r), nil
	case <-p.closed:
		return 0, io.EOF
	}
}

func (p *fakePeer) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5s", what)
}

// An inter-FE link whose peer stops answering the probes goes down in the
// datapath after inter_fe_probe_misses intervals, the other link staying
// up, and comes back at the first reply; the status and the log say so.
// Replies from another FE than the link's peer do not count.
func TestProbeLiveness(t *testing.T) {
	a, dp := clusterAgent(t)
	var logs logtest.Buffer
	a.log = slog.New(slog.NewTextHandler(&logs, nil))
	a.cfg.InterFEProbeInterval, a.cfg.InterFEProbeMisses = 10*time.Millisecond, 3
	a.do(func() {
		a.setPeerMAC(8, peerMAC(2))
		a.setPeerMAC(9, peerMAC(3))
	})
	peers := map[int]*fakePeer{8: newFakePeer(2), 9: newFakePeer(3)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.runProbes(ctx, func(ifindex int) (probeConn, error) { return peers[ifindex], nil })
	}()
	defer func() { cancel(); <-done }()

	linkUp := func(fe uint32) bool { return dp.InterFELinks()[fe].Up }
	status := func(port string) (s struct {
		alive          bool
		sent, answered uint64
	}) {
		for _, l := range a.Status().InterFELinks {
			if l.Port == port {
				s.alive, s.sent, s.answered = l.Alive, l.ProbesSent, l.ProbesAnswered
			}
		}
		return s
	}
	waitFor(t, "replies on both links", func() bool { return status("ife2").answered > 3 && status("ife3").answered > 3 })
	if !linkUp(2) || !linkUp(3) || !status("ife3").alive {
		t.Fatalf("both peers answer: links up %t %t, ife3 alive %t", linkUp(2), linkUp(3), status("ife3").alive)
	}

	peers[9].answering.Store(false)
	silentFrom := peers[9].requests.Load()
	waitFor(t, "the link to the silent FE 3 down", func() bool { return !linkUp(3) })
	// It took the configured misses: three probes unanswered at least.
	if n := peers[9].requests.Load() - silentFrom; n < 3 {
		t.Errorf("link down after %d unanswered probes, want at least 3", n)
	}
	if !linkUp(2) || status("ife3").alive || !status("ife2").alive {
		t.Errorf("FE 3 silent: link to FE 2 up %t (want true), ife3 alive %t, ife2 alive %t", linkUp(2), status("ife3").alive, status("ife2").alive)
	}
	if v, ok := linkAliveMetric(t, a, "ife3", "3"); !ok || v != 0 {
		t.Errorf("splitplane_fe_inter_fe_link_alive{port=ife3,peer_fe=3} = %v (present %t), want 0", v, ok)
	}
	if v, ok := linkAliveMetric(t, a, "ife2", "2"); !ok || v != 1 {
		t.Errorf("splitplane_fe_inter_fe_link_alive{port=ife2,peer_fe=2} = %v (present %t), want 1", v, ok)
	}
	if !strings.Contains(logs.String(), `msg="fe: inter-FE link peer silent; routing around it" port=ife3 peer_fe=3 silence=`) {
		t.Errorf("no warning naming ife3 and FE 3 in the log:\n%s", logs.String())
	}

	// Another FE answering on the link (a miswired mesh) is no peer.
	peers[9].responder.Store(4)
	peers[9].answering.Store(true)
	waitFor(t, "stray replies counted", func() bool { return a.links[9].probe.strays.Load() > 2 })
	if linkUp(3) {
		t.Errorf("replies from FE 4 on the link to FE 3 took it up")
	}

	peers[9].responder.Store(0)
	waitFor(t, "the link to FE 3 up again", func() bool { return linkUp(3) })
	if !strings.Contains(logs.String(), `msg="fe: inter-FE link peer answers again; the link carries traffic" port=ife3 peer_fe=3`) {
		t.Errorf("no info of ife3 back in the log:\n%s", logs.String())
	}

	// Alive but the port down: down; port up again: up. While the port
	// is down the probes pause: their silence says nothing of the peer,
	// and the link is up the moment the port is.
	a.do(func() {
		a.ports[9].Up = false
		a.linkState(9)
	})
	if linkUp(3) {
		t.Errorf("port down, peer alive: link up")
	}
	peers[9].answering.Store(false)
	time.Sleep(20 * time.Millisecond) // a probe sent before may still be counted
	sentDown := peers[9].requests.Load()
	time.Sleep(100 * time.Millisecond)
	if n := peers[9].requests.Load() - sentDown; n != 0 {
		t.Errorf("%d probes sent while the port was down", n)
	}
	a.do(func() {
		a.ports[9].Up = true
		a.linkState(9)
	})
	if !linkUp(3) {
		t.Errorf("port up again: link down")
	}
	// And a peer that died meanwhile is found out as any other.
	waitFor(t, "the link to FE 3, silent after the port came back, down", func() bool { return !linkUp(3) })
}

// Nothing is sent on a link whose peer's MAC is not known yet, and such a
// link is not declared, so it cannot go down for silence.
func TestProbeWaitsForPeerMAC(t *testing.T) {
	a, dp := clusterAgent(t)
	a.cfg.InterFEProbeInterval = 10 * time.Millisecond
	peer := newFakePeer(2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	a.runProbes(ctx, func(ifindex int) (probeConn, error) {
		if ifindex == 8 {
			return peer, nil
		}
		return nil, errors.New("no socket")
	})
	if n := peer.requests.Load(); n != 0 {
		t.Errorf("%d probes sent before the peer's MAC was known", n)
	}
	if _, ok := dp.InterFELinks()[2]; ok {
		t.Errorf("link declared without a peer MAC")
	}
}

func TestCheckLinkMTUs(t *testing.T) {
	links := []InterFELink{{Port: "ife2", PeerFE: 2}, {Port: "ife3", PeerFE: 3}}
	got := checkLinkMTUs(links, map[string]int{"eth0": 1500, "eth1": 9000, "ife2": 9048, "ife3": 9047, "lo": 65536})
	if len(got) != 1 || got[0] != (linkMTUProblem{port: "ife3", peerFE: 3, mtu: 9047, need: 9048}) {
		t.Errorf("jumbo port: %+v, want ife3 alone, 9047 < 9048", got)
	}
	if got := checkLinkMTUs(links, map[string]int{"eth0": 1500, "ife2": 1548, "ife3": 1548}); len(got) != 0 {
		t.Errorf("links of 1548 for 1500-byte ports: %+v, want none", got)
	}
	if got := checkLinkMTUs(links, map[string]int{"ife2": 1500, "ife3": 1500}); len(got) != 0 {
		t.Errorf("links alone: %+v, want none", got)
	}
}

// The agent warns at start for a link below the MTU it needs, naming it.
func TestWarnLinkMTUs(t *testing.T) {
	a, _ := testAgent(t, Config{ID: 1, Ports: []string{"p7", "ife2"}, InterFELinks: []InterFELink{{Port: "ife2", PeerFE: 2}}})
	var logs logtest.Buffer
	a.log = slog.New(slog.NewTextHandler(&logs, nil))
	a.ports[7].mtu = 1500
	a.ports[8] = &port{Name: "ife2", Ifindex: 8, Up: true, mac: peerMAC(9), mtu: 1500}
	a.startInterFE(newFake())
	want := `msg="fe: inter-FE link MTU too small for the ports' largest packets; those go to the kernel (pass_mtu)" port=ife2 peer_fe=2 mtu=1500 mtu_needed=1548`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, logs.String())
	}
}

func TestConfigProbe(t *testing.T) {
	c := Config{Ports: []string{"eth0"}}
	if err := c.Validate(); err != nil || c.InterFEProbeInterval != 100*time.Millisecond || c.InterFEProbeMisses != 3 {
		t.Fatalf("defaults: %v, interval %s, misses %d; want 100ms and 3", err, c.InterFEProbeInterval, c.InterFEProbeMisses)
	}
	for _, tc := range []struct {
		interval time.Duration
		misses   int
		want     string
	}{
		{9 * time.Millisecond, 3, "inter_fe_probe_interval 9ms: must be at least 10ms"},
		{-time.Second, 3, "inter_fe_probe_interval -1s: must be at least 10ms"},
		{time.Second, -1, "inter_fe_probe_misses -1: must be 1 to 1000"},
		{time.Second, 1001, "inter_fe_probe_misses 1001: must be 1 to 1000"},
	} {
		c := Config{Ports: []string{"eth0"}, InterFEProbeInterval: tc.interval, InterFEProbeMisses: tc.misses}
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("interval %s misses %d: %v, want an ErrConfig naming %q", tc.interval, tc.misses, err, tc.want)
		}
	}
	c = Config{Ports: []string{"eth0"}, InterFEProbeInterval: 10 * time.Millisecond, InterFEProbeMisses: 1}
	if err := c.Validate(); err != nil {
		t.Errorf("10ms, 1 miss: %v", err)
	}
}

// linkAliveMetric collects splitplane_fe_inter_fe_link_alive of the link
// on port to peer.
func linkAliveMetric(t *testing.T, a *Agent, port, peer string) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 256)
	go func() { (&feCollector{a: a}).Collect(ch); close(ch) }()
	var v float64
	var found bool
	for m := range ch {
		if m.Desc() != feLinkAlive {
			continue
		}
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["port"] == port && labels["peer_fe"] == peer {
			v, found = d.GetGauge().GetValue(), true
		}
	}
	return v, found
}

// The socket of a port that goes down reports ENETDOWN once: the probes
// go on.
func TestProbeSurvivesReadError(t *testing.T) {
	a, _ := clusterAgent(t)
	a.cfg.InterFEProbeInterval = 10 * time.Millisecond
	a.do(func() { a.setPeerMAC(8, peerMAC(2)) })
	peer := newFakePeer(2)
	var enetdown error = syscall.ENETDOWN
	peer.readErr.Store(&enetdown)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.runProbes(ctx, func(ifindex int) (probeConn, error) {
			if ifindex == 8 {
				return peer, nil
			}
			return nil, errors.New("no socket")
		})
	}()
	defer func() { cancel(); <-done }()
	waitFor(t, "replies after ENETDOWN", func() bool { return a.links[8].probe.answered.Load() > 3 })
}
