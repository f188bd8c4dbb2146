package ce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("ce config")

// Config is the CE's configuration file (YAML).
type Config struct {
	// ID is this CE's number; its ForCES ID is forces.CEID(ID).
	ID uint32 `yaml:"id"`
	// ASN and RouterID identify the embedded BGP speaker.
	ASN      uint32 `yaml:"asn"`
	RouterID string `yaml:"router_id"`
	// BGPListenPort is the port GoBGP listens on (179 by default, -1 to not listen).
	BGPListenPort int32 `yaml:"bgp_listen_port"`
	// BGPListenAddrs restricts the addresses GoBGP listens on.
	BGPListenAddrs []string `yaml:"bgp_listen_addresses"`
	// Neighbors are the BGP neighbours.
	Neighbors []NeighborConfig `yaml:"neighbors"`
	// BGPMultipath turns on BGP multipath, ECMP (false by default): for
	// every prefix the CE then learns all the equal-cost paths GoBGP selects
	// (all from eBGP or all from iBGP neighbours, with the same LOCAL_PREF,
	// AS_PATH length, ORIGIN and MED; their ASes may differ) and forwards
	// over all their next hops.
	BGPMultipath bool `yaml:"bgp_multipath"`
	// ForCESListen is the TCP address FEs associate to (ForCES TML over TCP).
	ForCESListen string `yaml:"forces_listen"`
	// ForCESListenLow is the TCP address of the low-priority channel
	// (packet redirects and events); by default the port after next of
	// forces_listen's (6702 beside 6700).
	ForCESListenLow string `yaml:"forces_listen_low"`
	// HeartbeatInterval is how often CE and FE exchange ForCES heartbeats.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// HeartbeatMissLimit is how many silent intervals end an association
	// (3 by default), on both sides: the CE sets it in each FE's FE Protocol LFB.
	HeartbeatMissLimit int `yaml:"heartbeat_miss_limit"`
	// SyncHold bounds how long FEs wait, after the CE starts, for BGP to
	// converge before their first full sync (30s by default): until then an
	// FE keeps forwarding with the FIB it has, so a CE restart withdraws
	// nothing. The wait ends earlier once every neighbour is established and
	// the routes have been quiet for a second.
	SyncHold time.Duration `yaml:"sync_hold"`
	// TLS, if set, requires mutual TLS on both ForCES channels: this CE's
	// certificate and key, and the CA that FE certificates must chain to.
	TLS *forces.TLSConfig `yaml:"tls"`
	// ForCESPcap, if set, records every ForCES message sent and received in
	// this pcap file (decode with: tshark -d udp.port==6700,forces).
	ForCESPcap string `yaml:"forces_pcap"`
	// StatusSocket, if set, is a unix socket serving the CE's status as JSON.
	StatusSocket string `yaml:"status_socket"`

	// ControlCores are the CPUs the CE runs on (every thread, GOMAXPROCS set
	// to match); empty leaves it unpinned.
	ControlCores []int `yaml:"control_cores"`
	// StaticRoutes are routes from the configuration, beside BGP's.
	StaticRoutes []StaticRoute `yaml:"static_routes"`
	// Distances override the administrative distances of route sources.
	Distances Distances `yaml:"distances"`
}

// StaticRoute is a configured route: a prefix and one or more next hops
// (two or more make an ECMP route). Next hops are resolved like BGP's,
// through connected and other static routes.
type StaticRoute struct {
	Prefix   string   `yaml:"prefix"`
	NextHops []string `yaml:"next_hops"`
	// Distance overrides the static distance for this route (0: default).
	Distance uint8 `yaml:"distance"`
}

// Distances are administrative distances: for a prefix known from several
// sources, the lowest distance wins. Zero values take the defaults
// (connected 0, static 1, api 5, ebgp 20, ibgp 200), as common routers
// number them.
type Distances struct {
	Static uint8 `yaml:"static"`
	API    uint8 `yaml:"api"`
	EBGP   uint8 `yaml:"ebgp"`
	IBGP   uint8 `yaml:"ibgp"`
}

// NeighborConfig is one BGP neighbour.
type NeighborConfig struct {
	Address      string        `yaml:"address"`
	ASN          uint32        `yaml:"asn"`
	Port         uint32        `yaml:"port"`
	Passive      bool          `yaml:"passive"`
	HoldTime     time.Duration `yaml:"hold_time"`
	Keepalive    time.Duration `yaml:"keepalive"`
	ConnectRetry time.Duration `yaml:"connect_retry"`
}

// DefaultForCESListen is where the CE accepts FEs unless configured otherwise
// (6700 is the ForCES TML's registered high-priority port).
const DefaultForCESListen = "127.0.0.1:6700"

// DefaultHeartbeatInterval is the ForCES heartbeat interval unless configured.
const DefaultHeartbeatInterval = time.Second

// Validate checks the configuration and fills in defaults. Errors name the field and value.
func (c *Config) Validate() error {
	if c.ID > 0x3FFFFFFF {
		return fmt.Errorf("%w: id %d: must be below 0x40000000", ErrConfig, c.ID)
	}
	if c.ForCESListen == "" {
		c.ForCESListen = DefaultForCESListen
	}
	if c.ForCESListenLow == "" {
		low, err := LowPriorityAddress(c.ForCESListen)
		if err != nil {
			return fmt.Errorf("%w: forces_listen %q: %v", ErrConfig, c.ForCESListen, err)
		}
		c.ForCESListenLow = low
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SyncHold == 0 {
		c.SyncHold = 30 * time.Second
	}
	if c.SyncHold < 0 {
		return fmt.Errorf("%w: sync_hold %s: must not be negative", ErrConfig, c.SyncHold)
	}
	if c.HeartbeatMissLimit == 0 {
		c.HeartbeatMissLimit = 3
	}
	if c.HeartbeatMissLimit < 2 || c.HeartbeatMissLimit > 100 {
		return fmt.Errorf("%w: heartbeat_miss_limit %d: must be 2 to 100", ErrConfig, c.HeartbeatMissLimit)
	}
	if c.HeartbeatInterval < 10*time.Millisecond {
		return fmt.Errorf("%w: heartbeat_interval %s: must be at least 10ms", ErrConfig, c.HeartbeatInterval)
	}
	if c.TLS != nil {
		if _, err := c.TLS.ServerTLS(); err != nil {
			return fmt.Errorf("%w: tls: %w", ErrConfig, err)
		}
	}
	_, err := c.bgpConfig()
	return err
}

// LowPriorityAddress derives the low-priority channel's address from the
// high-priority one: same host, port + 2 (6700 -> 6702, as the ForCES TML
// ports). Port 0 (any) stays 0.
func LowPriorityAddress(high string) (string, error) {
	host, port, err := net.SplitHostPort(high)
	if err != nil {
		return "", err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p > 65533 {
		return "", fmt.Errorf("port %q: want 0 to 65533", port)
	}
	if p != 0 {
		p += 2
	}
	return net.JoinHostPort(host, strconv.FormatUint(p, 10)), nil
}

func (c *Config) bgpConfig() (bgp.Config, error) {
	rid, err := netip.ParseAddr(c.RouterID)
	if err != nil || !rid.Is4() {
		return bgp.Config{}, fmt.Errorf("%w: router_id %q: must be an IPv4 address", ErrConfig, c.RouterID)
	}
	bc := bgp.Config{ASN: c.ASN, RouterID: rid, ListenPort: c.BGPListenPort, ListenAddrs: c.BGPListenAddrs, Multipath: c.BGPMultipath}
	for i, n := range c.Neighbors {
		a, err := netip.ParseAddr(n.Address)
		if err != nil {
			return bgp.Config{}, fmt.Errorf("%w: neighbors[%d].address %q: not an IP address", ErrConfig, i, n.Address)
		}
		bc.Neighbors = append(bc.Neighbors, bgp.Neighbor{
			Address: a, ASN: n.ASN, Port: n.Port, Passive: n.Passive,
			HoldTime: n.HoldTime, Keepalive: n.Keepalive, ConnectRetry: n.ConnectRetry,
		})
	}
	if err := bc.Validate(); err != nil {
		return bgp.Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return bc, nil
}
