package ce

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/logtest"
)

// discovered plays the FE until it has answered the CE's discovery query
// (heartbeats answered on the way); then the FE stops reading.
func (f *fakeFE) discovered() {
	f.t.Helper()
	for {
		m, err := f.conn.ReadMessage()
		if err != nil {
			f.t.Fatalf("waiting for the discovery query: %v", err)
		}
		switch {
		case m.Header.Type == forces.MsgQuery:
			f.answer(m)
			return
		case m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK:
			f.conn.WriteMessage(forces.NewHeartbeat(f.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
		}
	}
}

// grCE starts a CE whose one BGP neighbour has graceful restart on (when gr)
// and that waits up to wait for the FEs of allowed.
func grCE(t *testing.T, gr bool, wait time.Duration, allowed ...string) (*CE, *logtest.Recorder) {
	t.Helper()
	rec := &logtest.Recorder{}
	c := startCEWith(t, time.Second, slog.New(rec), func(c *Config) {
		n := NeighborConfig{Address: "127.0.0.2", ASN: 65002, Passive: true}
		if gr {
			n.GracefulRestart = &GracefulRestartConfig{Enabled: true}
		}
		c.Neighbors = []NeighborConfig{n}
		c.GracefulRestartFEWait, c.ForCESAllowedFEs, c.SyncHold = wait, allowed, 500*time.Millisecond
	})
	return c, rec
}

// associateFE has FE n associate and answer discovery, saying whether it
// kept its FIB (nil: as an FE that does not know the component).
func associateFE(t *testing.T, c *CE, n uint32, kept *bool) {
	t.Helper()
	f, _ := dialFE(t, c, n)
	f.fibKept = kept
	f.discovered()
}

func neighborsAdded(t *testing.T, c *CE) bool { return len(statusOf(t, c).Neighbors) > 0 }

// With a graceful-restart neighbour the CE adds its neighbours only once
// every FE it expects (forces_allowed_fes) has said whether it kept its FIB,
// and claims the forwarding state preserved when all did; a reload waits
// for the neighbours to be added.
func TestGracefulRestartWaitsForFEs(t *testing.T) {
	yes := true
	c, rec := grCE(t, true, time.Minute, "1", "2")
	associateFE(t, c, 1, &yes)
	time.Sleep(300 * time.Millisecond)
	if neighborsAdded(t, c) {
		t.Fatal("neighbours added before FE 2, which forces_allowed_fes names, associated")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Reload(ctx, c.cfg)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reload during the wait for FEs: %v, want it to wait", err)
	}
	associateFE(t, c, 2, &yes)
	waitFor(t, func() bool { return neighborsAdded(t, c) })
	if !statusOf(t, c).ForwardingPreserved {
		t.Fatal("status: forwarding state not claimed preserved though both FEs kept their FIB")
	}
	if !rec.Has("INFO bgp: graceful restart: claiming the forwarding state preserved", "fes=2", "every FE that associated kept its FIB") {
		t.Fatalf("no INFO line on the claim:\n%s", rec.String())
	}
	if _, err := c.Reload(context.Background(), c.cfg); err != nil {
		t.Fatalf("reload after the neighbours were added: %v", err)
	}
}

// The claim is made only when every FE kept its FIB: an FE that did not,
// or that does not say, ends the wait at once with no claim; with no FE
// at all the wait ends at graceful_restart_fe_wait, with no claim.
func TestGracefulRestartNoClaim(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name   string
		fe     func(t *testing.T, c *CE)
		reason string
	}{
		{"FE lost its FIB", func(t *testing.T, c *CE) { associateFE(t, c, 1, &no) }, "reason=FE(1) came up without the FIB"},
		{"FE does not say", func(t *testing.T, c *CE) { associateFE(t, c, 1, nil) }, "reason=FE(1) came up without the FIB"},
		{"no FE", func(*testing.T, *CE) {}, "no FE associated within graceful_restart_fe_wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := time.Minute
			if tc.name == "no FE" {
				wait = 300 * time.Millisecond
			}
			c, rec := grCE(t, true, wait, "1", "2")
			tc.fe(t, c)
			waitFor(t, func() bool { return neighborsAdded(t, c) })
			if statusOf(t, c).ForwardingPreserved {
				t.Fatal("forwarding state claimed preserved")
			}
			if !rec.Has("INFO bgp: graceful restart: not claiming the forwarding state preserved", tc.reason) {
				t.Fatalf("no INFO line naming %q:\n%s", tc.reason, rec.String())
			}
		})
	}
}

// Without a graceful-restart neighbour nothing waits: the neighbours are
// there as soon as the CE is.
func TestNoGracefulRestartNoWait(t *testing.T) {
	c, rec := grCE(t, false, time.Minute, "1")
	if !neighborsAdded(t, c) {
		t.Fatal("neighbours not added at start without graceful restart")
	}
	if rec.Has("graceful restart") || statusOf(t, c).ForwardingPreserved {
		t.Fatalf("a claim without graceful restart:\n%s", rec.String())
	}
}

func TestDecideForwarding(t *testing.T) {
	fe1, fe2 := forces.FEID(1), forces.FEID(2)
	for _, tc := range []struct {
		reports map[forces.ID]bool
		want    bool
		reason  string
	}{
		{nil, false, "no FE associated within graceful_restart_fe_wait (1s)"},
		{map[forces.ID]bool{fe1: true}, true, "every FE that associated kept its FIB"},
		{map[forces.ID]bool{fe1: true, fe2: true}, true, "every FE"},
		{map[forces.ID]bool{fe1: true, fe2: false}, false, "FE(2) came up without"},
	} {
		got := decideForwarding(tc.reports, time.Second)
		if got.preserved != tc.want || !strings.Contains(got.reason, tc.reason) || got.fes != len(tc.reports) {
			t.Errorf("decideForwarding(%v) = %+v, want %v, %q", tc.reports, got, tc.want, tc.reason)
		}
	}
}
