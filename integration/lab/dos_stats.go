package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/internal/nsthread"
	"github.com/splitplane/splitplane/internal/status"
)

// snapshot is every counter the DoS test reads, at one moment; the figures
// are differences of two.
type snapshot struct {
	at     time.Time
	fe     map[string]uint64   // the FE's datapath counters, summed
	feCPU  []map[string]uint64 // the same per CPU
	sink   uint64              // host B's sink: the forwarded flood delivered
	sent   [nFloods]uint64     // frames the generators sent
	ring   ringStats           // the router's port, to-peer
	kernel map[string]uint64   // the router's kernel: "TcpExt:SyncookiesSent", ...
	cpu    []cpuTimes          // /proc/stat, per CPU
	// backlogDrops are the packets dropped because a CPU's input queue
	// (netdev_max_backlog, where RPS puts packets) was full, per CPU
	// (/proc/net/softnet_stat: the whole machine).
	backlogDrops []uint64
}

// ringStats are the veth counters of the router's port to-peer and of the
// peer's end: what arrived in each receive queue, and what the sender could
// not put in because the queue's ring was full (a NIC's rx_missed).
type ringStats struct {
	queued  map[int]uint64 // rx_queue_N_xdp_packets of to-peer, by queue
	xmit    uint64         // frames sent by XDP out of the peer's eth0 (the generators)
	xmitErr uint64         // of those, dropped: the ring was full
	// skbDropped is the peer's eth0 tx_dropped: the frames the router's
	// port dropped because the ring of their queue was full, the XDP
	// frames (xmitErr) and those the peer's kernel sent (the ARP flood, and
	// the peer's own packets: its BGP session).
	skbDropped uint64
}

// cpuTimes are one CPU's times in clock ticks.
type cpuTimes struct{ busy, softirq, total uint64 }

// takeSnapshot reads the counters of the lab and of the DoS test's parts.
func takeSnapshot(o *Options, f *floods, sk *sink) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var st fe.Status
	if err := status.Get(o.Socket("fe"), "/", &st); err != nil {
		return s, fmt.Errorf("fe status: %w", err)
	}
	s.fe = st.Counters
	for _, c := range st.PerCPU {
		s.feCPU = append(s.feCPU, c)
	}
	var err error
	if s.sink, err = sk.packets(); err != nil {
		return s, err
	}
	if f != nil {
		s.sent = f.sent()
	}
	rx, err := ethtoolStats(o.Namespace("rtr"), "to-peer")
	if err != nil {
		return s, err
	}
	s.ring.queued = map[int]uint64{}
	for k, v := range rx {
		var q int
		if _, err := fmt.Sscanf(k, "rx_queue_%d_xdp_packets", &q); err == nil {
			s.ring.queued[q] = v
		}
	}
	tx, err := ethtoolStats(o.Namespace("peer"), "eth0")
	if err != nil {
		return s, err
	}
	for k, v := range tx {
		switch {
		case strings.HasSuffix(k, "_xdp_xmit_errors"):
			s.ring.xmitErr += v
		case strings.HasSuffix(k, "_xdp_xmit"):
			s.ring.xmit += v
		}
	}
	if s.kernel, err = kernelCounters(o.Namespace("rtr")); err != nil {
		return s, fmt.Errorf("the router's kernel counters: %w", err)
	}
	err = nsthread.Run(o.Namespace("peer"), func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if st := l.Attrs().Statistics; st != nil {
			s.ring.skbDropped = st.TxDropped
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("the peer's eth0: %w", err)
	}
	if s.cpu, err = readCPUTimes(); err != nil {
		return s, err
	}
	s.backlogDrops, err = readBacklogDrops()
	return s, err
}

// kernelCounters reads /proc/net/netstat and snmp of namespace ns.
func kernelCounters(ns string) (map[string]uint64, error) {
	m := map[string]uint64{}
	err := nsthread.Run(ns, func() error {
		for _, file := range []string{"netstat", "snmp"} {
			b, err := os.ReadFile("/proc/thread-self/net/" + file)
			if err != nil {
				return err
			}
			parseSNMP(string(b), m)
		}
		return nil
	})
	return m, err
}

// parseSNMP adds the counters of /proc/net/snmp or netstat, which come in
// pairs of lines ("TcpExt: A B ...", "TcpExt: 1 2 ..."), as "TcpExt:A".
func parseSNMP(text string, into map[string]uint64) {
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) != len(values) || len(names) == 0 || names[0] != values[0] {
			continue
		}
		for j := 1; j < len(names); j++ {
			if v, err := strconv.ParseUint(values[j], 10, 64); err == nil {
				into[names[0]+names[j]] = v
			}
		}
	}
}

// readCPUTimes reads the per-CPU lines of /proc/stat.
func readCPUTimes() ([]cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	var out []cpuTimes
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [8]uint64 // user nice system idle iowait irq softirq steal
		for i := range v {
			v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
		t := cpuTimes{softirq: v[6]}
		for i, x := range v {
			t.total += x
			if i != 3 && i != 4 && i != 7 { // idle, iowait and steal (the hypervisor's) are not ours
				t.busy += x
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// readBacklogDrops reads the second column of /proc/net/softnet_stat, one
// line per CPU.
func readBacklogDrops() ([]uint64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("softnet_stat %q: %w", line, err)
		}
		out = append(out, v)
	}
	return out, nil
}
