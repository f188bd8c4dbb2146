package fe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/splitplane/splitplane/classifier"
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
	interrupts, _ := os.ReadFile(procInterrupts) // none readable: no lane shows an irq
	var out []Lane
	for _, pq := range ports {
		name := pq.name
		irqs := classifier.QueueIRQs(name, string(interrupts), nil)
		threaded := readTrim(filepath.Join(sysRoot, "class/net", name, "threaded")) == "1"
		for q := range max(pq.rxQueues, 1) {
			l := Lane{Port: name, Queue: q, CPUs: "sender", Via: "softirq"}
			if qi := irqs[uint32(q)]; len(qi) > 0 {
				irq := strconv.Itoa(qi[0])
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

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
