package bgp

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// SetNeighbors makes the speaker's neighbours ns: the sessions of
// neighbours that are gone are closed, new ones are started, and a neighbour
// whose settings changed is restarted; the others are not touched. Import
// and export policies, BFD, graceful restart and max_prefixes warnings
// follow. It returns what it did, one entry per neighbour: "+address",
// "-address", "~address" (changed).
func (s *Speaker) SetNeighbors(ctx context.Context, ns []Neighbor) ([]string, error) {
	want, warnings := map[string]Neighbor{}, map[string]string{}
	for i, n := range ns {
		if err := n.validate(i); err != nil {
			return nil, err
		}
		if _, dup := want[n.Address.String()]; dup {
			return nil, fmt.Errorf("%w: neighbors[%d].address %s: listed twice", ErrConfig, i, n.Address)
		}
		n, warnings[n.Address.String()] = rfc8212(n, s.asn)
		want[n.Address.String()] = n
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	s.mu.Lock()
	have := map[string]Neighbor{}
	for a, n := range s.configured {
		have[a] = n
	}
	s.mu.Unlock()

	var gone, kept, changed, added []Neighbor
	for a, old := range have {
		n, ok := want[a]
		switch {
		case !ok:
			gone = append(gone, old)
		case !reflect.DeepEqual(old, n):
			changed = append(changed, n)
			gone = append(gone, old)
		default:
			kept = append(kept, n)
		}
	}
	for a, n := range want {
		if _, ok := have[a]; !ok {
			added = append(added, n)
		}
	}
	if len(gone)+len(added) == 0 {
		return nil, nil
	}
	byAddr := func(a, b Neighbor) int { return a.Address.Compare(b.Address) }
	for _, l := range [][]Neighbor{gone, kept, changed, added} {
		slices.SortFunc(l, byAddr)
	}

	var done []string
	// Sessions down first, then their policies out of the assignments, so
	// they can be deleted.
	for _, n := range gone {
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: n.Address.String()}); err != nil {
			return done, fmt.Errorf("remove neighbour %s: %w", n.Address, err)
		}
		s.mu.Lock()
		delete(s.configured, n.Address.String())
		delete(s.neighbors, n.Address)
		if t := s.restarts[n.Address.String()]; t != nil {
			t.Stop()
			delete(s.restarts, n.Address.String())
		}
		s.mu.Unlock()
		if _, ok := want[n.Address.String()]; !ok {
			done = append(done, "-"+n.Address.String())
		}
	}
	if err := assignPolicies(ctx, s.srv, kept); err != nil {
		return done, err
	}
	for _, n := range gone {
		if err := removePolicies(ctx, s.srv, n); err != nil {
			return done, err
		}
	}
	// New policies in place before the sessions that need them, so that no
	// route passes unfiltered.
	up := append(slices.Clone(changed), added...)
	for _, n := range up {
		if err := definePolicies(ctx, s.srv, n); err != nil {
			return done, err
		}
	}
	all := append(slices.Clone(kept), up...)
	slices.SortFunc(all, byAddr)
	if err := assignPolicies(ctx, s.srv, all); err != nil {
		return done, err
	}
	for _, n := range up {
		restarting := n.GracefulRestart != nil && s.forwarding()
		if n.GracefulRestart != nil && !restarting {
			s.log.Info("bgp: graceful restart without the Restart and Forwarding State bits: no forwarding state known to be preserved", "neighbor", n.Address)
		}
		if err := s.srv.AddPeer(ctx, peerRequest(n, restarting)); err != nil {
			return done, fmt.Errorf("add neighbour %s: %w", n.Address, err)
		}
		s.mu.Lock()
		s.configured[n.Address.String()] = n
		w := warnings[n.Address.String()]
		s.neighbors[n.Address] = &NeighborStatus{Address: n.Address.String(), ASN: n.ASN, State: "idle", Since: time.Now(), Warning: w}
		s.mu.Unlock()
		if w != "" {
			s.log.Warn("bgp neighbour without policy exchanges no routes", "neighbor", n.Address, "warning", w,
				"hint", "write import: {default: accept} or export: {default: accept} (or a prefix_list) to exchange routes")
		}
		if _, ok := have[n.Address.String()]; ok {
			done = append(done, "~"+n.Address.String())
		} else {
			done = append(done, "+"+n.Address.String())
		}
	}
	return done, nil
}
