package datapath

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"

	pfx "github.com/splitplane/splitplane/internal/prefix"
)

// The range table of xdp.c (dxr_direct, dxr_ranges, dxr_values), after DXR
// (Zec, Rizzo, Mikuc: "DXR: towards a billion routing lookups per second
// in software", SIGCOMM CCR 2012); the values repeat the defines in maps.h.
//
// The IPv4 address space is cut into 65,536 chunks of a /16. Inside a chunk
// the longest match changes only at a few addresses: the starts of its
// ranges, where one prefix's addresses end and another's (or nothing's)
// begin. An edge router's table of a million prefixes, reaching the world
// through a few upstreams, has about that many ranges (neighbouring
// prefixes often share their next hop and then merge), which at 4 bytes a
// range is a few MB, where DIR-24-8's tbl24 alone is 64 MB. So a lookup
// reads:
//   - dxr_direct[addr >> 16]: the chunk's FIB entry itself when the whole
//     chunk has one (a leaf, encoded as in tbl24: 0 or FIB_VALID | id), or
//     DXR_RANGES | log2(block size) << 24 | block base, or DXR_TBL24 when
//     the chunk did not fit (more than dxrMaxRanges ranges, value table or
//     range rows full): then tbl24 and tbl8 decide, as before;
//   - the chunk's block of dxr_ranges, 2^k entries of start << 16 | value
//     index, sorted by start, the first starting at 0, padded to the power
//     of two by repeating the last: a binary search of exactly k steps finds
//     the last range starting at or before addr & 0xffff. Most chunks hold
//     only prefixes of /24 and shorter, and an edge router few next hops:
//     when every start of a chunk is a multiple of 256 and every value index
//     below 256, its entries are 16 bits, start >> 8 << 8 | index
//     (DXR_SHORT in the direct entry), half the memory;
//   - dxr_values[index]: the FIB entry.
//
// The router's own IPv4 addresses are in the range table too, as ranges of
// one address whose entry is FIB_VALID | FIB_LOCAL: the one lookup of a
// packet tells a packet for the router from one to forward, and no hash
// of the local addresses is read on the way (a /16 on DIR-24-8 still reads
// local_addrs).
//
// DIR-24-8 (fib.go) stays the control structure: it computes the longest
// matches, and dxr derives each changed chunk's ranges from its 256 tbl24
// entries (and their tbl8 groups) after every batch. A chunk is switched
// from its old ranges to its new ones with one atomic store of its direct
// entry, after the new block is written, so a reader sees either; old
// blocks and value indexes are reused only after a grace period.
const (
	dxrChunks     = 1 << 16
	dxrRowEntries = 4096 // DXR_ROW: ranges per row of dxr_ranges
	dxrMaxLog     = 12   // a block is at most a row, and never crosses one
	dxrMaxRanges  = 1 << dxrMaxLog
	dxrRanges     = 1 << 31 // DXR_RANGES
	dxrTbl24      = 1 << 29 // DXR_TBL24
	dxrShort      = 1 << 28 // DXR_SHORT: 16-bit range entries
	dxrShortMax   = 256     // value indexes a 16-bit entry can name
	dxrLogShift   = 24
	dxrBaseMask   = 0xffffff
	dxrValueCount = 1 << 16 // dxr_values entries (DXR_VALUES); index 0 is "no route"
	fibLocal      = 1 << 27 // FIB_LOCAL: with fibValid, an address of the router

	// DXRRangeRows is the default of dxr_ranges' rows (16 KiB each): 4M
	// ranges, room for an edge-shaped table of several million routes.
	DXRRangeRows = 1024
)

// dxrBlock is a block of dxr_ranges: its first word and log2 of its size
// in words.
type dxrBlock struct {
	base uint32
	log  uint8
}

func (b dxrBlock) words() int { return 1 << b.log }

// blockOf returns the block of a direct entry with DXR_RANGES: a short
// block of 2^k entries takes 2^(k-1) words.
func blockOf(e uint32) dxrBlock {
	k := uint8(e >> dxrLogShift & 0xf)
	if e&dxrShort != 0 {
		k--
	}
	return dxrBlock{e & dxrBaseMask, k}
}

// dxr is the range table's control structure. Like fib it is not safe for
// concurrent use; Datapath serialises the calls.
type dxr struct {
	f *fib
	// direct, ranges and values are the mmapped BPF arrays (plain slices
	// in tests).
	direct, ranges, values []uint32
	// ranges16 is ranges as 16-bit entries, for the short blocks (on a
	// little-endian machine, entry 2w is the low half of ranges[w], as the
	// BPF program reads it).
	ranges16 []uint16

	// valueIndex maps a FIB entry to its index in values; refs counts the
	// range entries (padding included) that use each index.
	valueIndex map[uint32]uint16
	refs       []uint32
	freeValues []uint16

	// blocks are dxr_ranges' blocks.
	blocks blockPool

	// Released value indexes wait in quarantine for a grace period (as
	// released blocks do in blocks): a reader may still use them.
	quarValues []uint16
	grace      func() error

	// locals are the router's IPv4 addresses (host order); local24
	// counts them per /24.
	locals  map[uint32]struct{}
	local24 map[uint32]int

	// dirty marks the chunks to rebuild, listed in dirtyList.
	dirty     []bool
	dirtyList []uint32

	// Scratch of a chunk's rebuild.
	starts []uint16
	vals   []uint32
	idxs   []uint16

	stats DXRStats
}

// DXRStats says how the range table holds the IPv4 FIB.
type DXRStats struct {
	// Chunks (/16s) by representation: one entry for the whole /16 in
	// dxr_direct, a block of ranges, or DIR-24-8 (tbl24 and tbl8).
	LeafChunks, RangeChunks, TBL24Chunks int
	// ShortChunks are the RangeChunks with 16-bit entries.
	ShortChunks int
	// RangeWords is the number of 32-bit words of dxr_ranges in published
	// blocks (padding included); Values the value indexes in use;
	// TBL8Groups the tbl8 groups of the chunks on DIR-24-8.
	RangeWords, Values, TBL8Groups int
}

// statsNow returns the statistics, with the tbl8 groups of the chunks on
// DIR-24-8 counted from tbl24 (there are few such chunks).
func (x *dxr) statsNow() DXRStats {
	s := x.stats
	if s.TBL24Chunks == 0 {
		return s
	}
	for c, d := range x.direct {
		if d&dxrTbl24 == 0 || d&dxrRanges != 0 {
			continue
		}
		for _, e := range x.f.tbl24[c<<8 : c<<8+fibGroupEntries] {
			if e&fibGroup != 0 {
				s.TBL8Groups++
			}
		}
	}
	return s
}

func newDXR(f *fib, direct, ranges, values []uint32, grace func() error) *dxr {
	x := &dxr{
		f: f, direct: direct, ranges: ranges, values: values,
		valueIndex: map[uint32]uint16{0: 0},
		refs:       make([]uint32, len(values)),
		blocks:     newBlockPool(dxrMaxLog, len(ranges)),
		grace:      grace,
		dirty:      make([]bool, dxrChunks),
		locals:     make(map[uint32]struct{}),
		local24:    make(map[uint32]int),
	}
	for i := len(values) - 1; i >= 1; i-- {
		x.freeValues = append(x.freeValues, uint16(i))
	}
	x.refs[0] = 1 // never released
	x.stats.LeafChunks = dxrChunks
	if len(ranges) > 0 {
		x.ranges16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(ranges))), 2*len(ranges))
	}
	f.dxr = x
	return x
}

// setLocal adds (on) or removes the router's address a and rebuilds its
// chunk.
func (x *dxr) setLocal(a uint32, on bool) {
	_, had := x.locals[a]
	switch {
	case on && !had:
		x.locals[a] = struct{}{}
		x.local24[a>>8]++
	case !on && had:
		delete(x.locals, a)
		if x.local24[a>>8]--; x.local24[a>>8] == 0 {
			delete(x.local24, a>>8)
		}
	default:
		return
	}
	x.mark(a >> 16)
	x.update()
}

func (x *dxr) mark(c uint32) {
	if !x.dirty[c] {
		x.dirty[c] = true
		x.dirtyList = append(x.dirtyList, c)
	}
}

// markV4 marks the chunks the prefixes touch.
func (x *dxr) markV4(ps []pfx.V4) {
	for _, p := range ps {
		first, n := p.Addr()>>16, uint32(1)
		if p.Bits() < 16 {
			n = 1 << (16 - p.Bits())
		}
		for c := first; c < first+n; c++ {
			x.mark(c)
		}
	}
}

// update rebuilds the marked chunks from the DIR-24-8 tables.
func (x *dxr) update() {
	for _, c := range x.dirtyList {
		x.dirty[c] = false
		x.rebuild(c)
	}
	x.dirtyList = x.dirtyList[:0]
}

// scan lists chunk c's ranges from tbl24 and tbl8, with the router's own
// addresses, into x.starts and x.vals.
func (x *dxr) scan(c uint32) {
	x.starts, x.vals = x.starts[:0], x.vals[:0]
	prev := uint32(fibGroup) // no value has the group flag
	emit := func(start int, v uint32) {
		if v != prev {
			x.starts, x.vals = append(x.starts, uint16(start)), append(x.vals, v)
			prev = v
		}
	}
	t24 := x.f.tbl24[c<<8 : c<<8+fibGroupEntries]
	for i, e := range t24 {
		locals := len(x.local24) > 0 && x.local24[c<<8|uint32(i)] > 0
		if e&fibGroup == 0 && !locals {
			emit(i<<8, e)
			continue
		}
		for j := range fibGroupEntries {
			v := e
			if e&fibGroup != 0 {
				v = x.f.tbl8[(e&fibGroupMask)*fibGroupEntries+uint32(j)]
			}
			if locals {
				if _, ok := x.locals[c<<16|uint32(i)<<8|uint32(j)]; ok {
					v = fibValid | fibLocal
				}
			}
			emit(i<<8|j, v)
		}
	}
}

// rebuild makes chunk c's direct entry (and block) hold what tbl24 says.
func (x *dxr) rebuild(c uint32) {
	x.scan(c)
	old := x.direct[c]
	n := len(x.starts)
	var next uint32
	switch {
	case n == 1:
		next = x.vals[0]
	case n > dxrMaxRanges:
		next = dxrTbl24
	default:
		if x.same(old) {
			return
		}
		var ok bool
		if next, ok = x.publishRanges(); !ok {
			next = dxrTbl24
		}
	}
	if next == old {
		return
	}
	atomic.StoreUint32(&x.direct[c], next)
	x.count(old, -1)
	x.count(next, 1)
	if old&dxrRanges != 0 {
		x.release(old)
	}
}

// count keeps the chunk statistics.
func (x *dxr) count(e uint32, d int) {
	switch {
	case e&dxrRanges != 0:
		x.stats.RangeChunks += d
		x.stats.RangeWords += d * blockOf(e).words()
		if e&dxrShort != 0 {
			x.stats.ShortChunks += d
		}
	case e&dxrTbl24 != 0:
		x.stats.TBL24Chunks += d
	default:
		x.stats.LeafChunks += d
	}
}

// blockLog is log2 of the block that holds n ranges.
func blockLog(n int) uint8 {
	return uint8(bits.Len(uint(n - 1)))
}

// same tells whether the direct entry old already holds the scanned
// ranges.
func (x *dxr) same(old uint32) bool {
	k := blockLog(len(x.starts))
	if old&dxrRanges == 0 || uint8(old>>dxrLogShift&0xf) != k || (old&dxrShort != 0) != x.short() {
		return false
	}
	base := old & dxrBaseMask
	for i := range 1 << k {
		j := min(i, len(x.starts)-1) // the padding repeats the last range
		start, idx := x.entry(old, base, i)
		if start != x.starts[j] || x.values[idx] != x.vals[j] {
			return false
		}
	}
	return true
}

// short tells whether the scanned ranges can have 16-bit entries, as far as
// their starts go (their values must also have indexes below 256).
func (x *dxr) short() bool {
	for _, s := range x.starts {
		if s&0xff != 0 {
			return false
		}
	}
	return true
}

// entry returns range i of the block at base of direct entry e.
func (x *dxr) entry(e, base uint32, i int) (start uint16, idx uint16) {
	if e&dxrShort != 0 {
		v := x.ranges16[2*base+uint32(i)]
		return v &^ 0xff, v & 0xff
	}
	v := x.ranges[base+uint32(i)]
	return uint16(v >> 16), uint16(v)
}

// publishRanges writes the scanned ranges to a new block and returns its
// direct entry, or false if the values or the blocks ran out (the chunk
// then stays on DIR-24-8).
func (x *dxr) publishRanges() (uint32, bool) {
	n, k := len(x.starts), blockLog(len(x.starts))
	idxs := x.idxs[:0]
	short := x.short()
	for i, v := range x.vals {
		idx, ok := x.value(v)
		if !ok {
			x.unrefIdx(idxs) // the values taken so far
			return 0, false
		}
		idxs = append(idxs, idx)
		x.refs[idx]++
		if idx >= dxrShortMax {
			short = false
		}
		if i == n-1 {
			x.refs[idx] += 1<<k - uint32(n) // the padding
		}
	}
	x.idxs = idxs
	e := dxrRanges | uint32(k)<<dxrLogShift
	if short {
		e |= dxrShort
	}
	b, ok := x.alloc(blockOf(e).log)
	if !ok {
		x.unrefPadded(idxs, k)
		return 0, false
	}
	e |= b
	if short {
		blk := x.ranges16[2*b : 2*b+1<<k]
		for i := range blk {
			j := min(i, n-1)
			blk[i] = x.starts[j] | idxs[j]
		}
	} else {
		blk := x.ranges[b : b+1<<k]
		for i := range blk {
			j := min(i, n-1)
			blk[i] = uint32(x.starts[j])<<16 | uint32(idxs[j])
		}
	}
	return e, true
}

// unrefPadded drops the references publishRanges took for a block of 2^k
// entries over idxs.
func (x *dxr) unrefPadded(idxs []uint16, k uint8) {
	for i := range 1 << k {
		x.unrefIdx(idxs[min(i, len(idxs)-1):][:1])
	}
}

// value returns the index of FIB entry v in values, allocating one.
func (x *dxr) value(v uint32) (uint16, bool) {
	if idx, ok := x.valueIndex[v]; ok {
		return idx, true
	}
	if len(x.freeValues) == 0 {
		if len(x.quarValues) == 0 || x.grace() != nil {
			return 0, false
		}
		x.recycle()
	}
	idx := x.freeValues[len(x.freeValues)-1]
	x.freeValues = x.freeValues[:len(x.freeValues)-1]
	x.values[idx] = v // before any range refers to it
	x.valueIndex[v] = idx
	x.stats.Values++
	return idx, true
}

// unrefIdx drops one reference of each value index.
func (x *dxr) unrefIdx(idxs []uint16) {
	for _, idx := range idxs {
		if x.refs[idx]--; x.refs[idx] == 0 {
			delete(x.valueIndex, x.values[idx])
			x.quarValues = append(x.quarValues, idx)
			x.stats.Values--
		}
	}
}

// release quarantines the block of direct entry e and its value references.
func (x *dxr) release(e uint32) {
	base := e & dxrBaseMask
	for i := range 1 << (e >> dxrLogShift & 0xf) {
		_, idx := x.entry(e, base, i)
		x.unrefIdx([]uint16{idx})
	}
	x.blocks.release(blockOf(e))
}

// alloc returns the base of a free block of 2^k entries, from the pool or,
// when all rows are in use, one released before the grace period it waits
// for.
func (x *dxr) alloc(k uint8) (uint32, bool) {
	if b, ok := x.blocks.alloc(k); ok {
		return b, true
	}
	if !x.blocks.waiting() || x.grace() != nil {
		return 0, false
	}
	x.recycle()
	return x.blocks.take(k)
}

// recycle frees what waited in quarantine, once grace has returned. The
// free value indexes are kept sorted, highest first, so that the lowest are
// taken first: short blocks need indexes below 256.
func (x *dxr) recycle() {
	x.freeValues = append(x.freeValues, x.quarValues...)
	x.quarValues = x.quarValues[:0]
	slices.SortFunc(x.freeValues, func(a, b uint16) int { return int(b) - int(a) })
	x.blocks.recycle()
}

// lookup returns the FIB entry for addr as the XDP program finds it.
func (x *dxr) lookup(addr uint32) uint32 {
	d := x.direct[addr>>16]
	switch {
	case d&dxrRanges != 0:
		k, base, lo := d>>dxrLogShift&0xf, d&dxrBaseMask, uint16(addr)
		i := 0
		for s := int(k) - 1; s >= 0; s-- {
			j := i | 1<<s
			if start, _ := x.entry(d, base, j); start <= lo {
				i = j
			}
		}
		_, idx := x.entry(d, base, i)
		return x.values[idx]
	case d&dxrTbl24 != 0:
		e := x.f.tbl24[addr>>8]
		if e&fibGroup != 0 {
			e = x.f.tbl8[(e&fibGroupMask)<<8|addr&0xff]
		}
		return e
	default:
		return d
	}
}

// Bytes is the memory a lookup can read: dxr_direct, the published
// blocks, the values in use, and for the chunks on DIR-24-8 their tbl24
// rows and tbl8 groups.
func (s DXRStats) Bytes() int {
	return 4 * (dxrChunks + s.RangeWords + s.Values + (s.TBL24Chunks+s.TBL8Groups)*fibGroupEntries)
}
