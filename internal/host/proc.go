package host

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessMemory returns a process's resident set size (VmRSS) and its peak
// (VmHWM), in MB of 10^6 bytes.
func ProcessMemory(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		mb, err := KBToMB(v)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, line, err)
		}
		if name == "VmRSS" {
			rss = mb
		} else {
			peak = mb
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, peak, nil
}

// KBToMB reads a /proc value such as "  123456 kB" as MB of 10^6 bytes.
func KBToMB(v string) (float64, error) {
	kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
	return kb * 1024 / 1e6, err
}
