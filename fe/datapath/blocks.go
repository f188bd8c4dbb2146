package datapath

// blockPool hands out the blocks of a range table (dxr_ranges, dxr6_ranges):
// runs of 2^k entries that never cross a row of 2^maxLog entries, split and
// merged as buddies. Rows are cut into blocks only as they are needed.
// Released blocks wait in quarantine until the owner has seen a grace
// period: a reader may still be searching them.
type blockPool struct {
	maxLog uint8
	// free holds the free blocks of each size, by base; rows is how many
	// of maxRows rows have been cut into blocks so far.
	free          []map[uint32]struct{}
	rows, maxRows int
	quarantine    []dxrBlock
}

func newBlockPool(maxLog uint8, entries int) blockPool {
	p := blockPool{maxLog: maxLog, maxRows: entries >> maxLog, free: make([]map[uint32]struct{}, maxLog+1)}
	for i := range p.free {
		p.free[i] = make(map[uint32]struct{})
	}
	return p
}

// alloc returns the base of a free block of 2^k entries: a free one of that
// size, one split from a larger one, or one from a new row. When it fails,
// waiting tells whether blocks in quarantine could help after a grace
// period (then recycle and take again).
func (p *blockPool) alloc(k uint8) (uint32, bool) {
	if b, ok := p.take(k); ok {
		return b, true
	}
	if p.rows < p.maxRows {
		p.free[p.maxLog][uint32(p.rows)<<p.maxLog] = struct{}{}
		p.rows++
		return p.take(k)
	}
	return 0, false
}

func (p *blockPool) waiting() bool { return len(p.quarantine) > 0 }

// take returns a free block of 2^k entries, split from a larger one if it
// has to.
func (p *blockPool) take(k uint8) (uint32, bool) {
	for j := k; j <= p.maxLog; j++ {
		for b := range p.free[j] {
			delete(p.free[j], b)
			for ; j > k; j-- { // split, keeping the lower half
				p.free[j-1][b+1<<(j-1)] = struct{}{}
			}
			return b, true
		}
	}
	return 0, false
}

// release puts b in quarantine.
func (p *blockPool) release(b dxrBlock) {
	p.quarantine = append(p.quarantine, b)
}

// recycle frees the quarantined blocks; the owner's grace period must have
// returned since they were released.
func (p *blockPool) recycle() {
	for _, b := range p.quarantine {
		p.freeBlock(b)
	}
	p.quarantine = p.quarantine[:0]
}

// freeBlock returns a block to the free lists, merged with its buddy while
// that is free too.
func (p *blockPool) freeBlock(b dxrBlock) {
	for b.log < p.maxLog {
		buddy := b.base ^ 1<<b.log
		if _, ok := p.free[b.log][buddy]; !ok {
			break
		}
		delete(p.free[b.log], buddy)
		b = dxrBlock{min(b.base, buddy), b.log + 1}
	}
	p.free[b.log][b.base] = struct{}{}
}
