package classifier

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeNIC is a NIC with a rule table of size locations that records every
// change it is asked to make, one line each, in the words of ethtool.
type fakeNIC struct {
	size   uint32
	queues int
	rules  map[uint32]NtupleRule
	indir  []uint32
	log    []string

	failInsert   map[NtupleMatch]error
	failDelete   map[uint32]error
	failSetIndir error
	failIndir    error
}

func newFakeNIC(size uint32, queues, indirSize int) *fakeNIC {
	n := &fakeNIC{size: size, queues: queues, rules: make(map[uint32]NtupleRule),
		failInsert: make(map[NtupleMatch]error), failDelete: make(map[uint32]error)}
	n.indir = defaultIndir(indirSize, queues)
	return n
}

func defaultIndir(size, queues int) []uint32 {
	t := make([]uint32, size)
	for i := range t {
		t[i] = uint32(i % queues)
	}
	return t
}

func (n *fakeNIC) Insert(r NtupleRule) (uint32, error) {
	if err := n.failInsert[r.Match()]; err != nil {
		return 0, err
	}
	if _, err := ruleSpec(r); err != nil {
		return 0, err
	}
	if r.Loc == LocAny {
		loc, ok := lastFree(n.size, slices.Collect(maps.Keys(n.rules)))
		if !ok {
			return 0, ErrRuleTableFull
		}
		r.Loc = loc
	}
	if _, taken := n.rules[r.Loc]; taken || r.Loc >= n.size {
		return 0, unix.EINVAL
	}
	n.rules[r.Loc] = r
	n.log = append(n.log, fmt.Sprintf("insert %v", r))
	return r.Loc, nil
}

func (n *fakeNIC) Delete(loc uint32) error {
	if err := n.failDelete[loc]; err != nil {
		return err
	}
	if _, ok := n.rules[loc]; !ok {
		return unix.ENOENT
	}
	delete(n.rules, loc)
	n.log = append(n.log, fmt.Sprintf("delete %d", loc))
	return nil
}

func (n *fakeNIC) Rules() ([]NtupleRule, error) {
	var rs []NtupleRule
	for _, loc := range slices.Sorted(maps.Keys(n.rules)) {
		rs = append(rs, n.rules[loc])
	}
	return rs, nil
}

func (n *fakeNIC) Indir() ([]uint32, error) {
	if n.failIndir != nil {
		return nil, n.failIndir
	}
	return slices.Clone(n.indir), nil
}

func (n *fakeNIC) SetIndir(t []uint32) error {
	if n.failSetIndir != nil {
		return n.failSetIndir
	}
	if len(t) == 0 {
		n.log = append(n.log, "indir default")
		n.indir = defaultIndir(len(n.indir), n.queues)
		return nil
	}
	n.log = append(n.log, fmt.Sprintf("indir %v", t))
	n.indir = slices.Clone(t)
	return nil
}

func (n *fakeNIC) Queues() (int, error) { return n.queues, nil }
func (n *fakeNIC) Close() error         { return nil }

// takeLog returns the changes made since the last call.
func (n *fakeNIC) takeLog() []string {
	l := n.log
	n.log = nil
	return l
}

// fakeAffinity is IRQAffinity over a map, recording changes.
type fakeAffinity struct {
	cpus map[int]string
	fail map[int]error
	log  []string
}

func (a *fakeAffinity) Affinity(irq int) (string, error) {
	c, ok := a.cpus[irq]
	if !ok {
		return "", os.ErrNotExist
	}
	return c, nil
}

func (a *fakeAffinity) SetAffinity(irq int, cpus string) error {
	if err := a.fail[irq]; err != nil {
		return err
	}
	a.cpus[irq] = cpus
	a.log = append(a.log, fmt.Sprintf("irq %d -> %s", irq, cpus))
	return nil
}

var (
	flowA  = NtupleMatch{Src: netip.MustParseAddrPort("192.0.2.1:179"), Dst: netip.MustParseAddrPort("192.0.2.100:40000")}
	flowB  = NtupleMatch{Src: netip.MustParseAddrPort("[2001:db8::1]:179"), Dst: netip.MustParseAddrPort("[2001:db8::100]:40001")}
	flowC  = NtupleMatch{Src: netip.MustParseAddrPort("192.0.2.2:6700"), Dst: netip.MustParseAddrPort("192.0.2.100:40002")}
	flowAm = NtupleMatch{Src: netip.MustParseAddrPort("[::ffff:192.0.2.1]:179"), Dst: netip.MustParseAddrPort("192.0.2.100:40000")}
	// foreign is a rule an operator put on the NIC; the Steerer must leave
	// it alone.
	foreign = NtupleRule{Loc: 0, Src: netip.MustParseAddrPort("203.0.113.1:22"), Dst: netip.MustParseAddrPort("192.0.2.100:22"), Queue: 3}
)

func TestCapabilitiesString(t *testing.T) {
	c := Capabilities{Ifname: "eth2", Driver: "ixgbe", Bus: "0000:03:00.0", Ntuple: true, RuleTableSize: 8190,
		NtupleFeature: "on", IndirSize: 128, Queues: 4, QueueIRQs: map[uint32][]int{0: {98}, 1: {99}}}
	want := "eth2 (ixgbe 0000:03:00.0): 4 rx queues, ntuple rules: 8190 locations, ntuple-filters on, rss indirection: 128 entries, irqs q0:98 q1:99; hardware steering: yes"
	if got := c.String(); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	c.NtupleFeature = "off"
	if c.CanSteer() || !strings.HasSuffix(c.String(), "hardware steering: no") || !strings.Contains(c.String(), "ethtool -K eth2 ntuple on") {
		t.Errorf("ntuple-filters off: CanSteer %v, %s", c.CanSteer(), c)
	}
}
