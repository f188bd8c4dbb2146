package classifier

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func checkLog(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: changes\n\t%s\nwant\n\t%s", step, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// nicMatches returns the flows the NIC steers to queue, besides foreign.
func nicMatches(t *testing.T, n *fakeNIC, queue uint32) []NtupleMatch {
	t.Helper()
	rs, _ := n.Rules()
	var ms []NtupleMatch
	for _, r := range rs {
		if r == foreign {
			continue
		}
		if r.Queue != queue {
			t.Errorf("rule %v steers to queue %d, want %d", r, r.Queue, queue)
		}
		ms = append(ms, r.Match())
	}
	return ms
}

func sameFlows(a, b []NtupleMatch) bool {
	key := func(m NtupleMatch) string { return m.String() }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i, m := range a {
		ka[i] = key(m)
	}
	for i, m := range b {
		kb[i] = key(m)
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// TestSteererApply follows the NIC's rules through a sequence of desired
// flows: each step changes only what differs, and the NIC then holds exactly
// the desired flows (to the control queue) plus the operator's own rule.
func TestSteererApply(t *testing.T) {
	nic := newFakeNIC(8, 4, 16)
	nic.rules[foreign.Loc] = foreign
	s := NewSteerer(nic, SteererConfig{ControlQueue: 0, Affinity: &fakeAffinity{}})

	steps := []struct {
		name    string
		desired []NtupleMatch
		changes []string
	}{
		{"first", []NtupleMatch{flowA, flowB, flowAm}, []string{
			"insert loc 7 tcp 192.0.2.1:179 -> 192.0.2.100:40000 queue 0",
			"insert loc 6 tcp [2001:db8::1]:179 -> [2001:db8::100]:40001 queue 0",
		}},
		{"same again", []NtupleMatch{flowB, flowA}, nil},
		{"A goes, C comes", []NtupleMatch{flowB, flowC}, []string{
			"delete 7",
			"insert loc 7 tcp 192.0.2.2:6700 -> 192.0.2.100:40002 queue 0",
		}},
		{"none", nil, []string{"delete 6", "delete 7"}},
		{"none again", nil, nil},
	}
	for _, st := range steps {
		if err := s.Apply(st.desired); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		checkLog(t, st.name, nic.takeLog(), st.changes...)
		wantFlows := []NtupleMatch{}
		for _, m := range st.desired {
			if m != flowAm {
				wantFlows = append(wantFlows, m)
			}
		}
		if got := nicMatches(t, nic, 0); !sameFlows(got, wantFlows) {
			t.Errorf("%s: NIC steers %v, want %v", st.name, got, wantFlows)
		}
		if len(s.Rules()) != len(wantFlows) {
			t.Errorf("%s: Steerer reports %v", st.name, s.Rules())
		}
	}
	if nic.rules[foreign.Loc] != foreign {
		t.Errorf("the operator's rule was touched: %v", nic.rules)
	}
}

func TestSteererApplyRejectsBadFlow(t *testing.T) {
	nic := newFakeNIC(8, 4, 16)
	s := NewSteerer(nic, SteererConfig{Affinity: &fakeAffinity{}})
	if err := s.Apply([]NtupleMatch{flowA}); err != nil {
		t.Fatal(err)
	}
	nic.takeLog()
	bad := NtupleMatch{Src: flowA.Src, Dst: flowB.Dst}
	if err := s.Apply([]NtupleMatch{flowC, bad}); !errors.Is(err, ErrBadRule) {
		t.Fatalf("Apply with a mixed-family flow: %v, want ErrBadRule", err)
	}
	checkLog(t, "bad flow", nic.takeLog()) // nothing changed, A still there
	if len(nic.rules) != 1 {
		t.Errorf("rules %v", nic.rules)
	}
}

// TestSteererApplyErrors: a rule the NIC refuses does not stop the others;
// the error names it, Rules shows what the NIC holds, and the next Apply
// retries only what is missing.
func TestSteererApplyErrors(t *testing.T) {
	nic := newFakeNIC(8, 4, 16)
	s := NewSteerer(nic, SteererConfig{ControlQueue: 1, Affinity: &fakeAffinity{}})
	refused := errors.New("refused by the fake")
	nic.failInsert[flowB] = refused

	err := s.Apply([]NtupleMatch{flowA, flowB, flowC})
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), flowB.String()) {
		t.Fatalf("Apply: %v, want the refusal of %v", err, flowB)
	}
	checkLog(t, "partial", nic.takeLog(),
		"insert loc 7 tcp 192.0.2.1:179 -> 192.0.2.100:40000 queue 1",
		"insert loc 6 tcp 192.0.2.2:6700 -> 192.0.2.100:40002 queue 1")
	if got := s.Rules(); len(got) != 2 || got[0].Match() != flowC || got[1].Match() != flowA {
		t.Errorf("Rules after partial failure: %v", got)
	}

	delete(nic.failInsert, flowB)
	if err := s.Apply([]NtupleMatch{flowA, flowB, flowC}); err != nil {
		t.Fatal(err)
	}
	checkLog(t, "retry", nic.takeLog(), "insert loc 5 tcp [2001:db8::1]:179 -> [2001:db8::100]:40001 queue 1")

	// A delete that fails keeps the rule in the books; one whose rule is
	// already gone (ENOENT) counts as done.
	nic.failDelete[7] = unix.EBUSY
	delete(nic.rules, 6) // gone behind our back
	err = s.Apply([]NtupleMatch{flowB})
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Apply: %v, want EBUSY", err)
	}
	checkLog(t, "delete fails", nic.takeLog())
	if got := s.Rules(); len(got) != 2 || got[0].Loc != 5 || got[1].Loc != 7 {
		t.Errorf("Rules after failed delete: %v", got)
	}
	delete(nic.failDelete, 7)
	if err := s.Apply([]NtupleMatch{flowB}); err != nil {
		t.Fatal(err)
	}
	checkLog(t, "delete retried", nic.takeLog(), "delete 7")

	// A full table is reported as such.
	small := newFakeNIC(1, 4, 16)
	s = NewSteerer(small, SteererConfig{Affinity: &fakeAffinity{}})
	if err := s.Apply([]NtupleMatch{flowA, flowB}); !errors.Is(err, ErrRuleTableFull) {
		t.Errorf("Apply on a full table: %v, want ErrRuleTableFull", err)
	}
	if len(s.Rules()) != 1 {
		t.Errorf("Rules on a full table: %v", s.Rules())
	}
}

// TestSteererResync: after the NIC lost its rules (driver reset), Resync puts
// back the desired ones.
func TestSteererResync(t *testing.T) {
	nic := newFakeNIC(8, 4, 16)
	s := NewSteerer(nic, SteererConfig{Affinity: &fakeAffinity{}})
	if err := s.Apply([]NtupleMatch{flowA, flowB}); err != nil {
		t.Fatal(err)
	}
	nic.takeLog()
	if err := s.Resync(); err != nil {
		t.Fatal(err)
	}
	checkLog(t, "resync, nothing lost", nic.takeLog())
	clear(nic.rules)
	if err := s.Resync(); err != nil {
		t.Fatal(err)
	}
	if got := nicMatches(t, nic, 0); !sameFlows(got, []NtupleMatch{flowA, flowB}) {
		t.Errorf("after resync the NIC steers %v", got)
	}
}

func steererSetup(prevIndir []uint32) (*fakeNIC, *fakeAffinity, SteererConfig) {
	nic := newFakeNIC(8, 4, 8)
	if prevIndir != nil {
		nic.indir = prevIndir
	}
	nic.rules[foreign.Loc] = foreign
	aff := &fakeAffinity{cpus: map[int]string{40: "0-3", 41: "0-3", 42: "0-3", 43: "0-3", 44: "2"}, fail: map[int]error{}}
	cfg := SteererConfig{
		ControlQueue: 0,
		QueueCPU:     map[uint32]int{0: 0, 1: 1, 2: 2, 3: 2},
		QueueIRQs:    map[uint32][]int{0: {40}, 1: {41}, 2: {42}, 3: {43, 44}},
		Affinity:     aff,
	}
	return nic, aff, cfg
}

// TestSteererStartRestore: Start keeps forwarding traffic off the control
// queue and pins the interrupts; Restore puts back exactly what was there.
func TestSteererStartRestore(t *testing.T) {
	for _, c := range []struct {
		name        string
		prev        []uint32
		restoreLine string
	}{
		// The driver's default is asked for again, not copied.
		{"default table", nil, "indir default"},
		{"operator's table", []uint32{0, 0, 1, 1, 2, 2, 3, 3}, "indir [0 0 1 1 2 2 3 3]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nic, aff, cfg := steererSetup(c.prev)
			before := slices.Clone(nic.indir)
			s := NewSteerer(nic, cfg)
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, "start", nic.takeLog(), "indir [1 2 3 1 2 3 1 2]")
			checkLog(t, "start irqs", aff.log, "irq 40 -> 0", "irq 41 -> 1", "irq 42 -> 2", "irq 43 -> 2")
			aff.log = nil
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, "start again", nic.takeLog())
			checkLog(t, "start again irqs", aff.log)

			if err := s.Apply([]NtupleMatch{flowA}); err != nil {
				t.Fatal(err)
			}
			nic.takeLog()
			if err := s.Restore(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, "restore", nic.takeLog(), "delete 7", c.restoreLine)
			checkLog(t, "restore irqs", aff.log, "irq 40 -> 0-3", "irq 41 -> 0-3", "irq 42 -> 0-3", "irq 43 -> 0-3")
			if !slices.Equal(nic.indir, before) {
				t.Errorf("table after restore %v, before %v", nic.indir, before)
			}
			want := map[int]string{40: "0-3", 41: "0-3", 42: "0-3", 43: "0-3", 44: "2"}
			if !reflect.DeepEqual(aff.cpus, want) {
				t.Errorf("affinities after restore %v, want %v", aff.cpus, want)
			}
			if rs, _ := nic.Rules(); len(rs) != 1 || rs[0] != foreign {
				t.Errorf("rules after restore %v, want only the operator's", rs)
			}
			aff.log = nil
			if err := s.Restore(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, "restore again", nic.takeLog())
			checkLog(t, "restore again irqs", aff.log)
		})
	}
}

func TestSteererStartErrors(t *testing.T) {
	t.Run("bad queues", func(t *testing.T) {
		for _, cfg := range []SteererConfig{
			{ControlQueue: 4},
			{ControlQueue: 0, FEQueues: []uint32{0, 1}},
			{ControlQueue: 0, FEQueues: []uint32{5}},
		} {
			nic, aff, _ := steererSetup(nil)
			cfg.Affinity = aff
			if err := NewSteerer(nic, cfg).Start(); !errors.Is(err, ErrNotSteerable) {
				t.Errorf("%+v: %v, want ErrNotSteerable", cfg, err)
			}
			checkLog(t, "bad queues", nic.takeLog())
		}
		single := newFakeNIC(8, 1, 8)
		if err := NewSteerer(single, SteererConfig{Affinity: &fakeAffinity{}}).Start(); !errors.Is(err, ErrNotSteerable) {
			t.Errorf("one queue: %v, want ErrNotSteerable", err)
		}
	})
	t.Run("explicit FE queues", func(t *testing.T) {
		nic, _, cfg := steererSetup(nil)
		cfg.FEQueues = []uint32{2, 3}
		cfg.QueueCPU = nil
		if err := NewSteerer(nic, cfg).Start(); err != nil {
			t.Fatal(err)
		}
		checkLog(t, "fe queues", nic.takeLog(), "indir [2 3 2 3 2 3 2 3]")
	})
	t.Run("no indirection table", func(t *testing.T) {
		nic, aff, cfg := steererSetup(nil)
		nic.failIndir = fmt.Errorf("ethtool GRXFHINDIR: %w", unix.EOPNOTSUPP)
		s := NewSteerer(nic, cfg)
		if err := s.Start(); !errors.Is(err, ErrNotSteerable) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Start: %v, want ErrNotSteerable and EOPNOTSUPP", err)
		}
		checkLog(t, "no table irqs", aff.log) // nothing changed
		if err := s.Restore(); err != nil {
			t.Errorf("Restore with nothing changed: %v", err)
		}
	})
	t.Run("table refused", func(t *testing.T) {
		nic, aff, cfg := steererSetup(nil)
		nic.failSetIndir = unix.EINVAL
		s := NewSteerer(nic, cfg)
		if err := s.Start(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Start: %v, want EINVAL", err)
		}
		checkLog(t, "table refused irqs", aff.log)
	})
	t.Run("irq refused", func(t *testing.T) {
		nic, aff, cfg := steererSetup(nil)
		aff.fail[42] = unix.EIO // a managed interrupt
		delete(aff.cpus, 44)    // gone
		s := NewSteerer(nic, cfg)
		err := s.Start()
		if !errors.Is(err, unix.EIO) || !strings.Contains(err.Error(), "irq 42") || !strings.Contains(err.Error(), "irq 44") {
			t.Errorf("Start: %v, want irq 42 EIO and irq 44 missing", err)
		}
		checkLog(t, "irq refused", aff.log, "irq 40 -> 0", "irq 41 -> 1", "irq 43 -> 2")
		aff.log = nil
		// Restore puts back only what was changed, and a failure there is
		// reported and retried by the next Restore.
		aff.fail[41] = unix.EIO
		if err := s.Restore(); !errors.Is(err, unix.EIO) || !strings.Contains(err.Error(), "irq 41") {
			t.Errorf("Restore: %v, want irq 41 EIO", err)
		}
		checkLog(t, "restore", aff.log, "irq 40 -> 0-3", "irq 43 -> 0-3")
		checkLog(t, "restore table", nic.takeLog(), "indir [1 2 3 1 2 3 1 2]", "indir default")
		aff.log = nil
		delete(aff.fail, 41)
		if err := s.Restore(); err != nil {
			t.Fatal(err)
		}
		checkLog(t, "restore retried", aff.log, "irq 41 -> 0-3")
		checkLog(t, "restore retried table", nic.takeLog())
	})
	t.Run("restore delete refused", func(t *testing.T) {
		nic, _, cfg := steererSetup(nil)
		cfg.QueueCPU = nil
		s := NewSteerer(nic, cfg)
		if err := s.Apply([]NtupleMatch{flowA, flowB}); err != nil {
			t.Fatal(err)
		}
		nic.failDelete[6] = unix.EBUSY
		nic.takeLog()
		if err := s.Restore(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("Restore: %v, want EBUSY", err)
		}
		checkLog(t, "restore", nic.takeLog(), "delete 7")
		if got := s.Rules(); len(got) != 1 || got[0].Loc != 6 {
			t.Errorf("Rules after failed restore: %v", got)
		}
		delete(nic.failDelete, 6)
		if err := s.Restore(); err != nil {
			t.Fatal(err)
		}
		checkLog(t, "restore retried", nic.takeLog(), "delete 6")
	})
}
