package prefetch

import "unsafe"

// line asks the CPU to bring the cache line at p into its caches, without
// waiting for it (PREFETCHT0). It never faults.
//
//go:noescape
func line(p unsafe.Pointer)
