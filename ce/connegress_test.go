package ce

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// connOf describes connected changes as "SET row prefix FE n port p" or
// "DEL row prefix".
func connOf(ch []Change) []string {
	var out []string
	for _, c := range ch {
		switch c.Kind {
		case ConnectedSet:
			out = append(out, fmt.Sprintf("SET %d %s FE %d port %d", c.ID, c.Prefix, c.Egress.FE, c.Egress.Port))
		case ConnectedDel:
			out = append(out, fmt.Sprintf("DEL %d %s", c.ID, c.Prefix))
		}
	}
	return out
}

// One row per subnet of a port that is up: a subnet several FEs have is
// the lowest FE's (then its lowest port's), link-local ones have none, a
// row keeps its index while its prefix stays, a port that goes down or an
// FE that leaves deletes its rows, and a new prefix takes the lowest free
// index.
func TestConnectedRows(t *testing.T) {
	e := newEgress()
	e.setPorts(forces.FEID(2), []forces.PortInfo{port(5, true, "10.20.2.1/24", "fd00:20:2::1/64", "fe80::1/64"), port(4, true, "10.9.0.2/24")})
	e.setPorts(forces.FEID(1), []forces.PortInfo{port(3, true, "10.20.1.1/24"), port(7, false, "10.20.7.1/24"), port(8, true, "10.9.0.1/24")})
	out, refused := e.recomputeConnected(nil)
	want := []string{
		"SET 0 10.9.0.0/24 FE 1 port 8",
		"SET 1 10.20.1.0/24 FE 1 port 3",
		"SET 2 10.20.2.0/24 FE 2 port 5",
		"SET 3 fd00:20:2::/64 FE 2 port 5",
	}
	if got := connOf(out); !slices.Equal(got, want) || len(refused) != 0 {
		t.Fatalf("first rows %q (refused %v), want %q", got, refused, want)
	}
	if out, _ := e.recomputeConnected(nil); len(out) != 0 {
		t.Fatalf("nothing changed, yet %q", connOf(out))
	}
	if got := connOf(e.connSnapshot()); !slices.Equal(got, want) {
		t.Fatalf("snapshot %q, want %q", got, want)
	}
	if n := e.connCounts(); n[1] != 2 || n[2] != 2 {
		t.Fatalf("rows per FE: %v", n)
	}

	// FE 1 leaves: its rows go, but 10.9.0.0/24 moves to FE 2 in its row.
	e.setPorts(forces.FEID(1), nil)
	out, _ = e.recomputeConnected(nil)
	want = []string{"DEL 1 10.20.1.0/24", "SET 0 10.9.0.0/24 FE 2 port 4"}
	if got := connOf(out); !slices.Equal(got, want) {
		t.Fatalf("FE 1 left: %q, want %q", got, want)
	}
	// FE 3 comes with a new subnet: the lowest free index, 1.
	e.setPorts(forces.FEID(3), []forces.PortInfo{port(1, true, "10.20.3.1/24")})
	out, _ = e.recomputeConnected(nil)
	if got, want := connOf(out), []string{"SET 1 10.20.3.0/24 FE 3 port 1"}; !slices.Equal(got, want) {
		t.Fatalf("FE 3 came: %q, want %q", got, want)
	}
	// FE 2's port 5 goes down.
	e.setPorts(forces.FEID(2), []forces.PortInfo{port(5, false, "10.20.2.1/24", "fd00:20:2::1/64"), port(4, true, "10.9.0.2/24")})
	out, _ = e.recomputeConnected(nil)
	if got, want := connOf(out), []string{"DEL 2 10.20.2.0/24", "DEL 3 fd00:20:2::/64"}; !slices.Equal(got, want) {
		t.Fatalf("port down: %q, want %q", got, want)
	}
}

// More subnets than rows: the first MaxConnectedRows (by prefix) get
// one, the others are returned as refused, and get one once a row frees.
func TestConnectedRowsFull(t *testing.T) {
	e := newEgress()
	var addrs []string
	for i := range forces.MaxConnectedRows + 2 {
		addrs = append(addrs, fmt.Sprintf("10.%d.%d.1/24", i>>8, i&0xff))
	}
	e.setPorts(forces.FEID(1), []forces.PortInfo{port(1, true, addrs...)})
	out, refused := e.recomputeConnected(nil)
	if len(out) != forces.MaxConnectedRows || len(refused) != 2 || refused[0] != netip.MustParsePrefix("10.16.0.0/24") {
		t.Fatalf("%d rows, refused %v", len(out), refused)
	}
	if last := out[len(out)-1]; last.ID != forces.MaxConnectedRows-1 {
		t.Fatalf("last row %d", last.ID)
	}
	e.setPorts(forces.FEID(1), []forces.PortInfo{port(1, true, addrs[1:]...)})
	out, refused = e.recomputeConnected(nil)
	if got, want := connOf(out), []string{"DEL 0 10.0.0.0/24", "SET 0 10.16.0.0/24 FE 1 port 1"}; !slices.Equal(got, want) || len(refused) != 1 {
		t.Fatalf("a row freed: %q (refused %v), want %q", got, refused, want)
	}
}

// An FE's queue sends connected deletions before connected sets, and
// drops a DEL of a row the FE never got.
func TestPendingConnected(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.20.2.0/24"), netip.MustParsePrefix("fd00:20:2::/64")
	eg := forces.NexthopEgressInfo{FE: 2, Port: 5}
	p := newPending()
	p.add([]Change{{Kind: ConnectedSet, ID: 0, Prefix: v4, Egress: eg}, {Kind: ConnectedSet, ID: 1, Prefix: v6, Egress: eg},
		{Kind: ConnectedSet, ID: 2, Prefix: v4, Egress: eg}, {Kind: ConnectedDel, ID: 2, Prefix: v4}})
	if got, want := connOf(p.take()), []string{"SET 0 10.20.2.0/24 FE 2 port 5", "SET 1 fd00:20:2::/64 FE 2 port 5"}; !slices.Equal(got, want) {
		t.Fatalf("first take %q, want %q", got, want)
	}
	// Row 0 moves from IPv4 to IPv6: deleted first.
	p.add([]Change{{Kind: ConnectedSet, ID: 0, Prefix: v6, Egress: eg}, {Kind: ConnectedDel, ID: 0, Prefix: v4}})
	if got, want := connOf(p.take()), []string{"DEL 0 10.20.2.0/24", "SET 0 fd00:20:2::/64 FE 2 port 5"}; !slices.Equal(got, want) {
		t.Fatalf("second take %q, want %q", got, want)
	}
}

var connLFBs = append(slices.Clone(egressLFBs),
	forces.SupportedLFB{Name: "SplitplaneIPv4ConnectedEgress", ClassID: forces.ClassIPv4ConnectedEgress, Version: "1.0"})

// connItems describes the connected rows among items.
func connItems(t *testing.T, items []forces.Item) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		switch {
		case it.ClassID == forces.ClassIPv4ConnectedEgress && it.Op == forces.OpSet:
			r, err := forces.DecodeRow(&it)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("SET %d %s FE %d port %d", r.Index, r.Prefix, r.Egress.FE, r.Egress.Port))
		case it.ClassID == forces.ClassIPv4ConnectedEgress && len(it.Path) == 2:
			out = append(out, fmt.Sprintf("%s %d", it.Op, it.Path[1]))
		case it.ClassID == forces.ClassIPv4ConnectedEgress:
			out = append(out, fmt.Sprintf("%s table", it.Op))
		}
	}
	return out
}

// Two FEs that list the connected LFB get every FE's port subnets in
// their full sync, after the table is emptied, and each change as it
// comes; an FE without the LFB gets none.
func TestConnectedRowsAcrossFEs(t *testing.T) {
	c := startCEWith(t, time.Second, slog.New(slog.DiscardHandler), nil)
	f1, _ := dialFE(t, c, 1)
	f1.lfbs, f1.ports = connLFBs, []forces.PortInfo{port(1, true, "10.20.1.1/24"), port(9, true)}
	if got, want := connItems(t, f1.fullSync()), []string{"DEL table", "SET 0 10.20.1.0/24 FE 1 port 1"}; !slices.Equal(got, want) {
		t.Fatalf("FE 1's full sync: %q, want %q", got, want)
	}
	f2, _ := dialFE(t, c, 2)
	f2.lfbs, f2.ports = connLFBs, []forces.PortInfo{port(5, true, "10.20.2.1/24")}
	want := []string{"DEL table", "SET 0 10.20.1.0/24 FE 1 port 1", "SET 1 10.20.2.0/24 FE 2 port 5"}
	if got := connItems(t, f2.fullSync()); !slices.Equal(got, want) {
		t.Fatalf("FE 2's full sync: %q, want %q", got, want)
	}
	if got := connItems(t, f1.rows(1)); !slices.Equal(got, want[2:]) {
		t.Fatalf("FE 1 got %q when FE 2 came, want %q", got, want[2:])
	}
	f3, _ := dialFE(t, c, 3)
	f3.ports = []forces.PortInfo{port(7, true, "10.20.3.1/24")}
	for _, it := range f3.fullSync() {
		if it.ClassID == forces.ClassIPv4ConnectedEgress {
			t.Fatalf("FE 3, without the connected LFB, got %+v", it)
		}
	}
	go keepAlive(f3)
	for name, f := range map[string]*fakeFE{"FE 1": f1, "FE 2": f2} {
		if got, want := connItems(t, f.rows(1)), []string{"SET 2 10.20.3.0/24 FE 3 port 7"}; !slices.Equal(got, want) {
			t.Fatalf("%s got %q when FE 3 came, want %q", name, got, want)
		}
	}

	connOfFE := map[string]int{}
	for _, fe := range statusOf(t, c).FEs {
		connOfFE[fe.ID] = fe.ConnectedOf
	}
	if fmt.Sprint(connOfFE) != "map[FE(1):1 FE(2):1 FE(3):1]" {
		t.Fatalf("subnets each FE is the egress of: %v", connOfFE)
	}

	// FE 2's port goes down: its row goes, on both FEs.
	s := c.session(context.Background(), f2.id)
	data, err := port(5, false, "10.20.2.1/24").AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.event(context.Background(), forces.NewEventNotification(f2.id, forces.CEID(0), 1, forces.PortTableClass, forces.PortTableInstance,
		[]uint32{forces.PortTableComponent, 5}, data))
	for name, f := range map[string]*fakeFE{"FE 1": f1, "FE 2": f2} {
		if got, want := connItems(t, f.rows(1)), []string{"DEL 1"}; !slices.Equal(got, want) {
			t.Fatalf("%s got %q when FE 2's port went down, want %q", name, got, want)
		}
	}
	// FE 3 leaves: its row goes.
	if err := f3.conn.WriteMessage(forces.NewAssociationTeardown(f3.id, c.id, uint32(forces.TeardownNormal))); err != nil {
		t.Fatal(err)
	}
	if got, want := connItems(t, f1.rows(1)), []string{"DEL 2"}; !slices.Equal(got, want) {
		t.Fatalf("FE 1 got %q when FE 3 left, want %q", got, want)
	}
}
