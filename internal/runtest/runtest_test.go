package runtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// Run returns once the daemon is up, and stop ends it, once.
func TestRunStop(t *testing.T) {
	var up, ended atomic.Bool
	run := func(ctx context.Context) error {
		up.Store(true)
		<-ctx.Done()
		ended.Store(true)
		return nil
	}
	stop := Run(t, "daemon", run, up.Load)
	if ended.Load() {
		t.Fatal("ended before stop")
	}
	stop()
	stop()
	if !ended.Load() {
		t.Fatal("not ended after stop")
	}
}

// A daemon whose Run fails before it is up fails the test.
func TestRunFailsEarly(t *testing.T) {
	ft := &fakeT{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ft, "daemon", func(context.Context) error { return errors.New("port in use") }, func() bool { return false })
	}()
	<-done
	if msg, _ := ft.msg.Load().(string); !strings.Contains(msg, "port in use") {
		t.Fatalf("the test failed with %q; want Run's error", msg)
	}
}

// fakeT records the first failure and ends the goroutine as t.Fatal does.
type fakeT struct {
	*testing.T
	msg atomic.Value // the first failure's message
}

func (f *fakeT) Fatalf(format string, args ...any) { f.Errorf(format, args...); runtime.Goexit() }
func (f *fakeT) Errorf(format string, args ...any) {
	f.msg.CompareAndSwap(nil, fmt.Sprintf(format, args...))
}
func (f *fakeT) Cleanup(func()) {}
func (f *fakeT) Helper()        {}
