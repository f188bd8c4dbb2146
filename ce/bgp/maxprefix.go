package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// warnInterval is how often the prefix warner reads the neighbours' counts.
const warnInterval = time.Second

// GoBGP's PrefixLimit only knows one reaction, tearing the session down (its
// ShutdownThresholdPct warns before that but cannot stop it), so "stop" maps
// onto it and "warn" is done here: GoBGP has no event for a prefix count,
// so the warner reads every neighbour's Adj-RIB-In counts once a second
// (one ListPeer call) and logs when one goes above its limit.

// prefixWarner logs when a neighbour with MaxPrefixes action Warn announces
// more prefixes than its limit in some family.
type prefixWarner struct {
	log    *slog.Logger
	limits func() map[string]uint32 // by neighbour address, read at every check
	cur    map[string]uint32        // this check's limits
	over   map[string]bool          // neighbour/family currently over its limit
}

func newPrefixWarner(limits func() map[string]uint32, log *slog.Logger) *prefixWarner {
	return &prefixWarner{log: log, limits: limits, over: map[string]bool{}}
}

// run checks the counts until ctx ends.
func (w *prefixWarner) run(ctx context.Context, srv *server.BgpServer) {
	t := time.NewTicker(warnInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.cur = w.limits(); len(w.cur) == 0 {
			clear(w.over)
			continue
		}
		_ = srv.ListPeer(ctx, &api.ListPeerRequest{}, w.check)
	}
}

// check looks at one neighbour's counts.
func (w *prefixWarner) check(p *api.Peer) {
	if p.Conf == nil {
		return
	}
	addr := p.Conf.NeighborAddress
	limit, ok := w.cur[addr]
	if !ok {
		return
	}
	for _, af := range p.AfiSafis {
		if af.State == nil || af.State.Family == nil {
			continue
		}
		fam := IPv4
		if af.State.Family.Afi == api.Family_AFI_IP6 {
			fam = IPv6
		}
		key := addr + "/" + fam.String()
		switch n := af.State.Received; {
		case n > uint64(limit) && !w.over[key]:
			w.over[key] = true
			w.log.Warn("bgp neighbour above max_prefixes", "neighbor", netip.MustParseAddr(addr), "family", fam.String(), "prefixes", n, "limit", limit)
		case n <= uint64(limit) && w.over[key]:
			delete(w.over, key)
			w.log.Info("bgp neighbour back within max_prefixes", "neighbor", netip.MustParseAddr(addr), "family", fam.String(), "prefixes", n, "limit", limit)
		}
	}
}

// A neighbour stopped by max_prefixes (action stop) is one GoBGP put in
// admin state PFX_CT: GoBGP neither connects to it nor accepts its
// connections in that state (its idle hold timer only restarts a neighbour
// whose admin state is up), so the session stays down until the speaker
// enables it again: ResetNeighbor, or the timer maxPrefixesStopped starts
// when MaxPrefixes.Restart is set.

// ErrUnknownNeighbor is returned by ResetNeighbor for an address that is
// not a configured neighbour.
var ErrUnknownNeighbor = errors.New("no such bgp neighbour")

// maxPrefixesStopped is called once when neighbour addr's session was
// closed for announcing more than its max_prefixes: it logs, and starts the
// restart timer if the neighbour has one.
func (s *Speaker) maxPrefixesStopped(addr netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.configured[addr.String()]
	if !ok || s.stopping {
		return
	}
	var restart time.Duration
	if n.MaxPrefixes != nil {
		restart = n.MaxPrefixes.Restart
	}
	if restart <= 0 {
		s.log.Warn("bgp neighbour stopped by max_prefixes: down until reset", "neighbor", addr)
		return
	}
	s.log.Warn("bgp neighbour stopped by max_prefixes: down until reset or restart", "neighbor", addr, "restart", restart)
	if t := s.restarts[addr.String()]; t != nil {
		t.Stop()
	}
	s.restarts[addr.String()] = time.AfterFunc(restart, func() {
		s.mu.Lock()
		delete(s.restarts, addr.String())
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		s.log.Info("bgp neighbour stopped by max_prefixes: restart interval over, enabling it", "neighbor", addr, "restart", restart)
		_ = s.srv.EnablePeer(context.Background(), &api.EnablePeerRequest{Address: addr.String()})
	})
}

// ResetNeighbor brings a neighbour stopped by max_prefixes back (its
// session starts again), or resets the session of any other neighbour (a
// Cease NOTIFICATION, administrative reset, and a new session).
func (s *Speaker) ResetNeighbor(ctx context.Context, addr netip.Addr) error {
	s.mu.Lock()
	st, ok := s.neighbors[addr]
	stopped := ok && st.MaxPrefixesStopped
	if t := s.restarts[addr.String()]; t != nil {
		t.Stop()
		delete(s.restarts, addr.String())
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownNeighbor, addr)
	}
	if stopped {
		s.log.Info("bgp neighbour stopped by max_prefixes: reset, enabling it", "neighbor", addr)
		return s.srv.EnablePeer(ctx, &api.EnablePeerRequest{Address: addr.String()})
	}
	s.log.Info("bgp neighbour reset", "neighbor", addr)
	return s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Communication: "reset by operator"})
}
