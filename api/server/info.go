package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
)

// statusTimeout bounds the wait for the CE's status: a CE that does not
// answer within it is not running.
const statusTimeout = 5 * time.Second

// ceStatus fetches the CE's status; Unavailable if the CE does not answer.
func ceStatus(ctx context.Context, b Backend) (ce.Status, error) {
	wait, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st := b.Status(wait)
	if st.ID == "" { // what Status returns when the CE did not answer
		if err := ctx.Err(); err != nil {
			return st, toStatus(err)
		}
		return st, status.Error(codes.Unavailable, "the CE is not running")
	}
	return st, nil
}

// fes serves the FEs service.
type fes struct {
	spv1.UnimplementedFEsServer
	b Backend
}

// List reports the associated FEs from the CE's status. Lanes and counters
// are the FEs' to report; the CE does not know them yet, so they are empty.
func (s *fes) List(ctx context.Context, _ *spv1.ListFEsRequest) (*spv1.ListFEsResponse, error) {
	st, err := ceStatus(ctx, s.b)
	if err != nil {
		return nil, err
	}
	out := &spv1.ListFEsResponse{Fes: make([]*spv1.FE, 0, len(st.FEs))}
	for _, f := range st.FEs {
		fe := &spv1.FE{
			Id: f.ID, Name: f.Name, Remote: f.Remote, Synced: f.Synced, AssociatedUnixMs: unixMs(f.AssociatedAt),
			RowsAcked: f.Acked, RowsFailed: f.Failed, HeartbeatRttP99Ms: f.HeartbeatRTT.P99,
		}
		for _, p := range f.Ports {
			fe.Ports = append(fe.Ports, &spv1.Port{Id: p.ID, Name: p.Name, Mac: p.MAC, Up: p.Up})
		}
		out.Fes = append(out.Fes, fe)
	}
	return out, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// bgpService serves the BGP service.
type bgpService struct {
	spv1.UnimplementedBGPServer
	b Backend
}

// Neighbors reports the BGP neighbours from the CE's status (the speaker
// does not count prefixes per neighbour yet: those stay zero).
func (s *bgpService) Neighbors(ctx context.Context, _ *spv1.ListNeighborsRequest) (*spv1.ListNeighborsResponse, error) {
	st, err := ceStatus(ctx, s.b)
	if err != nil {
		return nil, err
	}
	out := &spv1.ListNeighborsResponse{Neighbors: make([]*spv1.Neighbor, 0, len(st.Neighbors))}
	for _, n := range st.Neighbors {
		out.Neighbors = append(out.Neighbors, &spv1.Neighbor{Address: n.Address, Asn: n.ASN, State: n.State, SinceUnixMs: unixMs(n.Since), Bfd: n.BFD})
	}
	return out, nil
}

// classifier serves the Classifier service. The classifier does not exist
// yet: it has no rules.
type classifier struct {
	spv1.UnimplementedClassifierServer
}

func (classifier) ListRules(context.Context, *spv1.ListRulesRequest) (*spv1.ListRulesResponse, error) {
	return &spv1.ListRulesResponse{}, nil
}
