package harness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Proc is a program started in a namespace and supervised by its parent:
// it is reaped as soon as it exits, and Stop stops it by its pid.
type Proc struct {
	// Name names the program in errors; Log is the file it writes to.
	Name, Log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error // of Wait, once done is closed
}

// Start runs args in namespace ns (nsenter execs it, so the pid is the
// program's), in its own process group so that a terminal's signals stay
// with the caller, writing standard output and error to the file log.
func Start(name, ns, log string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, Log: log, done: make(chan struct{})}
	logf, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command("nsenter", append([]string{"--net=" + Path(ns)}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the program's pid.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited returns an error quoting the end of the log if the program has
// ended, and nil while it runs.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) exited (%v); the end of its log:\n%s", p.Name, p.Pid(), p.err, Tail(p.Log, 15))
	default:
		return nil
	}
}

// Stop sends SIGTERM and waits up to grace for the program to end, then
// sends SIGKILL and waits up to 5 s more.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL", p.Name, p.Pid())
	}
}

// StartDetached runs args in namespace ns as a daemon that outlives the
// caller: in its own session, writing to the file log (truncated first),
// and released, so that another process can stop it later with StopPid.
// It returns the pid.
func StartDetached(name, ns, log string, args ...string) (int, error) {
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=" + Path(ns)}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

// StopPid stops a process that StartDetached started: SIGTERM, then SIGKILL
// after grace. It returns once the process is gone. A pid that no longer
// runs, or now runs a command line without want, is left alone.
func StopPid(pid int, want string, grace time.Duration) error {
	if !Alive(pid, want) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !Alive(pid, want) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	// A killed process with a big heap takes a while to give its memory
	// back, and holds its sockets until then: the daemon started next
	// would find them in use.
	deadline = time.Now().Add(10 * time.Second)
	for Alive(pid, want) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d (%s) survived SIGKILL", pid, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Alive reports whether pid runs a command line containing want (any, if
// want is empty) and is not a zombie. A process in the middle of exec
// (nsenter becoming the daemon) briefly shows an empty command line, so
// only a process that is gone, a zombie, or running something else counts
// as not alive. A multi-threaded process that is exiting shows its main
// thread a zombie while the others still close its files and free its
// memory: it is alive until they are gone.
func Alive(pid int, want string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		threads, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		return len(threads) > 1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return want == "" || len(b) == 0 || bytes.Contains(b, []byte(want))
}
