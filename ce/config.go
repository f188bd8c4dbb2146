package ce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/internal/metrics"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("ce config")

// Config is the CE's configuration file (YAML).
type Config struct {
	// ID is this CE's number; its ForCES ID is forces.CEID(ID).
	ID uint32 `yaml:"id"`
	// ASN is the router's autonomous system number (4-byte ASNs welcome):
	// the embedded BGP speaker's local AS.
	ASN uint32 `yaml:"asn"`
	// RouterID is the BGP identifier, an IPv4 address (required), usually
	// one of the router's own.
	RouterID string `yaml:"router_id"`
	// BGPListenPort is the port GoBGP listens on (179 by default, -1 to not listen).
	BGPListenPort int32 `yaml:"bgp_listen_port"`
	// BGPListenAddrs restricts the addresses GoBGP listens on (every
	// address by default).
	BGPListenAddrs []string `yaml:"bgp_listen_addresses"`
	// Neighbors are the BGP neighbours.
	Neighbors []NeighborConfig `yaml:"neighbors"`
	// BGPMultipath turns on BGP multipath, ECMP (false by default): for
	// every prefix the CE then learns all the equal-cost paths GoBGP selects
	// (all from eBGP or all from iBGP neighbours, with the same LOCAL_PREF,
	// AS_PATH length, ORIGIN and MED; their ASes may differ) and forwards
	// over all their next hops.
	BGPMultipath bool `yaml:"bgp_multipath"`
	// BGPNetworks are prefixes the router itself announces over BGP (a
	// customer LAN, the operator's aggregate), IPv4 or IPv6, host bits
	// clear: unconditionally, to every neighbour whose export policy lets
	// them through, with the session's local address as the next hop.
	// They install nothing in the FIB: route them with static_routes.
	BGPNetworks []string `yaml:"bgp_networks"`
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
	// FEHoldTime is how long the CE keeps the connected prefixes of an FE
	// whose association ended (30s by default). Routes whose next hops
	// resolve through that FE's ports stay in the FIB meanwhile, so an FE
	// that restarts comes back to the table it left: no withdrawal and
	// reinstallation of every route, in the CE and to API watchers.
	// An FE that does not come back in time has its prefixes withdrawn and
	// the routes that depended on them with them.
	FEHoldTime time.Duration `yaml:"fe_hold_time"`
	// ClusterFEHoldTime replaces fe_hold_time for an FE that declared
	// inter-FE links (one FE of a router made of several) and ends its
	// association while other FEs remain associated (0 by default: its
	// connected prefixes are withdrawn at once). The others cannot reach
	// its ports without it, so holding its prefixes would only black-hole
	// the routes through them; withdrawn, those routes become unresolved
	// and BGP's other paths, if any, take over. A lone FE keeps
	// fe_hold_time.
	ClusterFEHoldTime time.Duration `yaml:"cluster_fe_hold_time"`
	// GracefulRestartFEWait bounds how long the CE, when a neighbour has
	// graceful_restart on, waits at start for FEs to associate before it
	// adds its BGP neighbours (10s by default: an FE retries at most 5s
	// apart). It then claims its forwarding state preserved (the Restart
	// and Forwarding State bits of RFC 4724) only if at least one FE
	// associated and every FE that did kept the FIB of before the CE's
	// restart. The wait ends as soon as every FE of forces_allowed_fes (when
	// it names at most 256 IDs; otherwise any one FE) has associated, or an
	// FE reports an empty FIB. Without graceful_restart there is no wait.
	GracefulRestartFEWait time.Duration `yaml:"graceful_restart_fe_wait"`
	// TLS, if set, requires mutual TLS on both ForCES channels: this CE's
	// certificate and key, and the CA that FE certificates must chain to.
	// An FE's certificate must also name its FE ID, as the DNS name fe-N
	// or fe-N.DOMAIN (docs/security.md).
	TLS *forces.TLSConfig `yaml:"tls"`
	// ForCESAllowedFEs lists the FE IDs that may associate: numbers and
	// inclusive ranges "A-B", e.g. [1, 2, "10-20"]. Empty: any FE ID from 1
	// to 0x3FFFFFFF. FE ID 0 is never admitted.
	ForCESAllowedFEs []string `yaml:"forces_allowed_fes"`
	// ForCESAcceptUnauthenticatedFEs lets the CE accept FEs without tls on
	// addresses other than loopback: anyone who reaches forces_listen can
	// then associate as an FE. Without tls and without it, forces_listen
	// and forces_listen_low must be loopback addresses.
	ForCESAcceptUnauthenticatedFEs bool      `yaml:"forces_accept_unauthenticated_fes"`
	allowedFEs                     []feRange // ForCESAllowedFEs, parsed by Validate

	// ForCESPcap, if set, records every ForCES message sent and received in
	// this pcap file, whole, as synthetic TCP streams (decode with: tshark -d tcp.port==6700,forces).
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

	// APIListen is where the gRPC API is served: "unix:PATH" (the default,
	// unix:/run/splitplane/ce-api.sock) or "tcp:HOST:PORT", which needs
	// api_tls (mutual TLS), and may add api_token_file (a bearer token);
	// "off" serves none.
	APIListen string `yaml:"api_listen"`
	// APITLS requires mutual TLS on a TCP API: the CE's certificate and key,
	// and the CA client certificates must chain to.
	APITLS *forces.TLSConfig `yaml:"api_tls"`
	// APITokenFile holds the bearer token API clients must send
	// (authorization: Bearer TOKEN): on a unix socket, or on TCP with
	// api_tls (never over plaintext TCP).
	APITokenFile string `yaml:"api_token_file"`
	// APIMaxMessage is the largest API request message in bytes (default
	// 1 MiB, where a batch of 10,000 IPv4 routes takes about 0.4 MiB); a
	// larger one is refused with ResourceExhausted before it is decoded.
	APIMaxMessage int `yaml:"api_max_message_bytes"`
	// APIMaxStreams is how many calls one API connection may have in
	// progress at once (default 64; HTTP/2 concurrent streams).
	APIMaxStreams int `yaml:"api_max_streams"`
	// APIMaxWatches is how many Routes.Watch streams may be open at once
	// (default 64); another is refused with ResourceExhausted.
	APIMaxWatches int `yaml:"api_max_watches"`
	// APIMaxSnapshots is how many Routes.List calls and Watch(current)
	// snapshots, which copy (part of) the RIB or FIB, may be in progress at
	// once (default 4); another is refused with ResourceExhausted.
	APIMaxSnapshots int `yaml:"api_max_snapshots"`
	// APIAllowMartians lets the API program routes for special-purpose
	// prefixes that are never routed (loopback, link-local, multicast, ...:
	// docs/api.md), refused with InvalidArgument by default.
	APIAllowMartians bool `yaml:"api_allow_martians"`
	// APIRoutesFile, if set, keeps the API's routes on disk as well as in
	// memory: rewritten (atomically) a second after they change (for big
	// tables, no sooner than five times what the last save cost: ~5 s at a
	// million routes), on a clean stop, and read back when the CE starts,
	// before any FE is synced, so a CE restart neither loses them nor takes
	// them out of the FEs (a crash loses the changes since the last save).
	// A failed save is retried (backoff from 0.5 s to 30 s, and once more
	// at a clean stop; splitplane_api_routes_save_failing). A file the CE
	// cannot restore (corrupt, or routes the FIB cannot take) is renamed
	// FILE.corrupt-TIME, named in the error log, and the CE starts without
	// the API's routes (splitplane_api_routes_restore_failed 1).
	// Without it the API's routes end with the CE and clients replay them
	// (docs/operations.md). Its directory must exist. Text, one route a
	// line.
	APIRoutesFile string `yaml:"api_routes_file"`
	// BGPAPIListen, if set, serves GoBGP's own gRPC API there (TCP
	// HOST:PORT, for the standard gobgp CLI); it has no authentication, so
	// keep it on loopback.
	BGPAPIListen string `yaml:"bgp_api_listen"`
	// MetricsListen, if set, serves Prometheus metrics at
	// http://ADDRESS/metrics (TCP HOST:PORT).
	MetricsListen string `yaml:"metrics_listen"`
}

// StaticRoute is a configured route: a prefix and one or more next hops
// (two or more make an ECMP route). Next hops are resolved like BGP's,
// through connected and other static routes. With Connected instead of next
// hops, the prefix is a subnet the FEs reach directly (as their ports'
// subnets, which they report themselves): next hops in it resolve to
// themselves; it is not installed as a route.
type StaticRoute struct {
	// Prefix is the destination, IPv4 or IPv6 ("192.0.2.0/24"); each
	// prefix at most once among the static routes.
	Prefix string `yaml:"prefix"`
	// NextHops are 1 to 16 addresses of the prefix's family (two or more:
	// ECMP), resolved recursively to directly connected ones.
	NextHops []string `yaml:"next_hops"`
	// Connected marks the prefix as a subnet the FEs reach directly,
	// instead of next_hops: next hops inside it resolve to themselves.
	Connected bool `yaml:"connected"`
	// Distance overrides the static distance for this route (0: default).
	Distance uint8 `yaml:"distance"`
}

// Distances are administrative distances: for a prefix known from several
// sources, the lowest distance wins. Zero values take the defaults
// (connected 0, static 1, api 5, ebgp 20, ibgp 200), as common routers
// number them.
type Distances struct {
	// Static is the distance of static_routes (1 by default).
	Static uint8 `yaml:"static"`
	// API is the distance of routes added through the gRPC API (5 by
	// default); a route can override it with its own.
	API uint8 `yaml:"api"`
	// EBGP is the distance of routes learned from eBGP neighbours (20 by
	// default).
	EBGP uint8 `yaml:"ebgp"`
	// IBGP is the distance of routes learned from iBGP neighbours (200 by
	// default).
	IBGP uint8 `yaml:"ibgp"`
}

// NeighborConfig is one BGP neighbour.
type NeighborConfig struct {
	// Address is the neighbour's IPv4 or IPv6 address (required).
	Address string `yaml:"address"`
	// ASN is the neighbour's autonomous system number; the session is
	// iBGP when it is the CE's own asn, eBGP otherwise.
	ASN uint32 `yaml:"asn"`
	// Port is the neighbour's TCP port (179 by default).
	Port uint32 `yaml:"port"`
	// Passive makes the CE wait for the neighbour to connect instead of
	// connecting itself.
	Passive bool `yaml:"passive"`
	// HoldTime is the hold time the CE proposes in its OPEN (90s by
	// default; whole seconds): the session drops when nothing arrives for
	// that long.
	HoldTime time.Duration `yaml:"hold_time"`
	// Keepalive is the interval between KEEPALIVEs (a third of hold_time
	// by default, 30s with the default hold time); it must be less than
	// hold_time.
	Keepalive time.Duration `yaml:"keepalive"`
	// ConnectRetry is how long the CE waits between attempts to connect
	// (5s by default).
	ConnectRetry time.Duration `yaml:"connect_retry"`
	// Families restricts the address families of the session: ipv4, ipv6
	// (both by default). The session is iBGP when asn is the CE's own.
	Families []string `yaml:"families"`
	// LocalAddress is the session's source address (the kernel's choice by
	// default); the neighbour must expect that address.
	LocalAddress string `yaml:"local_address"`
	// EBGPMultihopTTL lets an eBGP neighbour be this many hops away (1 to
	// 255; 0, the default, sends with TTL 1, for an adjacent neighbour).
	EBGPMultihopTTL int `yaml:"ebgp_multihop_ttl"`
	// Password signs every TCP segment of the session with this key (TCP
	// MD5, RFC 2385; at most 80 bytes); the neighbour needs the same.
	Password string `yaml:"password"`
	// PasswordFile reads the password from this file instead (its first
	// line, surrounding blanks removed), so that the configuration can be
	// shared and the key kept apart, e.g. in a Kubernetes Secret. Read at
	// start and at every reload (SIGHUP), so a changed key applies with a
	// reload. Not with password.
	PasswordFile string `yaml:"password_file"`
	// TTLSecurity turns on GTSM (RFC 5082) for an adjacent neighbour: the
	// CE sends with TTL 255 and drops segments arriving with less, so
	// nothing farther than one hop can reach the session. Not with
	// ebgp_multihop_ttl.
	TTLSecurity bool `yaml:"ttl_security"`
	// Import filters the routes learned from the neighbour. Without one an
	// eBGP neighbour's routes are all rejected (RFC 8212; a warning says
	// so at start and in 'splitplane bgp neighbors'), and an iBGP
	// neighbour's all accepted: write {default: accept} to accept every
	// route from an eBGP neighbour.
	Import *BGPPolicyConfig `yaml:"import"`
	// Export filters the routes the CE advertises to the neighbour.
	// Without one nothing is advertised to an eBGP neighbour (RFC 8212)
	// and everything to an iBGP one: write {default: accept} to advertise
	// every route to an eBGP neighbour.
	Export *BGPPolicyConfig `yaml:"export"`
	// MaxPrefixes bounds the prefixes the neighbour may announce, in each
	// address family, counted before import filtering.
	MaxPrefixes *MaxPrefixesConfig `yaml:"max_prefixes"`
	// GracefulRestart turns on graceful restart (RFC 4724) with the
	// neighbour, both ways: the CE keeps the neighbour's routes while it
	// restarts, and when the CE stops (without a NOTIFICATION) the
	// neighbour keeps the CE's while it is away, as the FEs keep
	// forwarding. The CE comes back with the Restart and Forwarding State
	// bits only when the FEs that associated within
	// graceful_restart_fe_wait all kept their FIB; otherwise without them,
	// and the neighbour drops the routes it kept as soon as the session is
	// up again and takes the CE's anew.
	GracefulRestart *GracefulRestartConfig `yaml:"graceful_restart"`
	// BFD runs a single-hop BFD session (RFC 5880/5881, UDP port 3784)
	// beside the BGP session; when BFD goes down, the BGP session is reset
	// at once instead of after the hold time. A neighbour without BFD
	// simply never brings the BFD session up, which changes nothing.
	BFD *BFDConfig `yaml:"bfd"`
}

// BGPPolicyConfig is an import or export policy: an ordered prefix list,
// whose first matching entry decides, and the action for a route no entry
// matches.
type BGPPolicyConfig struct {
	// PrefixList is the ordered list of entries; the first one that
	// matches a route decides.
	PrefixList []PrefixListEntry `yaml:"prefix_list"`
	// Default is accept or reject (the default, as the implicit last entry
	// of a router's prefix list).
	Default string `yaml:"default"`
}

// PrefixListEntry matches the routes inside Prefix whose length is between
// GE and LE: {prefix: 10.0.0.0/8, le: 24} matches 10.0.0.0/8 and every
// more specific route in it up to /24. Without ge and le it matches the
// prefix only; ge defaults to the prefix's length, le to ge, or to 32 (IPv6:
// 128) when only ge is given.
type PrefixListEntry struct {
	// Prefix is the covering prefix, without host bits ("10.0.0.0/8").
	Prefix string `yaml:"prefix"`
	// GE is the shortest prefix length matched (the prefix's own length
	// by default).
	GE int `yaml:"ge"`
	// LE is the longest prefix length matched (ge by default, or 32 for
	// IPv4 and 128 for IPv6 when only ge is given).
	LE int `yaml:"le"`
	// Action is accept (the default) or reject.
	Action string `yaml:"action"`
}

// MaxPrefixesConfig is a neighbour's prefix limit.
type MaxPrefixesConfig struct {
	// Limit is the largest number of prefixes allowed per address family.
	Limit uint32 `yaml:"limit"`
	// Action is stop (the default: the session is closed with a Cease
	// NOTIFICATION and stays down until reset with 'splitplane bgp reset',
	// the restart interval passes or the CE restarts) or warn (a warning
	// is logged each time the count goes above the limit).
	Action string `yaml:"action"`
	// Restart, with action stop, brings the session back after this long
	// (as FRR's "restart"; at least 1s); unset, it stays down until reset.
	Restart time.Duration `yaml:"restart"`
}

// GracefulRestartConfig configures graceful restart with a neighbour.
type GracefulRestartConfig struct {
	// Enabled turns graceful restart on for the neighbour.
	Enabled bool `yaml:"enabled"`
	// RestartTime is how long the neighbour keeps the CE's routes while
	// the CE restarts (the hold time by default; at most 4095s).
	RestartTime time.Duration `yaml:"restart_time"`
}

// BFDConfig configures BFD with a neighbour.
type BFDConfig struct {
	// Enabled turns BFD on for the neighbour.
	Enabled bool `yaml:"enabled"`
	// Interval is the transmit and receive interval (1s by default).
	Interval time.Duration `yaml:"interval"`
	// Multiplier is how many missed intervals bring BFD down (3 by default).
	Multiplier int `yaml:"multiplier"`
}

// DefaultForCESListen is where the CE accepts FEs unless configured otherwise
// (6700 is the ForCES TML's registered high-priority port).
const DefaultForCESListen = "127.0.0.1:6700"

// DefaultGracefulRestartFEWait is graceful_restart_fe_wait unless configured.
const DefaultGracefulRestartFEWait = 10 * time.Second

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
	if c.FEHoldTime == 0 {
		c.FEHoldTime = 30 * time.Second
	}
	if c.FEHoldTime < 0 {
		return fmt.Errorf("%w: fe_hold_time %s: must not be negative", ErrConfig, c.FEHoldTime)
	}
	if c.ClusterFEHoldTime < 0 {
		return fmt.Errorf("%w: cluster_fe_hold_time %s: must not be negative", ErrConfig, c.ClusterFEHoldTime)
	}
	if c.GracefulRestartFEWait == 0 {
		c.GracefulRestartFEWait = DefaultGracefulRestartFEWait
	}
	if c.GracefulRestartFEWait < 0 {
		return fmt.Errorf("%w: graceful_restart_fe_wait %s: must not be negative", ErrConfig, c.GracefulRestartFEWait)
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
	} else if !c.ForCESAcceptUnauthenticatedFEs {
		for _, l := range [...][2]string{{"forces_listen", c.ForCESListen}, {"forces_listen_low", c.ForCESListenLow}} {
			if !loopbackListen(l[1]) {
				return fmt.Errorf("%w: %s %q: without tls (mutual TLS) FEs are accepted on loopback addresses only; set tls, or forces_accept_unauthenticated_fes: true to accept unauthenticated FEs there", ErrConfig, l[0], l[1])
			}
		}
	}
	allowed, err := parseAllowedFEs(c.ForCESAllowedFEs)
	if err != nil {
		return fmt.Errorf("%w: forces_allowed_fes: %v", ErrConfig, err)
	}
	c.allowedFEs = allowed
	if err := c.validateStatics(); err != nil {
		return err
	}
	if err := c.validateAPI(); err != nil {
		return err
	}
	if len(c.ControlCores) > 0 {
		if _, err := checkCores(c.ControlCores); err != nil {
			return fmt.Errorf("%w: control_cores %v: %w", ErrConfig, c.ControlCores, err)
		}
	}
	if c.MetricsListen != "" {
		if err := metrics.CheckListen(c.MetricsListen); err != nil {
			return fmt.Errorf("%w: metrics_listen %q: %v", ErrConfig, c.MetricsListen, err)
		}
	}
	_, err = c.bgpConfig()
	return err
}

// DefaultAPIListen is where the CE serves the gRPC API unless configured
// otherwise: a unix socket, so only local users with access to it can
// program routes.
const DefaultAPIListen = "unix:/run/splitplane/ce-api.sock"

// Defaults of the API's limits (api_max_*).
const (
	DefaultAPIMaxMessage   = 1 << 20
	DefaultAPIMaxStreams   = 64
	DefaultAPIMaxWatches   = 64
	DefaultAPIMaxSnapshots = 4
)

// validateAPI checks api_listen, api_tls, api_token_file, the api_max_*
// limits and bgp_api_listen, filling in defaults: a TCP API needs mutual
// TLS, since anyone who can reach it can program routes (and a bearer
// token sent over plaintext TCP is anyone's who can see the wire).
func (c *Config) validateAPI() error {
	if c.APIListen == "" {
		c.APIListen = DefaultAPIListen
	}
	for _, l := range []struct {
		key      string
		v        *int
		def, max int
	}{
		{"api_max_message_bytes", &c.APIMaxMessage, DefaultAPIMaxMessage, 64 << 20},
		{"api_max_streams", &c.APIMaxStreams, DefaultAPIMaxStreams, 1 << 16},
		{"api_max_watches", &c.APIMaxWatches, DefaultAPIMaxWatches, 1 << 16},
		{"api_max_snapshots", &c.APIMaxSnapshots, DefaultAPIMaxSnapshots, 1 << 10},
	} {
		switch {
		case *l.v == 0:
			*l.v = l.def
		case *l.v < 0 || *l.v > l.max:
			return fmt.Errorf("%w: %s %d: want 1 to %d (0: %d)", ErrConfig, l.key, *l.v, l.max, l.def)
		}
	}
	if c.APITLS != nil {
		if _, err := c.APITLS.ServerTLS(); err != nil {
			return fmt.Errorf("%w: api_tls: %w", ErrConfig, err)
		}
	}
	if c.APITokenFile != "" {
		if _, err := ReadAPIToken(c.APITokenFile); err != nil {
			return fmt.Errorf("%w: api_token_file %q: %w", ErrConfig, c.APITokenFile, err)
		}
	}
	network, addr, ok := strings.Cut(c.APIListen, ":")
	switch {
	case c.APIListen == "off":
	case ok && network == "unix":
		if addr == "" {
			return fmt.Errorf("%w: api_listen %q: want unix:PATH with a path", ErrConfig, c.APIListen)
		}
	case ok && network == "tcp":
		if err := checkHostPort(addr); err != nil {
			return fmt.Errorf("%w: api_listen %q: %v", ErrConfig, c.APIListen, err)
		}
		if c.APITLS == nil && c.APITokenFile != "" {
			return fmt.Errorf("%w: api_listen %q with api_token_file %q: a bearer token over plaintext TCP is refused; set api_tls (mutual TLS), or serve the API on a unix socket", ErrConfig, c.APIListen, c.APITokenFile)
		}
		if c.APITLS == nil {
			return fmt.Errorf("%w: api_listen %q: a TCP API needs api_tls (mutual TLS)", ErrConfig, c.APIListen)
		}
	default:
		return fmt.Errorf("%w: api_listen %q: want unix:PATH, tcp:HOST:PORT or off", ErrConfig, c.APIListen)
	}
	if c.BGPAPIListen != "" {
		if err := checkHostPort(c.BGPAPIListen); err != nil {
			return fmt.Errorf("%w: bgp_api_listen %q: %v", ErrConfig, c.BGPAPIListen, err)
		}
	}
	return nil
}

// checkHostPort checks a TCP listening address, HOST:PORT with a port
// from 1 to 65535 (HOST may be empty: every address).
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %v", err)
	}
	if strings.ContainsAny(host, ",/") {
		return fmt.Errorf("host %q: want an address or a name", host)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return nil
}

// ReadAPIToken reads the API's bearer token from a file: its content
// without surrounding white space, which must not be empty.
func ReadAPIToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("the file holds no token")
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", errors.New("the token holds white space")
	}
	return tok, nil
}

// validateStatics checks the static routes: a prefix, 1 to 16 next hops of
// its family, each prefix once.
func (c *Config) validateStatics() error {
	seen := map[netip.Prefix]int{}
	for i, r := range c.StaticRoutes {
		p, err := netip.ParsePrefix(r.Prefix)
		if err != nil {
			return fmt.Errorf("%w: static_routes[%d].prefix %q: %v", ErrConfig, i, r.Prefix, err)
		}
		if j, dup := seen[p.Masked()]; dup {
			return fmt.Errorf("%w: static_routes[%d].prefix %q: the same prefix as static_routes[%d]", ErrConfig, i, r.Prefix, j)
		}
		seen[p.Masked()] = i
		if r.Connected {
			if len(r.NextHops) > 0 || r.Distance != 0 {
				return fmt.Errorf("%w: static_routes[%d]: a connected prefix has no next_hops or distance", ErrConfig, i)
			}
			continue
		}
		if len(r.NextHops) == 0 || len(r.NextHops) > forces.MaxECMPMembers {
			return fmt.Errorf("%w: static_routes[%d].next_hops: %d next hops, want 1 to %d", ErrConfig, i, len(r.NextHops), forces.MaxECMPMembers)
		}
		for j, h := range r.NextHops {
			a, err := netip.ParseAddr(h)
			if err != nil {
				return fmt.Errorf("%w: static_routes[%d].next_hops[%d] %q: not an IP address", ErrConfig, i, j, h)
			}
			if !sameFamily(p, a) || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
				return fmt.Errorf("%w: static_routes[%d].next_hops[%d] %q: not a usable next hop for %s", ErrConfig, i, j, h, p)
			}
		}
	}
	return nil
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
	for i, n := range c.BGPNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return bgp.Config{}, fmt.Errorf("%w: bgp_networks[%d] %q: not a prefix", ErrConfig, i, n)
		}
		bc.Networks = append(bc.Networks, p)
	}
	for i, n := range c.Neighbors {
		bn, err := n.bgpNeighbor(i)
		if err != nil {
			return bgp.Config{}, err
		}
		bc.Neighbors = append(bc.Neighbors, bn)
	}
	if err := bc.Validate(); err != nil {
		return bgp.Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return bc, nil
}

// bgpNeighbor converts neighbors[i], checking what the YAML types cannot
// (bgp.Config.Validate checks the rest); errors name the field and value.
func (n *NeighborConfig) bgpNeighbor(i int) (bgp.Neighbor, error) {
	bad := func(field string, value any, why string) error {
		return fmt.Errorf("%w: neighbors[%d].%s %v: %s", ErrConfig, i, field, value, why)
	}
	a, err := netip.ParseAddr(n.Address)
	if err != nil {
		return bgp.Neighbor{}, bad("address", fmt.Sprintf("%q", n.Address), "not an IP address")
	}
	bn := bgp.Neighbor{
		Address: a, ASN: n.ASN, Port: n.Port, Passive: n.Passive,
		HoldTime: n.HoldTime, Keepalive: n.Keepalive, ConnectRetry: n.ConnectRetry,
		Password: n.Password, TTLSecurity: n.TTLSecurity,
	}
	if n.PasswordFile != "" {
		if n.Password != "" {
			return bgp.Neighbor{}, bad("password_file", fmt.Sprintf("%q", n.PasswordFile), "and password: set one of them")
		}
		b, err := os.ReadFile(n.PasswordFile)
		if err != nil {
			return bgp.Neighbor{}, bad("password_file", fmt.Sprintf("%q", n.PasswordFile), err.Error())
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if bn.Password = strings.TrimSpace(line); bn.Password == "" {
			return bgp.Neighbor{}, bad("password_file", fmt.Sprintf("%q", n.PasswordFile), "the file holds no password")
		}
	}
	seen := map[bgp.Family]bool{}
	for j, f := range n.Families {
		fam := map[string]bgp.Family{"ipv4": bgp.IPv4, "ipv6": bgp.IPv6}[f]
		if fam == 0 || seen[fam] {
			return bgp.Neighbor{}, bad(fmt.Sprintf("families[%d]", j), fmt.Sprintf("%q", f), "want ipv4 or ipv6, each once")
		}
		seen[fam] = true
		bn.Families = append(bn.Families, fam)
	}
	if n.LocalAddress != "" {
		if bn.LocalAddress, err = netip.ParseAddr(n.LocalAddress); err != nil {
			return bgp.Neighbor{}, bad("local_address", fmt.Sprintf("%q", n.LocalAddress), "not an IP address")
		}
	}
	if n.EBGPMultihopTTL < 0 || n.EBGPMultihopTTL > 255 {
		return bgp.Neighbor{}, bad("ebgp_multihop_ttl", n.EBGPMultihopTTL, "want 1 to 255 (0: adjacent neighbour)")
	}
	bn.EBGPMultihopTTL = uint8(n.EBGPMultihopTTL)
	for _, d := range []struct {
		name string
		in   *BGPPolicyConfig
		out  **bgp.Policy
	}{{"import", n.Import, &bn.Import}, {"export", n.Export, &bn.Export}} {
		if d.in == nil {
			continue
		}
		p := &bgp.Policy{}
		var ok bool
		if p.Default, ok = policyAction(d.in.Default, bgp.Reject); !ok {
			return bgp.Neighbor{}, bad(d.name+".default", fmt.Sprintf("%q", d.in.Default), "want accept or reject")
		}
		for j, e := range d.in.PrefixList {
			field := fmt.Sprintf("%s.prefix_list[%d]", d.name, j)
			pfx, err := netip.ParsePrefix(e.Prefix)
			if err != nil || pfx.Masked() != pfx {
				return bgp.Neighbor{}, bad(field+".prefix", fmt.Sprintf("%q", e.Prefix), "want a prefix without host bits, such as 10.0.0.0/8")
			}
			act, ok := policyAction(e.Action, bgp.Accept)
			if !ok {
				return bgp.Neighbor{}, bad(field+".action", fmt.Sprintf("%q", e.Action), "want accept or reject")
			}
			bits := pfx.Addr().BitLen()
			ge, le := e.GE, e.LE
			if ge != 0 && le == 0 {
				le = bits
			}
			if ge != 0 && (ge < pfx.Bits() || ge > bits) {
				return bgp.Neighbor{}, bad(field+".ge", ge, fmt.Sprintf("want %d to %d for %s", pfx.Bits(), bits, pfx))
			}
			if le != 0 && (le < max(ge, pfx.Bits()) || le > bits) {
				return bgp.Neighbor{}, bad(field+".le", le, fmt.Sprintf("want %d to %d for %s", max(ge, pfx.Bits()), bits, pfx))
			}
			p.Rules = append(p.Rules, bgp.PrefixRule{Prefix: pfx, GE: uint8(ge), LE: uint8(le), Action: act})
		}
		*d.out = p
	}
	if m := n.MaxPrefixes; m != nil {
		act := map[string]bgp.MaxPrefixAction{"": bgp.Stop, "stop": bgp.Stop, "warn": bgp.Warn}
		a, ok := act[m.Action]
		if !ok {
			return bgp.Neighbor{}, bad("max_prefixes.action", fmt.Sprintf("%q", m.Action), "want stop or warn")
		}
		if m.Limit == 0 {
			return bgp.Neighbor{}, bad("max_prefixes.limit", m.Limit, "must be at least 1")
		}
		if m.Restart != 0 && (m.Restart < time.Second || a != bgp.Stop) {
			return bgp.Neighbor{}, bad("max_prefixes.restart", m.Restart, "want at least 1s, with action stop (unset: down until reset)")
		}
		bn.MaxPrefixes = &bgp.MaxPrefixes{Limit: m.Limit, Action: a, Restart: m.Restart}
	}
	if g := n.GracefulRestart; g != nil && g.Enabled {
		if g.RestartTime < 0 || g.RestartTime > 4095*time.Second || g.RestartTime%time.Second != 0 {
			return bgp.Neighbor{}, bad("graceful_restart.restart_time", g.RestartTime, "want whole seconds, 0s (the hold time) to 4095s")
		}
		bn.GracefulRestart = &bgp.GracefulRestart{RestartTime: g.RestartTime}
	}
	if b := n.BFD; b != nil && b.Enabled {
		if b.Interval != 0 && (b.Interval < 10*time.Millisecond || b.Interval > time.Minute) {
			return bgp.Neighbor{}, bad("bfd.interval", b.Interval, "want 10ms to 1m")
		}
		if b.Multiplier < 0 || b.Multiplier > 255 {
			return bgp.Neighbor{}, bad("bfd.multiplier", b.Multiplier, "want 1 to 255 (0: 3)")
		}
		bn.BFD = &bgp.BFD{Interval: b.Interval, Multiplier: uint8(b.Multiplier)}
	}
	return bn, nil
}

// policyAction parses accept or reject, "" as def.
func policyAction(s string, def bgp.Action) (bgp.Action, bool) {
	switch s {
	case "":
		return def, true
	case "accept":
		return bgp.Accept, true
	case "reject":
		return bgp.Reject, true
	}
	return 0, false
}
