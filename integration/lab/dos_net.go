package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// pinThreadTo restricts the calling OS thread to one CPU.
func pinThreadTo(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// pinTaskTo restricts one thread (or process) to one CPU.
func pinTaskTo(tid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(tid, &set); err != nil {
		return fmt.Errorf("pin task %d to CPU %d: %w", tid, cpu, err)
	}
	return nil
}

// pinProcessTo restricts every thread of process pid to one CPU (threads it
// starts later inherit the mask of the thread that starts them).
func pinProcessTo(pid, cpu int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("pin process %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := pinTaskTo(tid, cpu); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// writeNetSysfs writes value to /sys/class/net/DEV/PATH of a device in
// namespace ns. sysfs shows the devices of the namespace that mounted it, so
// this goes through 'ip netns exec', which mounts one for the namespace.
func writeNetSysfs(ns, dev, path, value string) error {
	file := "/sys/class/net/" + dev + "/" + path
	return run("ip", "netns", "exec", ns, "sh", "-c", "echo "+value+" > "+file)
}

// napiThread is the kernel thread of one threaded NAPI instance.
type napiThread struct {
	ID  uint32 // the NAPI ID
	PID int    // its kthread, napi/DEV-ID
}

// Attributes and commands of the kernel's "netdev" generic netlink family
// (include/uapi/linux/netdev.h).
const (
	netdevCmdNAPIGet   = 11
	netdevANAPIIfindex = 1
	netdevANAPIID      = 2
	netdevANAPIPID     = 4
)

// napiThreads returns the threaded NAPI instances of a device of namespace
// ns that have a kthread, by NAPI ID. It asks the netdev generic netlink
// family (NAPI_GET, dumped for the device's ifindex), which names each
// instance's kthread: the names napi/DEV-ID are not unique across namespaces.
func napiThreads(ns, dev string) ([]napiThread, error) {
	var out []napiThread
	err := nsthread.Run(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", dev, ns, err)
		}
		fam, err := netlink.GenlFamilyGet("netdev")
		if err != nil {
			return fmt.Errorf("generic netlink family netdev: %w", err)
		}
		msgs, err := genlDump(fam.ID, netdevCmdNAPIGet, netdevANAPIIfindex, uint32(l.Attrs().Index))
		if err != nil {
			return fmt.Errorf("NAPI instances of %s: %w", dev, err)
		}
		for _, m := range msgs {
			var t napiThread
			for _, a := range m {
				switch {
				case a.Attr.Type == netdevANAPIID && len(a.Value) == 4:
					t.ID = binary.NativeEndian.Uint32(a.Value)
				case a.Attr.Type == netdevANAPIPID && len(a.Value) == 4:
					t.PID = int(binary.NativeEndian.Uint32(a.Value))
				}
			}
			if t.PID > 0 {
				out = append(out, t)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b napiThread) int { return int(a.ID) - int(b.ID) })
	return out, err
}

// genlDump sends a generic netlink dump request (command cmd of family,
// version 1, with one u32 attribute) on a socket of the calling thread's
// namespace and returns the attributes of every answer until NLMSG_DONE.
// It reads the socket itself: the netdev family's answers do not carry
// NLM_F_MULTI, after which vishvananda/netlink stops reading.
func genlDump(family uint16, cmd uint8, attr uint16, value uint32) ([][]syscall.NetlinkRouteAttr, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	const seq = 1
	req := make([]byte, unix.SizeofNlMsghdr+4+8)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], family)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[16], req[17] = cmd, 1 // genlmsghdr: command, version
	binary.NativeEndian.PutUint16(req[20:], 8)
	binary.NativeEndian.PutUint16(req[22:], attr)
	binary.NativeEndian.PutUint32(req[24:], value)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]syscall.NetlinkRouteAttr
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return nil, syscall.Errno(-errno)
					}
				}
				return out, nil
			}
			if len(m.Data) < 4 {
				continue
			}
			attrs, err := parseNlAttrs(m.Data[4:])
			if err != nil {
				return nil, err
			}
			out = append(out, attrs)
		}
	}
}

// parseNlAttrs parses a run of netlink attributes.
func parseNlAttrs(b []byte) ([]syscall.NetlinkRouteAttr, error) {
	var out []syscall.NetlinkRouteAttr
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b))
		if l < unix.SizeofRtAttr || l > len(b) {
			return nil, fmt.Errorf("netlink attribute of length %d in %d bytes", l, len(b))
		}
		var a syscall.NetlinkRouteAttr
		a.Attr.Len = uint16(l)
		a.Attr.Type = binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED
		a.Value = b[unix.SizeofRtAttr:l]
		out = append(out, a)
		b = b[min((l+3)&^3, len(b)):]
	}
	return out, nil
}

// ethtoolStats returns the counters 'ethtool -S' shows for a device of
// namespace ns.
func ethtoolStats(ns, dev string) (map[string]uint64, error) {
	out, err := harness.Output(context.Background(), "nsenter", "--net="+harness.Path(ns), "ethtool", "-S", dev)
	if err != nil {
		return nil, err
	}
	stats := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			stats[k] = n
		}
	}
	return stats, nil
}

// cpuMask is the hexadecimal mask of CPUs 0..n-1, as rps_cpus takes it.
func cpuMask(n int) string {
	return strconv.FormatUint(1<<n-1, 16)
}
