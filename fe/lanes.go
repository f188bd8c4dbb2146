package fe

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/forces"
)

// Lane is one receive queue of a port and the CPUs that serve it: where its
// interrupt is delivered (a NIC with per-queue IRQs), or the CPUs its NAPI
// kthread may run on (threaded NAPI), or, with neither, whichever CPU raised
// the softirq (veth: the sender's).
type Lane = forces.FELane

// portQueues is a port and its number of receive queues (from netlink, which,
// unlike /sys under nsenter, answers for the FE's own namespace).
type portQueues struct {
	name     string
	rxQueues int
}

// lanes lists the receive queues of the ports with their interrupts from
// procInterrupts (/proc/interrupts) and, where sysfs shows the port (sysRoot
// is /sys), whether its NAPI is threaded.
func lanes(sysRoot, procInterrupts string, ports []portQueues) []Lane {
	irqs := queueIRQs(procInterrupts)
	var out []Lane
	for _, pq := range ports {
		name := pq.name
		threaded := readTrim(filepath.Join(sysRoot, "class/net", name, "threaded")) == "1"
		for q := range max(pq.rxQueues, 1) {
			l := Lane{Port: name, Queue: q, CPUs: "sender", Via: "softirq"}
			if irq, ok := irqs[irqKey{name, q}]; ok {
				l.Via = "irq " + irq
				if cpus := readTrim(filepath.Join(filepath.Dir(procInterrupts), "irq", irq, "smp_affinity_list")); cpus != "" {
					l.CPUs = cpus
				}
			} else if threaded {
				l.Via, l.CPUs = "threaded napi", "any (pin the napi/"+name+"-* kthreads)"
			}
			out = append(out, l)
		}
	}
	return out
}

type irqKey struct {
	port  string
	queue int
}

// queueIRQs maps (port, queue) to IRQ numbers from /proc/interrupts, whose
// last column names per-queue vectors like "eth0-TxRx-3" or "eth0-rx-3".
func queueIRQs(path string) map[irqKey]string {
	out := map[irqKey]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasSuffix(fields[0], ":") {
			continue
		}
		irq := strings.TrimSuffix(fields[0], ":")
		name := fields[len(fields)-1]
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			continue
		}
		q, err := strconv.Atoi(name[i+1:])
		if err != nil {
			continue
		}
		rest := name[:i]
		for _, kind := range []string{"-TxRx", "-rx", "-RxTx", "-rxtx"} {
			if port, ok := strings.CutSuffix(rest, kind); ok {
				out[irqKey{port, q}] = irq
			}
		}
	}
	return out
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
