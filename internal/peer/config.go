package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// ErrInvalidConfig is wrapped by every error Start returns for a bad Config.
var ErrInvalidConfig = errors.New("invalid peer config")

// MaxRoutes bounds Config.Routes; beyond it the embedded GoBGP needs more
// than 10 GB of memory.
const MaxRoutes = 10_000_000

// Default timers, short enough for a lab to notice a dead session quickly.
const (
	DefaultHoldTime     = 9 * time.Second
	DefaultKeepalive    = 3 * time.Second
	DefaultConnectRetry = 1 * time.Second
	DefaultListenPort   = 179
)

// Config describes the speaker and its single neighbour. Zero values of the
// optional fields select the defaults documented on each field.
type Config struct {
	ASN        uint32     // local AS number, required
	RouterID   netip.Addr // BGP identifier, an IPv4 address, required
	ListenPort int32      // TCP port to accept sessions on; 0 = 179, -1 = do not listen
	// ListenAddrs are the addresses to listen on; empty = all (0.0.0.0 and ::).
	ListenAddrs []string
	// LocalAddress is the source address of the session; zero = the kernel's
	// choice. Incoming connections must arrive on this address when set.
	LocalAddress netip.Addr

	Neighbor     netip.Addr // the neighbour's address, required
	NeighborASN  uint32     // the neighbour's AS number, required
	NeighborPort uint32     // the neighbour's TCP port; 0 = 179
	Passive      bool       // only accept the session, never connect

	// Routes prefixes from routegen.Generate(Routes, Seed) are announced with
	// NextHop as the BGP NEXT_HOP, which the neighbour receives unchanged.
	Routes  int
	Seed    int64
	NextHop netip.Addr // IPv4, required; typically a host behind the neighbour's link, not this speaker
	// NextHop6 is the next hop of IPv6 prefixes (in Extra, or announced
	// later), carried in MP_REACH_NLRI; needed only to announce IPv6.
	NextHop6 netip.Addr
	// Extra prefixes are announced besides the generated ones, with the same
	// next hop.
	Extra []netip.Prefix

	HoldTime     time.Duration // 0 = 9s; whole seconds, 0 < HoldTime < 3s is invalid
	Keepalive    time.Duration // 0 = HoldTime/3; whole seconds
	ConnectRetry time.Duration // 0 = 1s; whole seconds
	// GracefulRestart, if not zero, turns on graceful restart (RFC 4724)
	// with this restart time (whole seconds, at most 4095s): the neighbour
	// keeps this speaker's routes while it restarts, and this speaker comes
	// up with the Restart State bit.
	GracefulRestart time.Duration

	Logger *slog.Logger // nil = discard
}

// withDefaults returns a copy of c with the zero optional fields filled in.
func (c Config) withDefaults() Config {
	if c.ListenPort == 0 {
		c.ListenPort = DefaultListenPort
	}
	if c.NeighborPort == 0 {
		c.NeighborPort = 179
	}
	if c.HoldTime == 0 {
		c.HoldTime = DefaultHoldTime
	}
	if c.Keepalive == 0 {
		c.Keepalive = (c.HoldTime / 3).Truncate(time.Second)
	}
	if c.ConnectRetry == 0 {
		c.ConnectRetry = DefaultConnectRetry
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func invalid(field string, value any, why string) error {
	return fmt.Errorf("%w: %s %v: %s", ErrInvalidConfig, field, value, why)
}

// validate checks a Config that already has its defaults applied.
func (c Config) validate() error {
	if c.ASN == 0 {
		return invalid("ASN", c.ASN, "must not be 0")
	}
	if !c.RouterID.Is4() || c.RouterID.IsUnspecified() {
		return invalid("RouterID", c.RouterID, "must be a non-zero IPv4 address")
	}
	if c.ListenPort != -1 && (c.ListenPort < 1 || c.ListenPort > 65535) {
		return invalid("ListenPort", c.ListenPort, "must be -1 (do not listen), 0 (179) or 1..65535")
	}
	for _, a := range c.ListenAddrs {
		// GoBGP parses these with netip.MustParseAddr, which panics.
		if _, err := netip.ParseAddr(a); err != nil {
			return invalid("ListenAddrs", fmt.Sprintf("%q", a), "is not an IP address")
		}
	}
	if !c.Neighbor.IsValid() || c.Neighbor.IsUnspecified() {
		return invalid("Neighbor", c.Neighbor, "must be a unicast IP address")
	}
	if c.LocalAddress.IsValid() && c.LocalAddress.Is4() != c.Neighbor.Is4() {
		return invalid("LocalAddress", c.LocalAddress, "must be of the same family as Neighbor")
	}
	if c.NeighborASN == 0 {
		return invalid("NeighborASN", c.NeighborASN, "must not be 0")
	}
	if c.NeighborPort > 65535 {
		return invalid("NeighborPort", c.NeighborPort, "must be 0 (179) or 1..65535")
	}
	if c.Passive && c.ListenPort == -1 {
		return invalid("Passive", c.Passive, "with ListenPort -1 the session can never come up")
	}
	if c.Routes < 0 || c.Routes > MaxRoutes {
		return invalid("Routes", c.Routes, fmt.Sprintf("must be in 0..%d", MaxRoutes))
	}
	if !c.NextHop.Is4() || c.NextHop.IsUnspecified() {
		// GoBGP would replace 0.0.0.0 by its own session address.
		return invalid("NextHop", c.NextHop, "must be a non-zero IPv4 address")
	}
	if c.NextHop6.IsValid() && (!c.NextHop6.Is6() || c.NextHop6.Is4In6() || c.NextHop6.IsUnspecified()) {
		return invalid("NextHop6", c.NextHop6, "must be a non-zero IPv6 address")
	}
	for _, p := range c.Extra {
		if err := checkPrefix(p); err != nil {
			return invalid("Extra", p, err.Error())
		}
		if p.Addr().Is6() && !c.NextHop6.IsValid() {
			return invalid("Extra", p, "an IPv6 prefix needs NextHop6")
		}
	}
	if err := wholeSeconds("HoldTime", c.HoldTime); err != nil {
		return err
	}
	if c.HoldTime < 3*time.Second || c.HoldTime > 65535*time.Second {
		return invalid("HoldTime", c.HoldTime, "must be in 3s..65535s")
	}
	if err := wholeSeconds("Keepalive", c.Keepalive); err != nil {
		return err
	}
	if c.Keepalive < time.Second || c.Keepalive >= c.HoldTime {
		return invalid("Keepalive", c.Keepalive, fmt.Sprintf("must be at least 1s and below HoldTime (%v)", c.HoldTime))
	}
	if err := wholeSeconds("GracefulRestart", c.GracefulRestart); err != nil {
		return err
	}
	if c.GracefulRestart < 0 || c.GracefulRestart > 4095*time.Second {
		return invalid("GracefulRestart", c.GracefulRestart, "must be in 0s..4095s")
	}
	if err := wholeSeconds("ConnectRetry", c.ConnectRetry); err != nil {
		return err
	}
	if c.ConnectRetry < time.Second {
		return invalid("ConnectRetry", c.ConnectRetry, "must be at least 1s")
	}
	return nil
}

// wholeSeconds rejects durations GoBGP's per-second timers cannot express.
func wholeSeconds(field string, d time.Duration) error {
	if d%time.Second != 0 {
		return invalid(field, d, "must be a whole number of seconds")
	}
	return nil
}

// checkPrefix accepts masked IPv4 and IPv6 prefixes.
func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return errors.New("not a valid prefix")
	case p.Addr().Is4In6() || p.Addr().Zone() != "":
		return errors.New("not a plain IPv4 or IPv6 prefix")
	case p.Masked() != p:
		return fmt.Errorf("host bits set (did you mean %v?)", p.Masked())
	}
	return nil
}
