package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/internal/nsthread"
)

func TestTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := Tail(p, 2), "    two\n    three"; got != want {
		t.Errorf("Tail(2) = %q, want %q", got, want)
	}
	if got, want := Tail(p, 5), "    one\n    two\n    three"; got != want {
		t.Errorf("Tail(5) = %q, want %q", got, want)
	}
	if got := Tail(filepath.Join(t.TempDir(), "none"), 2); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing file = %q, want the error", got)
	}
}

func TestFirstLines(t *testing.T) {
	if got, want := FirstLines([]byte("\na\nb\nc\n"), 2), "a; b; ..."; got != want {
		t.Errorf("FirstLines = %q, want %q", got, want)
	}
	if got, want := FirstLines([]byte("a\n"), 2), "a"; got != want {
		t.Errorf("FirstLines = %q, want %q", got, want)
	}
}

func TestRunQuotesStderr(t *testing.T) {
	err := Run(context.Background(), "sh", "-c", "echo to-stdout; echo bad >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "bad") || strings.Contains(err.Error(), ": to-stdout") {
		t.Errorf("Run = %v, want an error quoting stderr only", err)
	}
	out, err := Output(context.Background(), "echo", "hi")
	if err != nil || out != "hi\n" {
		t.Errorf("Output = %q, %v", out, err)
	}
}

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid(), "") {
		t.Error("this process is not alive")
	}
	if Alive(os.Getpid(), "no-such-program-name") {
		t.Error("this process runs a program it does not run")
	}
}

func root(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make namespaces")
	}
}

// TestNamespacesAndVeth builds two namespaces joined by a veth pair and
// checks the addresses, the MAC and that the pair carries traffic.
func TestNamespacesAndVeth(t *testing.T) {
	root(t)
	ctx := context.Background()
	a, b := fmt.Sprintf("hns-%d-a", os.Getpid()), fmt.Sprintf("hns-%d-b", os.Getpid())
	for _, ns := range []string{a, b} {
		if err := AddNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = DelNamespace(context.Background(), ns) })
	}
	if err := AddNamespace(ctx, a); !errors.Is(err, ErrExists) {
		t.Errorf("adding %s twice: %v, want ErrExists", a, err)
	}
	mac := net.HardwareAddr{0x02, 0, 0, 0x77, 0, 1}
	v := Veth{
		A: End{NS: a, Dev: "x0", MAC: mac, Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd00:99::1/64")}},
		B: End{NS: b, Dev: "y0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24")}},
	}
	if err := AddVeth(ctx, v); err != nil {
		t.Fatal(err)
	}
	err := nsthread.Run(a, func() error {
		ifi, err := net.InterfaceByName("x0")
		if err != nil {
			return err
		}
		if ifi.HardwareAddr.String() != mac.String() || ifi.Flags&net.FlagUp == 0 {
			return fmt.Errorf("x0: %v, flags %v", ifi.HardwareAddr, ifi.Flags)
		}
		addrs, err := ifi.Addrs()
		if err != nil || len(addrs) < 2 {
			return fmt.Errorf("x0 addresses %v, %v", addrs, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if err := Exec(ctx, a, "ping", "-c", "1", "-W", "2", "10.99.0.2"); err != nil {
		t.Errorf("ping across the pair: %v", err)
	}
	if err := DelNamespace(ctx, b); err != nil || Exists(b) {
		t.Errorf("delete %s: %v (exists %v)", b, err, Exists(b))
	}
}

// TestProcesses starts a supervised and a detached program in a namespace
// and stops them: one that honours SIGTERM, one that must be killed.
func TestProcesses(t *testing.T) {
	root(t)
	ctx := context.Background()
	ns := fmt.Sprintf("hns-%d-p", os.Getpid())
	if err := AddNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DelNamespace(context.Background(), ns) })
	dir := t.TempDir()

	p, err := Start("sleeper", ns, filepath.Join(dir, "sleeper.log"), "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exited(); err != nil {
		t.Fatalf("sleeper exited early: %v", err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Exited() == nil || Alive(p.Pid(), "sleep") {
		t.Error("sleeper runs after Stop")
	}

	// A program that ignores SIGTERM: StopPid kills it after the grace.
	pid, err := StartDetached("stubborn", ns, filepath.Join(dir, "stubborn.log"), "sh", "-c", "trap '' TERM; echo started; while :; do sleep 0.1; done")
	if err != nil {
		t.Fatal(err)
	}
	// Until the shell has set its trap, SIGTERM would end it.
	for deadline := time.Now().Add(5 * time.Second); Tail(filepath.Join(dir, "stubborn.log"), 1) != "    started"; {
		if time.Now().After(deadline) || !Alive(pid, "sh") {
			t.Fatalf("pid %d did not start: %s", pid, Tail(filepath.Join(dir, "stubborn.log"), 5))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	if err := StopPid(pid, "sh", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if Alive(pid, "sh") {
		t.Errorf("pid %d runs after StopPid", pid)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("StopPid returned after %s, before its grace: SIGTERM was not ignored?", d)
	}
}

// TestFreePrefix checks that a prefix in use by a namespace is skipped and
// freed again when the namespace goes.
func TestFreePrefix(t *testing.T) {
	root(t)
	ctx := context.Background()
	base := fmt.Sprintf("hfp%d", os.Getpid()%1000)
	first := FreePrefix(base)
	if want := fmt.Sprintf("%s-%d-1", base, os.Getpid()); first != want {
		t.Fatalf("FreePrefix = %q, want %q", first, want)
	}
	if err := AddNamespace(ctx, first+"-x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DelNamespace(context.Background(), first+"-x") })
	if got, want := FreePrefix(base), fmt.Sprintf("%s-%d-2", base, os.Getpid()); got != want {
		t.Errorf("FreePrefix with %s-x taken = %q, want %q", first, got, want)
	}
	if err := DelNamespace(ctx, first+"-x"); err != nil {
		t.Fatal(err)
	}
	if got := FreePrefix(base); got != first {
		t.Errorf("FreePrefix after deleting = %q, want %q", got, first)
	}
}
