package fe

import "iter"

// rowTable holds a prefix table's rows, indexed by row number, in pages of
// rowPageSize rows. The CE numbers its rows densely from 1, so a full table
// fills whole pages and a row costs an index, not a map insertion: this runs
// a million times in a full sync. Sparse numbering still works, a page per
// row at worst, up to maxRowPages pages.
type rowTable[K comparable] struct {
	pages map[uint32]*rowPage[K]
	n     int // rows in use

	// last caches the most recent page: rows usually come in order.
	lastID uint32
	last   *rowPage[K]
}

const (
	rowPageBits = 10
	rowPageSize = 1 << rowPageBits
	// maxRowPages bounds the memory a CE can make the FE spend on rows:
	// 16M rows when numbered densely.
	maxRowPages = 1 << 14
)

type rowPage[K comparable] struct {
	slots [rowPageSize]rowSlot[K]
	used  int
}

// rowSlot is one row: its prefix and the nexthop row (or, if ecmp, the
// ECMP group row) it points at.
type rowSlot[K comparable] struct {
	prefix  K
	nexthop uint32
	ecmp    bool
	used    bool
}

func newRowTable[K comparable]() rowTable[K] {
	return rowTable[K]{pages: map[uint32]*rowPage[K]{}}
}

func (t *rowTable[K]) page(row uint32) *rowPage[K] {
	id := row >> rowPageBits
	if t.last != nil && t.lastID == id {
		return t.last
	}
	p := t.pages[id]
	if p != nil {
		t.lastID, t.last = id, p
	}
	return p
}

// rowReader reads a rowTable with a page cache of its own, so that several
// goroutines can read one table at once (nothing may write it meanwhile).
type rowReader[K comparable] struct {
	t    *rowTable[K]
	id   uint32
	page *rowPage[K]
}

func (t *rowTable[K]) reader() rowReader[K] { return rowReader[K]{t: t} }

func (r *rowReader[K]) get(row uint32) (rowSlot[K], bool) {
	id := row >> rowPageBits
	if r.page == nil || r.id != id {
		r.id, r.page = id, r.t.pages[id]
		if r.page == nil {
			return rowSlot[K]{}, false
		}
	}
	s := r.page.slots[row&(rowPageSize-1)]
	return s, s.used
}

func (t *rowTable[K]) get(row uint32) (rowSlot[K], bool) {
	p := t.page(row)
	if p == nil {
		return rowSlot[K]{}, false
	}
	s := p.slots[row&(rowPageSize-1)]
	return s, s.used
}

// set stores a row. It fails only when the row needs a page beyond
// maxRowPages.
func (t *rowTable[K]) set(row uint32, prefix K, nexthop uint32, ecmp bool) bool {
	p := t.page(row)
	if p == nil {
		if len(t.pages) >= maxRowPages {
			return false
		}
		p = new(rowPage[K])
		t.pages[row>>rowPageBits] = p
		t.lastID, t.last = row>>rowPageBits, p
	}
	s := &p.slots[row&(rowPageSize-1)]
	if !s.used {
		p.used++
		t.n++
	}
	*s = rowSlot[K]{prefix: prefix, nexthop: nexthop, ecmp: ecmp, used: true}
	return true
}

func (t *rowTable[K]) del(row uint32) {
	p := t.page(row)
	if p == nil || !p.slots[row&(rowPageSize-1)].used {
		return
	}
	p.slots[row&(rowPageSize-1)] = rowSlot[K]{}
	t.n--
	if p.used--; p.used == 0 {
		delete(t.pages, row>>rowPageBits)
		t.last = nil
	}
}

// clone copies the rows, page by page (16 MiB for a million IPv4 rows: far
// cheaper than copying a map of them).
func (t *rowTable[K]) clone() rowTable[K] {
	c := rowTable[K]{pages: make(map[uint32]*rowPage[K], len(t.pages)), n: t.n}
	for id, p := range t.pages {
		cp := *p
		c.pages[id] = &cp
	}
	return c
}

// all yields the rows in use, in no particular order.
func (t *rowTable[K]) all() iter.Seq2[uint32, rowSlot[K]] {
	return func(yield func(uint32, rowSlot[K]) bool) {
		for id, p := range t.pages {
			for i := range p.slots {
				if s := p.slots[i]; s.used && !yield(id<<rowPageBits|uint32(i), s) {
					return
				}
			}
		}
	}
}
