package ce

import (
	"fmt"
	"net/netip"
)

// Martian prefixes: the special-purpose address space of the RFC 6890
// registries that is never forwarded (IANA's "Forwardable: False" blocks,
// and multicast and link-local space a unicast FIB has no business with).
// The API refuses a route whose prefix lies in one of them (an aggregate
// that covers one, 0.0.0.0/1 say, is routable) unless api_allow_martians is set: a
// route for 127.0.0.0/8 or 224.0.0.0/4 programmed by mistake (or by a
// hostile client) would blackhole or misdirect traffic the FEs must never
// route. Documentation and private ranges (192.0.2.0/24, 10.0.0.0/8, ...)
// are routable and allowed.
var martians = [...]struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (RFC 791)`},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback (RFC 1122)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (RFC 3927)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"},
	{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast (RFC 919)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (RFC 1112)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (RFC 5771)"},
	{netip.MustParsePrefix("::/128"), "unspecified address (RFC 4291)"},
	{netip.MustParsePrefix("::1/128"), "loopback (RFC 4291)"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped (RFC 4291)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local unicast (RFC 4291)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (RFC 4291)"},
}

// Martian returns the special-purpose block p lies in, and why it is
// never routed; ok is false for a routable prefix.
func Martian(p netip.Prefix) (block netip.Prefix, why string, ok bool) {
	if p.Addr().Is4() {
		// Most IPv4 prefixes start with an octet no block has: one
		// comparison instead of the table (a bulk of a million routes).
		switch a := p.Addr().As4()[0]; {
		case a != 0 && a != 127 && a != 169 && a != 192 && a < 224:
			return netip.Prefix{}, "", false
		}
	}
	for _, m := range martians {
		if m.p.Addr().Is4() == p.Addr().Is4() && m.p.Bits() <= p.Bits() && m.p.Contains(p.Addr()) {
			return m.p, m.why, true
		}
	}
	return netip.Prefix{}, "", false
}

// checkMartians refuses operations that add or replace a route for a
// martian prefix (deleting one is always allowed, so that routes restored
// from before the check can be removed).
func checkMartians(ops []RouteOp) error {
	for i, op := range ops {
		if op.Kind == OpDelete {
			continue
		}
		if block, why, ok := Martian(op.Prefix); ok {
			return &RouteError{Index: i, Field: "route.prefix", Value: op.Prefix.String(),
				Err: fmt.Errorf("%w: a martian prefix: %s is %s, never routed (api_allow_martians allows it)", ErrInvalidRoute, block, why)}
		}
	}
	return nil
}
