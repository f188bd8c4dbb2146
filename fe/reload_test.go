package fe

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/fe/fedptest"
	"github.com/splitplane/splitplane/forces"
)

// classifierFake is the recording datapath with a classifier: it logs the
// classifier calls as text.
type classifierFake struct {
	*fedptest.Datapath
	calls []string
}

func (f *classifierFake) SetControlCPU(cpu int) error                  { return nil }
func (f *classifierFake) AddControlFlow(datapath.ControlFlow) error    { return nil }
func (f *classifierFake) DeleteControlFlow(datapath.ControlFlow) error { return nil }
func (f *classifierFake) SetForwardCPUs([]int) error                   { return nil }
func (f *classifierFake) SetPolicers(r datapath.PoliceRates) error {
	f.calls = append(f.calls, "policer "+policeString(r))
	return nil
}
func (f *classifierFake) SetGTSM(peer netip.Addr, on bool) error {
	f.calls = append(f.calls, fmt.Sprintf("gtsm %s %v", peer, on))
	return nil
}

// Reload applies the policer and the GTSM peers at run time, lists what
// needs a restart, applies nothing twice, and refuses a bad configuration
// without changing anything.
func TestReload(t *testing.T) {
	base := func() Config {
		return Config{Ports: []string{"unused0"}, Classifier: &ClassifierConfig{ControlCPU: -1, PolicePPS: 1000, GTSMPeers: []string{"192.0.2.1", "192.0.2.2"}}}
	}
	a, err := New(base(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reload(base()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("reload before Run: %v, want ErrNotRunning", err)
	}
	dp := &classifierFake{Datapath: newFake()}
	a.prog.dp = dp

	r, err := a.Reload(base())
	if err != nil || len(r.Applied)+len(r.Restart)+len(dp.calls) != 0 {
		t.Fatalf("reload of the same config: %+v, calls %v, %v", r, dp.calls, err)
	}

	cfg := base()
	cfg.HeartbeatInterval = 3 * time.Second
	cfg.Ports = []string{"unused0", "unused1"}
	cfg.Classifier.PolicePPS = 5000
	cfg.Classifier.GTSMPeers = []string{"192.0.2.2", "192.0.2.3"}
	cfg.Classifier.ControlCPU = 1
	r, err = a.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantApplied := []string{"classifier.police_pps", "classifier.police_burst", "classifier.gtsm_peers"}
	wantRestart := []string{"ports", "heartbeat_interval", "classifier.control_cpu"}
	if !slices.Equal(r.Applied, wantApplied) || !slices.Equal(r.Restart, wantRestart) {
		t.Fatalf("reload: applied %v, restart %v; want %v, %v", r.Applied, r.Restart, wantApplied, wantRestart)
	}
	wantCalls := "policer to_router 5000/500 ttl_options 1000/100 arp_nd 1000/100 other 5000/500\ngtsm 192.0.2.1 false\ngtsm 192.0.2.3 true"
	if got := strings.Join(dp.calls, "\n"); got != wantCalls {
		t.Fatalf("datapath calls:\n%s\nwant:\n%s", got, wantCalls)
	}
	st := a.classifier.status
	if st.PolicePPS != 5000 || st.Police.ToRouter.PPS != 5000 || st.Police.ARPND.PPS != 1000 || !slices.Equal(st.GTSMPeers, cfg.Classifier.GTSMPeers) {
		t.Fatalf("classifier status after reload: %+v", st)
	}
	if a.cfg.Classifier.PolicePPS != 1000 {
		t.Fatal("reload changed the configuration the FE started with")
	}

	// Again: the applied settings are now the baseline; what needs a
	// restart is still reported.
	dp.calls = nil
	cfg2 := base()
	cfg2.HeartbeatInterval, cfg2.Ports = cfg.HeartbeatInterval, cfg.Ports
	cfg2.Classifier.PolicePPS, cfg2.Classifier.GTSMPeers, cfg2.Classifier.ControlCPU = 5000, cfg.Classifier.GTSMPeers, 1
	r, err = a.Reload(cfg2)
	if err != nil || len(r.Applied) != 0 || !slices.Equal(r.Restart, wantRestart) || len(dp.calls) != 0 {
		t.Fatalf("second reload: %+v, calls %v, %v", r, dp.calls, err)
	}

	bad := base()
	bad.Classifier.GTSMPeers = []string{"not-an-address"}
	bad.Classifier.PolicePPS = 1
	if _, err := a.Reload(bad); !errors.Is(err, ErrConfig) || len(dp.calls) != 0 {
		t.Fatalf("bad config: %v, calls %v; want ErrConfig and no calls", err, dp.calls)
	}
}

// Reload applies a class's own rate at run time: the datapath gets every
// class's rate (the changed one and the others' defaults), the status
// shows it, and only the changed class is listed as applied.
func TestReloadPoliceClass(t *testing.T) {
	base := func() Config {
		return Config{Ports: []string{"unused0"}, Classifier: &ClassifierConfig{ControlCPU: -1, PolicePPS: 20000}}
	}
	a, err := New(base(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dp := &classifierFake{Datapath: newFake()}
	a.prog.dp = dp

	cfg := base()
	cfg.Classifier.Police.ARPND = &PoliceRate{PPS: 50}
	r, err := a.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Applied, []string{"classifier.police.arp_nd"}) || len(r.Restart) != 0 {
		t.Fatalf("reload: applied %v, restart %v; want [classifier.police.arp_nd], []", r.Applied, r.Restart)
	}
	want := "policer to_router 20000/2000 ttl_options 1000/100 arp_nd 50/5 other 20000/2000"
	if got := strings.Join(dp.calls, "\n"); got != want {
		t.Fatalf("datapath calls:\n%s\nwant:\n%s", got, want)
	}
	if st := a.classifier.status.Police; st.ARPND != (forces.FEPoliceRate{PPS: 50, Burst: 5}) || st.ToRouter.PPS != 20000 {
		t.Fatalf("status after reload: %+v", st)
	}

	// The same again changes nothing; police_pps then moves the classes
	// that take it as their default, not arp_nd.
	dp.calls = nil
	if r, err := a.Reload(cfg); err != nil || len(r.Applied)+len(r.Restart)+len(dp.calls) != 0 {
		t.Fatalf("same config again: %+v, calls %v, %v", r, dp.calls, err)
	}
	cfg = base()
	cfg.Classifier.Police.ARPND = &PoliceRate{PPS: 50}
	cfg.Classifier.PolicePPS = 500
	if _, err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	want = "policer to_router 500/50 ttl_options 500/50 arp_nd 50/5 other 500/50"
	if got := strings.Join(dp.calls, "\n"); got != want {
		t.Fatalf("datapath calls:\n%s\nwant:\n%s", got, want)
	}

	// A bad class is refused, naming it, and nothing is called.
	dp.calls = nil
	cfg.Classifier.Police.TTLOptions = &PoliceRate{PPS: 0, Burst: 10}
	if _, err := a.Reload(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "classifier.police.ttl_options.pps 0") || len(dp.calls) != 0 {
		t.Fatalf("bad class: %v, calls %v", err, dp.calls)
	}
}
