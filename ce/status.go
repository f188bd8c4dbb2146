package ce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// Status is a snapshot of the CE for operators.
type Status struct {
	ID             string `json:"id"`
	ProtocolErrors uint64 `json:"protocol_errors"`
	// ForwardingPreserved: at start, the CE claimed its forwarding state
	// preserved to its graceful-restart neighbours (the FEs kept their FIB).
	ForwardingPreserved bool `json:"forwarding_preserved"`
	// ForCESRefused counts, by reason, the ForCES connections, setups,
	// messages and FE port addresses the CE refused.
	ForCESRefused map[string]uint64    `json:"forces_refused"`
	Routes        int                  `json:"routes"`
	Connected     []netip.Prefix       `json:"connected"` // the FEs' port prefixes next hops resolve through
	Neighbors     []bgp.NeighborStatus `json:"neighbors"`
	FEs           []FEStatus           `json:"fes"`
	// UnresolvedRoutes counts the routes of every origin whose next hops
	// resolve to no directly connected one (so are not forwarded with), by
	// reason: "no_route", "depth" (more than 8 static routes deep), "loop"
	// (only through static routes leading back to themselves), "work" (a
	// resolution that needed more than 4096 steps).
	UnresolvedRoutes map[string]int `json:"unresolved_routes"`
	// UnresolvedStatic lists the static routes among them, with the reason.
	UnresolvedStatic []UnresolvedRoute `json:"unresolved_static,omitempty"`
}

// FEStatus describes one associated FE.
type FEStatus struct {
	ID            string     `json:"id"`
	Num           forces.ID  `json:"-"` // the ID as a number, for FEDetails
	Name          string     `json:"name"`
	LFBs          []string   `json:"lfbs"`
	Ports         []FEPort   `json:"ports"`
	Remote        string     `json:"remote"`
	AssociatedAt  time.Time  `json:"associated_at"`
	Synced        bool       `json:"synced"`
	Pending       int        `json:"pending_changes"`
	Acked         uint64     `json:"acked_changes"`
	Failed        uint64     `json:"failed_changes"`
	LastHeartbeat time.Time  `json:"last_heartbeat"`
	HeartbeatRTT  RTTSummary `json:"heartbeat_rtt"`
	FIBKept       bool       `json:"fib_kept"` // its datapath held the FIB of before when it associated
	LowChannel    bool       `json:"low_channel"`
	Redirected    uint64     `json:"redirected_packets"`
	Injected      uint64     `json:"injected_packets"`
	Events        uint64     `json:"events"`
	// InterFELinks are the FE's ports to other FEs (the mesh); EgressOf
	// counts the nexthops whose gateway is behind this FE (egress.go).
	InterFELinks []FELink `json:"inter_fe_links,omitempty"`
	EgressOf     int      `json:"egress_of_nexthops"`
	// ConnectedOf counts the connected egress rows naming this FE: its
	// port subnets the other FEs reach through it (connegress.go).
	ConnectedOf int `json:"egress_of_subnets"`
}

// FEPort is a port an FE reported.
type FEPort struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	MAC  string `json:"mac"`
	Up   bool   `json:"up"`
}

// ErrNoAnswer is what Status returns when the CE's loop did not answer before
// the caller's context ended: the CE has stopped, or is busy past the caller's
// deadline.
var ErrNoAnswer = errors.New("no answer from the CE (stopped, or busy past the deadline)")

// Status returns a snapshot of the CE. When ctx ends before the CE's loop
// answers it returns ErrNoAnswer wrapping ctx's error, never a zero Status
// that a caller could take for an empty CE.
func (c *CE) Status(ctx context.Context) (Status, error) {
	ch := make(chan Status, 1)
	select {
	case c.queries <- ch:
		select {
		case s := <-ch:
			// Outside the loop: GoBGP's counts can take it a second.
			s.Neighbors = c.speaker.Neighbors()
			s.ForCESRefused = c.refusedCounts()
			s.ForwardingPreserved = c.forwardingPreserved.Load()
			return s, nil
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	return Status{}, fmt.Errorf("%w: %w", ErrNoAnswer, ctx.Err())
}
