package bgp

import (
	"sync"
	"time"
)

// costlyRefresh bounds what a costlyCache's refreshes take: a value is
// fetched again only once it is costlyRefresh times as old as its fetch
// took, so fetching takes at most 1/(costlyRefresh+1) of the time however
// often it is asked for. A fetch of microseconds (small tables) is
// therefore as good as fresh every time; one of a second (two full
// tables) is reused for 20 s, and none for longer than costlyMaxAge.
// An asker waits for a fetch at most costlyWait, then has the value it
// replaces (the zero value before the first): a status request answers
// in time even while GoBGP's loop is busy with a full table.
const (
	costlyRefresh = 20
	costlyMaxAge  = 30 * time.Second
	costlyWait    = 500 * time.Millisecond
)

// costlyCache holds a value that is dear to fetch. It is safe for
// concurrent use; one fetch runs at a time.
type costlyCache[T any] struct {
	mu       sync.Mutex
	ok       bool
	at       time.Time     // when the value's fetch ended
	cost     time.Duration // what it took
	v        T
	fetching chan struct{} // closed when the fetch under way ends; nil if none
	gen      uint64        // counts forget calls: a fetch begun before one is not kept
	fetchGen uint64        // gen when the fetch under way began
}

// forget drops the value: the next get fetches, and a fetch under way is
// not kept.
func (c *costlyCache[T]) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	c.ok, c.v = false, zero
	c.gen++
}

// get returns the value, fetching it first if it is older than
// costlyRefresh times its last fetch's cost or than costlyMaxAge (or there
// is none), waiting for that fetch at most wait.
func (c *costlyCache[T]) get(now func() time.Time, wait time.Duration, fetch func() T) T {
	c.mu.Lock()
	start := now()
	if c.ok && start.Sub(c.at) < min(costlyRefresh*c.cost, costlyMaxAge) {
		defer c.mu.Unlock()
		return c.v
	}
	done := c.fetching
	if done == nil || c.fetchGen != c.gen {
		done = make(chan struct{})
		c.fetching, c.fetchGen = done, c.gen
		gen := c.gen
		go func() {
			v := fetch()
			c.mu.Lock()
			if c.gen == gen {
				c.v, c.ok = v, true
				c.at = now()
				c.cost = c.at.Sub(start)
			}
			if c.fetching == done {
				c.fetching = nil
			}
			c.mu.Unlock()
			close(done)
		}()
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}
