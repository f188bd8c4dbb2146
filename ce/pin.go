package ce

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrControlCores is wrapped by every error Pin returns for a bad list of
// cores (empty, negative, duplicate, offline or not allowed).
var ErrControlCores = errors.New("control cores")

// maxPinPasses bounds the rescans of /proc/self/task. Each pass only finds
// threads cloned by a thread not yet pinned, so it converges in a few passes;
// the bound turns a pathological thread storm into an error, not a hang.
const maxPinPasses = 100

// pinSettle are the pauses between the quiet passes that end Pin. A thread
// that was inside clone(2) when Pin set its mask gives its child the old mask,
// and the child shows in /proc/self/task only when clone finishes, which a
// preempted thread may take milliseconds to do. Pin stops after a pass that
// pinned nothing has been followed by one more quiet pass after each pause.
var pinSettle = []time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond}

// PinReport says what Pin did.
type PinReport struct {
	// Cores are the CPUs every thread is now allowed to run on, sorted.
	Cores []int
	// GOMAXPROCSBefore and GOMAXPROCSAfter are runtime.GOMAXPROCS before and
	// after the call; after is len(Cores).
	GOMAXPROCSBefore, GOMAXPROCSAfter int
	// Threads is how many OS threads of the process Pin found, every one now
	// on Cores (threads that exited while Pin ran are not counted).
	Threads int
	// Passes is how many scans of /proc/self/task it took, the quiet ones that
	// end it included.
	Passes int
}

// String reads like "pinned to CPU 0 (GOMAXPROCS 2 -> 1, 7 threads)".
func (r PinReport) String() string {
	cpu := "CPU"
	if len(r.Cores) != 1 {
		cpu = "CPUs"
	}
	return fmt.Sprintf("pinned to %s %s (GOMAXPROCS %d -> %d, %d threads)",
		cpu, formatCPUList(r.Cores), r.GOMAXPROCSBefore, r.GOMAXPROCSAfter, r.Threads)
}

// Pin restricts every OS thread of the process to cores and sets GOMAXPROCS
// to len(cores). Threads started later, by the Go runtime or by C code,
// inherit the mask from the thread that clones them, so they stay on cores too.
// GOMAXPROCS is set explicitly because the runtime does not follow affinity
// changes after start-up (and runtime.NumCPU keeps the start-up count).
//
// Each core must be online and allowed by the affinity mask the process has
// when Pin is called (so a second Pin can narrow the set, not widen it). Bad
// input is refused, wrapping ErrControlCores, before anything is changed; an
// error from the kernel part-way through may leave some threads pinned.
func Pin(cores []int) (PinReport, error) {
	set, err := checkCores(cores)
	if err != nil {
		return PinReport{}, err
	}
	r := PinReport{Cores: slices.Sorted(slices.Values(cores))}
	r.Threads, r.Passes, err = pinThreads(threadOps{
		list: listThreads,
		onCores: func(tid int) (bool, error) {
			var now unix.CPUSet
			err := unix.SchedGetaffinity(tid, &now)
			return now == set, err
		},
		pin:   func(tid int) error { return unix.SchedSetaffinity(tid, &set) },
		sleep: time.Sleep,
	})
	if err != nil {
		return PinReport{}, err
	}
	r.GOMAXPROCSBefore = runtime.GOMAXPROCS(len(cores))
	r.GOMAXPROCSAfter = runtime.GOMAXPROCS(0)
	return r, nil
}

// checkCores validates cores against the online CPUs and the process's
// affinity mask and returns them as a CPU set.
func checkCores(cores []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	if len(cores) == 0 {
		return set, fmt.Errorf("%w: empty list (leave Pin uncalled to stay unpinned)", ErrControlCores)
	}
	onlineText, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return set, fmt.Errorf("pin: online CPUs: %w", err)
	}
	online, err := parseCPUList(string(onlineText))
	if err != nil {
		return set, fmt.Errorf("pin: online CPUs: %w", err)
	}
	// The thread group leader's mask stands for the process: it is the mask the
	// process was started with unless something changed it since.
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &allowed); err != nil {
		return set, fmt.Errorf("pin: affinity of the process: %w", err)
	}
	for _, c := range cores {
		switch {
		case c < 0:
			return set, fmt.Errorf("%w: CPU %d: negative", ErrControlCores, c)
		case set.IsSet(c):
			return set, fmt.Errorf("%w: CPU %d: listed twice", ErrControlCores, c)
		case !slices.Contains(online, c):
			return set, fmt.Errorf("%w: CPU %d: does not exist or is offline (online: %s)",
				ErrControlCores, c, formatCPUList(online))
		case !allowed.IsSet(c):
			return set, fmt.Errorf("%w: CPU %d: not allowed for this process (allowed: %s)",
				ErrControlCores, c, formatCPUList(cpuSetList(&allowed)))
		}
		set.Set(c)
	}
	return set, nil
}

// threadOps are what pinThreads does to the process, replaceable in tests.
type threadOps struct {
	list    func() ([]int, error)       // the threads' IDs
	onCores func(tid int) (bool, error) // whether tid's mask is already the wanted one
	pin     func(tid int) error         // set tid's mask
	sleep   func(d time.Duration)       // pause between quiet passes
}

// pinThreads pins every thread that ops.list returns and is not on the cores
// yet, and lists again until a pass pins nothing and stays so through the
// pinSettle pauses: a thread created after that was cloned by one already
// pinned, so it inherits the mask. A thread that exits before it is reached
// (ESRCH) is skipped, not counted.
func pinThreads(ops threadOps) (threads, passes int, err error) {
	seen := make(map[int]bool)
	quiet := 0
	for passes = 1; passes <= maxPinPasses; passes++ {
		tids, err := ops.list()
		if err != nil {
			return threads, passes, fmt.Errorf("pin: list threads: %w", err)
		}
		pinned := false
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			// Seen even if it has exited, so that a vanished thread whose /proc
			// entry lingers is not looked at on every pass.
			seen[tid] = true
			ok, err := ops.onCores(tid)
			if err == nil && !ok {
				err, pinned = ops.pin(tid), true
			}
			switch {
			case errors.Is(err, unix.ESRCH):
			case err != nil:
				return threads, passes, fmt.Errorf("pin: thread %d: %w", tid, err)
			default:
				threads++
			}
		}
		if pinned {
			quiet = 0
			continue
		}
		if quiet == len(pinSettle) {
			return threads, passes, nil
		}
		ops.sleep(pinSettle[quiet])
		quiet++
	}
	return threads, passes, fmt.Errorf("pin: threads still appearing after %d listings of /proc/self/task", maxPinPasses)
}

// listThreads returns the IDs of the process's threads.
func listThreads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// cpuSetList returns the CPUs in s, in order.
func cpuSetList(s *unix.CPUSet) []int {
	var cpus []int
	for c := 0; len(cpus) < s.Count(); c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// parseCPUList parses the kernel's CPU list format ("0-3,8,10-11"), as in
// /sys/devices/system/cpu/online and Cpus_allowed_list.
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var cpus []int
	if s == "" {
		return cpus, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("CPU list %q: %w", s, err)
			}
		}
		if a < 0 || b < a {
			return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// formatCPUList writes sorted CPUs in the kernel's list format, runs of
// consecutive CPUs as ranges: [0 1 2 5] is "0-2,5".
func formatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
