package fe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
)

func TestDirectSpill(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		budget, other, demand float64
		want                  int
	}{
		{"no demand", 100, 50, 0, 0},
		{"fits", 100, 0, 60, 0},
		{"fits beside transit", 100, 40, 60, 0},
		// 150 wanted, 100 fit: a third spills.
		{"over by half", 100, 0, 150, 333},
		// 40 of the link is others' traffic: 60 of 150 fit.
		{"transit counts", 100, 40, 150, 600},
		// Others fill the budget: everything spills.
		{"no room", 100, 100, 30, 1000},
		{"over budget", 100, 130, 30, 1000},
	} {
		if got := directSpill(tc.budget, tc.other, tc.demand); got != tc.want {
			t.Errorf("%s: directSpill(budget %g, other %g, demand %g) = %d, want %d",
				tc.name, tc.budget, tc.other, tc.demand, got, tc.want)
		}
	}
}

func TestTwoPhaseSpill(t *testing.T) {
	for fes, want := range map[int]int{1: 0, 2: 0, 3: 333, 4: 500, 32: 938} {
		if got := twoPhaseSpill(fes); got != want {
			t.Errorf("twoPhaseSpill(%d) = %d, want %d", fes, got, want)
		}
	}
}

// TestVLBStep drives direct VLB with counters as the datapath would move
// them: the link to FE 3 has 8 Mbit/s (1 MB/s) and max_link_load 0.5.
func TestVLBStep(t *testing.T) {
	v := newVLB(VLBConfig{Mode: VLBDirect, MaxLinkLoad: 0.5, Interval: time.Second},
		[]InterFELink{{Port: "ife3", PeerFE: 3, CapacityMbps: 8}, {Port: "ife2", PeerFE: 2, CapacityMbps: 8}},
		func(port string) int { return map[string]int{"ife3": 13, "ife2": 12}[port] })
	var tx3, dem3 uint64
	step := func(linkBps, demandBps uint64) map[uint32]int {
		tx3 += linkBps
		dem3 += demandBps
		return v.step(1, map[int]datapath.PortCounters{13: {TxBytes: tx3}, 12: {}},
			map[uint32]datapath.FEDemand{3: {Bytes: dem3}, 2: {}})
	}
	if c := step(0, 0); len(c) != 0 {
		t.Fatalf("first step (priming): %v", c)
	}
	// 400 kB/s fits under 500.
	for range 5 {
		if c := step(400e3, 400e3); len(c) != 0 {
			t.Fatalf("400 kB/s on a 500 kB/s budget: changes %v", c)
		}
	}
	// 1 MB/s: the smoothed rates climb, and the share with them, until
	// half the flows spill: the direct half fills the budget.
	spill := 0
	for range 12 {
		if c, ok := step(uint64(1e6*(1-float64(spill)/1000)), 1e6)[3]; ok {
			if c < spill {
				t.Fatalf("share fell from %d to %d under a rising load", spill, c)
			}
			spill = c
			v.links[0].spill = c // as run does once the datapath took it
		}
	}
	if spill < 480 || spill > 520 {
		t.Errorf("1 MB/s towards FE 3 on a 500 kB/s budget: spill %d, want about 500", spill)
	}
	// A small wobble of the load changes nothing (hysteresis).
	if c := step(uint64(1.01e6*(1-float64(spill)/1000)), 1.01e6); len(c) != 0 {
		t.Errorf("1%% more load: changes %v, want none", c)
	}
	// The load goes: every flow direct again.
	var back bool
	for range 10 {
		if c, ok := step(0, 0)[3]; ok && c == 0 {
			back = true
			break
		}
	}
	if !back {
		t.Errorf("no return to direct after the load went (links %+v)", *v.links[0])
	}
	st := v.status()
	if st == nil || len(st.Links) != 2 || st.Links[0].PeerFE != 3 || st.Links[0].CapacityMbps != 8 {
		t.Errorf("status %+v", st)
	}
}

func TestVLBConfig(t *testing.T) {
	base := func(v VLBConfig, capacity int) Config {
		return Config{ID: 1, Ports: []string{"eth0", "ife2"}, InterFELinks: []InterFELink{{Port: "ife2", PeerFE: 2, CapacityMbps: capacity}}, VLB: v}
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{base(VLBConfig{Mode: "random"}, 0), `vlb.mode "random": must be direct, two_phase or off`},
		{base(VLBConfig{MaxLinkLoad: 1.5}, 0), "vlb.max_link_load 1.5: must be 0.05 to 1"},
		{base(VLBConfig{MaxLinkLoad: -0.1}, 0), "vlb.max_link_load -0.1: must be 0.05 to 1"},
		{base(VLBConfig{Interval: 10 * time.Millisecond}, 0), "vlb.interval 10ms: must be at least 100ms"},
		{base(VLBConfig{}, -1), "inter_fe_links[0].capacity_mbps -1: must be 0"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v, %+v) = %v, want an ErrConfig naming %q", tc.cfg.VLB, tc.cfg.InterFELinks, err, tc.want)
		}
	}
	c := base(VLBConfig{}, 0)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.VLB.Mode != VLBDirect || c.VLB.MaxLinkLoad != 0.8 || c.VLB.Interval != time.Second {
		t.Errorf("defaults: %+v, want direct, 0.8, 1s", c.VLB)
	}
}
