package fe

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/classifier"
)

// fakeNIC is a NIC with n-tuple filters and RSS, in memory: the layer under
// the FE's hardware steering, which the machines here do not have.
type fakeNIC struct {
	rules  map[uint32]classifier.NtupleRule
	indir  []uint32
	closed bool
}

func (n *fakeNIC) Insert(r classifier.NtupleRule) (uint32, error) {
	for loc := uint32(0); loc < 64; loc++ {
		if _, used := n.rules[loc]; !used {
			r.Loc = loc
			n.rules[loc] = r
			return loc, nil
		}
	}
	return 0, errors.New("rule table full")
}
func (n *fakeNIC) Delete(loc uint32) error { delete(n.rules, loc); return nil }
func (n *fakeNIC) Rules() ([]classifier.NtupleRule, error) {
	var out []classifier.NtupleRule
	for _, r := range n.rules {
		out = append(out, r)
	}
	return out, nil
}
func (n *fakeNIC) Indir() ([]uint32, error) { return slices.Clone(n.indir), nil }
func (n *fakeNIC) SetIndir(t []uint32) error {
	if len(t) == 0 { // the driver's default: an even spread over the queues
		t = []uint32{0, 1, 2, 3, 0, 1, 2, 3}
	}
	n.indir = slices.Clone(t)
	return nil
}
func (n *fakeNIC) Queues() (int, error) { return 4, nil }
func (n *fakeNIC) Close() error         { n.closed = true; return nil }
func (n *fakeNIC) queues() map[uint32]int {
	q := map[uint32]int{}
	for _, v := range n.indir {
		q[v]++
	}
	return q
}

type fakeAffinity map[int]string

func (a fakeAffinity) Affinity(irq int) (string, error)       { return a[irq], nil }
func (a fakeAffinity) SetAffinity(irq int, cpus string) error { a[irq] = cpus; return nil }

// On a port whose NIC can steer, every return control flow becomes an
// n-tuple rule to queue 0, RSS keeps everything else off queue 0, queue 0's
// interrupt goes to the control CPU and the others' to the forwarding CPUs;
// a NIC that cannot steer is only reported; stopping restores it all.
func TestHardwareSteering(t *testing.T) {
	steerable := &fakeNIC{rules: map[uint32]classifier.NtupleRule{}, indir: []uint32{0, 1, 2, 3, 0, 1, 2, 3}}
	plain := &fakeNIC{rules: map[uint32]classifier.NtupleRule{}}
	aff := fakeAffinity{40: "0-1", 41: "0-1", 42: "0-1", 43: "0-1"}
	open := func(name string) (classifier.NIC, classifier.Capabilities, error) {
		switch name {
		case "eth0":
			return steerable, classifier.Capabilities{Ifname: name, Driver: "fake", Ntuple: true, RuleTableSize: 64, NtupleFeature: "on",
				IndirSize: 8, Queues: 4, QueueIRQs: map[uint32][]int{0: {40}, 1: {41}, 2: {42}, 3: {43}}}, nil
		case "veth0":
			return plain, classifier.Capabilities{Ifname: name, Driver: "veth", Queues: 1}, nil
		}
		return nil, classifier.Capabilities{}, fmt.Errorf("no such device")
	}
	hw := startHardwareSteering(slog.New(slog.DiscardHandler), []string{"eth0", "veth0", "gone0"}, open, aff, 0, []int{1})
	if len(hw.steerers) != 1 || !plain.closed || len(hw.reports) != 3 ||
		!strings.Contains(hw.reports[0], "n-tuple rules to queue 0") || !strings.Contains(hw.reports[2], "no such device") {
		t.Fatalf("steerers %d, reports %q", len(hw.steerers), hw.reports)
	}
	if q := steerable.queues(); q[0] != 0 || q[1]+q[2]+q[3] != 8 {
		t.Fatalf("RSS table %v: queue 0 must carry no forwarding traffic", steerable.indir)
	}
	if aff[40] != "0" || aff[41] != "1" || aff[43] != "1" {
		t.Fatalf("IRQ affinities %v: queue 0 on the control CPU, the rest on the forwarding CPU", aff)
	}

	bgp := classifier.Flow{Kind: "bgp", Local: netip.MustParseAddrPort("192.0.2.1:179"), Remote: netip.MustParseAddrPort("192.0.2.2:40000")}
	forces := classifier.Flow{Kind: "forces", Local: netip.MustParseAddrPort("10.0.0.1:6700"), Remote: netip.MustParseAddrPort("10.0.0.9:51000")}
	if errs := hw.apply([]classifier.Flow{bgp, forces}); errs != 0 || len(steerable.rules) != 2 {
		t.Fatalf("%d errors, rules %v", errs, steerable.rules)
	}
	for _, r := range steerable.rules {
		if r.Queue != 0 || (r.Src != bgp.Remote && r.Src != forces.Remote) {
			t.Fatalf("rule %+v: want a return flow to queue 0", r)
		}
	}
	// A session ends: its rule goes.
	hw.apply([]classifier.Flow{forces})
	if len(steerable.rules) != 1 {
		t.Fatalf("rules after the BGP session ended: %v", steerable.rules)
	}
	hw.stop()
	if len(steerable.rules) != 0 || !slices.Equal(steerable.indir, []uint32{0, 1, 2, 3, 0, 1, 2, 3}) || aff[40] != "0-1" || aff[41] != "0-1" || !steerable.closed {
		t.Fatalf("after stop: rules %v, RSS %v, affinities %v, closed %t", steerable.rules, steerable.indir, aff, steerable.closed)
	}

	// Without a control CPU, nothing is steered in hardware.
	steerable.closed = false
	hw = startHardwareSteering(slog.New(slog.DiscardHandler), []string{"eth0"}, open, aff, -1, nil)
	if len(hw.steerers) != 0 || !steerable.closed {
		t.Fatal("a NIC was steered without a control CPU")
	}
}
