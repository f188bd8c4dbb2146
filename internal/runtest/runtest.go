// Package runtest runs a daemon's Run method (the CE's, an FE agent's) for
// a test: on a goroutine of its own until the test ends, failing the test if
// it returns an error.
package runtest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Run calls run on a goroutine until the test ends or stop is called (once;
// later calls do nothing) and returns once up reports true (10 s at most).
// An error from run fails the test; what names the daemon in messages.
func Run(t testing.TB, what string, run func(context.Context) error, up func() bool) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	exited := false
	stop = func() {
		once.Do(func() {
			cancel()
			if exited {
				return
			}
			if err := <-done; err != nil {
				t.Errorf("%s Run: %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); !up(); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			exited = true
			t.Fatalf("%s Run returned before it was up: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not up after 10s", what)
		}
	}
	return stop
}
