package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// reportingFE is a CE backend with one more associated FE, FE(9), whose
// status query answers with doc: the API decodes what an FE reports of
// itself without an FE. (The API with a real FE in process is
// integration's TestAPITransactionWithFE.)
type reportingFE struct {
	*ce.CE
	doc any
}

func (b reportingFE) Status(ctx context.Context) (ce.Status, error) {
	st, err := b.CE.Status(ctx)
	if err != nil {
		return st, err
	}
	st.FEs = append(st.FEs, ce.FEStatus{ID: "FE(9)", Num: forces.FEID(9), Name: "fe-9", Synced: true,
		Ports: []ce.FEPort{{ID: 7, Name: "p7", MAC: "02:00:00:00:00:07", Up: true}}})
	return st, nil
}

func (b reportingFE) FEDetails(ctx context.Context, fe forces.ID) (json.RawMessage, error) {
	if fe != forces.FEID(9) {
		return b.CE.FEDetails(ctx, fe)
	}
	return json.Marshal(b.doc)
}

// FEs.List and Classifier.ListRules take the FE's counters (in total and
// per CPU), its ports' addresses and counters, its lanes and its
// classifier rules from the forces.FEStatus it reports; a port the CE does
// not know is added; a document that does not decode adds nothing.
func TestFEStatusDecoded(t *testing.T) {
	doc := forces.FEStatus{
		ID: "FE(9)", Associated: true,
		Ports: []forces.FEPortStatus{
			{Name: "p7", Ifindex: 7, Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")},
				Counters: forces.FEPortCounters{RxPackets: 5, TxPackets: 4, Passed: 1}},
			{Name: "p8", Ifindex: 8, MAC: "02:00:00:00:00:08", Counters: forces.FEPortCounters{Dropped: 3}},
		},
		Lanes:    []forces.FELane{{Port: "p7", Queue: 0, CPUs: "1-2", Via: "irq 40"}, {Port: "p8", Queue: 0, CPUs: "sender", Via: "softirq"}},
		Counters: forces.FECounters{"rx": 30, "forwarded": 20, "pass_no_route": 6, "pass_ttl": 4, "drop_policed": 2},
		PerCPU:   []forces.FECounters{{"rx": 10, "forwarded": 10}, {"rx": 20, "forwarded": 10, "pass_no_route": 6, "pass_ttl": 4, "drop_policed": 2}},
		Classifier: &forces.FEClassifierStatus{Steering: "xdp cpumap to CPU 1",
			Rules: []forces.FEFlowStatus{{Kind: "bgp", Local: "10.0.0.1:179", Remote: "10.0.0.2:40000", Packets: 12, BadChecksum: 3}}},
	}
	c := startCE(t, ce.Config{})
	b := reportingFE{CE: c, doc: doc}
	s := startServer(t, b, Config{})
	conn := dial(t, s)
	ctx := ctxT(t)

	l, err := spv1.NewFEsClient(conn).List(ctx, &spv1.ListFEsRequest{})
	if err != nil || len(l.Fes) != 1 {
		t.Fatalf("List: %v, %v", l, err)
	}
	f := l.Fes[0]
	cs := f.Counters
	if cs == nil || cs.RxPackets != 30 || cs.ForwardedPackets != 20 || cs.PassedPackets != 10 || cs.DroppedPackets != 2 || cs.ByReason["pass_ttl"] != 4 ||
		len(cs.Cpus) != 2 || cs.Cpus[1].PassedPackets != 10 {
		t.Fatalf("counters: %v", cs)
	}
	if len(f.Ports) != 2 || f.Ports[0].Name != "p7" || !slices.Equal(f.Ports[0].Addresses, []string{"10.0.0.1/8"}) ||
		f.Ports[0].Counters.RxPackets != 5 || f.Ports[0].Counters.ForwardedPackets != 4 || f.Ports[0].Counters.PassedPackets != 1 ||
		f.Ports[1].Id != 8 || f.Ports[1].Name != "p8" || f.Ports[1].Mac != "02:00:00:00:00:08" || f.Ports[1].Counters.DroppedPackets != 3 {
		t.Fatalf("ports: %v", f.Ports)
	}
	if got := fmt.Sprint(f.Lanes); len(f.Lanes) != 2 || f.Lanes[0].Cpu != 1 || f.Lanes[1].Cpu != -1 || f.Lanes[1].Port != "p8" {
		t.Fatalf("lanes: %s", got)
	}

	rules, err := spv1.NewClassifierClient(conn).ListRules(ctx, &spv1.ListRulesRequest{})
	if err != nil || len(rules.Rules) != 1 {
		t.Fatalf("ListRules: %v, %v", rules, err)
	}
	if r := rules.Rules[0]; r.Flow != "bgp: tcp 10.0.0.2:40000 -> 10.0.0.1:179" || r.Port != "FE(9)" || r.Steering != "xdp cpumap to CPU 1" ||
		r.Packets != 12 || r.PolicedDrops != 2 || r.PassSteerBadCsum != 3 {
		t.Fatalf("rule: %v", r)
	}

	// A document that is not an FE status: the FE is listed without it.
	s2 := startServer(t, reportingFE{CE: c, doc: []int{1}}, Config{})
	l, err = spv1.NewFEsClient(dial(t, s2)).List(ctx, &spv1.ListFEsRequest{})
	if err != nil || len(l.Fes) != 1 || l.Fes[0].Counters != nil || len(l.Fes[0].Ports) != 1 || len(l.Fes[0].Lanes) != 0 {
		t.Fatalf("List with a bad document: %v, %v", l, err)
	}
}
