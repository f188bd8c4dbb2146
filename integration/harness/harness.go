// Package harness builds what the lab and the benchmarks run on: named
// network namespaces, veth pairs between them, commands run inside them,
// daemons supervised by pid, and the end of a daemon's log for an error.
// Everything it makes is named by the caller, so that a caller that
// crashes can be cleaned up after by name. Go code that must run inside a
// namespace uses internal/nsthread.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// ErrExists is returned when a namespace to be created already exists: it is
// someone else's (or a crashed run's), and deleting it is their business.
var ErrExists = errors.New("namespace already exists")

// Run runs a command and returns an error with the command line and the
// first lines of its output if it fails, or the context's error if the
// context ended it.
func Run(ctx context.Context, name string, args ...string) error {
	_, err := Output(ctx, name, args...)
	return err
}

// Output runs a command and returns its standard output; it fails as Run,
// quoting the command's standard error.
func Output(ctx context.Context, name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		msg := stderr.Bytes()
		if len(bytes.TrimSpace(msg)) == 0 {
			msg = out
		}
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, FirstLines(msg, 5))
	}
	return string(out), nil
}

// FirstLines returns up to n lines of b, trimmed and joined by "; ", with
// "..." after them if there were more: a command's output fit for an error.
func FirstLines(b []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "; ")
}

// Exec runs a command inside namespace ns (through nsenter, so the
// command sees the namespace's network and the host's files).
func Exec(ctx context.Context, ns, name string, args ...string) error {
	return Run(ctx, "nsenter", append([]string{"--net=" + Path(ns), name}, args...)...)
}

// Path is where the named namespace ns is mounted.
func Path(ns string) string { return "/run/netns/" + ns }

// Exists reports whether namespace ns exists.
func Exists(ns string) bool {
	_, err := os.Stat(Path(ns))
	return err == nil
}

// FreePrefix returns "BASE-PID-N" for the lowest N from 1 up that no
// namespace's name starts with (followed by "-"), for a caller to name its
// namespaces PREFIX-ROLE. A name is not held until AddNamespace creates it,
// so two callers in one process must not pick prefixes at the same time;
// if they do, AddNamespace fails with ErrExists rather than share.
func FreePrefix(base string) string {
	entries, _ := os.ReadDir("/run/netns")
	for n := 1; ; n++ {
		prefix := fmt.Sprintf("%s-%d-%d", base, os.Getpid(), n)
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), prefix+"-") }) {
			return prefix
		}
	}
}

// AddNamespace creates namespace ns with its loopback up. It fails with
// ErrExists if ns is already there; if it fails after creating ns, it
// deletes ns again, so the caller owns ns exactly when it returns nil.
func AddNamespace(ctx context.Context, ns string) error {
	if Exists(ns) {
		return fmt.Errorf("%s: %w", ns, ErrExists)
	}
	if err := Run(ctx, "ip", "netns", "add", ns); err != nil {
		return err
	}
	if err := Run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		return errors.Join(err, DelNamespace(context.Background(), ns))
	}
	return nil
}

// DelNamespace deletes namespace ns; the kernel removes its links with it.
func DelNamespace(ctx context.Context, ns string) error {
	return Run(ctx, "ip", "netns", "del", ns)
}

// Sysctl sets kernel settings ("net.ipv4.ip_forward=1"...) in namespace ns.
func Sysctl(ctx context.Context, ns string, settings ...string) error {
	return Run(ctx, "ip", append([]string{"netns", "exec", ns, "sysctl", "-q", "-w"}, settings...)...)
}

// NoIPv6 turns IPv6 off in namespace ns, so that no DAD or router
// solicitation adds packets to a measured link.
func NoIPv6(ctx context.Context, ns string) error {
	return Sysctl(ctx, ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
}

// End is one end of a veth pair: its namespace, its name, and optionally
// its MAC address and its addresses (prefixes, as "10.0.0.1/24").
type End struct {
	NS, Dev string
	MAC     net.HardwareAddr
	Addrs   []netip.Prefix
}

// Veth is a veth pair between two namespaces.
type Veth struct {
	A, B End
	// Queues, if more than 1, gives both ends that many RX and TX queues.
	Queues int
}

// AddVeth creates the pair and, on each end that has addresses, adds them
// (IPv6 ones without duplicate address detection, which would hold them
// back for a second) and sets the end up. An end without addresses stays
// down for the caller to set up (into a bridge, say).
func AddVeth(ctx context.Context, v Veth) error {
	var queues []string
	if v.Queues > 1 {
		q := strconv.Itoa(v.Queues)
		queues = []string{"numtxqueues", q, "numrxqueues", q}
	}
	args := []string{"link", "add", v.A.Dev, "netns", v.A.NS}
	if v.A.MAC != nil {
		args = append(args, "address", v.A.MAC.String())
	}
	args = append(args, queues...)
	args = append(args, "type", "veth", "peer", "name", v.B.Dev, "netns", v.B.NS)
	if v.B.MAC != nil {
		args = append(args, "address", v.B.MAC.String())
	}
	if err := Run(ctx, "ip", append(args, queues...)...); err != nil {
		return err
	}
	for _, e := range []End{v.A, v.B} {
		for _, a := range e.Addrs {
			args := []string{"-n", e.NS, "addr", "add", a.String(), "dev", e.Dev}
			if a.Addr().Is6() {
				args = append(args, "nodad")
			}
			if err := Run(ctx, "ip", args...); err != nil {
				return err
			}
		}
		if len(e.Addrs) > 0 {
			if err := Run(ctx, "ip", "-n", e.NS, "link", "set", e.Dev, "up"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Tail returns the last n lines of the file at path, each indented by four
// spaces, for quoting a daemon's log in an error; or the error reading it.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
