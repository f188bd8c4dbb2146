package forces

import (
	"slices"
	"sync"
	"time"
)

// RTTRing measures the round trips of an association's own heartbeats (sent
// with AlwaysACK, answered by the peer's reader as soon as it reads them),
// keeping the most recent ones.
type RTTRing struct {
	mu      sync.Mutex
	pending map[uint64]time.Time // correlator -> sent
	rtts    []time.Duration      // the most recent round trips, a ring
	next    int
}

// rttWindow is how many round trips RTTRing keeps (and how many unanswered
// heartbeats it waits for).
const rttWindow = 256

// Sent records a heartbeat sent with correlator corr.
func (h *RTTRing) Sent(corr uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[uint64]time.Time{}
	}
	if len(h.pending) > rttWindow { // unanswered ones are lost, not leaked
		clear(h.pending)
	}
	h.pending[corr] = time.Now()
}

// Answered records the answer to the heartbeat with correlator corr; an
// answer to none sent is ignored.
func (h *RTTRing) Answered(corr uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.pending[corr]
	if !ok {
		return
	}
	delete(h.pending, corr)
	if len(h.rtts) < rttWindow {
		h.rtts = append(h.rtts, time.Since(t))
		return
	}
	h.rtts[h.next] = time.Since(t)
	h.next = (h.next + 1) % rttWindow
}

// RTTSummary describes recent heartbeat round trips, in milliseconds.
type RTTSummary struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

// Summary describes the round trips kept.
func (h *RTTRing) Summary() RTTSummary {
	h.mu.Lock()
	r := slices.Clone(h.rtts)
	h.mu.Unlock()
	if len(r) == 0 {
		return RTTSummary{}
	}
	slices.Sort(r)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return RTTSummary{Samples: len(r), P50: ms(r[len(r)/2]), P99: ms(r[(len(r)*99)/100]), Max: ms(r[len(r)-1])}
}
