package classifier

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

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

// QueueIRQs finds the RX queue interrupts of ifname in the text of
// /proc/interrupts: the one parser of that file, for the classifier's
// affinity pinning and the FE's lane report. Drivers name them differently: "eth0-TxRx-3" (ixgbe,
// i40e, ice), "eth0-rx-3" (separate RX and TX vectors), "eth0-fp-3" (bnx2x),
// "eth0-3" (sfc), "mlx5_comp3@pci:..." (mlx5), "virtio2-input.3"
// (virtio_net). The queue is the number after the RX marker. With device
// (its MSI vectors) only those are considered and the name need not hold
// ifname; without, the name must. It returns nil when no interrupt of
// ifname is found (veth and other virtual devices have none).
func QueueIRQs(ifname, interrupts string, device map[int]bool) map[uint32][]int {
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
