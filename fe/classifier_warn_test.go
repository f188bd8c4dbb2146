package fe

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/internal/logtest"
)

type countersFake struct {
	mu sync.Mutex
	n  uint64
}

func (f *countersFake) Counters() (datapath.Counters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return datapath.Counters{"pass_steer_bad_csum": f.n}, nil
}

func (f *countersFake) add(n uint64) {
	f.mu.Lock()
	f.n += n
	f.mu.Unlock()
}

// The FE warns when control-flow packets stay unsteered because their
// checksum did not verify, once while it lasts (within the repeat
// interval), and not for the count it found at start.
func TestWarnUnsteered(t *testing.T) {
	var out logtest.Recorder
	log := slog.New(&out)
	f := &countersFake{n: 5}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		warnUnsteered(ctx, log, f, 10*time.Millisecond, time.Hour)
	}()
	time.Sleep(50 * time.Millisecond)
	if out.Count() != 0 {
		t.Errorf("warned with a count that did not grow: %s", out.String())
	}
	f.add(3)
	deadline := time.Now().Add(5 * time.Second)
	for !out.Has("pass_steer_bad_csum=8") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.add(3)
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	if !out.Has("WARN", "pass_steer_bad_csum=8", "CPUMAP checksum pitfall") {
		t.Errorf("no warning for a growing pass_steer_bad_csum: %q", out.String())
	}
	if n := out.Count("WARN"); n != 1 {
		t.Errorf("%d warnings within the repeat interval, want 1: %s", n, out.String())
	}
}
