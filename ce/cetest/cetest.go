// Package cetest runs a real CE for the tests of the packages above it (the
// API server, the CLI, the FE's end-to-end tests). The CE's own tests have
// the same helper in package ce, which cannot import this one.
package cetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
)

// Run runs c until the test ends or stop is called (once; later calls do
// nothing), and returns when its ForCES listener is up. An error from the
// CE's Run fails the test.
func Run(t testing.TB, c *ce.CE) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	exited := false
	stop = func() {
		once.Do(func() {
			cancel()
			if !exited {
				runErr = <-done
			}
			if runErr != nil {
				t.Errorf("CE Run: %v", runErr)
			}
		})
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); c.Addr() == nil; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			exited = true
			t.Fatalf("CE Run returned before listening: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the CE's ForCES listener is not up after 10s")
		}
	}
	return stop
}
