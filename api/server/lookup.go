package server

import (
	"context"
	"net"
	"net/netip"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
)

// Get is Routes.Get: ce.CE.GetRoute.
func (r *routes) Get(ctx context.Context, req *spv1.GetRouteRequest) (*spv1.GetRouteResponse, error) {
	s := req.GetAddress()
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return nil, fieldError("address", s, "not an IPv4 or IPv6 address")
	}
	g, err := r.b.GetRoute(ctx, a)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &spv1.GetRouteResponse{Address: g.Address.String(), Kind: g.Kind}
	if g.Prefix.IsValid() {
		out.Prefix = g.Prefix.String()
	}
	for _, ri := range g.Routes {
		out.Routes = append(out.Routes, toRoute(ri))
	}
	for _, e := range g.Egress {
		h := &spv1.RouteHop{Gateway: addrOrEmpty(e.Gateway), Port: e.Port, PortName: e.Name}
		if e.FE != 0 {
			h.Fe = e.FE.String()
		}
		out.Hops = append(out.Hops, h)
	}
	for _, v := range g.FEs {
		out.Fes = append(out.Fes, toFELookup(v))
	}
	return out, nil
}

func toFELookup(v ce.FEView) *spv1.FELookup {
	out := &spv1.FELookup{Fe: v.FE.String(), Name: v.Name, Differs: v.Differs}
	if v.Err != nil {
		out.Kind, out.Error = "error", v.Err.Error()
		return out
	}
	out.Kind, out.Entry = v.Lookup.Kind.String(), v.Lookup.ID
	for _, h := range v.Lookup.Hops {
		fh := &spv1.FEHop{Id: h.ID, Gateway: addrOrEmpty(h.Gateway), Port: h.Port, PortName: v.Ports[h.Port],
			SrcMac: net.HardwareAddr(h.SrcMAC[:]).String(), RemoteFe: h.RemoteFE, RemotePort: h.RemotePort}
		if h.RemoteFE != 0 {
			fh.PortName, fh.SrcMac = "", ""
		}
		if h.Resolved {
			fh.DstMac = net.HardwareAddr(h.DstMAC[:]).String()
		}
		out.Hops = append(out.Hops, fh)
	}
	return out
}

func addrOrEmpty(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// Verify is FEs.Verify: ce.CE.Verify.
func (s *fes) Verify(ctx context.Context, req *spv1.VerifyFEsRequest) (*spv1.VerifyFEsResponse, error) {
	rep, err := s.b.Verify(ctx, int(req.GetSamples()))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &spv1.VerifyFEsResponse{Routes: uint64(rep.Routes), Addresses: uint64(rep.Addresses), Sampled: rep.Sampled,
		Differs: rep.Differs(), Seconds: rep.Took.Seconds()}
	for _, f := range rep.FEs {
		fv := &spv1.FEVerify{Fe: f.FE.String(), Name: f.Name, Checked: uint64(f.Checked), Differences: uint64(f.Differences)}
		if f.Err != nil {
			fv.Error = f.Err.Error()
		}
		for _, d := range f.Listed {
			fv.Listed = append(fv.Listed, &spv1.Difference{Address: d.Address.String(), Why: d.Why})
		}
		out.Fes = append(out.Fes, fv)
	}
	return out, nil
}
