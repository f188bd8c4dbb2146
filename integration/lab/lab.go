// Package lab builds the splitplane lab: network namespaces joined by veth
// links, with a BGP peer, the router (CE and FE) and two hosts, and runs the
// daemons in them as background processes it can stop by pid.
//
//	host A (10.10.1.2) ── to-a [ router: CE + FE, XDP on every port ] to-b ── host B (10.10.2.2, 198.51.100.10)
//	                                      to-peer            to-peer2 (with Options.Peer2)
//	                                         │                   │
//	                              peer (10.10.3.2, AS 65002)   peer2 (10.10.4.2, AS 65003)
//
// The peer announces 198.51.100.0/24 and N generated prefixes, next hop
// 10.10.2.2 (host B; BIRD, which cannot set that, gives itself). A BIRD or
// FRR peer also owns and announces the anycast prefixes (203.0.113.0/24,
// 2001:db8:e::/48) with itself as the next hop; a second peer announces
// only those, so the router reaches them by ECMP over both.
//
// The router's kernel forwards none of it (the tests check its counters), so A and B reach each other only
// through the XDP fast path, along a route learned over BGP.
//
// With Options.FEs > 1 the router has more forwarding elements, each a
// server of its own: FE n in namespace NAME-rtrN, with ports to-a and to-b
// to hosts NAME-aN and NAME-bN (copies of A and B), associated with the one
// CE over the management LAN (the bridge mgmt in NAME-rtr, 10.10.0.0/24):
//
//	[ NAME-rtr: CE + FE 1 ] ── mgmt (10.10.0.1) ──┬── 10.10.0.2 [ NAME-rtr2: FE 2 ] to-a ── host A2, to-b ── host B2
//	                                              └── 10.10.0.3 [ NAME-rtr3: FE 3 ] ...
//
// With Options.Cluster (2 to MaxFEs) the FEs are one router across several
// servers instead (cluster.go): the same FE namespaces and management LAN,
// a full mesh of inter-FE links between the FEs (FE i's port ifeJ, no
// addresses, MTU MeshMTU), and on each FE n a host of its own, NAME-hN
// (ClusterHost: 10.20.n.0/24, fd00:20:n::/64, a site 10.30.n.0/24 and
// fd00:30:n::/64 the CE routes to it). SetMeshLink takes a mesh link down
// and up; Restart, Stop and Start work on the FEs as with Options.FEs.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/splitplane/splitplane/integration/harness"
)

// Options configure a lab. The zero value plus a binary path is the default lab.
type Options struct {
	// Name prefixes every namespace (NAME-rtr, NAME-peer, NAME-a, NAME-b); "sp" by default.
	Name string
	// Dir keeps the lab's configs, logs, sockets and state; /run/splitplane/lab-NAME by default.
	Dir string
	// Binary is the splitplane executable the daemons run; the running one by default.
	Binary string
	// Routes is how many generated prefixes the peer announces (10,000 by default).
	Routes int
	// Seed seeds the prefix generator.
	Seed int64
	// XDPMode is the FE's XDP attach mode, "native" by default.
	XDPMode string
	// Traffic starts a steady ping from host A to host B after the lab is up.
	Traffic bool
	// Peer is the BGP peer's implementation: "splitplane" (the default, a
	// GoBGP speaker), "bird" (BIRD 2 from Debian, announcing the same
	// IPv4 table with itself as the next hop) or "frr" (FRR's bgpd from
	// Debian, announcing the same IPv4 and IPv6 routes as the GoBGP speaker,
	// next hop host B).
	Peer string
	// Password, when set, protects the BGP session with TCP MD5 on both
	// sides (the CE's neighbour and the peer); the frr peer only.
	Password string
	// Peer2, when set, adds a second BGP peer, "bird" or "frr", in AS
	// 65003 (Peer2ASN), in namespace NAME-peer2 behind the router's port
	// to-peer2 (10.10.4.0/24, fd00:10:4::/64). It announces the anycast
	// prefixes only (AnycastNet, AnycastNet6), as Peer does, so the router
	// reaches them over two equal-cost paths (ECMP). It needs Peer bird or
	// frr.
	Peer2 string
	// NoGracefulRestart turns graceful restart off on the CE's neighbours
	// and on the peers: a peer that goes away then takes its routes with it
	// as soon as the session ends (at once when its process dies, after the
	// hold time when it falls silent) instead of leaving them, stale, for
	// its restart time.
	NoGracefulRestart bool
	// BFD runs BFD (300ms x 3) on the sessions with BIRD peers, on both
	// sides: a BIRD that hangs or whose path fails loses its session (and
	// its routes, graceful restart or not) in about a second instead of the
	// hold time.
	BFD bool
	// PeerRestartTime is the restart time the BGP peers announce in their
	// graceful restart capability: how long the CE keeps a vanished peer's
	// routes, stale, before it sweeps them. 120s by default.
	PeerRestartTime time.Duration
	// PolicePPS polices the traffic addressed to the router that is not a
	// control flow, per CPU (the FE's classifier.police_pps); 0: the lab's
	// default, 20,000.
	PolicePPS uint64
	// GTSMPeers are addresses whose BGP packets must arrive with TTL 255
	// (the FE's classifier.gtsm_peers).
	GTSMPeers []string
	// HostChecksumOffload leaves TCP and UDP checksum offload on at the
	// hosts' and peers' veth ends, as a default veth (a container's) has
	// it: their packets then arrive with partial checksums
	// (CHECKSUM_PARTIAL). By default the lab turns it off there, so that
	// its traffic looks like a real NIC's; the FE must keep control flows
	// alive either way (docs/troubleshooting.md, "The CPUMAP checksum
	// pitfall on veth").
	HostChecksumOffload bool
	// NoProtection leaves the FE's classifier out: no control flows steered
	// to the control CPU, no policer, no GTSM, no forward CPUs (the
	// baseline of the DoS test).
	NoProtection bool
	// PersistAPIRoutes gives the CE an api_routes_file (in Dir), so the
	// API's routes survive a CE restart.
	PersistAPIRoutes bool
	// FEs is how many forwarding elements the router has: 1 (the default)
	// to MaxFEs. FE n >= 2 stands for a second server of a scale-out
	// router: namespace NAME-rtrN with an FE of its own (ForCES ID n,
	// name lab-feN, status socket feN.sock, daemon "feN"), whose ports
	// to-a and to-b lead to its own hosts, NAME-aN and NAME-bN, copies of
	// host A and host B (the same addresses and subnets), so it forwards
	// between its own ports with the FIB every FE gets. The peer's link is
	// FE 1's only: on the other FEs a route whose next hop is the peer
	// itself (the anycast prefixes; every route of a BIRD peer) stays
	// unresolved and goes to their kernel (docs/architecture.md, "Several
	// FEs"). The CE then
	// listens for ForCES on the management LAN, 10.10.0.1:6700 on the
	// bridge mgmt in NAME-rtr, which FE n reaches from 10.10.0.n over TCP
	// with mutual TLS (the CE's certificate names it "ce").
	FEs int
	// Cluster, 2 to MaxFEs, makes the lab one router across Cluster FE
	// "servers" (issue 23): FE n in namespace NAME-rtrN as with FEs (which
	// it sets; the two are otherwise exclusive), a full mesh of veths
	// between the FEs' namespaces (FE i's port ifeJ to FE j's ifeI, MTU
	// MeshMTU, no addresses) declared as each FE's inter_fe_links, and on
	// each FE n a host of its own, NAME-hN on port to-hN, with subnets of
	// its own (ClusterHost: 10.20.n.0/24, fd00:20:n::/64) and site
	// prefixes the CE routes to it statically. FE 1 keeps hosts A and B
	// and the peer, so every route of the peer has FE 1 for its egress.
	Cluster int
	// MeshCapacityMbps, if set, is the capacity in Mbit/s each cluster FE
	// declares for its inter-FE links (capacity_mbps), against which direct
	// VLB spills flows through intermediates once a link is loaded: a low
	// figure makes a lab's modest traffic load the mesh. 0: the veths'
	// speed.
	MeshCapacityMbps int
	// Attackable readies the lab for the hostile-input suite (Attack): the
	// lab's CA also certifies SpareFE, which the CE admits though no FE
	// runs it, and NotAllowedFE, which it does not; and the API asks for a
	// bearer token (in Dir/api-token).
	Attackable bool
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// The lab's fixed addressing. Only private and documentation ranges, inside
// the lab's own namespaces.

// HostA is host A's address, on its link to the router.
func HostA() netip.Addr { return netip.MustParseAddr("10.10.1.2") }

// HostB is host B's address, on its link to the router.
func HostB() netip.Addr { return netip.MustParseAddr("10.10.2.2") }

// HostBNet is announced by the peer and reached through host B.
func HostBNet() netip.Prefix { return netip.MustParsePrefix("198.51.100.0/24") }

// HostBAddr is host B's address in HostBNet.
func HostBAddr() netip.Addr { return netip.MustParseAddr("198.51.100.10") }

// HostA6 is host A's IPv6 address: the links are in fd00:10:N::/64.
func HostA6() netip.Addr { return netip.MustParseAddr("fd00:10:1::2") }

// HostB6 is host B's IPv6 address on its link.
func HostB6() netip.Addr { return netip.MustParseAddr("fd00:10:2::2") }

// HostBNet6 is the documentation prefix the peer announces (over the IPv4
// BGP session) and host B holds HostBAddr6 in.
func HostBNet6() netip.Prefix { return netip.MustParsePrefix("2001:db8:b::/48") }

// HostBAddr6 is host B's address in HostBNet6.
func HostBAddr6() netip.Addr { return netip.MustParseAddr("2001:db8:b::10") }

// The lab's autonomous systems: the router's and its BGP peers'.
const (
	RouterASN uint32 = 65001
	PeerASN   uint32 = 65002
	Peer2ASN  uint32 = 65003
)

// AnycastNet is an anycast prefix: every BIRD or FRR peer owns its
// addresses (on its loopback) and announces it with itself as the next
// hop, so host A's traffic to it ends at a BGP peer, which answers; with
// two peers the router spreads it over both.
func AnycastNet() netip.Prefix { return netip.MustParsePrefix("203.0.113.0/24") }

// AnycastAddr is the address in AnycastNet that host A sends to.
func AnycastAddr() netip.Addr { return netip.MustParseAddr("203.0.113.10") }

// AnycastNet6 is AnycastNet's IPv6 counterpart.
func AnycastNet6() netip.Prefix { return netip.MustParsePrefix("2001:db8:e::/48") }

// AnycastAddr6 is the address in AnycastNet6 that host A sends to.
func AnycastAddr6() netip.Addr { return netip.MustParseAddr("2001:db8:e::10") }

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = "sp"
	}
	if len(o.Name) > 8 || strings.ContainsAny(o.Name, "/ \t") {
		return fmt.Errorf("lab name %q: at most 8 characters, no spaces or slashes", o.Name)
	}
	if o.Dir == "" {
		o.Dir = filepath.Join("/run/splitplane", "lab-"+o.Name)
	}
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return err
		}
		o.Binary = b
	}
	if o.Routes == 0 {
		o.Routes = 10000
	}
	if o.Routes < 0 {
		return fmt.Errorf("routes %d: must not be negative", o.Routes)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.XDPMode == "" {
		o.XDPMode = "native"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Cluster != 0 {
		if o.Cluster < 2 || o.Cluster > MaxFEs {
			return fmt.Errorf("cluster %d: 2 to %d FEs", o.Cluster, MaxFEs)
		}
		if o.MeshCapacityMbps < 0 {
			return fmt.Errorf("mesh capacity %d Mbit/s: must not be negative", o.MeshCapacityMbps)
		}
		if o.FEs > 1 && o.FEs != o.Cluster {
			return fmt.Errorf("fes %d and cluster %d: one or the other (a cluster lab has cluster FEs)", o.FEs, o.Cluster)
		}
		o.FEs = o.Cluster
	}
	if o.FEs == 0 {
		o.FEs = 1
	}
	if o.FEs < 1 || o.FEs > MaxFEs {
		return fmt.Errorf("fes %d: 1 to %d", o.FEs, MaxFEs)
	}
	switch o.Peer {
	case "":
		o.Peer = "splitplane"
	case "splitplane", "bird", "frr":
	default:
		return fmt.Errorf("peer %q: splitplane, bird or frr", o.Peer)
	}
	if o.NoProtection && (o.PolicePPS != 0 || len(o.GTSMPeers) > 0) {
		return errors.New("police pps and GTSM peers are protection: not with no protection")
	}
	if o.Password != "" && o.Peer != "frr" {
		return fmt.Errorf("an MD5 password needs --peer frr (peer %q)", o.Peer)
	}
	switch o.Peer2 {
	case "":
	case "bird", "frr":
		if o.Peer == "splitplane" {
			return fmt.Errorf("a second peer needs --peer bird or frr, which announce the anycast prefixes too (peer %q)", o.Peer)
		}
	default:
		return fmt.Errorf("peer2 %q: bird or frr", o.Peer2)
	}
	if o.BFD && o.Peer != "bird" && o.Peer2 != "bird" {
		return errors.New("BFD needs a BIRD peer (--peer bird or --peer2 bird)")
	}
	if o.PeerRestartTime == 0 {
		o.PeerRestartTime = 120 * time.Second
	}
	if o.PeerRestartTime < time.Second || o.PeerRestartTime > 4095*time.Second {
		return fmt.Errorf("peer restart time %s: 1s to 4095s", o.PeerRestartTime)
	}
	return nil
}

// MaxFEs is the most forwarding elements a lab has (Options.FEs).
const MaxFEs = 4

// Namespace returns the name of one of the lab's namespaces: "rtr", "peer",
// "peer2", "a" or "b"; with several FEs also "rtrN", "aN" and "bN" (FE N's
// router and hosts, FEName); in a cluster lab "rtrN" and "hN" (FE N's
// host, ClusterHost).
func (o *Options) Namespace(role string) string { return o.Name + "-" + role }

// FEName is the name of FE n (1 to FEs) in the lab: the daemon's name for
// Restart, Stop, Start and Pid, its status socket's (Socket) and the suffix
// of its namespaces ("rtr"+suffix, "a"+suffix, "b"+suffix): "fe" and ""
// for FE 1, "fe2" and "2" for FE 2.
func FEName(n int) (daemon, suffix string) {
	if n == 1 {
		return "fe", ""
	}
	return "fe" + strconv.Itoa(n), strconv.Itoa(n)
}

// FECertName is the name the lab's CA certifies FE ID n under.
func certName(n uint32) string {
	name, _ := FEName(int(n))
	return name
}

func (o *Options) namespaces() []string {
	ns := []string{o.Namespace("rtr"), o.Namespace("peer"), o.Namespace("a"), o.Namespace("b")}
	if o.Peer2 != "" {
		ns = append(ns, o.Namespace("peer2"))
	}
	if o.Cluster > 0 {
		ns = append(ns, o.ClusterHost(1).Namespace)
	}
	for n := 2; n <= o.FEs; n++ {
		ns = append(ns, o.feNamespaces(n)...)
	}
	return ns
}

// feNamespaces are FE n's namespaces (n >= 2): its router's and its hosts'.
func (o *Options) feNamespaces(n int) []string {
	_, sfx := FEName(n)
	if o.Cluster > 0 {
		return []string{o.Namespace("rtr" + sfx), o.ClusterHost(n).Namespace}
	}
	return []string{o.Namespace("rtr" + sfx), o.Namespace("a" + sfx), o.Namespace("b" + sfx)}
}

// bgpPeer is one of the lab's BGP peers. Its role ("peer" or "peer2")
// names its namespace, its process and its files.
type bgpPeer struct {
	role, impl      string // impl: splitplane, bird or frr
	asn             uint32
	addr, addr6     netip.Addr // the peer's own, on its link to the router
	router, router6 netip.Addr // the router's end of that link
	port            string     // the router's port towards it
}

// suffix tells the files of a second peer from the first's: "" or "2".
func (p bgpPeer) suffix() string { return strings.TrimPrefix(p.role, "peer") }

// anycast reports whether the peer owns and announces the anycast prefixes.
func (p bgpPeer) anycast() bool { return p.impl != "splitplane" }

// peers lists the lab's BGP peers, the first one first.
func (o *Options) peers() []bgpPeer {
	ps := []bgpPeer{{role: "peer", impl: o.Peer, asn: PeerASN,
		addr: netip.MustParseAddr("10.10.3.2"), addr6: netip.MustParseAddr("fd00:10:3::2"),
		router: netip.MustParseAddr("10.10.3.1"), router6: netip.MustParseAddr("fd00:10:3::1"), port: "to-peer"}}
	if o.Peer2 != "" {
		ps = append(ps, bgpPeer{role: "peer2", impl: o.Peer2, asn: Peer2ASN,
			addr: netip.MustParseAddr("10.10.4.2"), addr6: netip.MustParseAddr("fd00:10:4::2"),
			router: netip.MustParseAddr("10.10.4.1"), router6: netip.MustParseAddr("fd00:10:4::1"), port: "to-peer2"})
	}
	return ps
}

// RouteCount returns how many prefixes the lab's peers announce together (the
// routes the CE and the FE hold once the lab is up): the generated table,
// host B's prefixes (IPv4 and IPv6; BIRD, whose next hop is itself,
// announces only the IPv4 one) and, with a BIRD or FRR peer, the two
// anycast prefixes; in a cluster lab also the static routes to the hosts'
// sites (two per FE).
func (o Options) RouteCount() int {
	if err := o.defaults(); err != nil {
		return 0
	}
	n := o.Routes + 2 + 2*o.Cluster
	switch o.Peer {
	case "bird":
		n++
	case "frr":
		n += 2
	}
	return n
}

// Socket returns the status socket of a daemon: "ce", "fe", "fe2"... or "peer".
func (o *Options) Socket(daemon string) string { return filepath.Join(o.Dir, daemon+".sock") }

// state is what lab down needs to undo lab up, kept in Dir/state.json.
type state struct {
	Namespaces []string           `json:"namespaces"`
	Processes  map[string]int     `json:"processes"` // name -> pid
	Commands   map[string]command `json:"commands"`  // name -> how it was started
}

// program is what the command line of the lab's process name contains: the
// splitplane binary, or ping, bird or bgpd.
func (o *Options) program(s state, name string) string {
	if strings.HasPrefix(name, "traffic") {
		return "ping"
	}
	if c, ok := s.Commands[name]; ok && len(c.Args) > 0 && external(c.Args[0]) {
		return filepath.Base(c.Args[0])
	}
	return filepath.Base(o.Binary)
}

// external reports whether a daemon's command line starts with a program
// of its own rather than a splitplane subcommand.
func external(arg0 string) bool {
	return arg0 == "ping" || arg0 == "bird" || arg0 == frrBGPD
}

// command is how a daemon was started, so lab restart can do it again.
type command struct {
	Namespace string   `json:"namespace"`
	Args      []string `json:"args"`
}

// Restart stops one of the lab's daemons ("ce", "fe", "fe2"..., "peer" or "peer2") by
// pid, with SIGKILL when kill is set (a crash) or SIGTERM (a clean stop), and
// starts it again as it was started.
func Restart(o Options, name string, kill bool) error {
	if err := Stop(o, name, kill); err != nil {
		return err
	}
	return Start(o, name)
}

// Stop stops one of the lab's daemons ("ce", "fe", "fe2"..., "peer" or "peer2") by pid:
// with SIGKILL when kill is set, as a crash would, or with SIGTERM. Start
// starts it again.
func Stop(o Options, name string, kill bool) error {
	if err := o.defaults(); err != nil {
		return err
	}
	s, err := o.loadState()
	if err != nil {
		return fmt.Errorf("lab %q: %w (is it up?)", o.Name, err)
	}
	if _, ok := s.Commands[name]; !ok {
		return fmt.Errorf("lab %q has no daemon %q (%s)", o.Name, name, strings.Join(slices.Sorted(maps.Keys(s.Commands)), ", "))
	}
	pid, ok := s.Processes[name]
	if !ok {
		return nil
	}
	if kill && harness.Alive(pid, o.program(s, name)) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := harness.StopPid(pid, o.program(s, name), stopGrace); err != nil {
		return err
	}
	delete(s.Processes, name)
	fmt.Fprintf(o.Out, "stopped %s (pid %d)\n", name, pid)
	return o.saveState(s)
}

// Pid returns the pid of one of the lab's running processes ("ce", "fe",
// "fe2", "peer", "peer2", "traffic"...).
func Pid(o Options, name string) (int, error) {
	if err := o.defaults(); err != nil {
		return 0, err
	}
	s, err := o.loadState()
	if err != nil {
		return 0, fmt.Errorf("lab %q: %w (is it up?)", o.Name, err)
	}
	pid, ok := s.Processes[name]
	if !ok || !harness.Alive(pid, o.program(s, name)) {
		return 0, fmt.Errorf("lab %q: %s is not running", o.Name, name)
	}
	return pid, nil
}

// Start starts one of the lab's daemons that Stop stopped, as lab up
// started it. A daemon that still runs is left alone.
func Start(o Options, name string) error {
	if err := o.defaults(); err != nil {
		return err
	}
	s, err := o.loadState()
	if err != nil {
		return fmt.Errorf("lab %q: %w (is it up?)", o.Name, err)
	}
	c, ok := s.Commands[name]
	if !ok {
		return fmt.Errorf("lab %q has no daemon %q (%s)", o.Name, name, strings.Join(slices.Sorted(maps.Keys(s.Commands)), ", "))
	}
	if pid, ok := s.Processes[name]; ok && harness.Alive(pid, o.program(s, name)) {
		return fmt.Errorf("%s is running (pid %d)", name, pid)
	}
	pid, err := o.start(name, c.Namespace, c.Args...)
	if err != nil {
		return err
	}
	s.Processes[name] = pid
	fmt.Fprintf(o.Out, "started %s (pid %d)\n", name, pid)
	return o.saveState(s)
}

func (o *Options) loadState() (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(o.Dir, "state.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func (o *Options) saveState(s state) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return os.WriteFile(filepath.Join(o.Dir, "state.json"), b, 0o644)
}

// run runs a command and returns its error with the command line and stderr.
func run(name string, args ...string) error {
	return harness.Run(context.Background(), name, args...)
}

// inNS runs a command inside a lab namespace.
func inNS(ns string, name string, args ...string) error {
	return harness.Exec(context.Background(), ns, name, args...)
}

// start launches a daemon in a namespace as a background process with its own
// session, logging to Dir/NAME.log, and returns its pid.
func (o *Options) start(name, ns string, args ...string) (int, error) {
	if !external(args[0]) {
		args = append([]string{o.Binary}, args...)
	}
	return harness.StartDetached(name, ns, filepath.Join(o.Dir, name+".log"), args...)
}

// stopGrace is how long a daemon has to stop after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Down stops every process the lab started, by pid, and deletes its
// namespaces (which removes its veth links). It works after a failed Up too,
// and is a no-op when nothing is left.
func Down(o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	var errs []error
	s, err := o.loadState()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("read lab state: %w", err))
	}
	// Daemons first (the FE detaches XDP and the CE tears down its sessions),
	// in reverse order of start, then any other process the state names.
	order := []string{"traffic", "traffic6", "peer2", "peer"}
	for n := MaxFEs; n >= 1; n-- {
		name, _ := FEName(n)
		order = append(order, name)
	}
	order = append(order, "ce")
	for _, name := range slices.Sorted(maps.Keys(s.Processes)) {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	for _, name := range order {
		pid, ok := s.Processes[name]
		if !ok {
			continue
		}
		want := o.program(s, name)
		fmt.Fprintf(o.Out, "stopping %s (pid %d)\n", name, pid)
		if err := harness.StopPid(pid, want, stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	// Those lab up made, and those it may have made: lab down is not told
	// whether there was a second peer or more FEs.
	all := append(s.Namespaces, o.namespaces()...)
	all = append(all, o.Namespace("peer2"))
	for n := 1; n <= MaxFEs; n++ {
		all = append(all, o.ClusterHost(n).Namespace)
		if n > 1 {
			all = append(all, o.feNamespaces(n)...)
		}
	}
	slices.Sort(all)
	for _, ns := range slices.Compact(all) {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			fmt.Fprintf(o.Out, "deleting namespace %s\n", ns)
			if err := harness.DelNamespace(context.Background(), ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		_ = os.RemoveAll(o.Dir)
	}
	return errors.Join(errs...)
}
