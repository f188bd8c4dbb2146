package fe

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/prefetch"
	"github.com/splitplane/splitplane/internal/prefix"
)

// The paged row table must behave like a map of rows.
func TestRowTableAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rows := newRowTable[prefix.V4]()
	ref := map[uint32]rowSlot[prefix.V4]{}
	for i := range 100_000 {
		row := uint32(r.IntN(5000))
		if i%97 == 0 {
			row = r.Uint32() // sparse rows get pages of their own
		}
		switch r.IntN(3) {
		case 0, 1:
			s := rowSlot[prefix.V4]{prefix: prefix.V4(r.Uint64()), nexthop: r.Uint32(), ecmp: r.IntN(2) == 0, used: true}
			if !rows.set(row, s.prefix, s.nexthop, s.ecmp) {
				t.Fatalf("set row %d refused with %d pages", row, len(rows.pages))
			}
			ref[row] = s
		case 2:
			rows.del(row)
			delete(ref, row)
		}
		if got, ok := rows.get(row); ok != (ref[row].used) || got != ref[row] {
			t.Fatalf("row %d: got %+v %t, want %+v", row, got, ok, ref[row])
		}
		if i%2000 == 0 {
			c := rows.clone()
			c.set(row, 1, 1, false) // a clone does not share pages
			if got, _ := rows.get(row); got != ref[row] {
				t.Fatalf("clone changed the original's row %d", row)
			}
		}
	}
	if rows.n != len(ref) {
		t.Fatalf("n = %d, want %d", rows.n, len(ref))
	}
	got := map[uint32]rowSlot[prefix.V4]{}
	maps.Insert(got, rows.all())
	if !maps.Equal(got, ref) {
		t.Fatalf("all yields %d rows, want %d", len(got), len(ref))
	}
}

// A CE cannot make the FE allocate without bound: past maxRowPages pages a
// row is refused with a result code, not a panic.
func TestRowTablePageLimit(t *testing.T) {
	rows := newRowTable[prefix.V4]()
	for i := range maxRowPages {
		if !rows.set(uint32(i)<<rowPageBits, 1, 1, false) {
			t.Fatalf("page %d refused", i)
		}
	}
	if rows.set(uint32(maxRowPages)<<rowPageBits, 1, 1, false) {
		t.Fatal("a row beyond the page limit was accepted")
	}
	if !rows.set(5, 1, 1, false) {
		t.Fatal("a row in an existing page was refused")
	}
	ft := newFamTable(ipv4)
	ft.rows = rows
	ft.nexthops[1] = addr4(0xc0000201)
	err := ft.setRoute(uint32(maxRowPages)<<rowPageBits, netip.MustParsePrefix("198.51.100.0/24"), 1, false, nil, nil)
	if resultOf(err) != forces.ResultMemoryError {
		t.Fatalf("err = %v (result %v), want a memory error", err, resultOf(err))
	}
}

// aheadOf yields every row of its source in order, whatever the count
// against the look-ahead, prefetches each prefix before its row is
// yielded, and stops when the loop does.
func TestAheadOfKeepsOrder(t *testing.T) {
	for _, n := range []int{0, 1, prefetch.Ahead - 1, prefetch.Ahead, prefetch.Ahead + 1, 100} {
		src := func(yield func(uint32, rowSlot[prefix.V4]) bool) {
			for i := range n {
				if !yield(uint32(i), rowSlot[prefix.V4]{prefix: prefix.V4(i)<<8 | 32, used: true}) {
					return
				}
			}
		}
		fetched := map[prefix.V4]bool{}
		var got []uint32
		for row, r := range aheadOf(src, rowPrefix, func(p prefix.V4) { fetched[p] = true }) {
			if !fetched[r.prefix] {
				t.Fatalf("n=%d: row %d yielded before its prefix was prefetched", n, row)
			}
			if r.prefix != prefix.V4(row)<<8|32 {
				t.Fatalf("n=%d: row %d came with the prefix of another", n, row)
			}
			got = append(got, row)
		}
		if len(got) != n || !slices.IsSorted(got) || n > 0 && got[n-1] != uint32(n-1) {
			t.Fatalf("n=%d: yielded %v", n, got)
		}
		stopped := 0
		for range aheadOf(src, rowPrefix, func(prefix.V4) {}) {
			if stopped++; stopped == 3 {
				break
			}
		}
		if want := min(n, 3); stopped != want {
			t.Fatalf("n=%d: %d rows after a break at 3", n, stopped)
		}
	}
}
