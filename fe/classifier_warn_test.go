package fe

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/fe/datapath"
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The FE warns when control-flow packets stay unsteered because their
// checksum did not verify, once while it lasts (within the repeat
// interval), and not for the count it found at start.
func TestWarnUnsteered(t *testing.T) {
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	f := &countersFake{n: 5}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		warnUnsteered(ctx, log, f, 10*time.Millisecond, time.Hour)
	}()
	time.Sleep(50 * time.Millisecond)
	if s := out.String(); s != "" {
		t.Errorf("warned with a count that did not grow: %s", s)
	}
	f.add(3)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "pass_steer_bad_csum=8") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.add(3)
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	s := out.String()
	if !strings.Contains(s, "level=WARN") || !strings.Contains(s, "pass_steer_bad_csum=8") || !strings.Contains(s, "CPUMAP checksum pitfall") {
		t.Errorf("no warning for a growing pass_steer_bad_csum: %q", s)
	}
	if n := strings.Count(s, "level=WARN"); n != 1 {
		t.Errorf("%d warnings within the repeat interval, want 1: %s", n, s)
	}
}
