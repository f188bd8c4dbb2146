package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// settle waits until the CPUs have been at least 90% idle over 250ms, for
// at most limit, and returns how long it waited and how busy they were in
// the last sample.
func settle(ctx context.Context, limit time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	busy := 1.0
	prevIdle, prevTotal, err := cpuTimes()
	if err != nil {
		return 0, 0, err
	}
	for time.Since(start) < limit {
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return 0, 0, err
		}
		idle, total, err := cpuTimes()
		if err != nil {
			return 0, 0, err
		}
		if total > prevTotal {
			busy = 1 - float64(idle-prevIdle)/float64(total-prevTotal)
		}
		prevIdle, prevTotal = idle, total
		if busy <= 0.1 {
			break
		}
	}
	return time.Since(start), busy, nil
}

// cpuTimes returns the idle (idle and iowait) and total jiffies of all
// CPUs from /proc/stat.
func cpuTimes() (idle, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, nil
}

// percentile returns the q-th percentile (nearest rank) of d.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
