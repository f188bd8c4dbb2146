package bgp

import (
	"context"
	"fmt"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Per-neighbour import and export policies.
//
// GoBGP v4 assigns policies per neighbour only to route-server clients
// (BgpServer.toPolicyInfo refuses any other neighbour: "non-rs-client peer
// ... doesn't have per peer policy"), and a route-server client gets its own
// RIB, which is not what an edge router wants. Every other neighbour's routes
// go through the global RIB's import and export assignments. So each
// neighbour's policy becomes one global policy whose statements all carry a
// neighbour-set condition naming only that neighbour: on import GoBGP
// evaluates the condition against the neighbour the route came from
// (server.propagateUpdate sets PolicyOptions.Info to the sending peer), on
// export against the neighbour it is about to be sent to
// (server.prePolicyFilterpath sets Info to the receiving peer). The
// statements are the prefix rules in order, each accepting or rejecting,
// then one without a prefix condition giving the policy's default, so a
// route from or to that neighbour is always decided by its own policy and
// the global default (accept) only applies to neighbours without one: iBGP
// neighbours, as an eBGP neighbour without a policy gets one that rejects
// everything (RFC 8212, rfc8212 below).
// A rejected import is kept in the Adj-RIB-In (and counted against
// max_prefixes) but never reaches the global RIB.

// rfc8212 returns n as the speaker in AS asn runs it, and the warning its
// status carries (empty if none). An eBGP neighbour without an import
// policy accepts no routes and without an export policy announces none
// (RFC 8212 section 3, as BIRD and FRR do): with two providers, accepting
// and announcing everything by default would leak one's routes to the
// other. Accepting or announcing everything has to be written down
// (import: {default: accept}). iBGP neighbours are left as they are.
func rfc8212(n Neighbor, asn uint32) (Neighbor, string) {
	if n.ASN == asn {
		return n, ""
	}
	var missing []string
	if n.Import == nil {
		n.Import = &Policy{Default: Reject}
		missing = append(missing, "import")
	}
	if n.Export == nil {
		n.Export = &Policy{Default: Reject}
		missing = append(missing, "export")
	}
	switch len(missing) {
	case 0:
		return n, ""
	case 2:
		return n, "eBGP neighbour without import and export policy: exchanges no routes (RFC 8212)"
	}
	if missing[0] == "import" {
		return n, "eBGP neighbour without import policy: accepts no routes (RFC 8212)"
	}
	return n, "eBGP neighbour without export policy: announces no routes (RFC 8212)"
}

// policyName names the GoBGP objects of one neighbour's policy.
// inGoBGP reports whether p is a policy GoBGP must evaluate: one that
// accepts everything is GoBGP's own default, and evaluating it for every
// path of a full table would cost convergence time for nothing.
func (p *Policy) inGoBGP() bool { return p != nil && (len(p.Rules) > 0 || p.Default != Accept) }

func policyName(dir string, a netip.Addr) string { return dir + "-" + a.String() }

// neighborSet names the GoBGP neighbour set of one neighbour's policies.
func neighborSet(a netip.Addr) string { return "neighbor-" + a.String() }

// definePolicies defines neighbour n's set and its import and export
// policies (nothing for a neighbour without them).
func definePolicies(ctx context.Context, srv *server.BgpServer, n Neighbor) error {
	if !n.Import.inGoBGP() && !n.Export.inGoBGP() {
		return nil
	}
	nset := neighborSet(n.Address)
	if err := srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nset,
		List: []string{netip.PrefixFrom(n.Address, n.Address.BitLen()).String()},
	}}); err != nil {
		return fmt.Errorf("neighbour set %s: %w", nset, err)
	}
	for dir, p := range map[string]*Policy{"import": n.Import, "export": n.Export} {
		if !p.inGoBGP() {
			continue
		}
		if _, err := addPolicy(ctx, srv, policyName(dir, n.Address), nset, p); err != nil {
			return err
		}
	}
	return nil
}

// removePolicies deletes what definePolicies defined for n; the policies
// must no longer be assigned.
func removePolicies(ctx context.Context, srv *server.BgpServer, n Neighbor) error {
	if !n.Import.inGoBGP() && !n.Export.inGoBGP() {
		return nil
	}
	for dir, p := range map[string]*Policy{"import": n.Import, "export": n.Export} {
		if !p.inGoBGP() {
			continue
		}
		name := policyName(dir, n.Address)
		// With its statements; then the prefix sets they used.
		if err := srv.DeletePolicy(ctx, &api.DeletePolicyRequest{Policy: &api.Policy{Name: name}, All: true}); err != nil {
			return fmt.Errorf("delete policy %s: %w", name, err)
		}
		for i := range p.Rules {
			pset := fmt.Sprintf("%s-%d", name, i)
			if err := srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: &api.DefinedSet{
				DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: pset}, All: true}); err != nil {
				return fmt.Errorf("delete prefix set %s: %w", pset, err)
			}
		}
	}
	nset := neighborSet(n.Address)
	if err := srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nset}, All: true}); err != nil {
		return fmt.Errorf("delete neighbour set %s: %w", nset, err)
	}
	return nil
}

// assignPolicies makes the global import and export assignments (GoBGP takes
// "" for the global RIB) the policies of ns, in their order; neighbours
// without a policy fall through to the default, accept.
func assignPolicies(ctx context.Context, srv *server.BgpServer, ns []Neighbor) error {
	var imports, exports []*api.Policy
	for _, n := range ns {
		if n.Import.inGoBGP() {
			imports = append(imports, &api.Policy{Name: policyName("import", n.Address)})
		}
		if n.Export.inGoBGP() {
			exports = append(exports, &api.Policy{Name: policyName("export", n.Address)})
		}
	}
	for _, a := range []struct {
		dir api.PolicyDirection
		ps  []*api.Policy
	}{{api.PolicyDirection_POLICY_DIRECTION_IMPORT, imports}, {api.PolicyDirection_POLICY_DIRECTION_EXPORT, exports}} {
		if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Direction: a.dir, Policies: a.ps, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
		}}); err != nil {
			return fmt.Errorf("assign %s policies: %w", a.dir, err)
		}
	}
	return nil
}

// addPolicy defines one prefix set per rule and the policy name made of
// them, for the neighbour in neighbour set nset.
func addPolicy(ctx context.Context, srv *server.BgpServer, name, nset string, p *Policy) (*api.Policy, error) {
	nbr := &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nset}
	pol := &api.Policy{Name: name}
	for i, r := range p.Rules {
		pset := fmt.Sprintf("%s-%d", name, i)
		ge, le := r.lengths()
		if err := srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: pset,
			Prefixes: []*api.Prefix{{IpPrefix: r.Prefix.String(), MaskLengthMin: uint32(ge), MaskLengthMax: uint32(le)}},
		}}); err != nil {
			return nil, fmt.Errorf("prefix set %s: %w", pset, err)
		}
		pol.Statements = append(pol.Statements, &api.Statement{
			Name:       pset,
			Conditions: &api.Conditions{NeighborSet: nbr, PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: pset}},
			Actions:    &api.Actions{RouteAction: routeAction(r.Action)},
		})
	}
	pol.Statements = append(pol.Statements, &api.Statement{
		Name:       name + "-default",
		Conditions: &api.Conditions{NeighborSet: nbr},
		Actions:    &api.Actions{RouteAction: routeAction(p.Default)},
	})
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: pol}); err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return &api.Policy{Name: name}, nil
}

func routeAction(a Action) api.RouteAction {
	if a == Accept {
		return api.RouteAction_ROUTE_ACTION_ACCEPT
	}
	return api.RouteAction_ROUTE_ACTION_REJECT
}
