package ce

import (
	"context"
	"time"
)

// quietPeriod is how long the routes must stay unchanged, with every
// neighbour established and done sending, for the CE's FIB to count as converged.
const quietPeriod = time.Second

// watchConvergence closes c.converged when every configured neighbour is
// established (with graceful restart: and has sent End-of-RIB) and no route
// has changed for quietPeriod, or when SyncHold has
// passed since the start, whichever comes first.
func (c *CE) watchConvergence(ctx context.Context) {
	defer close(c.converged)
	start := time.Now()
	c.lastUpdate.Store(start.UnixNano())
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		established := true
		for _, n := range c.speaker.Sessions() {
			// With graceful restart, a neighbour's routes are all in only
			// once it has sent End-of-RIB.
			if n.State != "established" || n.WaitingEndOfRIB {
				established = false
			}
		}
		quiet := time.Since(time.Unix(0, c.lastUpdate.Load())) >= quietPeriod
		if established && quiet {
			c.log.Info("fib: converged; syncing FEs", "after", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) >= c.cfg.SyncHold {
			c.log.Warn("fib: not converged within sync_hold; syncing FEs with what is known", "sync_hold", c.cfg.SyncHold)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
