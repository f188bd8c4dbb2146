package bgp

import (
	"fmt"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// Neighbor is one configured BGP neighbour. The session is iBGP when ASN
// equals Config.ASN, eBGP otherwise.
type Neighbor struct {
	Address      netip.Addr
	ASN          uint32
	Port         uint32 // 0 means 179
	Passive      bool
	HoldTime     time.Duration
	Keepalive    time.Duration
	ConnectRetry time.Duration

	// Families are the address families offered to the neighbour; empty
	// means both IPv4 and IPv6 unicast.
	Families []Family
	// LocalAddress is the source address of the session (zero: the
	// kernel's choice).
	LocalAddress netip.Addr
	// EBGPMultihopTTL, if not 0, is the TTL of an eBGP session's packets
	// (1, a directly connected neighbour, otherwise).
	EBGPMultihopTTL uint8
	// Password turns on TCP MD5 signatures (RFC 2385) with this key.
	Password string
	// TTLSecurity turns on GTSM (RFC 5082) for a directly connected
	// neighbour: packets are sent with TTL 255 and only received with 255.
	TTLSecurity bool
	// Import filters the routes learned from the neighbour, Export those
	// advertised to it. nil accepts all for an iBGP neighbour and nothing
	// for an eBGP one (RFC 8212).
	Import, Export *Policy
	// MaxPrefixes bounds the prefixes the neighbour may announce per
	// address family; nil means no bound.
	MaxPrefixes *MaxPrefixes
	// GracefulRestart, if set, turns on graceful restart (RFC 4724) with
	// this neighbour, as helper and as restarting speaker.
	GracefulRestart *GracefulRestart
	// BFD, if set, runs a single-hop BFD session (RFC 5880, 5881) with the
	// neighbour; its failure resets the BGP session.
	BFD *BFD
}

// Family is a BGP address family the speaker handles.
type Family uint8

// The unicast families.
const (
	IPv4 Family = iota + 1
	IPv6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

func (f Family) api() *api.Family {
	if f == IPv6 {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

// Action is what a policy does with a route.
type Action uint8

// Policy actions. The zero Action rejects, as the implicit last entry of a
// router's prefix list does.
const (
	Reject Action = iota
	Accept
)

func (a Action) String() string {
	if a == Accept {
		return "accept"
	}
	return "reject"
}

// Policy is an ordered prefix list: the first rule matching a route decides;
// a route no rule matches gets Default.
type Policy struct {
	Rules   []PrefixRule
	Default Action
}

// PrefixRule matches the routes inside Prefix whose length is in GE..LE.
// GE 0 means Prefix's length, LE 0 means GE (only that length): Prefix
// 10.0.0.0/8 with LE 24 matches 10.0.0.0/8 and everything in it up to /24.
type PrefixRule struct {
	Prefix netip.Prefix
	GE, LE uint8
	Action Action
}

// lengths returns the rule's length range with the defaults filled in.
func (r PrefixRule) lengths() (ge, le uint8) {
	ge, le = r.GE, r.LE
	if ge == 0 {
		ge = uint8(r.Prefix.Bits())
	}
	if le == 0 {
		le = ge
	}
	return ge, le
}

// MaxPrefixAction is what happens when a neighbour exceeds MaxPrefixes.
type MaxPrefixAction uint8

// Max-prefix actions.
const (
	// Stop closes the session with a Cease NOTIFICATION (maximum number of
	// prefixes reached, RFC 4486) and keeps it down until an operator
	// resets it (Speaker.ResetNeighbor), MaxPrefixes.Restart passes or the
	// speaker restarts.
	Stop MaxPrefixAction = iota
	// Warn logs a warning, once each time the count goes above the limit.
	Warn
)

func (a MaxPrefixAction) String() string {
	if a == Warn {
		return "warn"
	}
	return "stop"
}

// MaxPrefixes bounds the prefixes a neighbour announces, counted per address
// family before import policy, as GoBGP's Adj-RIB-In holds them.
type MaxPrefixes struct {
	Limit  uint32
	Action MaxPrefixAction
	// Restart, with action Stop, brings a stopped session back after this
	// long (as FRR's "restart"); 0 keeps it down until a reset.
	Restart time.Duration
}

// GracefulRestart configures graceful restart (RFC 4724) with a neighbour.
type GracefulRestart struct {
	// RestartTime is how long the neighbour should keep this speaker's
	// routes while it restarts, and the longest this speaker keeps the
	// neighbour's when it has not said otherwise (0: the hold time).
	RestartTime time.Duration
}

// BFD configures a BFD session with a neighbour.
type BFD struct {
	// Interval is the desired transmit and required receive interval (0:
	// GoBGP's default, 1s).
	Interval time.Duration
	// Multiplier is how many intervals without a packet bring the session
	// down (0: 3).
	Multiplier uint8
}

// validate checks one neighbour; i is its index in Config.Neighbors, named
// in errors as the config file names it.
func (n *Neighbor) validate(i int) error {
	field := func(name string) string { return fmt.Sprintf("neighbors[%d].%s", i, name) }
	if !n.Address.IsValid() {
		return fmt.Errorf("%w: %s: must be an IP address", ErrConfig, field("address"))
	}
	if n.ASN == 0 {
		return fmt.Errorf("%w: %s: must be set for neighbour %s", ErrConfig, field("asn"), n.Address)
	}
	for j, f := range n.Families {
		if f != IPv4 && f != IPv6 {
			return fmt.Errorf("%w: %s %s: want ipv4 or ipv6", ErrConfig, field(fmt.Sprintf("families[%d]", j)), f)
		}
	}
	if n.LocalAddress.IsValid() && n.LocalAddress.Is4() != n.Address.Is4() {
		return fmt.Errorf("%w: %s %s: not of the same family as address %s", ErrConfig, field("local_address"), n.LocalAddress, n.Address)
	}
	if len(n.Password) > 80 {
		// TCP_MD5SIG_MAXKEYLEN
		return fmt.Errorf("%w: %s: %d bytes, at most 80", ErrConfig, field("password"), len(n.Password))
	}
	if n.HoldTime < 0 || n.Keepalive < 0 {
		return fmt.Errorf("%w: %s %s, %s %s: must not be negative", ErrConfig, field("hold_time"), n.HoldTime, field("keepalive"), n.Keepalive)
	}
	if hold, ka := n.timers(); n.Keepalive > 0 && ka >= hold {
		// The neighbour would drop the session before the next KEEPALIVE.
		return fmt.Errorf("%w: %s %s: must be less than %s %s (a third of it is usual; unset, it is)",
			ErrConfig, field("keepalive"), n.Keepalive, field("hold_time"), time.Duration(hold)*time.Second)
	}
	if n.TTLSecurity && n.EBGPMultihopTTL != 0 {
		// GoBGP refuses both: with GTSM the neighbour must be adjacent.
		return fmt.Errorf("%w: %s: cannot be combined with ebgp_multihop_ttl %d", ErrConfig, field("ttl_security"), n.EBGPMultihopTTL)
	}
	for name, p := range map[string]*Policy{"import": n.Import, "export": n.Export} {
		if p == nil {
			continue
		}
		for j, r := range p.Rules {
			f := field(fmt.Sprintf("%s.prefix_list[%d]", name, j))
			if !r.Prefix.IsValid() || r.Prefix.Masked() != r.Prefix {
				return fmt.Errorf("%w: %s.prefix %s: must be a prefix without host bits", ErrConfig, f, r.Prefix)
			}
			ge, le := r.lengths()
			if maxBits := uint8(r.Prefix.Addr().BitLen()); ge < uint8(r.Prefix.Bits()) || le < ge || le > maxBits {
				return fmt.Errorf("%w: %s: ge %d, le %d: want %d <= ge <= le <= %d", ErrConfig, f, r.GE, r.LE, r.Prefix.Bits(), maxBits)
			}
		}
	}
	if n.MaxPrefixes != nil && n.MaxPrefixes.Limit == 0 {
		return fmt.Errorf("%w: %s: must be at least 1", ErrConfig, field("max_prefixes.limit"))
	}
	if m := n.MaxPrefixes; m != nil && m.Restart != 0 {
		if m.Restart < time.Second {
			return fmt.Errorf("%w: %s %s: must be at least 1s (0: stay down until reset)", ErrConfig, field("max_prefixes.restart"), m.Restart)
		}
		if m.Action != Stop {
			return fmt.Errorf("%w: %s %s: only with action stop, not %s", ErrConfig, field("max_prefixes.restart"), m.Restart, m.Action)
		}
	}
	if gr := n.GracefulRestart; gr != nil && (gr.RestartTime < 0 || gr.RestartTime > 4095*time.Second) {
		// 12 bits in the capability.
		return fmt.Errorf("%w: %s %s: must be 0s to 4095s", ErrConfig, field("graceful_restart.restart_time"), gr.RestartTime)
	}
	if b := n.BFD; b != nil && (b.Interval < 0 || b.Interval > time.Hour) {
		return fmt.Errorf("%w: %s %s: must be 0 to 1h", ErrConfig, field("bfd.interval"), b.Interval)
	}
	return nil
}

// families returns the neighbour's families, both when none is configured.
func (n *Neighbor) families() []Family {
	if len(n.Families) == 0 {
		return []Family{IPv4, IPv6}
	}
	return n.Families
}

// defaultHoldTime is the hold time proposed when none is configured.
const defaultHoldTime = 90 * time.Second

// secs rounds d up to whole seconds, def when d is not positive.
func secs(d, def time.Duration) uint64 {
	if d <= 0 {
		d = def
	}
	return uint64((d + time.Second - 1) / time.Second)
}

// timers returns the hold time and keepalive interval the neighbour's
// session uses, in whole seconds: the keepalive defaults to a third of the
// hold time (RFC 4271 10 suggests that ratio), at least a second, so that a
// neighbour configured with a short hold time alone does not flap.
func (n *Neighbor) timers() (hold, keepalive uint64) {
	hold = secs(n.HoldTime, defaultHoldTime)
	if n.Keepalive > 0 {
		return hold, secs(n.Keepalive, 0)
	}
	return hold, max(hold/3, 1)
}

// peerRequest is GoBGP's configuration of neighbour n; restarting, with
// graceful restart, announces this speaker as restarting with its
// forwarding state preserved.
func peerRequest(n Neighbor, restarting bool) *api.AddPeerRequest {
	hold, keepalive := n.timers()
	p := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: n.Address.String(), PeerAsn: n.ASN, AuthPassword: n.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      secs(n.ConnectRetry, 5*time.Second),
			HoldTime:          hold,
			KeepaliveInterval: keepalive,
		}},
		Transport: &api.Transport{PassiveMode: n.Passive, RemotePort: n.Port},
	}
	if n.LocalAddress.IsValid() {
		p.Transport.LocalAddress = n.LocalAddress.String()
	}
	if n.EBGPMultihopTTL != 0 {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(n.EBGPMultihopTTL)}
	}
	if n.TTLSecurity {
		// GoBGP then sends with TTL 255 and sets IP_MINTTL (IPv6:
		// IPV6_MINHOPCOUNT) to TtlMin on the session's socket.
		p.TtlSecurity = &api.TtlSecurity{Enabled: true, TtlMin: 255}
	}
	if gr := n.GracefulRestart; gr != nil {
		// LocalRestarting puts the Restart State bit in this speaker's
		// OPEN (RFC 4724 4.1), and GoBGP sets the Forwarding State bit
		// of every family with it (it has no separate switch): claimed
		// only when the caller knows the forwarding state was preserved
		// (Config.ForwardingPreserved). GoBGP then also defers its own
		// updates until every graceful-restart neighbour has sent
		// End-of-RIB or DeferralTime has passed. Without it the
		// neighbour drops the routes it kept at once (RFC 4724 4.2),
		// and this speaker still helps the neighbour restart.
		restart := uint32(secs(gr.RestartTime, time.Duration(p.Timers.Config.HoldTime)*time.Second))
		p.GracefulRestart = &api.GracefulRestart{
			Enabled: true, RestartTime: restart, DeferralTime: restart, LocalRestarting: restarting,
		}
	}
	if b := n.BFD; b != nil {
		us := uint32(b.Interval / time.Microsecond)
		p.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			DesiredMinimumTxInterval: us,
			RequiredMinimumReceive:   us,
			DetectionMultiplier:      uint32(b.Multiplier),
		}
	}
	// Capability negotiation leaves out what the neighbour does not offer.
	for _, f := range n.families() {
		af := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f.api(), Enabled: true}}
		if n.GracefulRestart != nil {
			af.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		if m := n.MaxPrefixes; m != nil && m.Action == Stop {
			af.PrefixLimits = &api.PrefixLimit{Family: f.api(), MaxPrefixes: m.Limit}
		}
		p.AfiSafis = append(p.AfiSafis, af)
	}
	return &api.AddPeerRequest{Peer: p}
}
