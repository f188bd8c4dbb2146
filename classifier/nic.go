package classifier

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/sys/unix"
)

// NIC is the hardware steering interface of one network device: its n-tuple
// rule table, its RSS indirection table and its RX queue count. OpenNIC
// returns the real one (SIOCETHTOOL ioctls); tests of the layers above use a
// fake.
type NIC interface {
	// Insert adds an exact-match TCP rule and returns its location; with
	// r.Loc == LocAny the driver, or Insert when the driver cannot, picks a
	// free location.
	Insert(r NtupleRule) (loc uint32, err error)
	// Delete removes the rule at loc.
	Delete(loc uint32) error
	// Rules lists the exact-match TCP rules the NIC holds (rules of other
	// kinds are left out).
	Rules() ([]NtupleRule, error)
	// Indir returns the RSS indirection table: entry i is the RX queue of
	// the flows whose hash selects i.
	Indir() ([]uint32, error)
	// SetIndir replaces the RSS indirection table; an empty table restores
	// the driver's default.
	SetIndir(table []uint32) error
	// Queues returns the number of RX queues.
	Queues() (int, error)
	// Close releases what the NIC holds open (not its settings).
	Close() error
}

// Capabilities is what OpenNIC found the device able to do, for reporting at
// start and for choosing between the hardware and the software steering path.
type Capabilities struct {
	Ifname string
	Driver string // driver name (GDRVINFO), "" if unknown
	Bus    string // bus address, e.g. "0000:03:00.0"

	// Ntuple says the driver has an n-tuple rule table (it answered
	// GRXCLSRLCNT) of RuleTableSize locations; DriverPicksLoc says it
	// accepts RX_CLS_LOC_ANY.
	Ntuple         bool
	RuleTableSize  uint32
	DriverPicksLoc bool
	// NtupleFeature is the state of the "ntuple-filters" feature as ethtool -k
	// shows it ("on", "off", "off [fixed]"), "" if the driver did not say.
	// Some drivers (ixgbe) answer GRXCLSRLCNT with the feature off but
	// refuse to insert rules until `ethtool -K IF ntuple on`.
	NtupleFeature string

	IndirSize int // entries of the RSS indirection table, 0 if none
	Queues    int // RX queues, 0 if unknown
	// QueueIRQs maps an RX queue to its interrupts, found by name in
	// /proc/interrupts among the device's MSI vectors.
	QueueIRQs map[uint32][]int
}

// CanSteer says whether the hardware path can steer flows to a queue of
// their own: an n-tuple table that is not switched off, an RSS indirection
// table to keep forwarding traffic off the control queue, and more than one
// queue.
func (c Capabilities) CanSteer() bool {
	return c.Ntuple && c.RuleTableSize > 0 && !strings.HasPrefix(c.NtupleFeature, "off") &&
		c.IndirSize > 0 && c.Queues > 1
}

// String reports the capabilities on one line, for the log at start.
func (c Capabilities) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", c.Ifname)
	if c.Driver != "" {
		fmt.Fprintf(&b, " (%s", c.Driver)
		if c.Bus != "" {
			fmt.Fprintf(&b, " %s", c.Bus)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %d rx queues", c.Queues)
	if c.Ntuple {
		fmt.Fprintf(&b, ", ntuple rules: %d locations", c.RuleTableSize)
		if c.DriverPicksLoc {
			b.WriteString(" (driver picks)")
		}
	} else {
		b.WriteString(", ntuple rules: none")
	}
	if c.NtupleFeature != "" {
		fmt.Fprintf(&b, ", ntuple-filters %s", c.NtupleFeature)
		if c.Ntuple && c.NtupleFeature == "off" {
			fmt.Fprintf(&b, " (ethtool -K %s ntuple on)", c.Ifname)
		}
	}
	if c.IndirSize > 0 {
		fmt.Fprintf(&b, ", rss indirection: %d entries", c.IndirSize)
	} else {
		b.WriteString(", rss indirection: none")
	}
	if len(c.QueueIRQs) > 0 {
		b.WriteString(", irqs")
		for _, q := range slices.Sorted(maps.Keys(c.QueueIRQs)) {
			fmt.Fprintf(&b, " q%d:", q)
			for i, irq := range c.QueueIRQs[q] {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprint(&b, irq)
			}
		}
	} else {
		b.WriteString(", irqs: unknown")
	}
	if c.CanSteer() {
		b.WriteString("; hardware steering: yes")
	} else {
		b.WriteString("; hardware steering: no")
	}
	return b.String()
}

// OpenNIC opens the device ifname of the calling thread's network namespace
// and probes what it can do. It fails only when the device cannot be
// reached; a device without n-tuple rules or RSS is reported in the
// Capabilities, and the NIC's calls then fail with errors that satisfy
// errors.Is(err, errors.ErrUnsupported). The caller closes the NIC.
func OpenNIC(ifname string) (NIC, Capabilities, error) {
	if ifname == "" || len(ifname) >= unix.IFNAMSIZ || strings.ContainsAny(ifname, "/\x00") {
		return nil, Capabilities{}, fmt.Errorf("classifier: bad interface name %q", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, Capabilities{}, fmt.Errorf("classifier: socket for ethtool ioctls: %w", err)
	}
	n := &ethtoolNIC{name: ifname, fd: fd}
	caps := Capabilities{Ifname: ifname}
	caps.Driver, caps.Bus, err = n.driver()
	if errors.Is(err, unix.ENODEV) {
		n.Close()
		return nil, Capabilities{}, fmt.Errorf("classifier: %w", err)
	}
	if _, size, locAny, err := n.ruleCount(); err == nil {
		caps.Ntuple, caps.RuleTableSize, caps.DriverPicksLoc = true, size, locAny
		n.size, n.locAny = size, locAny
	}
	// The kernel's name for what ethtool -k shows as ntuple-filters.
	if on, fixed, err := n.feature("rx-ntuple-filter"); err == nil {
		caps.NtupleFeature = map[bool]string{true: "on", false: "off"}[on]
		if fixed {
			caps.NtupleFeature += " [fixed]"
		}
	}
	if t, err := n.Indir(); err == nil {
		caps.IndirSize = len(t)
	}
	if q, err := n.Queues(); err == nil {
		caps.Queues = q
	}
	if interrupts, err := os.ReadFile("/proc/interrupts"); err == nil {
		caps.QueueIRQs = queueIRQs(ifname, string(interrupts), deviceMSIIRQs("/sys", ifname))
	}
	return n, caps, nil
}

// deviceMSIIRQs returns the MSI/MSI-X interrupts of ifname's device, nil if
// it has none (virtual devices). virtio devices keep them on their PCI
// parent.
func deviceMSIIRQs(sys, ifname string) map[int]bool {
	dev, err := filepath.EvalSymlinks(filepath.Join(sys, "class/net", ifname, "device"))
	if err != nil {
		return nil
	}
	for _, dir := range []string{filepath.Join(dev, "msi_irqs"), filepath.Join(filepath.Dir(dev), "msi_irqs")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		irqs := make(map[int]bool)
		for _, e := range entries {
			if irq, err := strconv.Atoi(e.Name()); err == nil {
				irqs[irq] = true
			}
		}
		return irqs
	}
	return nil
}

// queueIRQs finds the RX queue interrupts of ifname in the text of
// /proc/interrupts. Drivers name them differently: "eth0-TxRx-3" (ixgbe,
// i40e, ice), "eth0-rx-3" (separate RX and TX vectors), "eth0-fp-3" (bnx2x),
// "eth0-3" (sfc), "mlx5_comp3@pci:..." (mlx5), "virtio2-input.3"
// (virtio_net). The queue is the number after the RX marker. With device
// (its MSI vectors) only those are considered and the name need not hold
// ifname; without, the name must.
func queueIRQs(ifname, interrupts string, device map[int]bool) map[uint32][]int {
	out := make(map[uint32][]int)
	sc := bufio.NewScanner(strings.NewReader(interrupts))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		irq, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
		if err != nil {
			continue
		}
		if device != nil && !device[irq] {
			continue
		}
		if q, ok := irqQueue(fields[len(fields)-1], ifname, device != nil); ok {
			out[q] = append(out[q], irq)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// irqQueue returns the RX queue an interrupt named name serves.
func irqQueue(name, ifname string, ofDevice bool) (uint32, bool) {
	base, _, _ := strings.Cut(name, "@")
	l := strings.ToLower(base)
	ifAt := wordIndex(l, strings.ToLower(ifname))
	hasIf := ifAt >= 0
	if !ofDevice && !hasIf {
		return 0, false
	}
	for _, other := range []string{"config", "async", "ctrl", "event", "misc", "-aq", "fdir", "lsc", "mbx", "output"} {
		if strings.Contains(l, other) {
			return 0, false
		}
	}
	if strings.Contains(l, "tx") && !strings.Contains(l, "rx") {
		return 0, false // a TX-only vector
	}
	after := -1
	for _, marker := range []string{"rx", "input", "comp", "-fp-"} {
		if i := strings.LastIndex(l, marker); i >= 0 {
			after = max(after, i+len(marker))
		}
	}
	if after < 0 && hasIf {
		after = ifAt + len(ifname)
	}
	if after < 0 {
		return 0, false
	}
	rest := l[after:]
	end := strings.LastIndexFunc(rest, unicode.IsDigit)
	if end < 0 {
		return 0, false
	}
	start := end
	for start > 0 && unicode.IsDigit(rune(rest[start-1])) {
		start--
	}
	q, err := strconv.ParseUint(rest[start:end+1], 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(q), true
}

// wordIndex returns where word occurs in s with no letter or digit on
// either side ("eth2" is not in "eth20-TxRx-0"), or -1.
func wordIndex(s, word string) int {
	alnum := func(i int) bool {
		return i >= 0 && i < len(s) && (unicode.IsLetter(rune(s[i])) || unicode.IsDigit(rune(s[i])))
	}
	for from := 0; word != "" && from <= len(s)-len(word); {
		i := strings.Index(s[from:], word)
		if i < 0 {
			break
		}
		i += from
		if !alnum(i-1) && !alnum(i+len(word)) {
			return i
		}
		from = i + 1
	}
	return -1
}

// IRQAffinity reads and sets which CPUs an interrupt is delivered to, in the
// kernel's list format ("0-3,8").
type IRQAffinity interface {
	Affinity(irq int) (string, error)
	SetAffinity(irq int, cpus string) error
}

// ProcIRQ is IRQAffinity through /proc/irq/N/smp_affinity_list.
type ProcIRQ struct {
	Root string // the directory holding irq/; "" means /proc
}

func (p ProcIRQ) path(irq int) string {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, "irq", strconv.Itoa(irq), "smp_affinity_list")
}

// Affinity returns the CPU list irq is delivered to.
func (p ProcIRQ) Affinity(irq int) (string, error) {
	b, err := os.ReadFile(p.path(irq))
	return strings.TrimSpace(string(b)), err
}

// SetAffinity delivers irq to cpus. Managed interrupts (whose affinity the
// kernel owns) refuse with EIO.
func (p ProcIRQ) SetAffinity(irq int, cpus string) error {
	f, err := os.OpenFile(p.path(irq), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(cpus + "\n")
	return errors.Join(err, f.Close())
}

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
