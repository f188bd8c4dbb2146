package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// statusTimeout bounds the wait for the CE's status: a CE that does not
// answer within it is not running.
const statusTimeout = 5 * time.Second

// ceStatus fetches the CE's status; Unavailable if the CE does not answer.
func ceStatus(ctx context.Context, b Backend) (ce.Status, error) {
	wait, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := b.Status(wait)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil { // the caller gave up: say so, not Unavailable
			return st, toStatus(cerr)
		}
		return st, toStatus(err)
	}
	return st, nil
}

// fes serves the FEs service.
type fes struct {
	spv1.UnimplementedFEsServer
	b Backend
}

// List reports the associated FEs: what the CE knows of them, and what each
// FE reports of itself over ForCES (its status component: counters in total
// and per CPU, ports with addresses and counters, lanes). An FE that does
// not answer in time is listed without the latter.
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
		wait, cancel := context.WithTimeout(ctx, statusTimeout)
		raw, err := s.b.FEDetails(wait, f.Num)
		cancel()
		if err == nil {
			addDetails(fe, raw)
		}
		out.Fes = append(out.Fes, fe)
	}
	return out, nil
}

// addDetails fills in what an FE reported of itself.
func addDetails(out *spv1.FE, raw json.RawMessage) {
	var st forces.FEStatus
	if json.Unmarshal(raw, &st) != nil {
		return
	}
	out.Counters = counters(st.Counters, st.PerCPU)
	byName := map[string]*spv1.Port{}
	for _, p := range out.Ports {
		byName[p.Name] = p
	}
	for _, p := range st.Ports {
		pp := byName[p.Name]
		if pp == nil {
			pp = &spv1.Port{Id: uint32(p.Ifindex), Name: p.Name, Mac: p.MAC, Up: p.Up}
			out.Ports = append(out.Ports, pp)
		}
		for _, a := range p.Addrs {
			pp.Addresses = append(pp.Addresses, a.String())
		}
		pp.Counters = &spv1.Counters{RxPackets: p.Counters.RxPackets, ForwardedPackets: p.Counters.TxPackets, PassedPackets: p.Counters.Passed,
			DroppedPackets: p.Counters.Dropped}
	}
	for _, l := range st.Lanes {
		cpu := int32(-1) // served on the sending CPU, or not known
		if f := strings.FieldsFunc(l.CPUs, func(r rune) bool { return r == '-' || r == ',' }); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				cpu = int32(n)
			}
		}
		out.Lanes = append(out.Lanes, &spv1.Lane{Port: l.Port, Queue: uint32(l.Queue), Cpu: cpu})
	}
}

// counters maps the datapath's named counters: rx, forwarded, every pass_*
// reason and to_control_cpu (to the kernel), every drop_* reason (dropped).
func counters(total forces.FECounters, perCPU []forces.FECounters) *spv1.Counters {
	sum := func(c forces.FECounters) (rx, fwd, passed, dropped uint64) {
		for name, v := range c {
			switch {
			case name == "rx":
				rx = v
			case name == "forwarded":
				fwd = v
			case strings.HasPrefix(name, "pass_"), name == "to_control_cpu":
				passed += v
			case strings.HasPrefix(name, "drop_"):
				dropped += v
			}
		}
		return rx, fwd, passed, dropped
	}
	out := &spv1.Counters{ByReason: map[string]uint64{}}
	out.RxPackets, out.ForwardedPackets, out.PassedPackets, out.DroppedPackets = sum(total)
	for name, v := range total {
		out.ByReason[name] = v
	}
	for i, c := range perCPU {
		rx, fwd, passed, dropped := sum(c)
		out.Cpus = append(out.Cpus, &spv1.CPUCounters{Cpu: int32(i), RxPackets: rx, ForwardedPackets: fwd, PassedPackets: passed, DroppedPackets: dropped})
	}
	return out
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

// Neighbors reports the BGP neighbours from the CE's status.
func (s *bgpService) Neighbors(ctx context.Context, _ *spv1.ListNeighborsRequest) (*spv1.ListNeighborsResponse, error) {
	st, err := ceStatus(ctx, s.b)
	if err != nil {
		return nil, err
	}
	out := &spv1.ListNeighborsResponse{Neighbors: make([]*spv1.Neighbor, 0, len(st.Neighbors))}
	for _, n := range st.Neighbors {
		out.Neighbors = append(out.Neighbors, &spv1.Neighbor{Address: n.Address, Asn: n.ASN, State: n.State, SinceUnixMs: unixMs(n.Since), Bfd: n.BFD,
			PrefixesReceived: n.Received, PrefixesAccepted: n.Accepted, Warning: neighborWarning(n)})
	}
	return out, nil
}

// classifier serves the Classifier service: the control-flow rules each FE
// reports (its status component), with their packets, and the FE's policer
// drops.
type classifier struct {
	spv1.UnimplementedClassifierServer
	b Backend
}

func (c classifier) ListRules(ctx context.Context, _ *spv1.ListRulesRequest) (*spv1.ListRulesResponse, error) {
	st, err := ceStatus(ctx, c.b)
	if err != nil {
		return nil, err
	}
	out := &spv1.ListRulesResponse{}
	for _, f := range st.FEs {
		wait, cancel := context.WithTimeout(ctx, statusTimeout)
		raw, err := c.b.FEDetails(wait, f.Num)
		cancel()
		if err != nil {
			continue
		}
		var fs forces.FEStatus
		if json.Unmarshal(raw, &fs) != nil || fs.Classifier == nil {
			continue
		}
		for _, r := range fs.Classifier.Rules {
			out.Rules = append(out.Rules, &spv1.Rule{
				Flow:     fmt.Sprintf("%s: tcp %s -> %s", r.Kind, r.Remote, r.Local),
				Port:     f.ID,
				Steering: fs.Classifier.Steering,
				Packets:  r.Packets, PolicedDrops: fs.Counters["drop_policed"],
				PassSteerBadCsum: r.BadChecksum,
			})
		}
	}
	return out, nil
}

// ResetNeighbor brings back a neighbour stopped by max_prefixes, or resets
// another's session.
func (s *bgpService) ResetNeighbor(ctx context.Context, r *spv1.ResetNeighborRequest) (*spv1.ResetNeighborResponse, error) {
	a, err := netip.ParseAddr(r.GetAddress())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "address %q: not an IP address", r.GetAddress())
	}
	if err := s.b.ResetNeighbor(ctx, a); err != nil {
		return nil, toStatus(err)
	}
	return &spv1.ResetNeighborResponse{}, nil
}

// neighborWarning is the text of a neighbour's warnings, "" if none.
func neighborWarning(n bgp.NeighborStatus) string {
	w := n.Warning
	if n.MaxPrefixesStopped {
		if w != "" {
			w += "; "
		}
		w += "stopped by max_prefixes: down until reset or its restart interval"
	}
	return w
}
