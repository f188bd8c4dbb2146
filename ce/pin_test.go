package ce

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pinning changes the whole process, so every Pin that may succeed runs in a
// child: the test binary re-executed with pinChildEnv set, running only
// TestPinHelperProcess.
const (
	pinChildEnv = "SPLITPLANE_PIN_CHILD" // cores to pin to, "0" or "0,1"
	pinOutEnv   = "SPLITPLANE_PIN_OUT"   // file the child writes its pinChildResult to
)

// pinChildResult is what the child saw.
type pinChildResult struct {
	Err        string // Pin's error, if any
	Report     PinReport
	ReportText string
	// GOMAXPROCS is runtime.GOMAXPROCS before Pin and after the new threads ran.
	GOMAXPROCSBefore, GOMAXPROCSAfter int
	// Before are the threads that existed when Pin was called (churn aside);
	// Blockers are the threads of goroutines started after Pin, each locked to
	// its own thread and blocked in read(2), so most are new threads.
	Before, Blockers []int
	// Threads maps every thread at the end to its name and Cpus_allowed_list.
	Threads map[int][2]string
}

// TestPinHelperProcess is the child; it does nothing unless pinChildEnv is set.
func TestPinHelperProcess(t *testing.T) {
	coresText := os.Getenv(pinChildEnv)
	if coresText == "" {
		return
	}
	var res pinChildResult
	defer func() {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv(pinOutEnv), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}()
	cores, err := parseCPUList(coresText)
	if err != nil {
		res.Err = err.Error()
		return
	}

	// Start the runtime's template thread before Pin, so Pin must find it: the
	// runtime clones it for new threads wanted by goroutines that are locked.
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		runtime.UnlockOSThread()
		close(done)
	}()
	<-done

	// Threads appear and exit while Pin scans: each churn goroutine ends locked,
	// which makes the runtime end its thread and start another for the next.
	stopChurn := make(chan struct{})
	var churn sync.WaitGroup
	for range 4 {
		churn.Go(func() {
			for {
				select {
				case <-stopChurn:
					return
				default:
				}
				ch := make(chan struct{})
				go func() {
					runtime.LockOSThread()
					close(ch)
				}()
				<-ch
			}
		})
	}
	time.Sleep(20 * time.Millisecond)

	res.Before = taskIDs(t)
	res.GOMAXPROCSBefore = runtime.GOMAXPROCS(0)
	rep, err := Pin(cores)
	close(stopChurn)
	churn.Wait()
	if err != nil {
		res.Err = err.Error()
		return
	}
	res.Report, res.ReportText = rep, rep.String()

	// New threads after Pin: 16 goroutines each locked to a thread and blocked
	// in a raw read(2) (not the netpoller), so each holds its own thread.
	// Half are started by a locked goroutine, whose new threads the runtime
	// clones from its template thread rather than from the locked one.
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	tids := make(chan int)
	block := func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		var b [1]byte
		unix.Read(p[0], b[:])
	}
	for range 8 {
		go block()
	}
	go func() {
		runtime.LockOSThread()
		for range 8 {
			go block()
		}
		block()
	}()
	for range 17 {
		res.Blockers = append(res.Blockers, <-tids)
	}
	res.GOMAXPROCSAfter = runtime.GOMAXPROCS(0)
	res.Threads = make(map[int][2]string)
	for _, tid := range taskIDs(t) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil {
			continue // exited
		}
		res.Threads[tid] = [2]string{statusField(string(status), "Name"), statusField(string(status), "Cpus_allowed_list")}
	}
	unix.Close(p[1]) // releases the blockers; their threads exit with them
}

func taskIDs(t *testing.T) []int {
	tids, err := listThreads()
	if err != nil {
		t.Fatal(err)
	}
	return tids
}

func statusField(status, name string) string {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// runPinChild runs the child pinning to cores, with extra environment, and
// returns what it saw. If restrict is set, the child starts with its affinity
// restricted to it: it is forked from a thread with that mask.
func runPinChild(t *testing.T, cores []int, restrict []int, env ...string) pinChildResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPinHelperProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), pinChildEnv+"="+formatCPUList(cores), pinOutEnv+"="+out)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	var (
		output []byte
		err    error
	)
	if restrict == nil {
		output, err = cmd.CombinedOutput()
	} else {
		// os/exec forks from the calling thread, and the child inherits that
		// thread's mask. The goroutine stays locked, so its thread, with its
		// narrowed mask, exits with it instead of going back to the runtime.
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			var set unix.CPUSet
			for _, c := range restrict {
				set.Set(c)
			}
			if err = unix.SchedSetaffinity(0, &set); err != nil {
				return
			}
			output, err = cmd.CombinedOutput()
		}()
		<-done
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, output)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("child wrote no result: %v\n%s", err, output)
	}
	var res pinChildResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// allowedCPUs are the CPUs this test process may use.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &set); err != nil {
		t.Fatal(err)
	}
	return cpuSetList(&set)
}

// checkPinned asserts that the child pinned to cores, that the new threads
// appeared, and that every thread at the end, old or new, is on cores only.
func checkPinned(t *testing.T, res pinChildResult, cores []int) {
	t.Helper()
	if res.Err != "" {
		t.Fatalf("Pin(%v): %s", cores, res.Err)
	}
	t.Logf("child: %s in %d passes; %d threads before, %d at the end",
		res.ReportText, res.Report.Passes, len(res.Before), len(res.Threads))
	want := PinReport{
		Cores:            cores,
		GOMAXPROCSBefore: res.GOMAXPROCSBefore,
		GOMAXPROCSAfter:  len(cores),
		Threads:          res.Report.Threads,
		Passes:           res.Report.Passes,
	}
	if !slices.Equal(res.Report.Cores, want.Cores) || res.Report.GOMAXPROCSBefore != want.GOMAXPROCSBefore ||
		res.Report.GOMAXPROCSAfter != want.GOMAXPROCSAfter {
		t.Errorf("report %+v, want %+v", res.Report, want)
	}
	if res.Report.Threads < 2 || res.Report.Threads > len(res.Before)+100 {
		t.Errorf("report: %d threads pinned, %d existed before Pin", res.Report.Threads, len(res.Before))
	}
	if res.ReportText != want.String() {
		t.Errorf("report text %q, want %q", res.ReportText, want.String())
	}
	if res.GOMAXPROCSAfter != len(cores) {
		t.Errorf("GOMAXPROCS %d after the new threads ran, want %d", res.GOMAXPROCSAfter, len(cores))
	}

	var fresh []int
	for _, tid := range res.Blockers {
		if !slices.Contains(res.Before, tid) {
			fresh = append(fresh, tid)
		}
		if _, ok := res.Threads[tid]; !ok {
			t.Errorf("blocker thread %d missing from /proc/self/task", tid)
		}
	}
	// 17 locked, blocked goroutines need 17 threads; a few may be old ones.
	if len(fresh) < 10 {
		t.Errorf("only %d of the blocker threads were started after Pin (%v); before: %v", len(fresh), res.Blockers, res.Before)
	}
	wantList := formatCPUList(cores)
	for tid, v := range res.Threads {
		if v[1] != wantList {
			t.Errorf("thread %d (%s, new: %v): Cpus_allowed_list %q, want %q",
				tid, v[0], !slices.Contains(res.Before, tid), v[1], wantList)
		}
	}
}

func TestPinFirstAllowedCPU(t *testing.T) {
	cores := allowedCPUs(t)[:1]
	checkPinned(t, runPinChild(t, cores, nil), cores)
}

func TestPinCPU1(t *testing.T) {
	if !slices.Contains(allowedCPUs(t), 1) {
		t.Skipf("needs CPU 1; this process may only use CPUs %s", formatCPUList(allowedCPUs(t)))
	}
	checkPinned(t, runPinChild(t, []int{1}, nil), []int{1})
}

// TestPinTwoCores widens GOMAXPROCS: the child starts with GOMAXPROCS=1.
func TestPinTwoCores(t *testing.T) {
	allowed := allowedCPUs(t)
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs; this process may only use CPU %s", formatCPUList(allowed))
	}
	cores := allowed[:2]
	res := runPinChild(t, cores, nil, "GOMAXPROCS=1")
	checkPinned(t, res, cores)
	if res.Report.GOMAXPROCSBefore != 1 {
		t.Errorf("GOMAXPROCS before %d, want 1 (from the environment)", res.Report.GOMAXPROCSBefore)
	}
}

// TestPinNotAllowed: a process started on CPU 0 only may not pin to CPU 1,
// though CPU 1 is online.
func TestPinNotAllowed(t *testing.T) {
	if !slices.Contains(allowedCPUs(t), 0) || !slices.Contains(allowedCPUs(t), 1) {
		t.Skipf("needs CPUs 0 and 1; this process may only use CPUs %s", formatCPUList(allowedCPUs(t)))
	}
	res := runPinChild(t, []int{1}, []int{0})
	want := "control cores: CPU 1: not allowed for this process (allowed: 0)"
	if res.Err != want {
		t.Errorf("Pin([1]) in a process on CPU 0: %q, want %q", res.Err, want)
	}
	// And the same restricted process may pin to the CPU it has.
	checkPinned(t, runPinChild(t, []int{0}, []int{0}), []int{0})
}

// TestPinBadInput runs in this process: each case must fail before changing
// anything, which the test checks too.
func TestPinBadInput(t *testing.T) {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	onlineCPUs, err := parseCPUList(string(online))
	if err != nil {
		t.Fatal(err)
	}
	offline := slices.Max(onlineCPUs) + 1
	first := allowedCPUs(t)[0]
	beforeCPUs, beforeProcs := allowedCPUs(t), runtime.GOMAXPROCS(0)

	for _, tc := range []struct {
		cores []int
		want  string
	}{
		{nil, "control cores: empty list"},
		{[]int{}, "control cores: empty list"},
		{[]int{-1}, "control cores: CPU -1: negative"},
		{[]int{first, -3}, "control cores: CPU -3: negative"},
		{[]int{first, first}, fmt.Sprintf("control cores: CPU %d: listed twice", first)},
		{[]int{offline}, fmt.Sprintf("control cores: CPU %d: does not exist or is offline (online: %s)", offline, formatCPUList(onlineCPUs))},
		{[]int{first, 1 << 20}, fmt.Sprintf("control cores: CPU %d: does not exist or is offline", 1<<20)},
	} {
		rep, err := Pin(tc.cores)
		if !errors.Is(err, ErrControlCores) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Pin(%v) = %v, %v; want an error starting %q", tc.cores, rep, err, tc.want)
		}
	}
	if after := allowedCPUs(t); !slices.Equal(after, beforeCPUs) {
		t.Errorf("bad input changed the affinity: %v, was %v", after, beforeCPUs)
	}
	if after := runtime.GOMAXPROCS(0); after != beforeProcs {
		t.Errorf("bad input changed GOMAXPROCS: %d, was %d", after, beforeProcs)
	}
}

func TestPinCPUList(t *testing.T) {
	for _, tc := range []struct {
		text string
		cpus []int
	}{
		{"0", []int{0}},
		{"0-1\n", []int{0, 1}},
		{"0-2,5,7-8", []int{0, 1, 2, 5, 7, 8}},
		{"1,3", []int{1, 3}},
	} {
		cpus, err := parseCPUList(tc.text)
		if err != nil || !slices.Equal(cpus, tc.cpus) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", tc.text, cpus, err, tc.cpus)
		}
		if got, want := formatCPUList(tc.cpus), strings.TrimSpace(tc.text); got != want {
			t.Errorf("formatCPUList(%v) = %q, want %q", tc.cpus, got, want)
		}
	}
	for _, bad := range []string{"x", "1-", "3-1", "-1", "1,,2"} {
		if cpus, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, cpus)
		}
	}
	r := PinReport{Cores: []int{0}, GOMAXPROCSBefore: 2, GOMAXPROCSAfter: 1, Threads: 7}
	if got, want := r.String(), "pinned to CPU 0 (GOMAXPROCS 2 -> 1, 7 threads)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	r = PinReport{Cores: []int{0, 1, 3}, GOMAXPROCSBefore: 1, GOMAXPROCSAfter: 3, Threads: 9}
	if got, want := r.String(), "pinned to CPUs 0-1,3 (GOMAXPROCS 1 -> 3, 9 threads)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// fakeThreads is a process for pinThreads: a thread cloned by one not yet
// pinned starts with the old mask, as clone(2) copies the parent's.
type fakeThreads struct {
	pinned map[int]bool
	alive  []int
	// clones[parent] is the thread that parent clones just before it is pinned.
	clones map[int]int
	// late[n] is a thread that shows, unpinned, from the nth listing on: its
	// parent was inside clone(2) when it was pinned.
	late map[int]int
	// exits are threads that exit between the listing and their pinning.
	exits  map[int]bool
	lists  int
	sleeps []time.Duration
}

func (f *fakeThreads) ops() threadOps {
	return threadOps{list: f.list, onCores: f.onCores, pin: f.pin, sleep: func(d time.Duration) { f.sleeps = append(f.sleeps, d) }}
}

func (f *fakeThreads) list() ([]int, error) {
	f.lists++
	if tid, ok := f.late[f.lists]; ok {
		f.alive = append(f.alive, tid)
	}
	return slices.Clone(f.alive), nil
}

func (f *fakeThreads) onCores(tid int) (bool, error) {
	if f.exits[tid] {
		f.alive = slices.DeleteFunc(f.alive, func(t int) bool { return t == tid })
		return false, unix.ESRCH
	}
	return f.pinned[tid], nil
}

func (f *fakeThreads) pin(tid int) error {
	if child, ok := f.clones[tid]; ok {
		f.alive = append(f.alive, child) // inherits tid's mask: not pinned
	}
	f.pinned[tid] = true
	return nil
}

// TestPinThreadsRescan proves what the child processes only hit by chance: a
// thread cloned during the scan by a thread not yet pinned is found by a
// later listing, even one that shows only after a pass found nothing to pin;
// a thread already on the cores is counted, not pinned again; a thread that
// exits mid-scan is skipped.
func TestPinThreadsRescan(t *testing.T) {
	f := &fakeThreads{
		pinned: map[int]bool{8: true},
		alive:  []int{1, 2, 3, 4, 8},
		clones: map[int]int{3: 5, 5: 6},
		late:   map[int]int{5: 7},
		exits:  map[int]bool{2: true},
	}
	threads, passes, err := pinThreads(f.ops())
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range f.alive {
		if !f.pinned[tid] {
			t.Errorf("thread %d left unpinned", tid)
		}
	}
	// 1, 3, 4 pinned and 8 found on the cores in pass 1; 5 (cloned by 3) in
	// pass 2; 6 (cloned by 5) in pass 3; pass 4 pins nothing and waits; 7
	// shows in pass 5 and is pinned; passes 6 to 9 are quiet.
	wantSleeps := append(pinSettle[:1:1], pinSettle...)
	if threads != 7 || passes != 9 || f.lists != 9 || !slices.Equal(f.sleeps, wantSleeps) {
		t.Errorf("%d threads in %d passes (%d listings, pauses %v), want 7 in 9, pauses %v",
			threads, passes, f.lists, f.sleeps, wantSleeps)
	}

	// A process that never stops making unpinned threads is an error, not a hang.
	storm := &fakeThreads{pinned: map[int]bool{}, alive: []int{1}, clones: map[int]int{}}
	for tid := 1; tid <= 2*maxPinPasses; tid++ {
		storm.clones[tid] = tid + 1
	}
	if _, _, err := pinThreads(storm.ops()); err == nil || !strings.Contains(err.Error(), "still appearing") {
		t.Errorf("thread storm: %v, want an error", err)
	}

	// Any error but ESRCH stops Pin.
	_, _, err = pinThreads(threadOps{
		list:    func() ([]int, error) { return []int{7}, nil },
		onCores: func(int) (bool, error) { return false, nil },
		pin:     func(int) error { return unix.EINVAL },
	})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "thread 7") {
		t.Errorf("EINVAL from sched_setaffinity: %v", err)
	}
}
