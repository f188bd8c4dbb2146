package fe

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefix"
)

func routeItem(row uint32, p netip.Prefix, hop uint32) forces.Item {
	info := forces.IPv4PrefixInfo{Prefix: p, HopSelector: hop}
	return forces.Item{ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Op: forces.OpSet, Path: []uint32{1, row}, FullData: info.MarshalFullData(), HasFullData: true}
}

func delRowItem(row uint32) forces.Item {
	return forces.Item{ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Op: forces.OpDel, Path: []uint32{1, row}}
}

// A full sync staged in a transaction indexes its prefixes only when the
// table is first used; the result must be exactly that of indexing every
// row as it comes (what an all-or-none batch does): random sequences of
// sets and deletes, with prefixes set in several rows and rows set again.
func TestDeferredIndexMatchesImmediate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	nh := forces.IPv4NextHopInfo{NextHop: netip.MustParseAddr("10.0.0.2")}
	for round := range 300 {
		n := 1 + r.IntN(60)
		items := []forces.Item{
			{ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Op: forces.OpSet, Path: []uint32{1, 1}, FullData: nh.MarshalFullData(), HasFullData: true},
			{ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Op: forces.OpDel, Path: []uint32{1}},
		}
		for range n {
			row := uint32(1 + r.IntN(20))
			switch {
			case round%3 == 0 && r.IntN(8) == 0:
				items = append(items, delRowItem(row))
			default:
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(r.IntN(12)), 0}), 24)
				items = append(items, routeItem(row, p, 1))
			}
		}
		// Rows 1..5 from an earlier sync, which the DEL of the table drops.
		seed := func() *table {
			tb := newTable()
			applyItem(tb, items[0], nil, nil)
			for row := uint32(1); row <= 5; row++ {
				applyItem(tb, routeItem(row, netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, byte(row), 0}), 24), 1), nil, nil)
			}
			return tb
		}
		deferred, immediate := seed().stage(), seed()
		var undo []func()
		var errD, errI []string
		for _, it := range items[1:] {
			errD = append(errD, fmt.Sprint(applyItem(deferred, it, nil, nil)))
			errI = append(errI, fmt.Sprint(applyItem(immediate, it, nil, &undo)))
		}
		if fmt.Sprint(errD) != fmt.Sprint(errI) {
			t.Fatalf("round %d: results differ:\n deferred  %v\n immediate %v", round, errD, errI)
		}
		gotIdx, wantIdx := maps.Collect(deferred.v4.index().all()), maps.Collect(immediate.v4.index().all())
		if !maps.Equal(gotIdx, wantIdx) {
			t.Fatalf("round %d: index %v, want %v", round, gotIdx, wantIdx)
		}
		gotRows, wantRows := map[uint32]rowSlot[prefix.V4]{}, map[uint32]rowSlot[prefix.V4]{}
		maps.Insert(gotRows, deferred.v4.rows.all())
		maps.Insert(wantRows, immediate.v4.rows.all())
		if !maps.Equal(gotRows, wantRows) {
			t.Fatalf("round %d: rows %v, want %v", round, gotRows, wantRows)
		}
		if deferred.v4.len() != len(wantIdx) {
			t.Fatalf("round %d: len %d, want %d", round, deferred.v4.len(), len(wantIdx))
		}
	}
}

// BenchmarkApplyFullSync applies a full sync's Config items to a table the
// way applyNow does (each item read, the IPv4 route rows prefetched ahead),
// staged like a transaction: the FE's side of a full table.
func BenchmarkApplyFullSync(b *testing.B) {
	const n = 100_000
	nh := forces.IPv4NextHopInfo{NextHop: netip.MustParseAddr("10.0.0.2")}
	items := []forces.Item{
		{ClassID: forces.ClassIPv4NextHop, InstanceID: 1, Op: forces.OpSet, Path: []uint32{1, 1}, FullData: nh.MarshalFullData(), HasFullData: true},
		{ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Op: forces.OpDel, Path: []uint32{1}},
	}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		items = append(items, routeItem(uint32(i+1), netip.PrefixFrom(a, 32), 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		tb := newTable().stage()
		// In messages of 1,600 rows, as the CE sends a full sync.
		for start := 0; start < len(items); start += 1600 {
			if err := applyItems(tb, items[start:min(start+1600, len(items))]); err != nil {
				b.Fatal(err)
			}
		}
		if tb.v4.len() != n {
			b.Fatalf("%d routes", tb.v4.len())
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}

// applyItems applies items to tb in order, as applyNow does, with no undo;
// the first error stops it.
func applyItems(tb *table, items []forces.Item) error {
	for _, r := range tb.decoded(items) {
		if err := tb.apply(r, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// applyItem decodes one item and applies it to tb.
func applyItem(tb *table, it forces.Item, d *dirty, undo *[]func()) error {
	var r cfgRow
	r.err = r.Row.Decode(&it)
	return tb.apply(&r, d, undo)
}
