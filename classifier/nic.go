package classifier

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

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
		caps.QueueIRQs = QueueIRQs(ifname, string(interrupts), deviceMSIIRQs("/sys", ifname))
	}
	return n, caps, nil
}
