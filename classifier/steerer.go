package classifier

import (
	"cmp"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"maps"
	"slices"
	"strconv"
)

// ErrNotSteerable is returned, wrapped, when the NIC or the configuration
// cannot keep forwarding traffic off the control queue.
var ErrNotSteerable = errors.New("classifier: cannot steer")

// SteererConfig says where control flows go and where forwarding goes.
type SteererConfig struct {
	// ControlQueue is the RX queue served by the control core; every rule
	// sends its flow there.
	ControlQueue uint32
	// FEQueues are the queues RSS spreads all other traffic over; empty
	// means every queue but ControlQueue.
	FEQueues []uint32
	// QueueCPU is the core that serves each queue: Start pins the queue's
	// interrupts (QueueIRQs) to it. Queues not in it keep their affinity.
	QueueCPU  map[uint32]int
	QueueIRQs map[uint32][]int
	// Affinity sets interrupt affinity; nil means ProcIRQ{}.
	Affinity IRQAffinity
}

// Steerer keeps a NIC's n-tuple rules equal to the router's return control
// flows, and its RSS table and interrupts arranged so that only those flows
// reach the control queue. It remembers what it changed, so Restore can
// undo exactly that. It is not safe for concurrent use: one goroutine owns
// it.
type Steerer struct {
	nic      NIC
	cfg      SteererConfig
	desired  []NtupleMatch
	owned    map[NtupleMatch]uint32 // rules this Steerer inserted, by location
	started  bool
	indirSet bool
	// prevIndir is the table before Start; nil when it was the driver's
	// default, which Restore then asks for again (so the driver keeps
	// re-spreading it when the queue count changes).
	prevIndir   []uint32
	prevAffined map[int]string // interrupts Start moved, with their previous CPUs
}

// NewSteerer returns a Steerer for nic. It changes nothing on the NIC.
func NewSteerer(nic NIC, cfg SteererConfig) *Steerer {
	if cfg.Affinity == nil {
		cfg.Affinity = ProcIRQ{}
	}
	return &Steerer{nic: nic, cfg: cfg, owned: make(map[NtupleMatch]uint32), prevAffined: make(map[int]string)}
}

// Start sets the RSS indirection table so that forwarding traffic is spread
// over the FE queues only, and pins each queue's interrupts to its core. If
// the table cannot be set nothing is changed; interrupts that cannot be
// moved are reported in the error while the others are moved (Restore puts
// back whatever was changed). Calling Start again does nothing.
func (s *Steerer) Start() error {
	if s.started {
		return nil
	}
	queues, err := s.nic.Queues()
	if err != nil {
		return fmt.Errorf("%w: queue count: %w", ErrNotSteerable, err)
	}
	fe, err := s.feQueues(queues)
	if err != nil {
		return err
	}
	prev, err := s.nic.Indir()
	if err != nil {
		return fmt.Errorf("%w: rss indirection table: %w", ErrNotSteerable, err)
	}
	if len(prev) == 0 {
		return fmt.Errorf("%w: rss indirection table is empty", ErrNotSteerable)
	}
	table := make([]uint32, len(prev))
	for i := range table {
		table[i] = fe[i%len(fe)]
	}
	if !slices.Equal(table, prev) {
		if err := s.nic.SetIndir(table); err != nil {
			return fmt.Errorf("%w: set rss indirection table: %w", ErrNotSteerable, err)
		}
		s.indirSet = true
		s.prevIndir = prev
		if isDefaultIndir(prev, queues) {
			s.prevIndir = nil
		}
	}
	s.started = true

	var errs []error
	for _, q := range slices.Sorted(maps.Keys(s.cfg.QueueCPU)) {
		cpu := strconv.Itoa(s.cfg.QueueCPU[q])
		for _, irq := range s.cfg.QueueIRQs[q] {
			if _, moved := s.prevAffined[irq]; moved {
				continue
			}
			old, err := s.cfg.Affinity.Affinity(irq)
			if err != nil {
				errs = append(errs, fmt.Errorf("irq %d (queue %d): %w", irq, q, err))
				continue
			}
			if old == cpu {
				continue
			}
			if err := s.cfg.Affinity.SetAffinity(irq, cpu); err != nil {
				errs = append(errs, fmt.Errorf("irq %d (queue %d) to cpu %s: %w", irq, q, cpu, err))
				continue
			}
			s.prevAffined[irq] = old
		}
	}
	return errors.Join(errs...)
}

func (s *Steerer) feQueues(queues int) ([]uint32, error) {
	if int64(s.cfg.ControlQueue) >= int64(queues) {
		return nil, fmt.Errorf("%w: control queue %d, the NIC has %d", ErrNotSteerable, s.cfg.ControlQueue, queues)
	}
	fe := slices.Clone(s.cfg.FEQueues)
	if len(fe) == 0 {
		for q := range uint32(queues) {
			if q != s.cfg.ControlQueue {
				fe = append(fe, q)
			}
		}
	}
	for _, q := range fe {
		if q == s.cfg.ControlQueue || int64(q) >= int64(queues) {
			return nil, fmt.Errorf("%w: forwarding queue %d (control queue %d, %d queues)", ErrNotSteerable, q, s.cfg.ControlQueue, queues)
		}
	}
	if len(fe) == 0 {
		return nil, fmt.Errorf("%w: %d rx queue(s), none left for forwarding", ErrNotSteerable, queues)
	}
	return fe, nil
}

// isDefaultIndir says whether t is what drivers set by default
// (ethtool_rxfh_indir_default: entry i is queue i mod queues).
func isDefaultIndir(t []uint32, queues int) bool {
	for i, q := range t {
		if int(q) != i%queues {
			return false
		}
	}
	return true
}

// Apply makes the NIC's rules from this Steerer exactly one per flow in
// desired, each sending the flow to the control queue: it deletes the rules
// of flows no longer desired, then inserts the missing ones. Applying the
// same flows again does nothing. A bad flow fails the whole call before
// anything changes; a rule the NIC refuses is reported in the error while
// the other changes are made, and Rules then shows what the NIC holds (the
// next Apply tries the rest again).
func (s *Steerer) Apply(desired []NtupleMatch) error {
	want := make([]NtupleMatch, 0, len(desired))
	seen := make(map[NtupleMatch]bool, len(desired))
	for _, m := range desired {
		if err := m.validate(); err != nil {
			return err
		}
		c := m.canonical()
		if !seen[c] {
			seen[c] = true
			want = append(want, c)
		}
	}
	s.desired = want

	var errs []error
	for _, m := range s.ownedSorted() {
		if seen[m] {
			continue
		}
		if err := s.nic.Delete(s.owned[m]); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete rule %d (%s): %w", s.owned[m], m, err))
			continue
		}
		delete(s.owned, m)
	}
	for _, m := range want {
		if _, ok := s.owned[m]; ok {
			continue
		}
		loc, err := s.nic.Insert(NtupleRule{Loc: LocAny, Src: m.Src, Dst: m.Dst, Queue: s.cfg.ControlQueue})
		if err != nil {
			errs = append(errs, fmt.Errorf("insert rule for %s: %w", m, err))
			continue
		}
		s.owned[m] = loc
	}
	return errors.Join(errs...)
}

// Resync reads the NIC's rules, forgets those of this Steerer that the NIC
// no longer holds (a driver reset clears the table) and applies the desired
// flows again.
func (s *Steerer) Resync() error {
	held, err := s.nic.Rules()
	if err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	at := make(map[uint32]NtupleRule, len(held))
	for _, r := range held {
		at[r.Loc] = r
	}
	for m, loc := range s.owned {
		r, ok := at[loc]
		if !ok || r.Match().canonical() != m || r.Queue != s.cfg.ControlQueue {
			delete(s.owned, m)
		}
	}
	return s.Apply(s.desired)
}

// Rules returns the rules this Steerer has on the NIC, by location.
func (s *Steerer) Rules() []NtupleRule {
	rules := make([]NtupleRule, 0, len(s.owned))
	for m, loc := range s.owned {
		rules = append(rules, NtupleRule{Loc: loc, Src: m.Src, Dst: m.Dst, Queue: s.cfg.ControlQueue})
	}
	slices.SortFunc(rules, func(a, b NtupleRule) int { return cmp.Compare(a.Loc, b.Loc) })
	return rules
}

func (s *Steerer) ownedSorted() []NtupleMatch {
	ms := slices.Collect(maps.Keys(s.owned))
	slices.SortFunc(ms, func(a, b NtupleMatch) int { return cmp.Compare(s.owned[a], s.owned[b]) })
	return ms
}

// Restore deletes the rules this Steerer inserted and puts back the RSS
// indirection table and interrupt affinities it changed. It carries on past
// failures and reports them; what failed is still remembered, so calling
// Restore again retries only that.
func (s *Steerer) Restore() error {
	var errs []error
	s.desired = nil
	for _, m := range s.ownedSorted() {
		if err := s.nic.Delete(s.owned[m]); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("restore: delete rule %d (%s): %w", s.owned[m], m, err))
			continue
		}
		delete(s.owned, m)
	}
	if s.indirSet {
		if err := s.nic.SetIndir(s.prevIndir); err != nil {
			errs = append(errs, fmt.Errorf("restore: rss indirection table: %w", err))
		} else {
			s.indirSet, s.prevIndir = false, nil
		}
	}
	for _, irq := range slices.Sorted(maps.Keys(s.prevAffined)) {
		if err := s.cfg.Affinity.SetAffinity(irq, s.prevAffined[irq]); err != nil {
			errs = append(errs, fmt.Errorf("restore: irq %d to cpus %s: %w", irq, s.prevAffined[irq], err))
			continue
		}
		delete(s.prevAffined, irq)
	}
	if len(errs) == 0 {
		s.started = false
	}
	return errors.Join(errs...)
}
