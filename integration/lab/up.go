package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/routegen"
)

// link is one veth pair of the lab.
type link struct {
	ns1, if1, addr1, addr61 string
	ns2, if2, addr2, addr62 string
}

// veth is the pair that makes l, with its IPv4 and IPv6 addresses.
func (l link) veth() harness.Veth {
	return harness.Veth{
		A: harness.End{NS: l.ns1, Dev: l.if1, Addrs: []netip.Prefix{netip.MustParsePrefix(l.addr1), netip.MustParsePrefix(l.addr61)}},
		B: harness.End{NS: l.ns2, Dev: l.if2, Addrs: []netip.Prefix{netip.MustParsePrefix(l.addr2), netip.MustParsePrefix(l.addr62)}},
	}
}

// links are every veth pair of the lab: FE 1's ports (to its hosts and
// the peers), then those of the other FEs.
func (o *Options) links() []link {
	var ls []link
	for n := 1; n <= o.FEs; n++ {
		ls = append(ls, o.feLinks(n)...)
	}
	return ls
}

// feLinks are the links of FE n's ports: to its hosts A and B (FE n >= 2:
// to its copies of them, with the same addresses) and, for FE 1, to the
// BGP peers. In a cluster lab FE n >= 2 has no copies of A and B, and
// each FE a link to its own host (clusterLinks); the mesh is apart
// (upMesh).
func (o *Options) feLinks(n int) []link {
	if o.Cluster > 0 && n > 1 {
		return o.clusterLinks(n)
	}
	_, sfx := FEName(n)
	r := o.Namespace("rtr" + sfx)
	ls := []link{
		{r, "to-a", "10.10.1.1/24", "fd00:10:1::1/64", o.Namespace("a" + sfx), "eth0", HostA().String() + "/24", HostA6().String() + "/64"},
		{r, "to-b", "10.10.2.1/24", "fd00:10:2::1/64", o.Namespace("b" + sfx), "eth0", HostB().String() + "/24", HostB6().String() + "/64"},
	}
	if n > 1 {
		return ls
	}
	for _, p := range o.peers() {
		ls = append(ls, link{r, p.port, p.router.String() + "/24", p.router6.String() + "/64",
			o.Namespace(p.role), "eth0", p.addr.String() + "/24", p.addr6.String() + "/64"})
	}
	if o.Cluster > 0 {
		ls = append(ls, o.clusterLinks(n)...)
	}
	return ls
}

// ports are FE n's ports, its inter-FE links (in a cluster lab) last.
func (o *Options) ports(n int) []string {
	var ps []string
	for _, l := range o.feLinks(n) {
		ps = append(ps, l.if1)
	}
	return append(ps, o.meshPorts(n)...)
}

// mgmtAddr is FE n's address on the management LAN of a lab with several
// FEs (10.10.0.n/24); the CE, beside FE 1, listens on mgmtAddr(1).
func mgmtAddr(n int) netip.Addr { return netip.AddrFrom4([4]byte{10, 10, 0, byte(n)}) }

// forcesAddr is where the CE listens for its FEs: the loopback with one FE
// (as before there were several), the management LAN with more.
func (o *Options) forcesAddr() string {
	if o.FEs == 1 {
		return "127.0.0.1:6700"
	}
	return netip.AddrPortFrom(mgmtAddr(1), 6700).String()
}

// upMgmt builds the management LAN of a lab with several FEs: a bridge in
// the CE's namespace with FE 1's (and the CE's) address, and a veth from
// it to each other FE's namespace. It carries only ForCES: no FE forwards
// on it (it is no FE port), as a real router's management network is
// apart from the ports it forwards between.
func (o *Options) upMgmt(ctx context.Context) error {
	r := o.Namespace("rtr")
	fmt.Fprintf(o.Out, "management LAN: bridge %s/mgmt %s\n", r, mgmtAddr(1))
	for _, c := range [][]string{
		{"ip", "link", "add", "mgmt", "type", "bridge"},
		{"ip", "addr", "add", mgmtAddr(1).String() + "/24", "dev", "mgmt"},
		{"ip", "link", "set", "mgmt", "up"},
	} {
		if err := inNS(r, c[0], c[1:]...); err != nil {
			return err
		}
	}
	for n := 2; n <= o.FEs; n++ {
		_, sfx := FEName(n)
		rn, br := o.Namespace("rtr"+sfx), "mgmt"+sfx
		fmt.Fprintf(o.Out, "link %s/%s <-> %s/mgmt %s\n", r, br, rn, mgmtAddr(n))
		v := harness.Veth{
			A: harness.End{NS: r, Dev: br},
			B: harness.End{NS: rn, Dev: "mgmt", Addrs: []netip.Prefix{netip.PrefixFrom(mgmtAddr(n), 24)}},
		}
		if err := harness.AddVeth(ctx, v); err != nil {
			return err
		}
		if err := inNS(r, "ip", "link", "set", br, "master", "mgmt", "up"); err != nil {
			return err
		}
	}
	return nil
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
		if err := harness.AddNamespace(ctx, ns); err != nil {
			return err
		}
		s.Namespaces = append(s.Namespaces, ns)
		if err := save(); err != nil {
			return err
		}
	}
	for _, l := range o.links() {
		fmt.Fprintf(o.Out, "link %s/%s %s <-> %s/%s %s\n", l.ns1, l.if1, l.addr1, l.ns2, l.if2, l.addr2)
		if err := harness.AddVeth(ctx, l.veth()); err != nil {
			return err
		}
		// A native XDP redirect into a veth is delivered only if the peer
		// end runs NAPI: GRO on the hosts' ends turns it on.
		if err := inNS(l.ns2, "ethtool", "-K", l.if2, "gro", "on"); err != nil {
			return err
		}
		// A sender on a veth leaves TCP and UDP checksums to "hardware"
		// (CHECKSUM_PARTIAL), and veth never fills them in. Real NICs send
		// whole checksums, so by default the hosts' ends compute them; the
		// FE's XDP program steers only control-flow packets whose checksum
		// it verified, so with HostChecksumOffload the sessions stay up too
		// (their packets then reach the kernel where they arrive).
		if !o.HostChecksumOffload {
			if err := inNS(l.ns2, "ethtool", "-K", l.if2, "tx", "off"); err != nil {
				return err
			}
		}
	}
	for n := 1; n <= o.FEs; n++ {
		if o.Cluster > 0 && n > 1 {
			break // FE 1's hosts A and B only; the cluster hosts below
		}
		_, sfx := FEName(n)
		for _, h := range []struct{ ns, gw, gw6 string }{{o.Namespace("a" + sfx), "10.10.1.1", "fd00:10:1::1"}, {o.Namespace("b" + sfx), "10.10.2.1", "fd00:10:2::1"}} {
			if err := inNS(h.ns, "ip", "route", "add", "default", "via", h.gw); err != nil {
				return err
			}
			if err := inNS(h.ns, "ip", "-6", "route", "add", "default", "via", h.gw6); err != nil {
				return err
			}
		}
		if err := inNS(o.Namespace("b"+sfx), "ip", "addr", "add", HostBAddr().String()+"/32", "dev", "eth0"); err != nil {
			return err
		}
		if err := inNS(o.Namespace("b"+sfx), "ip", "-6", "addr", "add", HostBAddr6().String()+"/128", "dev", "eth0", "nodad"); err != nil {
			return err
		}
	}
	if o.FEs > 1 {
		if err := o.upMgmt(ctx); err != nil {
			return err
		}
	}
	if o.Cluster > 0 {
		if err := o.upMesh(ctx); err != nil {
			return err
		}
		if err := o.upClusterHosts(); err != nil {
			return err
		}
	}
	// BIRD and FRR peers own the anycast addresses they announce, and
	// answer through the router.
	for _, p := range o.peers() {
		if !p.anycast() {
			continue
		}
		ns := o.Namespace(p.role)
		for _, c := range [][]string{
			{"ip", "addr", "add", AnycastAddr().String() + "/32", "dev", "lo"},
			{"ip", "-6", "addr", "add", AnycastAddr6().String() + "/128", "dev", "lo"},
			{"ip", "route", "add", "default", "via", p.router.String()},
			{"ip", "-6", "route", "add", "default", "via", p.router6.String()},
		} {
			if err := inNS(ns, c[0], c[1:]...); err != nil {
				return err
			}
		}
	}
	// The router's kernel is the slow path for what XDP hands it (TTL
	// expiring: ICMP Time Exceeded; no route: ICMP Net Unreachable;
	// unresolved neighbour: it resolves and forwards). The FE copies the
	// CE's routes into its FIB for that; the tests check that the kernel
	// itself forwards none of the traffic.
	for n := 1; n <= o.FEs; n++ {
		_, sfx := FEName(n)
		if err := inNS(o.Namespace("rtr"+sfx), "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
			return err
		}
	}

	if err := o.writeConfigs(); err != nil {
		return err
	}
	type daemon struct {
		name, ns string
		args     []string
	}
	daemons := []daemon{{"ce", o.Namespace("rtr"), []string{"ce", "--config", filepath.Join(o.Dir, "ce.yaml")}}}
	for n := 1; n <= o.FEs; n++ {
		name, sfx := FEName(n)
		daemons = append(daemons, daemon{name, o.Namespace("rtr" + sfx), []string{"fe", "--config", filepath.Join(o.Dir, name+".yaml")}})
	}
	for _, p := range o.peers() {
		daemons = append(daemons, daemon{p.role, o.Namespace(p.role), o.peerArgs(p)})
	}
	for _, d := range daemons {
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

	want := o.RouteCount()
	fes := "the FE"
	if o.FEs > 1 {
		fes = fmt.Sprintf("each of the %d FEs", o.FEs)
	}
	if o.Cluster > 0 {
		fes += ", every mesh link up"
	}
	fmt.Fprintf(o.Out, "waiting for BGP and for %d routes in %s\n", want, fes)
	started := time.Now()
	if err := o.waitFor(ctx, 120*time.Second, func(st Status) error {
		if len(st.CE.Neighbors) != len(o.peers()) || st.BGPState != "established" {
			return fmt.Errorf("bgp sessions %+v", st.CE.Neighbors)
		}
		for i, f := range append([]fe.Status{st.FE}, st.OtherFEs...) {
			name, _ := FEName(i + 1)
			if !f.Associated {
				return fmt.Errorf("%s not associated", name)
			}
			if f.Routes < want {
				return fmt.Errorf("%d of %d routes in %s", f.Routes, want, name)
			}
		}
		if o.Cluster > 0 {
			return meshReady(st.CE, o.Cluster)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "BGP established and %d routes in %s %.1fs after the daemons started\n", want, fes, time.Since(started).Seconds())
	if o.Traffic {
		// BIRD announces host B's prefix with itself as the next hop,
		// where it ends: its traffic goes to the anycast addresses, which
		// it owns.
		to, to6 := HostBAddr(), HostBAddr6()
		if o.Peer == "bird" {
			to, to6 = AnycastAddr(), AnycastAddr6()
		}
		pings := [][]string{
			{"traffic", "ping", "-q", "-i", "0.2", to.String()},
			{"traffic6", "ping", "-6", "-q", "-i", "0.2", to6.String()},
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
				if !strings.HasPrefix(name, "traffic") && !harness.Alive(pid, o.program(s, name)) {
					return fmt.Errorf("%s (pid %d) exited; its log:\n%s", name, pid, harness.Tail(filepath.Join(o.Dir, name+".log"), 20))
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

// peerArgs is the command line of one of the lab's BGP peers.
func (o *Options) peerArgs(p bgpPeer) []string {
	switch p.impl {
	case "frr":
		return o.frrArgs(p)
	case "bird":
		return []string{"bird", "-f", "-c", o.birdConf(p), "-s", o.BIRDSocket(p.role), "-P", filepath.Join(o.Dir, "bird"+p.suffix()+".pid")}
	}
	gr := o.PeerRestartTime.String()
	if o.NoGracefulRestart {
		gr = "0s"
	}
	hold, _ := o.timers()
	return []string{"peer", "--asn", fmt.Sprint(p.asn), "--router-id", p.addr.String(),
		"--neighbor", p.router.String(), "--neighbor-asn", fmt.Sprint(RouterASN), "--next-hop", HostB().String(),
		"--extra", HostBNet().String() + "," + HostBNet6().String(), "--next-hop6", HostB6().String(), "--routes", strconv.Itoa(o.Routes), "--seed", strconv.FormatInt(o.Seed, 10),
		"--control", o.Socket(p.role), "--graceful-restart", gr, "--hold-time", fmt.Sprintf("%ds", hold)}
}

// BIRDSocket is the control socket of a BIRD peer ("peer" or "peer2"), for
// birdc -s.
func (o *Options) BIRDSocket(role string) string {
	return o.Socket("bird" + strings.TrimPrefix(role, "peer"))
}

func (o *Options) birdConf(p bgpPeer) string {
	return filepath.Join(o.Dir, "bird"+p.suffix()+".conf")
}

// writeBIRD writes the configuration of BIRD as one of the lab's peers: as
// static routes in table4 and table6, exported over eBGP with BIRD itself as
// the next hop, the anycast prefixes and, as the first peer, the generated
// table and 198.51.100.0/24. IPv6 goes over the same (IPv4) session.
func (o *Options) writeBIRD(p bgpPeer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# BIRD as the lab's BGP %s (generated by 'splitplane lab up')\n", p.role)
	fmt.Fprintf(&b, "log stderr all;\nrouter id %s;\nprotocol device { }\n", p.addr)
	fmt.Fprintf(&b, "protocol static table4 {\n  ipv4;\n  route %s blackhole;\n", AnycastNet())
	if p.role == "peer" {
		fmt.Fprintf(&b, "  route %s blackhole;\n", HostBNet())
		for _, r := range routegen.Generate(o.Routes, o.Seed) {
			fmt.Fprintf(&b, "  route %s blackhole;\n", r)
		}
	}
	fmt.Fprintf(&b, "}\n")
	fmt.Fprintf(&b, "protocol static table6 {\n  ipv6;\n  route %s blackhole;\n}\n", AnycastNet6())
	gr := fmt.Sprintf("graceful restart on;\n  graceful restart time %d;", int(o.PeerRestartTime.Seconds()))
	if o.NoGracefulRestart {
		gr = "graceful restart off;"
	}
	bfd := ""
	if o.BFD {
		fmt.Fprintf(&b, "protocol bfd {\n  interface \"eth0\" { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; };\n}\n")
		bfd = "\n  bfd on;"
	}
	hold, keepalive := o.timers()
	fmt.Fprintf(&b, "protocol bgp splitplane {\n  local %s as %d;\n  neighbor %s as %d;\n  hold time %d;\n  keepalive time %d;\n  connect retry time 1;\n  %s%s\n", p.addr, p.asn, p.router, RouterASN, hold, keepalive, gr, bfd)
	fmt.Fprintf(&b, "  ipv4 { import none; export all; };\n  ipv6 { import none; export all; next hop address %s; };\n}\n", p.addr6)
	return os.WriteFile(o.birdConf(p), []byte(b.String()), 0o644)
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

// bigTable is the table size from which the lab's BGP sessions use the
// usual timers (hold 90 s, keepalive 30 s) instead of the quick ones
// (9 s, 3 s) that let the DoS lab see a starved session drop within
// seconds. A GoBGP peer holding a large table builds every UPDATE for it
// when the session comes up before it sends anything, a keepalive
// included: some 10 s for a million prefixes here, longer than a 9 s hold
// time.
const bigTable = 100_000

// kernelRoutes is the FE's kernel_routes setting, with its comment: every
// route for a table of up to bigTable prefixes, so that the kernel, the
// slow path, can answer ICMP Time Exceeded for any destination; only the
// connected ones and a default above that: the FE's copy of a million routes
// would cost the two cores ~13 s of CPU (one netlink call a route, at low
// priority) and the kernel its memory for them, which a lab can do without.
func (o *Options) kernelRoutes() string {
	if o.Routes > bigTable {
		return "default          # a big table: the kernel, the slow path, knows the connected routes and a default"
	}
	return "all              # the kernel, the slow path, knows every route (ICMP Time Exceeded)"
}

// timers returns the hold time and keepalive of the lab's BGP sessions, in
// seconds.
func (o *Options) timers() (hold, keepalive int) {
	if o.Routes > bigTable {
		return 90, 30
	}
	return 9, 3
}

func (o *Options) writeConfigs() error {
	var listen []string
	var neighbors strings.Builder
	for _, p := range o.peers() {
		switch p.impl {
		case "bird":
			if err := o.writeBIRD(p); err != nil {
				return err
			}
		case "frr":
			if err := o.writeFRR(p); err != nil {
				return err
			}
		}
		listen = append(listen, fmt.Sprintf("%q", p.router))
		hold, keepalive := o.timers()
		fmt.Fprintf(&neighbors, "  - address: %s\n    asn: %d\n    hold_time: %ds\n    keepalive: %ds\n    connect_retry: 1s\n", p.addr, p.asn, hold, keepalive)
		// Without policies an eBGP neighbour exchanges no routes (RFC 8212).
		neighbors.WriteString("    import: {default: accept}        # every route from the peer\n    export: {default: accept}        # every route to it\n")
		if !o.NoGracefulRestart {
			neighbors.WriteString("    graceful_restart: {enabled: true, restart_time: 120s}   # a restarting peer's routes stay (and ours, when the CE restarts)\n")
		}
		if o.BFD && p.impl == "bird" {
			neighbors.WriteString("    bfd: {enabled: true, interval: 300ms, multiplier: 3}     # a hung peer or a dead path: down in about a second\n")
		}
		if o.Password != "" && p.role == "peer" {
			fmt.Fprintf(&neighbors, "    password: %q                # TCP MD5, the same on the peer\n", o.Password)
		}
	}
	// The ForCES channels use mutual TLS, with a CA made for the lab: a
	// certificate for the CE and one for each FE, bound to its FE ID (the
	// DNS name fe-N the CE requires).
	names := []forces.PKICert{{Name: "ce"}}
	for n := 1; n <= o.FEs; n++ {
		name, _ := FEName(n)
		names = append(names, forces.PKICert{Name: name, DNS: []string{forces.FECertName(uint32(n))}})
	}
	if o.Attackable {
		for _, n := range []uint32{SpareFE, NotAllowedFE} {
			names = append(names, forces.PKICert{Name: certName(n), DNS: []string{forces.FECertName(n)}})
		}
	}
	pki, err := forces.WritePKICerts(o.Dir, 30*24*time.Hour, names...)
	if err != nil {
		return err
	}
	ce := fmt.Sprintf(`# splitplane CE of the lab (generated by 'splitplane lab up')
id: 1
asn: %d
router_id: 10.10.3.1
bgp_listen_addresses: [%s]
forces_listen: %s
forces_allowed_fes: [%s]        # the FEs that may associate (their certificates name fe-N)
heartbeat_interval: 1s
tls: {cert: %s, key: %s, ca: %s}
status_socket: %s
api_listen: unix:%s        # splitplane route|fe|bgp ... --api unix:THIS
metrics_listen: 127.0.0.1:9101
bgp_api_listen: 127.0.0.1:50051 # GoBGP's API: 'ip netns exec NS gobgp neighbor' works in the router's namespace
control_cores: [0]              # the control core: the FE's XDP forwards on the others
bgp_multipath: true
neighbors:
%s`, RouterASN, strings.Join(listen, ", "), o.forcesAddr(), o.allowedFEs(), pki["ce"].Cert, pki["ce"].Key, pki["ce"].CA, o.Socket("ce"), o.Socket("api"), neighbors.String())
	if o.Attackable {
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		if err := os.WriteFile(o.apiToken(), []byte(hex.EncodeToString(tok)+"\n"), 0o600); err != nil {
			return err
		}
		ce += fmt.Sprintf("api_token_file: %s   # the attack suite's API clients need it\n", o.apiToken())
	}
	if o.Cluster > 0 {
		ce += o.clusterStatic()
	}
	if o.PersistAPIRoutes {
		ce += fmt.Sprintf("api_routes_file: %s   # the API's routes survive a CE restart\n", filepath.Join(o.Dir, "api-routes"))
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "ce.yaml"), []byte(ce), 0o644); err != nil {
		return err
	}
	for n := 1; n <= o.FEs; n++ {
		name, _ := FEName(n)
		if err := os.WriteFile(filepath.Join(o.Dir, name+".yaml"), []byte(o.feConfig(n, pki[name])), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// allowedFEs is the CE's forces_allowed_fes: the lab's FEs and, in an
// attack lab, SpareFE.
func (o *Options) allowedFEs() string {
	allowed := fmt.Sprintf("\"1-%d\"", o.FEs)
	if o.Attackable {
		allowed += fmt.Sprintf(", %d", SpareFE)
	}
	return allowed
}

// FEMetricsPort is the port FE n serves its metrics on, on 127.0.0.1 in
// its namespace.
func FEMetricsPort(n int) int { return 9101 + n }

// feConfig is FE n's configuration file.
func (o *Options) feConfig(n int, tls forces.TLSConfig) string {
	name, _ := FEName(n)
	ce := "ce_address: " + o.forcesAddr()
	if o.FEs > 1 {
		// Over the management LAN: the CE's certificate carries its name,
		// not that address (forces.WritePKI).
		ce += "            # the CE on the management LAN\ntls_server_name: ce"
	}
	fe := fmt.Sprintf(`# splitplane FE of the lab (generated by 'splitplane lab up')
id: %d
name: lab-%s
%s
ports: [%s]
redirect_ethertypes: [0x88cc]   # LLDP frames go to the CE
kernel_routes: %s
xdp_mode: %s
heartbeat_interval: 1s
tls: {cert: %s, key: %s, ca: %s}
status_socket: %s
metrics_listen: 127.0.0.1:%d      # Prometheus metrics (the CE's are on 9101)
`, n, name, ce, strings.Join(o.ports(n), ", "), o.kernelRoutes(), o.XDPMode, tls.Cert, tls.Key, tls.CA, o.Socket(name), FEMetricsPort(n))
	if o.Cluster > 0 {
		fe += o.interFELinks(n)
	}
	if !o.NoProtection {
		fe += fmt.Sprintf(`classifier:                     # the BGP session's return packets go to CPU 0, the CE's core
  control_cpu: 0
  forward_cpus: [%s]            # packets to forward that arrive on CPU 0 are forwarded there
  police_pps: %d                # per CPU and class, what goes to the kernel that is not a control flow (TTL/options and ARP/ND: at most 1000)
  gtsm_peers: [%s]
`, forwardCPUs(), o.policePPS(), strings.Join(o.GTSMPeers, ", "))
	}
	return fe
}
