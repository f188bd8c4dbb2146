package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/routegen"
)

// link is one veth pair of the lab.
type link struct {
	ns1, if1, addr1, addr61 string
	ns2, if2, addr2, addr62 string
}

func (o *Options) links() []link {
	r := o.Namespace("rtr")
	return []link{
		{r, "to-a", "10.10.1.1/24", "fd00:10:1::1/64", o.Namespace("a"), "eth0", HostA.String() + "/24", HostA6.String() + "/64"},
		{r, "to-b", "10.10.2.1/24", "fd00:10:2::1/64", o.Namespace("b"), "eth0", HostB.String() + "/24", HostB6.String() + "/64"},
		{r, "to-peer", "10.10.3.1/24", "fd00:10:3::1/64", o.Namespace("peer"), "eth0", "10.10.3.2/24", "fd00:10:3::2/64"},
	}
}

// Up builds the lab and waits until the peer's routes are in the FE. On
// failure it removes whatever it had made.
func Up(ctx context.Context, o Options) (err error) {
	if err := o.defaults(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "state.json")); err == nil {
		return fmt.Errorf("lab %q is already up (state in %s); run 'splitplane lab down' first", o.Name, o.Dir)
	}
	for _, ns := range o.namespaces() {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			return fmt.Errorf("namespace %s already exists; run 'splitplane lab down' first", ns)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	s := state{Processes: map[string]int{}, Commands: map[string]command{}}
	defer func() {
		if err != nil {
			fmt.Fprintf(o.Out, "lab up failed, cleaning up: %v\n", err)
			if derr := Down(Options{Name: o.Name, Dir: o.Dir, Binary: o.Binary, Out: o.Out}); derr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", derr))
			}
		}
	}()
	save := func() error { return o.saveState(s) }

	fmt.Fprintf(o.Out, "creating namespaces %v\n", o.namespaces())
	for _, ns := range o.namespaces() {
		if err := run("ip", "netns", "add", ns); err != nil {
			return err
		}
		s.Namespaces = append(s.Namespaces, ns)
		if err := save(); err != nil {
			return err
		}
		if err := inNS(ns, "ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	for _, l := range o.links() {
		fmt.Fprintf(o.Out, "link %s/%s %s <-> %s/%s %s\n", l.ns1, l.if1, l.addr1, l.ns2, l.if2, l.addr2)
		if err := run("ip", "link", "add", l.if1, "netns", l.ns1, "type", "veth", "peer", "name", l.if2, "netns", l.ns2); err != nil {
			return err
		}
		for _, e := range [][4]string{{l.ns1, l.if1, l.addr1, l.addr61}, {l.ns2, l.if2, l.addr2, l.addr62}} {
			if err := inNS(e[0], "ip", "addr", "add", e[2], "dev", e[1]); err != nil {
				return err
			}
			if err := inNS(e[0], "ip", "-6", "addr", "add", e[3], "dev", e[1], "nodad"); err != nil {
				return err
			}
			if err := inNS(e[0], "ip", "link", "set", e[1], "up"); err != nil {
				return err
			}
		}
		// A native XDP redirect into a veth is delivered only if the peer
		// end runs NAPI: GRO on the hosts' ends turns it on.
		if err := inNS(l.ns2, "ethtool", "-K", l.if2, "gro", "on"); err != nil {
			return err
		}
		// A sender on a veth leaves TCP and UDP checksums to "hardware"
		// (CHECKSUM_PARTIAL), and veth never fills them in: a packet the
		// XDP program redirects through the CPUMAP to the control CPU (a
		// control flow's) is then rebuilt without that note and fails the
		// kernel's checksum check. Real NICs send whole checksums; here the
		// hosts' ends compute them.
		if err := inNS(l.ns2, "ethtool", "-K", l.if2, "tx", "off"); err != nil {
			return err
		}
	}
	for _, h := range []struct{ ns, gw, gw6 string }{{o.Namespace("a"), "10.10.1.1", "fd00:10:1::1"}, {o.Namespace("b"), "10.10.2.1", "fd00:10:2::1"}} {
		if err := inNS(h.ns, "ip", "route", "add", "default", "via", h.gw); err != nil {
			return err
		}
		if err := inNS(h.ns, "ip", "-6", "route", "add", "default", "via", h.gw6); err != nil {
			return err
		}
	}
	if err := inNS(o.Namespace("b"), "ip", "addr", "add", HostBAddr.String()+"/32", "dev", "eth0"); err != nil {
		return err
	}
	if err := inNS(o.Namespace("b"), "ip", "-6", "addr", "add", HostBAddr6.String()+"/128", "dev", "eth0", "nodad"); err != nil {
		return err
	}
	// The router's kernel is the slow path for what XDP hands it (TTL
	// expiring: ICMP Time Exceeded; no route: ICMP Net Unreachable;
	// unresolved neighbour: it resolves and forwards). The FE copies the
	// CE's routes into its FIB for that; the tests check that the kernel
	// itself forwards none of the traffic.
	if err := inNS(o.Namespace("rtr"), "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
		return err
	}

	if err := o.writeConfigs(); err != nil {
		return err
	}
	for _, d := range []struct {
		name, ns string
		args     []string
	}{
		{"ce", o.Namespace("rtr"), []string{"ce", "--config", filepath.Join(o.Dir, "ce.yaml")}},
		{"fe", o.Namespace("rtr"), []string{"fe", "--config", filepath.Join(o.Dir, "fe.yaml")}},
		{"peer", o.Namespace("peer"), o.peerArgs()},
	} {
		pid, err := o.start(d.name, d.ns, d.args...)
		if err != nil {
			return err
		}
		s.Processes[d.name] = pid
		s.Commands[d.name] = command{Namespace: d.ns, Args: d.args}
		if err := save(); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "started %s in %s (pid %d, log %s)\n", d.name, d.ns, pid, filepath.Join(o.Dir, d.name+".log"))
	}

	want := o.Routes + 2 // and 198.51.100.0/24 and 2001:db8:b::/48
	if o.Peer == "bird" {
		want = o.Routes + 1 // BIRD announces the IPv4 table only
	}
	fmt.Fprintf(o.Out, "waiting for BGP and for %d routes in the FE\n", want)
	started := time.Now()
	if err := o.waitFor(ctx, 120*time.Second, func(st Status) error {
		if st.BGPState != "established" {
			return fmt.Errorf("bgp session %q", st.BGPState)
		}
		if !st.FEAssociated {
			return errors.New("FE not associated")
		}
		if st.FERoutes < want {
			return fmt.Errorf("%d of %d routes in the FE", st.FERoutes, want)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "BGP established and %d routes in the FE %.1fs after the daemons started\n", want, time.Since(started).Seconds())
	if o.Traffic {
		pings := [][]string{{"traffic", "ping", "-q", "-i", "0.2", HostBAddr.String()}}
		if o.Peer != "bird" { // BIRD announces no IPv6 here
			pings = append(pings, []string{"traffic6", "ping", "-6", "-q", "-i", "0.2", HostBAddr6.String()})
		}
		for _, p := range pings {
			pid, err := o.start(p[0], o.Namespace("a"), p[1:]...)
			if err != nil {
				return err
			}
			s.Processes[p[0]] = pid
			if err := save(); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "started traffic: ping from host A to %s every 0.2s (pid %d)\n", p[len(p)-1], pid)
		}
	}
	return nil
}

// waitFor polls the lab's status until cond returns nil, the timeout passes or
// a daemon dies (its log is quoted in the error).
func (o *Options) waitFor(ctx context.Context, timeout time.Duration, cond func(Status) error) error {
	deadline := time.Now().Add(timeout)
	last := errors.New("no status yet")
	for time.Now().Before(deadline) {
		if s, err := o.loadState(); err == nil {
			for name, pid := range s.Processes {
				if !strings.HasPrefix(name, "traffic") && !alive(pid, o.program(s, name)) {
					return fmt.Errorf("%s (pid %d) exited; its log:\n%s", name, pid, tail(filepath.Join(o.Dir, name+".log"), 20))
				}
			}
		}
		st, err := GetStatus(*o)
		if err == nil {
			if last = cond(st); last == nil {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("lab not ready after %s: %w", timeout, last)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += "    " + l + "\n"
	}
	return out
}

// peerArgs is the command line of the lab's BGP peer.
func (o *Options) peerArgs() []string {
	if o.Peer == "frr" {
		return o.frrArgs()
	}
	if o.Peer == "bird" {
		return []string{"bird", "-f", "-c", filepath.Join(o.Dir, "bird.conf"), "-s", o.Socket("bird"), "-P", filepath.Join(o.Dir, "bird.pid")}
	}
	return []string{"peer", "--asn", fmt.Sprint(PeerASN), "--router-id", "10.10.3.2",
		"--neighbor", "10.10.3.1", "--neighbor-asn", fmt.Sprint(RouterASN), "--next-hop", HostB.String(),
		"--extra", HostBNet.String() + "," + HostBNet6.String(), "--next-hop6", HostB6.String(), "--routes", strconv.Itoa(o.Routes), "--seed", strconv.FormatInt(o.Seed, 10),
		"--control", o.Socket("peer"), "--graceful-restart", "120s"}
}

// writeBIRD writes the configuration of BIRD as the lab's peer: the
// generated table and 198.51.100.0/24 as static routes, exported over eBGP
// (BIRD is then the next hop, 10.10.3.2).
func (o *Options) writeBIRD() error {
	var b strings.Builder
	fmt.Fprintf(&b, "# BIRD as the lab's BGP peer (generated by 'splitplane lab up --peer bird')\n")
	fmt.Fprintf(&b, "log stderr all;\nrouter id 10.10.3.2;\nprotocol device { }\n")
	fmt.Fprintf(&b, "protocol static table4 {\n  ipv4;\n  route %s blackhole;\n", HostBNet)
	for _, p := range routegen.Generate(o.Routes, o.Seed) {
		fmt.Fprintf(&b, "  route %s blackhole;\n", p)
	}
	fmt.Fprintf(&b, "}\n")
	fmt.Fprintf(&b, "protocol bgp splitplane {\n  local 10.10.3.2 as %d;\n  neighbor 10.10.3.1 as %d;\n  hold time 9;\n  connect retry time 1;\n  graceful restart on;\n  graceful restart time 120;\n  ipv4 { import none; export all; };\n}\n", PeerASN, RouterASN)
	return os.WriteFile(filepath.Join(o.Dir, "bird.conf"), []byte(b.String()), 0o644)
}

// forwardCPUs lists every CPU but 0, the control core (none on a machine
// with one).
func forwardCPUs() string {
	var cpus []string
	for i := 1; i < runtime.NumCPU(); i++ {
		cpus = append(cpus, strconv.Itoa(i))
	}
	return strings.Join(cpus, ", ")
}

func (o *Options) policePPS() uint64 {
	if o.PolicePPS == 0 {
		return 20000
	}
	return o.PolicePPS
}

func (o *Options) writeConfigs() error {
	switch o.Peer {
	case "bird":
		if err := o.writeBIRD(); err != nil {
			return err
		}
	case "frr":
		if err := o.writeFRR(); err != nil {
			return err
		}
	}
	// The ForCES channels use mutual TLS, with a CA made for the lab.
	pki, err := forces.WritePKI(o.Dir, 30*24*time.Hour, "ce", "fe")
	if err != nil {
		return err
	}
	ce := fmt.Sprintf(`# splitplane CE of the lab (generated by 'splitplane lab up')
id: 1
asn: %d
router_id: 10.10.3.1
bgp_listen_addresses: ["10.10.3.1"]
forces_listen: 127.0.0.1:6700
heartbeat_interval: 1s
tls: {cert: %s, key: %s, ca: %s}
status_socket: %s
api_listen: unix:%s        # splitplane route|fe|bgp ... --api unix:THIS
metrics_listen: 127.0.0.1:9101
control_cores: [0]              # the control core: the FE's XDP forwards on the others
bgp_multipath: true
neighbors:
  - address: 10.10.3.2
    asn: %d
    hold_time: 9s
    keepalive: 3s
    connect_retry: 1s
    graceful_restart: {enabled: true, restart_time: 120s}   # a restarting peer's routes stay (and ours, when the CE restarts)
`, RouterASN, pki["ce"].Cert, pki["ce"].Key, pki["ce"].CA, o.Socket("ce"), o.Socket("api"), PeerASN)
	if o.Password != "" {
		ce += fmt.Sprintf("    password: %q                # TCP MD5, the same on the peer\n", o.Password)
	}
	fe := fmt.Sprintf(`# splitplane FE of the lab (generated by 'splitplane lab up')
id: 1
name: lab-fe
ce_address: 127.0.0.1:6700
ports: [to-a, to-b, to-peer]
redirect_ethertypes: [0x88cc]   # LLDP frames go to the CE
kernel_routes: all              # the kernel, the slow path, knows every route (ICMP Time Exceeded)
xdp_mode: %s
heartbeat_interval: 1s
tls: {cert: %s, key: %s, ca: %s}
status_socket: %s
`, o.XDPMode, pki["fe"].Cert, pki["fe"].Key, pki["fe"].CA, o.Socket("fe"))
	if !o.NoProtection {
		fe += fmt.Sprintf(`classifier:                     # the BGP session's return packets go to CPU 0, the CE's core
  control_cpu: 0
  forward_cpus: [%s]            # packets to forward that arrive on CPU 0 are forwarded there
  police_pps: %d                # per CPU, for the other traffic to the router
  gtsm_peers: [%s]
`, forwardCPUs(), o.policePPS(), strings.Join(o.GTSMPeers, ", "))
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "ce.yaml"), []byte(ce), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Dir, "fe.yaml"), []byte(fe), 0o644)
}
