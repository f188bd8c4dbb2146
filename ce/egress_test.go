package ce

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/logtest"
)

func port(id uint32, up bool, addrs ...string) forces.PortInfo {
	p := forces.PortInfo{ID: id, Name: fmt.Sprintf("p%d", id), Up: up}
	for _, a := range addrs {
		p.Addrs = append(p.Addrs, netip.MustParsePrefix(a))
	}
	return p
}

// The egress of a gateway is the most specific covering prefix of a port
// that is up; of equals, the lowest FE ID's, then the lowest port ID's.
func TestEgressCandidates(t *testing.T) {
	e := newEgress()
	e.setPorts(forces.FEID(3), []forces.PortInfo{port(9, true, "10.1.0.1/24"), port(2, true, "10.1.0.9/24")})
	e.setPorts(forces.FEID(2), []forces.PortInfo{port(4, true, "10.1.0.2/24", "2001:db8:1::2/64"), port(5, false, "10.2.0.1/24")})
	e.setPorts(forces.FEID(1), []forces.PortInfo{port(1, true, "10.0.0.1/8")})
	for _, tc := range []struct {
		gw   string
		want []forces.NexthopEgressInfo
	}{
		{"10.1.0.7", []forces.NexthopEgressInfo{{FE: 2, Port: 4}, {FE: 3, Port: 2}, {FE: 3, Port: 9}}},
		{"10.2.0.7", []forces.NexthopEgressInfo{{FE: 1, Port: 1}}}, // FE 2's /24 is down: FE 1's /8
		{"2001:db8:1::7", []forces.NexthopEgressInfo{{FE: 2, Port: 4}}},
		{"192.0.2.1", nil},
		{"::ffff:10.1.0.7", nil},
	} {
		if got := e.egressCandidates(netip.MustParseAddr(tc.gw)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.gw, got, tc.want)
		}
	}
	// follow: a new nexthop gets a row, a deleted one loses it, an
	// unchanged one makes no change.
	gw := netip.MustParseAddr("10.1.0.7")
	out := e.follow([]Change{{Kind: NexthopSet, ID: 3, NextHop: gw}}, nil)
	if len(out) != 1 || out[0].Kind != EgressSet || out[0].Egress != (forces.NexthopEgressInfo{FE: 2, Port: 4}) {
		t.Fatalf("follow a NexthopSet: %+v", out)
	}
	if out := e.follow([]Change{{Kind: NexthopSet, ID: 3, NextHop: gw}}, nil); len(out) != 0 {
		t.Fatalf("the same nexthop again: %+v", out)
	}
	e.setPorts(forces.FEID(2), nil) // FE 2 leaves
	if out := e.set(3, gw, nil); len(out) != 1 || out[0].Egress != (forces.NexthopEgressInfo{FE: 3, Port: 2}) {
		t.Fatalf("after FE 2 left: %+v", out)
	}
	if out := e.follow([]Change{{Kind: NexthopDel, ID: 3, NextHop: gw}}, nil); len(out) != 1 || out[0].Kind != EgressDel {
		t.Fatalf("follow a NexthopDel: %+v", out)
	}
}

var egressLFBs = append(slices.Clone(routingLFBs),
	forces.SupportedLFB{Name: "SplitplaneIPv4NexthopEgress", ClassID: forces.ClassIPv4NexthopEgress, Version: "1.0"})

// egressOf describes the egress rows among items by gateway, through the
// nexthop rows the FE got (nh: nexthop row -> gateway, filled in).
func egressOf(t *testing.T, items []forces.Item, nh map[uint32]string) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		switch {
		case it.ClassID == forces.ClassIPv4NextHop && it.Op == forces.OpSet:
			i, err := forces.ParseIPv4NextHopInfo(it.FullData)
			if err != nil {
				t.Fatal(err)
			}
			nh[it.Path[1]] = i.NextHop.String()
		case it.ClassID == forces.ClassIPv4NexthopEgress && it.Op == forces.OpSet:
			e, err := forces.ParseNexthopEgressInfo(it.FullData)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s FE %d port %d", nh[it.Path[1]], e.FE, e.Port))
		case it.ClassID == forces.ClassIPv4NexthopEgress && len(it.Path) == 2:
			out = append(out, fmt.Sprintf("%s %s", it.Op, nh[it.Path[1]]))
		}
	}
	slices.Sort(out)
	return out
}

// keepAlive answers f's heartbeats until its connection closes.
func keepAlive(f *fakeFE) {
	for {
		m, err := f.conn.ReadMessage()
		if err != nil {
			return
		}
		if m.Header.Type == forces.MsgHeartbeat && m.Header.Flags.ACK == forces.AlwaysACK {
			f.conn.WriteMessage(forces.NewHeartbeat(f.id, m.Header.Src, m.Header.Correlator, forces.NoACK))
		}
	}
}

// Three FEs with different connected prefixes: every FE that lists the
// egress LFB gets the same rows naming, for each gateway, the FE behind
// which it is; an FE without the LFB gets none. A port that goes down or
// an FE that leaves moves the rows to another FE with the subnet, or
// deletes them.
func TestEgressRowsAcrossFEs(t *testing.T) {
	c := startCEWith(t, time.Second, slog.New(slog.DiscardHandler), func(cfg *Config) { cfg.MetricsListen = "127.0.0.1:0" })
	var us []bgp.Update
	for i, gw := range []string{"10.1.0.2", "10.2.0.2", "10.3.0.2", "192.0.2.1"} {
		us = append(us, bgp.Update{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(100 + i), 0}), 24), NextHop: netip.MustParseAddr(gw)})
	}
	c.updates <- us
	waitFor(t, func() bool { return statusOf(t, c).Routes == 4 })

	nh := map[uint32]string{}
	f1, _ := dialFE(t, c, 1)
	f1.lfbs, f1.ports = egressLFBs, []forces.PortInfo{port(1, true, "10.1.0.1/24"), port(9, true)}
	f1.links = []forces.InterFELink{{Port: 9, PeerFE: 2}}
	sync1 := f1.fullSync()
	if got, want := egressOf(t, sync1, nh), []string{"10.1.0.2 FE 1 port 1"}; !slices.Equal(got, want) {
		t.Fatalf("FE 1's full sync: %q, want %q", got, want)
	}
	if !slices.ContainsFunc(sync1, func(it forces.Item) bool {
		return it.ClassID == forces.ClassIPv4NexthopEgress && it.Op == forces.OpDel && len(it.Path) == 1
	}) {
		t.Fatal("FE 1's full sync does not empty the egress table first")
	}

	f2, _ := dialFE(t, c, 2)
	f2.lfbs, f2.ports = egressLFBs, []forces.PortInfo{port(5, true, "10.2.0.1/24"), port(6, true, "10.3.0.1/24")}
	want := []string{"10.1.0.2 FE 1 port 1", "10.2.0.2 FE 2 port 5", "10.3.0.2 FE 2 port 6"}
	if got := egressOf(t, f2.fullSync(), nh); !slices.Equal(got, want) {
		t.Fatalf("FE 2's full sync: %q, want %q", got, want)
	}
	if got := egressOf(t, f1.rows(2), nh); !slices.Equal(got, want[1:]) {
		t.Fatalf("FE 1 got %q when FE 2 came, want %q", got, want[1:])
	}

	// FE 3 has 10.3.0.0/24 too, but a higher ID: nothing moves; it does
	// not list the egress LFB, so it gets no rows.
	f3, _ := dialFE(t, c, 3)
	f3.ports = []forces.PortInfo{port(7, true, "10.3.0.1/24")}
	for _, it := range f3.fullSync() {
		if it.ClassID == forces.ClassIPv4NexthopEgress {
			t.Fatalf("FE 3, without the egress LFB, got %+v", it)
		}
	}
	go keepAlive(f3)

	// FE 2's port to 10.3.0.0/24 goes down: 10.3.0.2 is behind FE 3 now.
	s := c.session(context.Background(), f2.id)
	down := port(6, false, "10.3.0.1/24")
	data, err := down.AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.event(context.Background(), forces.NewEventNotification(f2.id, forces.CEID(0), 1, forces.PortTableClass, forces.PortTableInstance,
		[]uint32{forces.PortTableComponent, 6}, data))
	want = []string{"10.3.0.2 FE 3 port 7"}
	if got := egressOf(t, f1.rows(1), nh); !slices.Equal(got, want) {
		t.Fatalf("FE 1 got %q when FE 2's port went down, want %q", got, want)
	}
	if got := egressOf(t, f2.rows(1), nh); !slices.Equal(got, want) {
		t.Fatalf("FE 2 got %q when its port went down, want %q", got, want)
	}

	st := statusOf(t, c)
	egressOfFE := map[string]int{}
	for _, fe := range st.FEs {
		egressOfFE[fe.ID] = fe.EgressOf
	}
	if fmt.Sprint(egressOfFE) != "map[FE(1):1 FE(2):1 FE(3):1]" {
		t.Fatalf("nexthops each FE is the egress of: %v", egressOfFE)
	}
	if l := st.FEs[0].InterFELinks; len(l) != 1 || l[0] != (FELink{Port: 9, PortName: "p9", PeerFE: 2, Up: true, PeerAssociated: true}) {
		t.Fatalf("FE 1's links: %+v", l)
	}
	mfs := scrape(t, c.MetricsAddr().String())
	if v, ok := metricValue(mfs, "splitplane_ce_fe_egress_nexthops", "fe", "FE(2)"); !ok || v != 1 {
		t.Errorf("splitplane_ce_fe_egress_nexthops{fe=FE(2)} = %v (present: %v), want 1", v, ok)
	}
	if v, ok := metricValue(mfs, "splitplane_ce_fe_inter_fe_link_up", "fe", "FE(1)", "port", "p9", "peer_fe", "FE(2)"); !ok || v != 1 {
		t.Errorf("splitplane_ce_fe_inter_fe_link_up of FE 1's link = %v (present: %v), want 1", v, ok)
	}

	// FE 2 leaves: 10.2.0.2 is behind no other FE, its row goes.
	if err := f2.conn.WriteMessage(forces.NewAssociationTeardown(f2.id, forces.CEID(0), uint32(forces.TeardownNormal))); err != nil {
		t.Fatal(err)
	}
	if got, want := egressOf(t, f1.rows(1), nh), []string{"DEL 10.2.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("FE 1 got %q when FE 2 left, want %q", got, want)
	}
}

// The cost of recomputing every nexthop's egress (what an FE's port event
// or departure costs the loop): 4 FEs of 8 ports each, 10,000 nexthops.
func BenchmarkEgressRecompute(b *testing.B) {
	e := newEgress()
	for fe := range 4 {
		var ports []forces.PortInfo
		for p := range 8 {
			ports = append(ports, port(uint32(p+1), true, fmt.Sprintf("10.%d.%d.1/24", fe, p)))
		}
		e.setPorts(forces.FEID(uint32(fe+1)), ports)
	}
	fib := fibs{v4: NewFIB(), v6: NewFIB()}
	const n = 10000
	for i := range n {
		gw := netip.AddrFrom4([4]byte{10, byte(i % 4), byte(i / 4 % 8), byte(2 + i/32%250)})
		fib.v4.Set(netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), gw, nil)
	}
	nh := len(fib.v4.nexthops)
	for b.Loop() {
		e.rows = [2]map[uint32]egressRow{{}, {}}
		if out := e.recompute(fib, nil); len(out) != nh {
			b.Fatalf("%d rows for %d nexthops", len(out), nh)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nh), "ns/nexthop")
}

// An FE's queue orders egress rows after the nexthops they name and their
// deletions before, and drops a DEL of a row the FE never got.
func TestPendingEgress(t *testing.T) {
	gw := netip.MustParseAddr("10.1.0.2")
	p := newPending()
	p.add([]Change{
		{Kind: EgressSet, ID: 1, NextHop: gw, Egress: forces.NexthopEgressInfo{FE: 1, Port: 1}},
		{Kind: NexthopSet, ID: 1, NextHop: gw},
		{Kind: EgressSet, ID: 2, NextHop: gw, Egress: forces.NexthopEgressInfo{FE: 1, Port: 1}},
		{Kind: EgressDel, ID: 2, NextHop: gw},
	})
	kinds := func(ch []Change) (out []ChangeKind) {
		for _, c := range ch {
			out = append(out, c.Kind)
		}
		return out
	}
	if got := kinds(p.take()); !slices.Equal(got, []ChangeKind{NexthopSet, EgressSet}) {
		t.Fatalf("first take: %v, want a NexthopSet then one EgressSet", got)
	}
	p.add([]Change{{Kind: NexthopDel, ID: 1, NextHop: gw}, {Kind: EgressDel, ID: 1, NextHop: gw}})
	if got := kinds(p.take()); !slices.Equal(got, []ChangeKind{EgressDel, NexthopDel}) {
		t.Fatalf("second take: %v, want the EgressDel before the NexthopDel", got)
	}
}

// An FE whose inter-FE link table does not parse is still associated, with
// no links and a warning; an FE that does not know the component (an older
// FE) has none.
func TestInterFELinksMalformed(t *testing.T) {
	logs := &logtest.Recorder{}
	c := startCELog(t, time.Second, slog.New(logs))
	f1, _ := dialFE(t, c, 1)
	f1.links = []forces.InterFELink{{Port: 3, PeerFE: 2}}
	f1.linksRaw = []byte{0, 0, 0, 0, 1, 0x12, 0, 8, 0, 0, 0, 3} // a row of 4 bytes
	f1.fullSync()
	go keepAlive(f1)
	f2, _ := dialFE(t, c, 2) // no link component
	f2.fullSync()
	go keepAlive(f2)
	st := statusOf(t, c)
	if len(st.FEs) != 2 || st.FEs[0].InterFELinks != nil || st.FEs[1].InterFELinks != nil {
		t.Fatalf("FEs %+v", st.FEs)
	}
	if !logs.Has("WARN forces: FE's inter-FE link table is malformed; taken for none") {
		t.Fatal("no warning for the malformed link table")
	}
}

// A port event that carries the inter-FE link table updates the FE's
// links; one whose table does not parse leaves them.
func TestInterFELinksInEvents(t *testing.T) {
	c := startCE(t, time.Second)
	f, _ := dialFE(t, c, 2)
	f.ports = []forces.PortInfo{port(5, true)}
	f.fullSync()
	go keepAlive(f)
	s := c.session(context.Background(), f.id)
	event := func(links []byte) {
		data, err := port(5, false).AppendFullData(nil)
		if err != nil {
			t.Fatal(err)
		}
		m := forces.NewEventNotification(f.id, forces.CEID(0), 1, forces.PortTableClass, forces.PortTableInstance,
			[]uint32{forces.PortTableComponent, 5}, data)
		op := &m.LFBs[0].Ops[0]
		op.Paths = append(op.Paths, forces.PathData{IDs: []uint32{forces.InterFELinksComponent}, FullData: links, HasFullData: true})
		s.event(context.Background(), m)
	}
	table, err := forces.MarshalInterFELinks([]forces.InterFELink{{Port: 5, PeerFE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	event(table)
	want := []FELink{{Port: 5, PortName: "p5", PeerFE: 1}}
	if got := statusOf(t, c).FEs[0].InterFELinks; !slices.Equal(got, want) {
		t.Fatalf("links after the event: %+v, want %+v", got, want)
	}
	event([]byte{0, 0, 0, 0, 1, 0x12, 0, 6, 0, 0})
	if got := statusOf(t, c).FEs[0].InterFELinks; !slices.Equal(got, want) {
		t.Fatalf("links after a malformed table: %+v, want %+v", got, want)
	}
}
