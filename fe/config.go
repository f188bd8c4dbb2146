package fe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/splitplane/splitplane/internal/metrics"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/forces"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("fe config")

// Config is the FE's configuration file (YAML).
type Config struct {
	// ID is this FE's number, 1 (the default) to 0x3FFFFFFF; its ForCES ID is forces.FEID(ID).
	ID uint32 `yaml:"id"`
	// Name is the FE's name as its FE Object LFB reports it (default: its ForCES ID).
	Name string `yaml:"name"`
	// CEAddress is the CE's ForCES TCP address.
	CEAddress string `yaml:"ce_address"`
	// CEAddressLow is the CE's low-priority channel (packet redirects,
	// events); by default the port after next of ce_address's (6702 beside 6700).
	CEAddressLow string `yaml:"ce_address_low"`
	// RedirectEtherTypes are the EtherTypes of frames received on the ports
	// that the FE redirects to the CE (e.g. 0x88cc for LLDP); none by default.
	RedirectEtherTypes []uint16 `yaml:"redirect_ethertypes"`
	// Ports are the interfaces this FE forwards between; the XDP program is attached to each.
	Ports []string `yaml:"ports"`
	// InterFELinks are the ports that link this FE to the other FEs of the
	// same CE (one port space over several FEs): each names one of ports
	// and the FE at its other end, e.g. [{port: ife2, peer_fe: 2}]. The FE
	// reports them to the CE, which tells every FE which FE each next hop
	// is behind. None by default.
	InterFELinks []InterFELink `yaml:"inter_fe_links"`
	// VLB is how this FE spreads the traffic it sends to the other FEs over
	// the inter-FE links (Valiant load balancing, docs/cluster.md).
	VLB VLBConfig `yaml:"vlb"`
	// InterFEProbeInterval is how often the FE probes each inter-FE link
	// (default 100ms, at least 10ms): a small frame that the peer FE's XDP
	// program answers, so that a reply proves the peer's datapath runs,
	// not only the link's carrier (docs/cluster.md, "Liveness").
	InterFEProbeInterval time.Duration `yaml:"inter_fe_probe_interval"`
	// InterFEProbeMisses is how many probe intervals in a row without a
	// reply take an inter-FE link down for forwarding (default 3, 1 to
	// 1000): flows to its peer, and through it, then go through another
	// FE until replies return.
	InterFEProbeMisses int `yaml:"inter_fe_probe_misses"`
	// KernelRoutes is which CE routes the FE copies into the kernel's FIB,
	// the slow path: "connected" (none), "default" (the CE's default route;
	// the default) or "all" (every route: then the kernel can answer ICMP
	// Time Exceeded for any destination; a thread of the FE at the lowest
	// CPU priority writes the copy, some 13 µs a route, behind the
	// datapath, so a full table reaches the kernel after the XDP fast path).
	KernelRoutes string `yaml:"kernel_routes"`
	// XDPMode is "native" (the default; a port whose driver lacks native XDP
	// falls back to generic mode with a warning) or "generic".
	XDPMode string `yaml:"xdp_mode"`
	// FIBGroups sizes the IPv4 FIB's pool of 256-entry groups (1 KiB of
	// kernel memory each; 8192 by default): one per /24 holding prefixes
	// longer than /24. 1024 to 4194304.
	FIBGroups int `yaml:"fib_groups"`
	// IPv6FIBGroups sizes the IPv6 FIB's pool of 256-entry groups (1 KiB
	// each; 131072, 128 MiB, by default): a prefix longer than /16 needs a
	// group for every 8 bits beyond /16 that no other prefix has opened,
	// so clustered tables need far fewer than 2.5 per route, scattered ones
	// up to that. An IPv6 route that does not fit is refused and counted
	// (datapath errors). 1024 to 4194304.
	IPv6FIBGroups int `yaml:"ipv6_fib_groups"`
	// HeartbeatInterval is how often the FE sends ForCES heartbeats.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// TLS, if set, makes the FE connect to the CE with mutual TLS: this FE's
	// certificate and key, and the CA that the CE's certificate must chain to.
	TLS *forces.TLSConfig `yaml:"tls"`
	// TLSServerName is the name the CE's certificate must carry (default: the
	// host of ce_address).
	TLSServerName string `yaml:"tls_server_name"`
	// ForCESPcap, if set, records every ForCES message sent and received in
	// this pcap file, whole, as synthetic TCP streams (decode with: tshark -d tcp.port==6700,forces).
	ForCESPcap string `yaml:"forces_pcap"`
	// StatusSocket, if set, is a unix socket serving the FE's status as JSON.
	StatusSocket string `yaml:"status_socket"`
	// MetricsListen, if set, serves Prometheus metrics at
	// http://ADDRESS/metrics (TCP HOST:PORT): the datapath's per-CPU and
	// per-port counters, the FE's tables and its association.
	MetricsListen string `yaml:"metrics_listen"`
	// Classifier steers the router's own control flows (BGP sessions,
	// ForCES associations) to the control CPU and polices the rest of the
	// traffic addressed to the router; nil: off.
	Classifier *ClassifierConfig `yaml:"classifier"`
}

// InterFELink is a port of the FE that links it to another FE.
type InterFELink struct {
	// Port is the interface, one of ports.
	Port string `yaml:"port"`
	// PeerFE is the id of the FE at the other end: 1 to 1073741823, not
	// this FE's, one link per peer.
	PeerFE uint32 `yaml:"peer_fe"`
	// CapacityMbps is the link's capacity in Mbit/s, against which vlb's
	// max_link_load is read; 0 (the default) takes the port's speed as
	// the kernel reports it, or 10000 when it reports none.
	CapacityMbps int `yaml:"capacity_mbps"`
}

// The VLB modes (vlb.mode).
const (
	VLBDirect   = "direct"
	VLBTwoPhase = "two_phase"
	VLBOff      = "off"
)

// VLBConfig configures Valiant load balancing over the inter-FE links.
type VLBConfig struct {
	// Mode is "direct" (the default: "direct VLB" as RouteBricks has it;
	// the flows to an FE take the direct link while this FE's traffic
	// leaves it under max_link_load of its capacity, and the excess
	// flows go through intermediate FEs), "two_phase" (every FE, this
	// one and the egress one included, is as likely an intermediate:
	// (N-2)/N of the flows to an FE go through another, whatever the load)
	// or "off" (direct unless the link is down).
	Mode string `yaml:"mode"`
	// MaxLinkLoad is the share of a link's capacity the direct traffic may
	// fill before flows spill over in direct mode; 0.8 by default, 0.05 to 1.
	MaxLinkLoad float64 `yaml:"max_link_load"`
	// Interval is how often the load is measured and the share of flows
	// sent through intermediates set again (1s by default, at least 100ms).
	// Every change moves flows between paths, so it is not made often.
	Interval time.Duration `yaml:"interval"`
}

func (v *VLBConfig) validate() error {
	switch v.Mode {
	case "":
		v.Mode = VLBDirect
	case VLBDirect, VLBTwoPhase, VLBOff:
	default:
		return fmt.Errorf("%w: vlb.mode %q: must be direct, two_phase or off", ErrConfig, v.Mode)
	}
	if v.MaxLinkLoad == 0 {
		v.MaxLinkLoad = 0.8
	}
	if !(v.MaxLinkLoad >= 0.05 && v.MaxLinkLoad <= 1) {
		return fmt.Errorf("%w: vlb.max_link_load %g: must be 0.05 to 1", ErrConfig, v.MaxLinkLoad)
	}
	if v.Interval == 0 {
		v.Interval = time.Second
	}
	if v.Interval < 100*time.Millisecond {
		return fmt.Errorf("%w: vlb.interval %s: must be at least 100ms", ErrConfig, v.Interval)
	}
	return nil
}

// ClassifierConfig configures the classifier (package classifier).
type ClassifierConfig struct {
	// ControlCPU is the CPU the return packets of control flows are
	// steered to (the CE's control core); -1: none (they are still
	// exempt from policing).
	ControlCPU int `yaml:"control_cpu"`
	// Ports are the TCP ports whose connections are control flows, with
	// a name each; by default 179 (bgp), 6700 and 6702 (forces), 22 (ssh).
	Ports map[uint16]string `yaml:"ports"`
	// PolicePPS polices everything the XDP program hands to the kernel
	// but the learned control flows, per CPU and per class (see police):
	// a token bucket of police_burst packets refilled at police_pps
	// packets per second; excess is dropped (counted drop_policed,
	// drop_policed_ttl_options, drop_policed_arp_nd, drop_policed_other).
	// It is the rate of the classes that police does not set, capped at
	// 1000 for ttl_options and arp_nd. 0: no policing but of the classes
	// police sets. At most 1000000000.
	PolicePPS uint64 `yaml:"police_pps"`
	// PoliceBurst is the policer's bucket size in packets (a tenth of
	// police_pps by default, at least 1), for the classes that police
	// does not set (capped at 100 for ttl_options and arp_nd).
	PoliceBurst uint64 `yaml:"police_burst"`
	// Police sets the rate of each class of its own: to_router,
	// ttl_options, arp_nd, other, each {pps, burst}. A class left out
	// takes police_pps and police_burst.
	Police PoliceConfig `yaml:"police"`
	// GTSMPeers are BGP peers one hop away whose packets to port 179 must
	// arrive with TTL 255 (RFC 5082); others are dropped (drop_gtsm).
	GTSMPeers []string `yaml:"gtsm_peers"`
	// Interval is how often the router's sockets are read for control
	// flows (default 200ms).
	Interval time.Duration `yaml:"interval"`
	// ForwardCPUs, if set, are the CPUs forwarding is done on: a packet to
	// forward that arrives on another CPU (the control CPU's queue, say) is
	// handed to one of them through the CPUMAP, by a hash of its flow
	// (software RSS). Empty: forwarded where it arrives. Must not include
	// control_cpu.
	ForwardCPUs []int `yaml:"forward_cpus"`
}

// Validate checks the configuration and fills in defaults. Errors name the field and value.
func (c *Config) Validate() error {
	if c.ID == 0 {
		c.ID = 1
	}
	if c.ID > 0x3FFFFFFF {
		return fmt.Errorf("%w: id %d: must be 1 to 1073741823", ErrConfig, c.ID)
	}
	if c.CEAddress == "" {
		c.CEAddress = "127.0.0.1:6700"
	}
	if c.CEAddressLow == "" {
		host, port, err := net.SplitHostPort(c.CEAddress)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || p == 0 || p > 65533 {
			return fmt.Errorf("%w: ce_address %q: want host:port with a port of 1 to 65533", ErrConfig, c.CEAddress)
		}
		c.CEAddressLow = net.JoinHostPort(host, strconv.FormatUint(p+2, 10))
	}
	if c.TLS != nil {
		if c.TLSServerName == "" {
			c.TLSServerName, _, _ = net.SplitHostPort(c.CEAddress)
		}
		if _, err := c.TLS.ClientTLS(c.TLSServerName); err != nil {
			return fmt.Errorf("%w: tls: %w", ErrConfig, err)
		}
	}
	for i, et := range c.RedirectEtherTypes {
		if et < 0x0600 {
			return fmt.Errorf("%w: redirect_ethertypes[%d] %#04x: not an EtherType (below 0x0600)", ErrConfig, i, et)
		}
	}
	if len(c.Ports) == 0 {
		return fmt.Errorf("%w: ports: at least one interface is needed", ErrConfig)
	}
	seen := map[string]bool{}
	for i, p := range c.Ports {
		if p == "" || seen[p] {
			return fmt.Errorf("%w: ports[%d] %q: empty or listed twice", ErrConfig, i, p)
		}
		seen[p] = true
	}
	if err := c.validateLinks(seen); err != nil {
		return err
	}
	if _, err := c.mode(); err != nil {
		return err
	}
	if err := c.sizes().Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch c.KernelRoutes {
	case "":
		c.KernelRoutes = KernelRoutesDefault
	case KernelRoutesConnected, KernelRoutesDefault, KernelRoutesAll:
	default:
		return fmt.Errorf("%w: kernel_routes %q: must be connected, default or all", ErrConfig, c.KernelRoutes)
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.HeartbeatInterval < 10*time.Millisecond {
		return fmt.Errorf("%w: heartbeat_interval %s: must be at least 10ms", ErrConfig, c.HeartbeatInterval)
	}
	if err := c.VLB.validate(); err != nil {
		return err
	}
	if c.MetricsListen != "" {
		if err := metrics.CheckListen(c.MetricsListen); err != nil {
			return fmt.Errorf("%w: metrics_listen %q: %v", ErrConfig, c.MetricsListen, err)
		}
	}
	if c.Classifier != nil {
		return c.Classifier.validate()
	}
	return nil
}

// validateLinks checks inter_fe_links against the ports (ports: the
// configured port names).
func (c *Config) validateLinks(ports map[string]bool) error {
	peers := map[uint32]bool{}
	onPort := map[string]bool{}
	for i, l := range c.InterFELinks {
		switch {
		case !ports[l.Port]:
			return fmt.Errorf("%w: inter_fe_links[%d].port %q: not one of ports", ErrConfig, i, l.Port)
		case onPort[l.Port]:
			return fmt.Errorf("%w: inter_fe_links[%d].port %q: already the link to another FE", ErrConfig, i, l.Port)
		case l.PeerFE == 0 || l.PeerFE > forces.MaxFESubID:
			return fmt.Errorf("%w: inter_fe_links[%d].peer_fe %d: must be 1 to %d", ErrConfig, i, l.PeerFE, forces.MaxFESubID)
		case l.PeerFE == c.ID:
			return fmt.Errorf("%w: inter_fe_links[%d].peer_fe %d: is this FE's own id", ErrConfig, i, l.PeerFE)
		case peers[l.PeerFE]:
			return fmt.Errorf("%w: inter_fe_links[%d].peer_fe %d: a second link to the same FE", ErrConfig, i, l.PeerFE)
		case l.CapacityMbps < 0 || l.CapacityMbps > 10_000_000:
			return fmt.Errorf("%w: inter_fe_links[%d].capacity_mbps %d: must be 0 (the port's speed) to 10000000", ErrConfig, i, l.CapacityMbps)
		}
		peers[l.PeerFE], onPort[l.Port] = true, true
	}
	if c.InterFEProbeInterval == 0 {
		c.InterFEProbeInterval = defaultProbeInterval
	}
	if c.InterFEProbeInterval < 10*time.Millisecond {
		return fmt.Errorf("%w: inter_fe_probe_interval %s: must be at least 10ms", ErrConfig, c.InterFEProbeInterval)
	}
	if c.InterFEProbeMisses == 0 {
		c.InterFEProbeMisses = defaultProbeMisses
	}
	if c.InterFEProbeMisses < 1 || c.InterFEProbeMisses > 1000 {
		return fmt.Errorf("%w: inter_fe_probe_misses %d: must be 1 to 1000", ErrConfig, c.InterFEProbeMisses)
	}
	return nil
}

func (c *ClassifierConfig) validate() error {
	if c.ControlCPU < -1 || c.ControlCPU >= 1<<16 {
		return fmt.Errorf("%w: classifier.control_cpu %d: want a CPU number, or -1 for none", ErrConfig, c.ControlCPU)
	}
	if c.Interval == 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.Interval < 10*time.Millisecond {
		return fmt.Errorf("%w: classifier.interval %s: must be at least 10ms", ErrConfig, c.Interval)
	}
	if err := c.validatePolice(); err != nil {
		return err
	}
	for port, name := range c.Ports {
		if port == 0 || name == "" {
			return fmt.Errorf("%w: classifier.ports %d: %q: want a port and a name", ErrConfig, port, name)
		}
	}
	for i, cpu := range c.ForwardCPUs {
		if cpu < 0 || cpu >= 1<<16 || cpu == c.ControlCPU || slices.Contains(c.ForwardCPUs[:i], cpu) {
			return fmt.Errorf("%w: classifier.forward_cpus[%d] %d: want distinct CPU numbers other than control_cpu", ErrConfig, i, cpu)
		}
	}
	for i, p := range c.GTSMPeers {
		if a, err := netip.ParseAddr(p); err != nil || a.Zone() != "" {
			return fmt.Errorf("%w: classifier.gtsm_peers[%d] %q: not an IP address", ErrConfig, i, p)
		}
	}
	return nil
}

func (c *Config) mode() (datapath.Mode, error) {
	switch c.XDPMode {
	case "", "native":
		return datapath.ModeNative, nil
	case "generic":
		return datapath.ModeGeneric, nil
	}
	return 0, fmt.Errorf("%w: xdp_mode %q: must be native or generic", ErrConfig, c.XDPMode)
}

// sizes are the datapath's FIB pools the configuration asks for.
func (c *Config) sizes() datapath.Sizes {
	return datapath.Sizes{FIBGroups: c.FIBGroups, FIB6Groups: c.IPv6FIBGroups}
}
