package bgp

import (
	"context"
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
