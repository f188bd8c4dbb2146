package bgp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A costlyCache fetches again only once its value is costlyRefresh times
// as old as the fetch took, and never keeps one past costlyMaxAge.
func TestCostlyCache(t *testing.T) {
	var c costlyCache[int]
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	fetches := 0
	fetch := func(cost time.Duration) func() int {
		return func() int {
			fetches++
			advance(cost)
			return fetches
		}
	}
	get := func(f func() int) int { return c.get(now, time.Minute, f) }
	if v := get(fetch(time.Second)); v != 1 {
		t.Fatalf("first get %d, want 1", v)
	}
	advance(costlyRefresh*time.Second - time.Millisecond)
	if v := get(fetch(time.Second)); v != 1 {
		t.Fatalf("get before %d x the cost: %d, want the cached 1", costlyRefresh, v)
	}
	advance(time.Millisecond)
	if v := get(fetch(time.Microsecond)); v != 2 {
		t.Fatalf("get at %d x the cost: %d, want a fetch", costlyRefresh, v)
	}
	// A cheap fetch is fresh almost every time.
	advance(costlyRefresh * time.Microsecond)
	if v := get(fetch(time.Minute)); v != 3 {
		t.Fatalf("get after a cheap fetch: %d, want a fetch", v)
	}
	// However dear the last fetch, the value is fetched again after
	// costlyMaxAge.
	advance(costlyMaxAge - time.Millisecond)
	if v := get(fetch(time.Microsecond)); v != 3 {
		t.Fatalf("get before costlyMaxAge: %d, want the cached 3", v)
	}
	advance(time.Millisecond)
	if v := get(fetch(time.Microsecond)); v != 4 {
		t.Fatalf("get at costlyMaxAge: %d, want a fetch", v)
	}
}

// An asker waits for a slow fetch only so long, then has the previous
// value; the fetch still lands, once, for whoever asks next.
func TestCostlyCacheSlowFetch(t *testing.T) {
	var c costlyCache[int]
	release := make(chan struct{})
	var calls atomic.Int32
	slow := func() int { calls.Add(1); <-release; return 7 }
	if v := c.get(time.Now, 10*time.Millisecond, slow); v != 0 {
		t.Fatalf("get during the first fetch: %d, want the zero value", v)
	}
	if v := c.get(time.Now, 10*time.Millisecond, slow); v != 0 || calls.Load() != 1 {
		t.Fatalf("second get during the fetch: %d after %d fetches, want 0 after 1", v, calls.Load())
	}
	close(release)
	if v := c.get(time.Now, time.Minute, slow); v != 7 || calls.Load() != 1 {
		t.Fatalf("get after the fetch: %d after %d fetches, want 7 after 1", v, calls.Load())
	}
}

// forget makes the next get fetch, and drops what a fetch begun before it
// brings.
func TestCostlyCacheForget(t *testing.T) {
	var c costlyCache[int]
	if v := c.get(time.Now, time.Minute, func() int { return 1 }); v != 1 {
		t.Fatalf("first get %d, want 1", v)
	}
	c.forget()
	if v := c.get(time.Now, time.Minute, func() int { return 2 }); v != 2 {
		t.Fatalf("get after forget: %d, want a fetch", v)
	}
	release := make(chan struct{})
	if v := c.get(time.Now, time.Millisecond, func() int { <-release; return 3 }); v != 2 {
		t.Fatalf("get during a fetch: %d, want the previous 2", v)
	}
	c.forget()
	close(release)
	if v := c.get(time.Now, time.Minute, func() int { return 4 }); v != 4 {
		t.Fatalf("get after a forgotten fetch: %d, want a new fetch's 4", v)
	}
}
