package fe

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/classifier"
	"github.com/splitplane/splitplane/fe/datapath"
)

// The FE's status shows, for each rule, its packets and those of them passed
// for a bad checksum, from the datapath's per-flow counts.
func TestClassifierStatusBadChecksum(t *testing.T) {
	a, err := New(Config{Ports: []string{"unused0"}, Classifier: &ClassifierConfig{ControlCPU: 1}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	bgp := classifier.Flow{Kind: "bgp", Local: netip.MustParseAddrPort("192.0.2.1:40001"), Remote: netip.MustParseAddrPort("192.0.2.2:179")}
	ssh := classifier.Flow{Kind: "ssh", Local: netip.MustParseAddrPort("192.0.2.1:22"), Remote: netip.MustParseAddrPort("192.0.2.9:50000")}
	a.classifier.flows = map[classifier.Flow]bool{bgp: true, ssh: true}
	st := a.classifierStatus(map[datapath.ControlFlow]datapath.FlowCounts{
		{Src: bgp.Remote, Dst: bgp.Local}: {Packets: 40, BadChecksum: 7},
		{Src: ssh.Remote, Dst: ssh.Local}: {Packets: 5},
	})
	if st == nil || len(st.Rules) != 2 {
		t.Fatalf("status: %+v", st)
	}
	for _, r := range st.Rules {
		want := FlowStatus{Kind: "bgp", Local: bgp.Local.String(), Remote: bgp.Remote.String(), Packets: 40, BadChecksum: 7}
		if r.Kind == "ssh" {
			want = FlowStatus{Kind: "ssh", Local: ssh.Local.String(), Remote: ssh.Remote.String(), Packets: 5}
		}
		if r != want {
			t.Errorf("rule %+v, want %+v", r, want)
		}
	}
	doc, err := json.Marshal(st.Rules)
	if err != nil || !strings.Contains(string(doc), `"pass_steer_bad_csum":7`) {
		t.Errorf("JSON %s, %v: want pass_steer_bad_csum 7", doc, err)
	}
}
