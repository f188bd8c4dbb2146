package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/host"
)

// Where Debian's frr package installs the daemons (outside PATH).
const (
	frrBGPD  = "/usr/lib/frr/bgpd"
	frrZebra = "/usr/lib/frr/zebra"
)

// frrNetlinkBuffer is zebra's netlink receive buffer, as Debian's
// /etc/frr/daemons sets it (-s 90000000): with the default, the kernel's
// notifications of a full table overflow it and zebra resyncs.
const frrNetlinkBuffer = "90000000"

// checkFRR returns an error naming what is missing unless FRR's bgpd, zebra
// and vtysh are installed.
func checkFRR() error {
	for _, d := range []string{frrBGPD, frrZebra} {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("FRR's %s not found (apt-get install frr): %w", filepath.Base(d), err)
		}
	}
	if _, err := exec.LookPath("vtysh"); err != nil {
		return fmt.Errorf("FRR's vtysh not found (apt-get install frr): %w", err)
	}
	return nil
}

// frrDaemons is one FRR instance, zebra and bgpd, whose configuration, pid
// files, vty sockets and zebra's API socket all live in one directory: it
// shares nothing with a system FRR or another instance.
type frrDaemons struct {
	dir string
}

// newFRRDaemons makes the directory of an FRR instance: a new one in the
// system's temporary directory, owned by Debian's frr user, which zebra
// runs as (it refuses root, which is not in the frrvty group) and which
// could not reach a directory inside a private one (a test's).
func newFRRDaemons() (frrDaemons, error) {
	u, err := user.Lookup("frr")
	if err != nil {
		return frrDaemons{}, fmt.Errorf("FRR's user (the frr package adds it): %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return frrDaemons{}, fmt.Errorf("FRR's user: uid %q, gid %q: not numbers", u.Uid, u.Gid)
	}
	dir, err := os.MkdirTemp("", "splitplane-frr-")
	if err != nil {
		return frrDaemons{}, err
	}
	if err = os.Chmod(dir, 0o755); err == nil {
		err = os.Chown(dir, uid, gid)
	}
	if err != nil {
		os.RemoveAll(dir)
		return frrDaemons{}, err
	}
	return frrDaemons{dir: dir}, nil
}

// zebraArgs is zebra's command line: as Debian's frr user (the default), no
// TCP vty, leaving its routes in the kernel when it stops (-r: the
// benchmark removes them with the link, as BIRD's persist).
func (f frrDaemons) zebraArgs() []string {
	return []string{frrZebra, "-F", "traditional", "-f", f.path("zebra.conf"), "-i", f.path("zebra.pid"),
		"-z", f.path("zserv.api"), "--vty_socket", f.dir, "-P", "0",
		"-r", "-s", frrNetlinkBuffer, "--log", "stdout"}
}

// bgpdArgs is bgpd's command line: as root, no TCP vty, talking to this
// instance's zebra. (-l would listen on one address but implies -n, no
// routes to the kernel; bgpd runs in a namespace of its own instead.)
func (f frrDaemons) bgpdArgs() []string {
	return []string{frrBGPD, "-F", "traditional", "-f", f.path("bgpd.conf"), "-i", f.path("bgpd.pid"),
		"-z", f.path("zserv.api"), "--vty_socket", f.dir, "-S", "-P", "0", "--log", "stdout"}
}

func (f frrDaemons) path(name string) string { return filepath.Join(f.dir, name) }

// vtysh runs commands (each one -c) against one of the daemons.
func (f frrDaemons) vtysh(daemon string, cmds ...string) (string, error) {
	args := []string{"--vty_socket", f.dir, "-d", daemon}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := exec.Command("vtysh", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// bgpdClient reports whether zebra serves bgpd (its client list names bgp).
func (f frrDaemons) bgpdClient() bool {
	out, err := f.vtysh("zebra", "show zebra client summary")
	return err == nil && strings.Contains(out, "bgp")
}

// frrRound starts FRR (zebra and bgpd) in a fresh namespace, receiving the
// table from the sender, bgpd handing it to zebra and zebra installing it
// into the kernel's main table, and times the table into the kernel.
func (c *convergeRun) frrRound(ctx context.Context) (b birdFigures, err error) {
	if err := c.addNamespace(ctx, c.ns.frr); err != nil {
		return b, err
	}
	defer func() {
		if derr := c.delNamespace(c.ns.frr); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := c.link(ctx, c.ns.snd, "snd2", cvgSenderFRR(), c.ns.frr, "frr0", cvgFRR()); err != nil {
		return b, err
	}
	f, err := newFRRDaemons()
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(f.dir)
	if err := os.WriteFile(f.path("zebra.conf"), []byte("! zebra of 'splitplane bench converge' (the FRR baseline)\nhostname "+c.ns.frr+"\n"), 0o644); err != nil {
		return b, err
	}
	// As the receiving BIRD: accept everything (eBGP needs a policy or
	// this, RFC 8212), send nothing.
	conf := fmt.Sprintf(`! bgpd of 'splitplane bench converge' (the FRR baseline)
hostname %[1]s
router bgp %[2]d
 bgp router-id %[3]s
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor %[4]s remote-as %[5]d
 neighbor %[4]s timers connect 1
 address-family ipv4 unicast
  neighbor %[4]s activate
 exit-address-family
exit
`, c.ns.frr, cvgFRRASN, cvgFRR(), cvgSenderFRR(), cvgSenderASN)
	if err := os.WriteFile(f.path("bgpd.conf"), []byte(conf), 0o644); err != nil {
		return b, err
	}
	counter, err := newRouteCounter(c.ns.frr, rtprotBGP, c.opts.Routes)
	if err != nil {
		return b, fmt.Errorf("route notifications: %w", err)
	}
	defer counter.close()
	// zebra stops first (leaving its routes, -r), so that neither it nor
	// bgpd spends the stop on removing a full table; then bgpd, and then
	// the sender's session goes down.
	var zebraProc, bgpdProc *harness.Proc
	enabled := false
	defer c.endRound("to_frr", &enabled, &err, &bgpdProc, &zebraProc)
	if zebraProc, err = c.start("zebra", c.ns.frr, f.zebraArgs()...); err != nil {
		return b, err
	}
	daemons := []*harness.Proc{c.sender, zebraProc}
	err = c.poll(ctx, time.Minute, 50*time.Millisecond, "zebra to serve", daemons, func() (bool, error) {
		_, err := os.Stat(f.path("zserv.api"))
		return err == nil, nil
	})
	if err != nil {
		return b, err
	}
	if bgpdProc, err = c.start("bgpd", c.ns.frr, f.bgpdArgs()...); err != nil {
		return b, err
	}
	daemons = append(daemons, bgpdProc)
	err = c.poll(ctx, time.Minute, 50*time.Millisecond, "bgpd to connect to zebra", daemons, func() (bool, error) {
		return f.bgpdClient(), nil
	})
	if err != nil {
		return b, err
	}

	enabled = true
	est, err := c.enableSession(ctx, "to_frr", daemons)
	if err != nil {
		return b, err
	}
	b.tableTimes, err = c.waitTable(ctx, est, "routes in the kernel", daemons, counter.count)
	if err != nil {
		return b, err
	}
	// FRR's memory is its two daemons'.
	for _, p := range []*harness.Proc{bgpdProc, zebraProc} {
		rss, _, err := host.ProcessMemory(p.Pid())
		if err != nil {
			return b, fmt.Errorf("%s: %w", p.Name, err)
		}
		b.rss += rss
	}
	return b, checkKernelTable(c.ns.frr, rtprotBGP, counter, c.opts.Routes)
}

// checkKernelTable checks, by a full dump, that namespace ns's main table
// holds want routes of protocol proto, as the counter counted.
func checkKernelTable(ns string, proto byte, counter *routeCounter, want int) error {
	n, err := countKernelRoutes(ns, proto)
	if err != nil {
		return fmt.Errorf("count the kernel's routes: %w", err)
	}
	if counted, _, _ := counter.count(); n != want {
		return fmt.Errorf("%w: the route notifications counted %d routes, a dump of the kernel's table %d, want %d", ErrIncomplete, counted, n, want)
	}
	return nil
}
