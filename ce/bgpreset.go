package ce

import (
	"context"
	"net/netip"
)

// ResetNeighbor brings back the BGP neighbour addr if max_prefixes stopped
// it, or resets its session (bgp.Speaker.ResetNeighbor); an address that
// is no configured neighbour is bgp.ErrUnknownNeighbor.
func (c *CE) ResetNeighbor(ctx context.Context, addr netip.Addr) error {
	select {
	case <-c.ready: // the speaker is up
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.speaker.ResetNeighbor(ctx, addr)
}
