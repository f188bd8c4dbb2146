package fe

import (
	"os"
	"strings"
)

// The kernel is the FE's slow path: what XDP passes it (the first packets
// to a host whose MAC the datapath does not know yet, TTL expiry, packets
// too big for the egress port, inter-FE frames whose host is unknown) it
// must forward, answer or resolve. A namespace or host starts with
// forwarding off, and then those packets are dropped and a connected host
// on another FE is never resolved. So the FE turns the kernel's forwarding
// on, IPv4 and IPv6, in its namespace, and says so.

// kernelForwarding are the sysctls the FE needs on.
var kernelForwarding = []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"}

// enableKernelForwarding turns each of files on that is off, logging what
// it did or could not do.
func (a *Agent) enableKernelForwarding(files []string) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			a.log.Warn("fe: kernel forwarding unknown; the slow path may not forward what XDP passes it", "sysctl", f, "err", err)
			continue
		}
		if strings.TrimSpace(string(b)) != "0" {
			continue
		}
		if err := os.WriteFile(f, []byte("1\n"), 0o644); err != nil {
			a.log.Error("fe: the kernel does not forward, and could not be made to: what XDP passes it is dropped", "sysctl", f, "err", err)
			continue
		}
		a.log.Info("fe: kernel forwarding turned on: the slow path forwards what XDP passes it", "sysctl", f)
	}
}
