package ce

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

var (
	pfxA = netip.MustParsePrefix("198.51.100.0/24")
	pfxB = netip.MustParsePrefix("203.0.113.0/24")
	nh1  = netip.MustParseAddr("10.10.2.2")
	nh2  = netip.MustParseAddr("10.10.3.2")
)

func kinds(ch []Change) string {
	s := ""
	for _, c := range ch {
		switch c.Kind {
		case NexthopSet:
			s += fmt.Sprintf("nh+%d=%s ", c.ID, c.NextHop)
		case NexthopDel:
			s += fmt.Sprintf("nh-%d ", c.ID)
		case RouteSet:
			if c.ECMP {
				s += fmt.Sprintf("rt+%d=%s>g%d ", c.Row, c.Prefix, c.ID)
				continue
			}
			s += fmt.Sprintf("rt+%d=%s>%d ", c.Row, c.Prefix, c.ID)
		case GroupSet:
			s += fmt.Sprintf("g+%d=%v ", c.ID, c.Members)
		case GroupDel:
			s += fmt.Sprintf("g-%d ", c.ID)
		case RouteDel:
			s += fmt.Sprintf("rt-%d ", c.Row)
		}
	}
	return s
}

func TestFIBChanges(t *testing.T) {
	f := NewFIB()
	steps := []struct {
		name string
		do   func([]Change) []Change
		want string
	}{
		{"first route brings its nexthop first", func(o []Change) []Change { o, _ = f.Set(pfxA, nh1, o); return o },
			"nh+1=10.10.2.2 rt+1=198.51.100.0/24>1 "},
		{"same route again changes nothing", func(o []Change) []Change { o, _ = f.Set(pfxA, nh1, o); return o }, ""},
		{"unmasked prefix is the same route", func(o []Change) []Change {
			o, _ = f.Set(netip.MustParsePrefix("198.51.100.7/24"), nh1, o)
			return o
		}, ""},
		{"second route shares the nexthop", func(o []Change) []Change { o, _ = f.Set(pfxB, nh1, o); return o },
			"rt+2=203.0.113.0/24>1 "},
		{"moving a route keeps its row; nexthop added before, none freed", func(o []Change) []Change { o, _ = f.Set(pfxB, nh2, o); return o },
			"nh+2=10.10.3.2 rt+2=203.0.113.0/24>2 "},
		{"last user of a nexthop frees it after the route", func(o []Change) []Change { o, _ = f.Set(pfxA, nh2, o); return o },
			"rt+1=198.51.100.0/24>2 nh-1 "},
		{"delete frees the row; missing delete is a no-op", func(o []Change) []Change {
			o = f.Delete(pfxA, o)
			return f.Delete(pfxA, o)
		}, "rt-1 "},
		{"freed rows and ids are reused", func(o []Change) []Change { o, _ = f.Set(pfxA, nh1, o); return o },
			"nh+1=10.10.2.2 rt+1=198.51.100.0/24>1 "},
		{"deleting everything frees every nexthop", func(o []Change) []Change { return f.Delete(pfxB, f.Delete(pfxA, o)) },
			"rt-1 nh-1 rt-2 nh-2 "},
	}
	for _, s := range steps {
		if got := kinds(s.do(nil)); got != s.want {
			t.Fatalf("%s:\n got  %q\n want %q", s.name, got, s.want)
		}
	}
	if f.Len() != 0 || len(f.nexthops) != 0 {
		t.Fatalf("FIB not empty: %d routes, %d nexthops", f.Len(), len(f.nexthops))
	}
}

func TestFIBSnapshot(t *testing.T) {
	f := NewFIB()
	f.Set(pfxA, nh1, nil)
	f.Set(pfxB, nh2, nil)
	snap := f.Snapshot()
	slices.SortStableFunc(snap[2:], func(a, b Change) int { return cmp.Compare(a.Row, b.Row) })
	got := kinds(snap)
	want := "nh+1=10.10.2.2 nh+2=10.10.3.2 rt+1=198.51.100.0/24>1 rt+2=203.0.113.0/24>2 "
	if got != want {
		t.Fatalf("snapshot %q, want %q", got, want)
	}
}

// The snapshot, copied from the FIB's row-ordered array, holds exactly the
// FIB's routes, in row order, after random sets, ECMP sets and deletes of
// both families (rows freed and reused).
func TestFIBSnapshotMatchesRoutes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	fs := fibs{v4: NewFIB(), v6: NewFIB()}
	var ps []netip.Prefix
	for i := range 6000 { // v4 rows span more than one page
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>8), byte(i), 0}), 24),
			netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)}), 48))
	}
	hops := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"),
		netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")}
	mutate := func(n int) {
		for range n {
			p := ps[r.IntN(len(ps))]
			f := fs.of(p)
			fam := hops[:3]
			if !p.Addr().Is4() {
				fam = hops[3:]
			}
			switch r.IntN(4) {
			case 0:
				f.Delete(p, nil)
			case 1:
				f.SetECMP(p, fam[:2], nil)
			default:
				f.Set(p, fam[r.IntN(len(fam))], nil)
			}
		}
	}
	routes := func() (want []string) {
		for _, f := range []*FIB{fs.v4, fs.v6} {
			for p, rt := range f.routes.all() {
				c := f.change(p, rt)
				want = append(want, fmt.Sprintf("%s row %d id %d ecmp %t first %d", c.Prefix, c.Row, c.ID, c.ECMP, c.First))
			}
		}
		slices.Sort(want)
		return want
	}
	check := func(s *Snapshot, want []string, v4 int) {
		t.Helper()
		var got []string
		var rows []uint32
		for ch := range s.Chunks(64) {
			for _, c := range ch {
				if c.Kind == RouteSet {
					got = append(got, fmt.Sprintf("%s row %d id %d ecmp %t first %d", c.Prefix, c.Row, c.ID, c.ECMP, c.First))
					rows = append(rows, c.Row)
				}
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("snapshot routes:\n%v\nFIB routes:\n%v", got, want)
		}
		if !slices.IsSorted(rows[:v4]) || !slices.IsSorted(rows[v4:]) {
			t.Fatalf("snapshot rows not in row order per family: %v", rows)
		}
	}
	mutate(20000)
	s1, want1, v41 := fs.Snapshot(), routes(), fs.v4.Len()
	check(s1, want1, v41)
	// The FIBs change on; each snapshot keeps what they held when taken.
	mutate(20000)
	s2, want2, v42 := fs.Snapshot(), routes(), fs.v4.Len()
	mutate(20000)
	check(s1, want1, v41)
	check(s2, want2, v42)
	check(fs.Snapshot(), routes(), fs.v4.Len())
}

func TestFIBNexthopTableFull(t *testing.T) {
	f := NewFIB()
	for i := 0; i < forces.MaxNexthopID; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		if _, ok := f.Set(p, a, nil); !ok {
			t.Fatalf("nexthop %d refused before the table is full", i+1)
		}
	}
	out, ok := f.Set(pfxA, netip.MustParseAddr("192.0.2.1"), nil)
	if ok || len(out) != 0 {
		t.Fatalf("a route needing nexthop %d was accepted (%v)", forces.MaxNexthopID+1, kinds(out))
	}
	if _, exists := f.Lookup(pfxA); exists {
		t.Fatal("the refused route is in the FIB")
	}
}

func BenchmarkFIBSet(b *testing.B) {
	f := NewFIB()
	var out []Change
	for i := 0; b.Loop(); i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 0}), 24)
		out, _ = f.Set(p, nh1, out[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}

// Pending changes coalesce per row, in an order the FE can apply, and a row
// set and deleted before it was ever sent is not sent at all.
func TestPendingCoalesces(t *testing.T) {
	f := NewFIB()
	p := newPending()
	ch, _ := f.Set(pfxA, nh1, nil) // nh 1, row 1
	p.synced(ch)                   // the FE has them

	var burst []Change
	burst, _ = f.Set(pfxA, nh2, burst) // row 1 -> nh 2 (new), nh 1 freed
	burst, _ = f.Set(pfxB, nh1, burst) // nh 1 again (reused id), row 2
	burst = f.Delete(pfxB, burst)      // row 2 gone again, nh 1 freed again
	burst, _ = f.Set(pfxA, nh1, burst) // row 1 back to nh 1 (id reused), nh 2 freed
	p.add(burst)
	got := kinds(p.take())
	// Row 1's final state and nexthop 1's; nexthop 2 was never sent, and row
	// 2 never reached the FE.
	if want := "nh+1=10.10.2.2 rt+1=198.51.100.0/24>1 "; got != want {
		t.Fatalf("coalesced %q, want %q", got, want)
	}
	if p.len() != 0 {
		t.Fatal("take left changes behind")
	}
	// Deleting what the FE has is sent, deletes before sets.
	p.add(f.Delete(pfxA, nil))
	if got, want := kinds(p.take()), "rt-1 nh-1 "; got != want {
		t.Fatalf("delete: %q, want %q", got, want)
	}
}

// Whatever order rows change in, take hands each kind over in row order
// (IPv4 before IPv6), with only each row's last change.
func TestPendingRowOrder(t *testing.T) {
	p := newPending()
	var ch []Change
	rows := []uint32{7, 3, 9, 1, 3, 12, 2, 7}
	for i, r := range rows {
		pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(r), 0}), 24)
		ch = append(ch, Change{Kind: RouteSet, Row: r, Prefix: pfx, ID: uint32(i + 1), NextHop: nh1})
	}
	ch = append(ch, Change{Kind: RouteSet, Row: 1, Prefix: netip.MustParsePrefix("2001:db8::/32"), ID: 1, NextHop: netip.MustParseAddr("2001:db8::1")})
	p.add(ch)
	var got []string
	for _, c := range p.take() {
		got = append(got, fmt.Sprintf("%d:%d", c.Row, c.ID))
	}
	// Rows 3 and 7 changed twice: their last IDs are 5 and 8.
	if want := []string{"1:4", "2:7", "3:5", "7:8", "9:3", "12:6", "1:1"}; !slices.Equal(got, want) {
		t.Fatalf("take: %v, want %v", got, want)
	}
	// In order already (a full table): the same.
	p.add(ch[3:4])
	p.add(ch[6:7])
	if got := p.take(); len(got) != 2 || got[0].Row != 1 || got[1].Row != 2 {
		t.Fatalf("take: %+v", got)
	}
}

func TestFIBECMP(t *testing.T) {
	f := NewFIB()
	nh3 := netip.MustParseAddr("10.10.4.2")
	steps := []struct {
		name string
		do   func([]Change) []Change
		want string
	}{
		{"an ECMP route brings its nexthops, then its group", func(o []Change) []Change {
			o, _ = f.SetECMP(pfxA, []netip.Addr{nh2, nh1, nh2}, o)
			return o
		}, "nh+1=10.10.2.2 nh+2=10.10.3.2 g+1=[1 2] rt+1=198.51.100.0/24>g1 "},
		{"the same set in another order is the same route", func(o []Change) []Change {
			o, _ = f.SetECMP(pfxA, []netip.Addr{nh1, nh2}, o)
			return o
		}, ""},
		{"a second route shares the group", func(o []Change) []Change {
			o, _ = f.SetECMP(pfxB, []netip.Addr{nh1, nh2}, o)
			return o
		}, "rt+2=203.0.113.0/24>g1 "},
		{"a grown set is a new group; the old one stays for the other route", func(o []Change) []Change {
			o, _ = f.SetECMP(pfxA, []netip.Addr{nh1, nh2, nh3}, o)
			return o
		}, "nh+3=10.10.4.2 g+2=[1 2 3] rt+1=198.51.100.0/24>g2 "},
		{"one next hop left: a plain route; its last group user frees the group, not the nexthops", func(o []Change) []Change {
			o, _ = f.SetECMP(pfxB, []netip.Addr{nh1}, o)
			return o
		}, "rt+2=203.0.113.0/24>1 g-1 "},
		{"deleting the last user frees the group, then the nexthops no one else uses", func(o []Change) []Change {
			return f.Delete(pfxA, o)
		}, "rt-1 g-2 nh-2 nh-3 "},
	}
	for _, s := range steps {
		if got := kinds(s.do(nil)); got != s.want {
			t.Fatalf("%s:\n got  %s\n want %s", s.name, got, s.want)
		}
	}
	if got := f.LookupAll(pfxB); !slices.Equal(got, []netip.Addr{nh1}) {
		t.Fatalf("LookupAll = %v", got)
	}
	// The snapshot of an ECMP FIB: nexthops, groups, routes.
	f.SetECMP(pfxA, []netip.Addr{nh1, nh2}, nil)
	if got := kinds(f.Snapshot()); got != "nh+1=10.10.2.2 nh+3=10.10.3.2 g+2=[1 3] rt+1=198.51.100.0/24>g2 rt+2=203.0.113.0/24>1 " { // freed IDs are reused
		t.Fatalf("snapshot: %s", got)
	}
	// More members than the datapath takes: the lowest 16.
	var many []netip.Addr
	for i := range 20 {
		many = append(many, netip.AddrFrom4([4]byte{10, 10, 9, byte(40 - i)}))
	}
	f.SetECMP(pfxB, many, nil)
	if got := f.LookupAll(pfxB); len(got) != 16 || got[0] != netip.MustParseAddr("10.10.9.21") {
		t.Fatalf("20 next hops: kept %v", got)
	}
}

// A lagging session's pending changes reuse their room from one take to the
// next while the load lasts (no allocation), and give it up when a take is
// small again.
func TestPendingKeepsRoomWhileLoaded(t *testing.T) {
	burst := func(n int) []Change {
		ch := make([]Change, n)
		for i := range ch {
			ch[i] = Change{Kind: RouteSet, Row: uint32(i + 1), Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 0}), 24), ID: 1}
		}
		return ch
	}
	big, load := burst(4*maxKeptChanges), burst(2*maxKeptChanges)
	p := newPending()
	p.add(big)
	if got := len(p.take()); got != len(big) {
		t.Fatalf("took %d of %d", got, len(big))
	}
	if allocs := testing.AllocsPerRun(5, func() {
		p.add(load)
		if got := len(p.take()); got != len(load) {
			t.Fatalf("took %d of %d", got, len(load))
		}
	}); allocs != 0 {
		t.Errorf("a burst of %d after one of %d allocated %.0f times, want 0", len(load), len(big), allocs)
	}
	p.add(load[:10])
	p.take()
	if c := cap(p.routes.list); c > maxKeptChanges {
		t.Errorf("room for %d changes kept after a take of 10", c)
	}
	if c := cap(p.out); c > maxKeptChanges {
		t.Errorf("room for %d taken changes kept after a take of 10", c)
	}
}

// BenchmarkPendingBursts: a sustained load handed to a session that lags:
// bursts of 131,072 route changes added and taken in turn, as during a bulk
// API load.
func BenchmarkPendingBursts(b *testing.B) {
	const burst = 1 << 17
	ch := make([]Change, burst)
	for i := range ch {
		ch[i] = Change{Kind: RouteSet, Row: uint32(i + 1), Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 0}), 24), ID: 1}
	}
	p := newPending()
	for b.Loop() {
		p.add(ch)
		if got := p.take(); len(got) != burst {
			b.Fatalf("took %d changes of %d", len(got), burst)
		}
	}
	b.ReportMetric(float64(b.N*burst)/b.Elapsed().Seconds(), "changes/s")
}
