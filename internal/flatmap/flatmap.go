// Package flatmap is a hash map with integer keys kept in one flat,
// pointer-free array (open addressing, linear probing): the million-entry
// IPv4 route tables of the CE and the FE.
//
// It replaces github.com/kamstrup/intmap, which has the same layout, for
// how a table's memory is first touched: every insert reads a slot before it
// writes one, and a large table is fresh memory, so each page was faulted
// twice, the second time with a TLB flush on every CPU (17 - 19 µs per 4 KiB
// page on the development VM, against 2 µs for a first write; see
// host.Prefault). Here a table is written once per page as it is allocated.
// The hash also mixes every bit of the key (intmap multiplies by a 32-bit
// constant and needs the varying bits of a key low), and Prefetch lets a
// loop over many keys overlap their cache misses.
//
// Like intmap, and unlike a Go map, a Map must not be changed while it is
// iterated.
package flatmap

import (
	"iter"

	"github.com/splitplane/splitplane/internal/host"
	"github.com/splitplane/splitplane/internal/prefetch"
)

// Key is the integer types a Map takes as keys.
type Key interface {
	~uint32 | ~uint64 | ~int32 | ~int64 | ~uint | ~int
}

// slot is one entry of the table; key 0 marks an empty slot (the map keeps
// the value of key 0 aside).
type slot[K Key, V any] struct {
	k K
	v V
}

// Map maps integer keys to values. Make one with New; a nil *Map reads as
// empty (Len, Get, Has, All).
type Map[K Key, V any] struct {
	slots []slot[K, V] // a power of two in length
	mask  uint64
	n     int // entries in slots (key 0 not counted)
	grow  int // n at which the table doubles

	zero    V
	hasZero bool
}

// minSlots is the smallest table.
const minSlots = 8

// New returns an empty map with room for capacity entries before it grows.
func New[K Key, V any](capacity int) *Map[K, V] {
	size := minSlots
	for size*3/4 < capacity {
		size *= 2
	}
	m := &Map[K, V]{}
	m.alloc(size)
	return m
}

// alloc gives m an empty table of size slots, written once per page.
func (m *Map[K, V]) alloc(size int) {
	m.slots = make([]slot[K, V], size)
	host.Prefault(m.slots)
	m.mask = uint64(size - 1)
	m.n = 0
	m.grow = size * 3 / 4
}

// hash mixes every bit of k into every bit of the result (the finalizer of
// MurmurHash3), so keys that differ only in a few bits, such as adjacent
// prefixes, land far apart.
func hash[K Key](k K) uint64 {
	h := uint64(k)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() int {
	if m == nil {
		return 0
	}
	if m.hasZero {
		return m.n + 1
	}
	return m.n
}

// Get returns the value of k and whether k is in the map.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m == nil {
		var none V
		return none, false
	}
	if k == 0 {
		return m.zero, m.hasZero
	}
	for i := hash(k) & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.k == k {
			return s.v, true
		}
		if s.k == 0 {
			var none V
			return none, false
		}
	}
}

// Has reports whether k is in the map.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// Put sets the value of k.
func (m *Map[K, V]) Put(k K, v V) {
	if k == 0 {
		m.zero, m.hasZero = v, true
		return
	}
	for i := hash(k) & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.k == k {
			s.v = v
			return
		}
		if s.k == 0 {
			s.k, s.v = k, v
			m.n++
			if m.n >= m.grow {
				m.resize()
			}
			return
		}
	}
}

// resize doubles the table.
func (m *Map[K, V]) resize() {
	old := m.slots
	m.alloc(2 * len(old))
	for i := range old {
		if s := &old[i]; s.k != 0 {
			m.insertNew(s.k, s.v)
		}
	}
}

// insertNew puts k, known not to be in the table, which has room.
func (m *Map[K, V]) insertNew(k K, v V) {
	i := hash(k) & m.mask
	for m.slots[i].k != 0 {
		i = (i + 1) & m.mask
	}
	m.slots[i] = slot[K, V]{k, v}
	m.n++
}

// Del removes k and reports whether it was in the map.
func (m *Map[K, V]) Del(k K) bool {
	if k == 0 {
		had := m.hasZero
		var none V
		m.zero, m.hasZero = none, false
		return had
	}
	i := hash(k) & m.mask
	for ; m.slots[i].k != k; i = (i + 1) & m.mask {
		if m.slots[i].k == 0 {
			return false
		}
	}
	// Backward shift: move up each later entry of the run whose home slot
	// does not lie between the hole and it, so that no probe for it ever
	// meets an empty slot before reaching it.
	for j := (i + 1) & m.mask; m.slots[j].k != 0; j = (j + 1) & m.mask {
		home := hash(m.slots[j].k) & m.mask
		if (j-home)&m.mask >= (j-i)&m.mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = slot[K, V]{}
	m.n--
	return true
}

// All returns the entries in no particular order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m == nil {
			return
		}
		if m.hasZero && !yield(0, m.zero) {
			return
		}
		for _, s := range m.slots {
			if s.k != 0 && !yield(s.k, s.v) {
				return
			}
		}
	}
}

// Prefetch starts loading the slot where a lookup of k begins, so that a
// Get, Put or Del of k a few operations later (prefetch.Ahead) finds it in
// the cache.
func (m *Map[K, V]) Prefetch(k K) {
	if m == nil {
		return
	}
	prefetch.Index(m.slots, int(hash(k)&m.mask))
}
