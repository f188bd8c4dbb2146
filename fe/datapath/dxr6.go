package datapath

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The IPv6 range table of xdp.c (dxr6_direct, dxr6_sub, dxr6_ranges), DXR
// (dxr.go) for the shape of the IPv6 Internet table; the values repeat the
// defines in maps.h.
//
// The full IPv6 table lives in a few dozen /16s (the RIRs' blocks) and is
// made of LIR allocations (/29, /32) and their more-specifics down to /48,
// few longer. In the stride table (fib6.go) nearly every such route opens
// groups of its own at /40 and /48, so a lookup there walks four or five
// groups spread over hundreds of MB. Here a lookup reads:
//   - dxr6_direct[addr >> 112]: the /16's FIB entry when the whole /16 has
//     one (0 or FIB_VALID | id), DXR6_SUB | group when it holds longer
//     prefixes, DXR6_STRIDE when no sub group was left;
//   - the sub group's entry for the /24 (addr >> 104 & 0xff): a FIB entry
//     for the whole /24, DXR_RANGES | log2(block size) << 24 | block base,
//     or DXR6_STRIDE when the /24 holds prefixes longer than /64, more
//     than dxr6MaxRanges ranges, or no block was left;
//   - the /24's block of dxr6_ranges, 2^k 64-bit entries of start << 24 |
//     value, start being address bits 24 to 63 (prefixes up to /64 start
//     and end on such a boundary) and value 0 or DXR6_VALID | nexthop id,
//     sorted and padded as in dxr.go: a binary search of exactly k steps
//     finds the last range starting at or before the address;
//   - DXR6_STRIDE: the stride table decides, as before.
//
// The value sits in the range entry itself: an IPv6 FIB entry needs only
// its valid bit and nexthop id (the router's own IPv6 addresses are in
// local_addrs6), so a lookup reads no value table.
//
// The stride table stays the control structure; dxr6 derives each changed
// /24 from its groups after every batch, switching the /24 with one atomic
// store of its sub entry once the new block is written, and a /16 with one
// store of its direct entry once its new sub group is filled. Released
// blocks and sub groups are reused only after a grace period.
const (
	dxr6DirectEntries = 1 << 16
	dxr6RowEntries    = 2048 // DXR6_ROW: ranges per row of dxr6_ranges
	dxr6MaxLog        = 11   // a block is at most a row
	dxr6MaxRanges     = 1 << dxr6MaxLog
	dxr6Sub           = 1 << 28  // DXR6_SUB
	dxr6Stride        = dxrTbl24 // DXR6_STRIDE
	dxr6ValueBits     = 24
	dxr6ValueMask     = 1<<dxr6ValueBits - 1
	dxr6Valid         = 1 << 23 // DXR6_VALID, in a range entry's value

	// DXR6SubGroups is the number of sub groups (1 KiB each, one per /16
	// holding prefixes longer than /16): the full table needs about 100,
	// prefixes spread over 2000::/3 at most 8,192.
	DXR6SubGroups = 4096
	// DXR6RangeRows is the number of rows of dxr6_ranges (16 KiB each):
	// 1M ranges, several times what the full table needs.
	DXR6RangeRows = 512
)

// dxr6 is the IPv6 range table's control structure. Like fib6 it is not
// safe for concurrent use; Datapath serialises the calls.
type dxr6 struct {
	f *fib6
	// direct, sub and ranges are the mmapped BPF arrays (plain slices in
	// tests).
	direct, sub []uint32
	ranges      []uint64

	blocks blockPool
	// free sub groups can be used at once; quarSubs were released since
	// the last grace period.
	freeSubs, quarSubs []uint32
	grace              func() error

	// dirty16 marks the /16s to rebuild whole, listed in dirtyList;
	// dirty24 holds the /24s (address >> 104) to rebuild.
	dirty16   []bool
	dirtyList []uint32
	dirty24   map[uint32]struct{}

	// Scratch of a /24's rebuild: its range starts (bits 24 to 63) and
	// values; deep when it holds prefixes longer than /64.
	starts []uint64
	vals   []uint32
	deep   bool

	stats DXR6Stats
}

// DXR6Stats says how the range table holds the IPv6 FIB.
type DXR6Stats struct {
	// SubGroups is the number of /16s with a sub group; RangeChunks the
	// /24s with a block of ranges, RangeWords the 64-bit entries of
	// those blocks (padding included); StrideChunks the /16s and /24s
	// looked up in the stride table.
	SubGroups, RangeChunks, RangeWords, StrideChunks int
}

func newDXR6(f *fib6, direct, sub []uint32, ranges []uint64, grace func() error) *dxr6 {
	x := &dxr6{
		f: f, direct: direct, sub: sub, ranges: ranges,
		blocks:  newBlockPool(dxr6MaxLog, len(ranges)),
		grace:   grace,
		dirty16: make([]bool, dxr6DirectEntries),
		dirty24: make(map[uint32]struct{}),
	}
	for g := len(sub)/fibGroupEntries - 1; g >= 0; g-- {
		x.freeSubs = append(x.freeSubs, uint32(g))
	}
	f.dxr = x
	return x
}

// u64s is ranges, an mmapped array of 64-bit entries, as the Go side
// writes it.
func u64s(ranges []uint32) []uint64 {
	if len(ranges) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(ranges))), len(ranges)/2)
}

// mark notes the /16s and /24s that prefixes change: a prefix of /16 or
// shorter rebuilds its /16s whole, a longer one its /24s.
func (x *dxr6) mark(ps []prefix6) {
	for _, p := range ps {
		c16 := uint32(p.addr[0])<<8 | uint32(p.addr[1])
		if p.bits <= 16 {
			for c := c16; c < c16+1<<(16-p.bits); c++ {
				if !x.dirty16[c] {
					x.dirty16[c] = true
					x.dirtyList = append(x.dirtyList, c)
				}
			}
			continue
		}
		c24 := c16<<8 | uint32(p.addr[2])
		n := uint32(1)
		if p.bits < 24 {
			n = 1 << (24 - p.bits)
		}
		for c := c24; c < c24+n; c++ {
			x.dirty24[c] = struct{}{}
		}
	}
}

// update rebuilds what mark noted from the stride table.
func (x *dxr6) update() {
	for _, c := range x.dirtyList {
		x.rebuild16(c)
	}
	for c := range x.dirty24 {
		if !x.dirty16[c>>8] {
			x.rebuild24(c)
		}
	}
	for _, c := range x.dirtyList {
		x.dirty16[c] = false
	}
	x.dirtyList = x.dirtyList[:0]
	clear(x.dirty24)
}

// rebuild24 makes /24 c's sub entry hold what the stride table says; a /16
// without a sub group, or whose prefixes no longer need one, is rebuilt
// whole.
func (x *dxr6) rebuild24(c uint32) {
	d := x.direct[c>>8]
	if d&dxr6Sub == 0 || x.f.tbl16[c>>8]&fibGroup == 0 {
		x.dirty16[c>>8] = true // not again for another /24 of it
		x.dirtyList = append(x.dirtyList, c>>8)
		x.rebuild16(c >> 8)
		return
	}
	x.rebuildSubEntry(&x.sub[int(d&dxrBaseMask)<<8|int(c&0xff)], c)
}

// rebuild16 makes /16 c's direct entry, and its sub group, hold what the
// stride table says.
func (x *dxr6) rebuild16(c uint32) {
	e := x.f.tbl16[c]
	old := x.direct[c]
	next := e
	if e&fibGroup != 0 {
		if old&dxr6Sub != 0 {
			base := int(old&dxrBaseMask) << 8
			for i := range uint32(fibGroupEntries) {
				x.rebuildSubEntry(&x.sub[base+int(i)], c<<8|i)
			}
			return
		}
		next = dxr6Stride
		if g, ok := x.allocSub(); ok {
			base := int(g) << 8
			for i := range uint32(fibGroupEntries) {
				v := x.build24(c<<8|i, 0)
				x.sub[base+int(i)] = v
				x.count(v, 1)
			}
			next = dxr6Sub | g
			x.stats.SubGroups++
		}
	}
	if next == old {
		return
	}
	atomic.StoreUint32(&x.direct[c], next)
	if next&dxr6Stride != 0 {
		x.stats.StrideChunks++
	}
	switch {
	case old&dxr6Sub != 0:
		x.releaseSub(old & dxrBaseMask)
	case old&dxr6Stride != 0:
		x.stats.StrideChunks--
	}
}

// rebuildSubEntry rebuilds /24 c in its published sub entry slot.
func (x *dxr6) rebuildSubEntry(slot *uint32, c uint32) {
	old := *slot
	next := x.build24(c, old)
	if next == old {
		return
	}
	atomic.StoreUint32(slot, next)
	x.count(old, -1)
	x.count(next, 1)
	x.releaseEntry(old)
}

// count keeps the statistics of the sub entries.
func (x *dxr6) count(e uint32, d int) {
	switch {
	case e&dxrRanges != 0:
		x.stats.RangeChunks += d
		x.stats.RangeWords += d << (e >> dxrLogShift & 0xf)
	case e&dxr6Stride != 0:
		x.stats.StrideChunks += d
	}
}

// releaseEntry quarantines the block of sub entry e, if it has one.
func (x *dxr6) releaseEntry(e uint32) {
	if e&dxrRanges != 0 {
		x.blocks.release(dxrBlock{e & dxrBaseMask, uint8(e >> dxrLogShift & 0xf)})
	}
}

// releaseSub quarantines an unpublished sub group and its blocks.
func (x *dxr6) releaseSub(g uint32) {
	for _, e := range x.sub[int(g)<<8 : int(g+1)<<8] {
		x.count(e, -1)
		x.releaseEntry(e)
	}
	x.quarSubs = append(x.quarSubs, g)
	x.stats.SubGroups--
}

// allocSub returns a free sub group, waiting for a grace period if only
// released ones are left.
func (x *dxr6) allocSub() (uint32, bool) {
	if len(x.freeSubs) == 0 {
		if len(x.quarSubs) == 0 || x.grace() != nil {
			return 0, false
		}
		x.recycle()
	}
	g := x.freeSubs[len(x.freeSubs)-1]
	x.freeSubs = x.freeSubs[:len(x.freeSubs)-1]
	return g, true
}

// alloc returns the base of a free block of 2^k ranges, waiting for a
// grace period if only released ones are left.
func (x *dxr6) alloc(k uint8) (uint32, bool) {
	if b, ok := x.blocks.alloc(k); ok {
		return b, true
	}
	if !x.blocks.waiting() || x.grace() != nil {
		return 0, false
	}
	x.recycle()
	return x.blocks.take(k)
}

// recycle frees what waited in quarantine, once grace has returned.
func (x *dxr6) recycle() {
	x.freeSubs = append(x.freeSubs, x.quarSubs...)
	x.quarSubs = x.quarSubs[:0]
	x.blocks.recycle()
}

// value6 is the range entry value of stride table entry e.
func value6(e uint32) uint64 {
	if e&fibValid == 0 {
		return 0
	}
	return dxr6Valid | uint64(e&fibNexthopMask)
}

// build24 returns the sub entry of /24 c, whose old entry is old (reused
// when its block already holds the ranges). The /16's stride entry must be
// a group.
func (x *dxr6) build24(c uint32, old uint32) uint32 {
	g1 := x.f.tbl16[c>>8] & fibGroupMask
	e := x.f.tbl8[int(g1)<<8|int(c&0xff)]
	if e&fibGroup == 0 {
		return e
	}
	x.starts, x.vals, x.deep = x.starts[:0], x.vals[:0], false
	x.scan(e&fibGroupMask, 2, 0)
	n := len(x.starts)
	switch {
	case x.deep || n > dxr6MaxRanges:
		return dxr6Stride
	case n == 1:
		return x.vals[0]
	case x.same(old):
		return old
	}
	k := uint8(bits.Len(uint(n - 1)))
	b, ok := x.alloc(k)
	if !ok {
		return dxr6Stride
	}
	blk := x.ranges[b : b+1<<k]
	for i := range blk {
		j := min(i, n-1) // the padding repeats the last range
		blk[i] = x.starts[j]<<dxr6ValueBits | value6(x.vals[j])
	}
	return dxrRanges | uint32(k)<<dxrLogShift | b
}

// scan lists the ranges of stride group g at level k (indexed by address
// byte k+1), reached by address bits 24 to 63 start, into x.starts and
// x.vals; a group below level 6 (address byte 7) sets x.deep. It stops
// once there are more ranges than a block holds.
func (x *dxr6) scan(g uint32, k int, start uint64) {
	shift := 8 * (6 - k)
	for j, e := range x.f.tbl8[int(g)<<8 : int(g+1)<<8] {
		if x.deep || len(x.starts) > dxr6MaxRanges {
			return
		}
		s := start | uint64(j)<<shift
		if e&fibGroup != 0 {
			if k == 6 {
				x.deep = true
				return
			}
			x.scan(e&fibGroupMask, k+1, s)
			continue
		}
		if n := len(x.vals); n == 0 || x.vals[n-1] != e {
			x.starts, x.vals = append(x.starts, s), append(x.vals, e)
		}
	}
}

// same tells whether sub entry old's block already holds the scanned
// ranges.
func (x *dxr6) same(old uint32) bool {
	k := uint8(bits.Len(uint(len(x.starts) - 1)))
	if old&dxrRanges == 0 || uint8(old>>dxrLogShift&0xf) != k {
		return false
	}
	blk := x.ranges[old&dxrBaseMask:][:1<<k]
	for i, r := range blk {
		j := min(i, len(x.starts)-1)
		if r != x.starts[j]<<dxr6ValueBits|value6(x.vals[j]) {
			return false
		}
	}
	return true
}

// lookup returns the nexthop id for addr as the XDP program finds it.
func (x *dxr6) lookup(addr [16]byte) (uint32, bool) {
	hi := binary.BigEndian.Uint64(addr[:8])
	d := x.direct[hi>>48]
	if d&dxr6Sub != 0 {
		d = x.sub[int(d&dxrBaseMask)<<8|int(hi>>40&0xff)]
	}
	switch {
	case d&dxrRanges != 0:
		k, blk := d>>dxrLogShift&0xf, x.ranges[d&dxrBaseMask:]
		key := hi << dxr6ValueBits
		i := 0
		for s := int(k) - 1; s >= 0; s-- {
			if j := i | 1<<s; blk[j]&^dxr6ValueMask <= key {
				i = j
			}
		}
		v := blk[i] & dxr6ValueMask
		return uint32(v) & fibNexthopMask, v&dxr6Valid != 0
	case d&dxr6Stride != 0:
		return x.f.lookup(addr)
	}
	return d & fibNexthopMask, d&fibValid != 0
}

// strideGroups counts the stride table's groups below the /16s and /24s
// left to it.
func (x *dxr6) strideGroups() int {
	var below func(e uint32) int
	below = func(e uint32) int {
		if e&fibGroup == 0 {
			return 0
		}
		g := e & fibGroupMask
		n := 1
		for _, c := range x.f.tbl8[int(g)<<8 : int(g+1)<<8] {
			n += below(c)
		}
		return n
	}
	n := 0
	for c, d := range x.direct {
		switch {
		case d&dxr6Stride != 0:
			n += below(x.f.tbl16[c])
		case d&dxr6Sub != 0:
			g1 := x.f.tbl16[c] & fibGroupMask
			for i, e := range x.sub[int(d&dxrBaseMask)<<8:][:fibGroupEntries] {
				if e&dxr6Stride != 0 && e&dxrRanges == 0 {
					n += below(x.f.tbl8[int(g1)<<8|i])
				}
			}
		}
	}
	return n
}

// statsNow returns the statistics.
func (x *dxr6) statsNow() DXR6Stats { return x.stats }

// Bytes is the memory a lookup can read outside the stride table:
// dxr6_direct, the sub groups in use and the published blocks.
func (s DXR6Stats) Bytes() int {
	return 4*(dxr6DirectEntries+s.SubGroups*fibGroupEntries) + 8*s.RangeWords
}
