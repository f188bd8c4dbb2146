package bgp

import (
	"fmt"
	"net/netip"
	"slices"

	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
)

// Networks are the prefixes the router itself originates into BGP (the
// CE's bgp_networks), as FRR's "network" statement and BIRD's exported
// static routes do: a customer LAN, the operator's aggregate. They are
// announced unconditionally, to every neighbour whose export policy lets
// them through, with the speaker itself as the next hop (GoBGP puts the
// session's local address in place of the unspecified one).
//
// GoBGP also selects its own paths: where one is the best path of a prefix
// the RIB is told that BGP has no route there (toUpdates and multipaths
// treat a path without a usable next hop as a withdrawal), so an
// originated prefix never forwards towards the router itself.

// validateNetworks checks prefixes as the configuration names them.
func validateNetworks(prefixes []netip.Prefix) error {
	seen := map[netip.Prefix]bool{}
	for i, p := range prefixes {
		if !p.IsValid() {
			return fmt.Errorf("%w: bgp_networks[%d]: not a prefix", ErrConfig, i)
		}
		if p != p.Masked() {
			return fmt.Errorf("%w: bgp_networks[%d] %s: host bits set (the prefix is %s)", ErrConfig, i, p, p.Masked())
		}
		if seen[p] {
			return fmt.Errorf("%w: bgp_networks[%d] %s: listed twice", ErrConfig, i, p)
		}
		seen[p] = true
	}
	return nil
}

// SetNetworks makes the originated prefixes exactly prefixes: new ones are
// announced, those no longer listed withdrawn, the others left alone. It
// returns how many it announced and withdrew. Invalid prefixes change
// nothing.
func (s *Speaker) SetNetworks(prefixes []netip.Prefix) (added, removed int, err error) {
	if err := validateNetworks(prefixes); err != nil {
		return 0, 0, err
	}
	s.netMu.Lock()
	defer s.netMu.Unlock()
	var add, del []netip.Prefix
	for _, p := range prefixes {
		if !slices.Contains(s.networks, p) {
			add = append(add, p)
		}
	}
	for _, p := range s.networks {
		if !slices.Contains(prefixes, p) {
			del = append(del, p)
		}
	}
	if len(add) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: localPaths(add, false)}); err != nil {
			return 0, 0, fmt.Errorf("bgp_networks: announce %v: %w", add, err)
		}
	}
	if len(del) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: localPaths(del, true)}); err != nil {
			return len(add), 0, fmt.Errorf("bgp_networks: withdraw %v: %w", del, err)
		}
	}
	s.networks = slices.Clone(prefixes)
	return len(add), len(del), nil
}

// Networks returns the originated prefixes.
func (s *Speaker) Networks() []netip.Prefix {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	return slices.Clone(s.networks)
}

// localPaths are GoBGP paths for prefixes originated here (PeerASN 0): ORIGIN
// IGP and the unspecified next hop, which GoBGP replaces with the session's
// local address on the way out.
func localPaths(prefixes []netip.Prefix, withdraw bool) []*apiutil.Path {
	origin := gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP)
	paths := make([]*apiutil.Path, 0, len(prefixes))
	for _, p := range prefixes {
		nlri, err := gobgp.NewIPAddrPrefix(p)
		if err != nil {
			continue // validated: cannot happen
		}
		if p.Addr().Is4() {
			nh, _ := gobgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
			paths = append(paths, &apiutil.Path{Family: gobgp.RF_IPv4_UC, Nlri: nlri, Withdrawal: withdraw,
				Attrs: []gobgp.PathAttributeInterface{origin, nh}})
			continue
		}
		reach, err := gobgp.NewPathAttributeMpReachNLRI(gobgp.RF_IPv6_UC, []gobgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			continue
		}
		paths = append(paths, &apiutil.Path{Family: gobgp.RF_IPv6_UC, Nlri: nlri, Withdrawal: withdraw,
			Attrs: []gobgp.PathAttributeInterface{origin, reach}})
	}
	return paths
}

// usable reports whether a path's next hop can be forwarded to: not
// missing and not the unspecified address of the router's own paths.
func usable(nh netip.Addr) bool {
	return nh.IsValid() && !nh.IsUnspecified()
}
