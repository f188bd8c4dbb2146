package host

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FaultProbeBytes is how much fresh memory PageFaultCost touches: 16,384
// pages of 4 KiB, a few tenths of a second where faults are dear.
const FaultProbeBytes = 64 << 20

// PageFaultCost maps size bytes of fresh anonymous memory in 4 KiB pages
// (huge pages refused for the mapping), writes one byte to each page and
// returns the time per page: what the daemons pay the first time their heaps
// grow into memory. On bare metal it is well under a microsecond; a VM whose
// host backs guest memory only when it is touched, and takes back what the
// guest frees (virtio-balloon free page reporting), charges several
// microseconds more on every first touch (docs/performance.md).
func PageFaultCost(size int) (time.Duration, error) {
	page := unix.Getpagesize()
	if size < page {
		return 0, fmt.Errorf("probe size %d is less than one %d-byte page", size, page)
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("map %d bytes: %w", size, err)
	}
	defer unix.Munmap(b)
	if err := unix.Madvise(b, unix.MADV_NOHUGEPAGE); err != nil {
		return 0, fmt.Errorf("refuse huge pages for the probe: %w", err)
	}
	pages := size / page
	start := time.Now()
	for i := 0; i < pages; i++ {
		b[i*page] = 1
	}
	return time.Since(start) / time.Duration(pages), nil
}

// Memory is what this machine makes of the daemons' memory, for benchmarks
// to state beside their figures: the THP mode ("" if unreadable) and what a
// first touch of a 4 KiB page costs (0 if the probe failed).
type Memory struct {
	THP        string
	FirstTouch time.Duration
}

// MeasureMemory reads the THP mode and runs the first-touch probe on
// FaultProbeBytes. Each call probes anew: a command that states the figures
// and writes a report keeps the one Memory and hands it on, so both state
// the same figures (bench.AllOptions.Memory).
func MeasureMemory() Memory {
	var m Memory
	m.THP, _ = TransparentHugePages(THPEnabled)
	m.FirstTouch, _ = PageFaultCost(FaultProbeBytes)
	return m
}

// Prefault writes zeros into s once per 4 KiB page, so that the first access
// to each page is a write; s must be as make returned it, all zero. Linux answers a first read of fresh anonymous
// memory by mapping its shared zero page, and the write that follows by
// copying it into a new page and flushing the old mapping from every CPU
// the process runs on, an inter-processor interrupt: on the development VM
// 17 - 19 µs per 4 KiB page against 2 µs for a first write
// (docs/performance.md, "Page faults on the development VM"). A large table
// that is read before it is written (a hash map's probes, a depth array
// compared before it is set) is worth prefaulting as it is allocated.
func Prefault[T any](s []T) {
	stride := 4096 / int(unsafe.Sizeof(*new(T)))
	if stride < 1 {
		stride = 1
	}
	var zero T
	for i := 0; i < len(s); i += stride {
		s[i] = zero
	}
}
