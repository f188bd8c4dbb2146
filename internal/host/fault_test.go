package host

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The probe faults in every page it times, one fault each: the process's
// minor faults grow by at least its page count, and the time per page is
// neither zero nor absurd.
func TestPageFaultCost(t *testing.T) {
	runtime.LockOSThread() // RUSAGE_THREAD counts this thread's faults only
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	d, err := PageFaultCost(size)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	pages := int64(size / unix.Getpagesize())
	if got := after.Minflt - before.Minflt; got < pages {
		t.Errorf("%d minor faults while probing %d pages: the probe did not touch fresh 4 KiB pages", got, pages)
	}
	if d <= 0 || d > time.Millisecond {
		t.Errorf("%v per page fault", d)
	}
	t.Logf("%v per page fault (%d pages)", d, pages)
}

func TestPageFaultCostTooSmall(t *testing.T) {
	if _, err := PageFaultCost(100); err == nil {
		t.Error("a probe smaller than a page: no error")
	}
}

// MeasureMemory measures: a first touch costs something.
func TestMeasureMemory(t *testing.T) {
	a := MeasureMemory()
	if a.FirstTouch <= 0 {
		t.Errorf("first touch %v", a.FirstTouch)
	}
}

// Prefault leaves a fresh slice zero and faults each of its pages once, on
// the write: filling it afterwards in reads and writes adds no fault.
func TestPrefault(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := make([]uint32, 8<<20) // 32 MiB of fresh heap
	Prefault(s)
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Skipf("getrusage: %v", err)
	}
	for i := 0; i < len(s); i += 1024 {
		if s[i] != 0 {
			t.Fatalf("s[%d] = %d after Prefault", i, s[i])
		}
		s[i] = uint32(i)
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	if faults := after.Minflt - before.Minflt; faults > 64 {
		t.Errorf("%d page faults reading and writing the 8,192 pages Prefault wrote", faults)
	}
}
