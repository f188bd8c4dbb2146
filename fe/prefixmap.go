package fe

import (
	"iter"
	"math/bits"
	"net/netip"

	"github.com/kamstrup/intmap"
)

// prefixMap maps an address family's prefixes to values. The FE keeps a
// million IPv4 prefixes in several of them (the table's index, what the
// datapath holds, what a batch touched), and a full sync fills them from
// empty: for IPv4 they are open-addressed integer maps (intmap), which
// insert about three times faster than Go's map at that size (one probe
// into one flat, pointer-free array). IPv6 prefixes, fewer and wider, stay
// in a Go map.
//
// Unlike a Go map, a prefixMap must not be changed while it is iterated:
// collect the keys first.
type prefixMap[K comparable, V any] interface {
	get(K) (V, bool)
	put(K, V)
	del(K)
	len() int
	all() iter.Seq2[K, V]
	clone() prefixMap[K, V]
}

// newPrefixMap returns an empty map for about n prefixes.
func newPrefixMap[K comparable, V any](n int) prefixMap[K, V] {
	var k K
	if _, ok := any(k).(prefix4); ok {
		return any(map4[V]{intmap.New[uint64, V](n)}).(prefixMap[K, V])
	}
	return goMap[K, V](make(map[K]V, n))
}

// map4 holds IPv4 prefixes. intmap hashes a key by multiplying it with a
// 32-bit constant, which leaves the top bits of a 64-bit key out of the
// slot: the key is the prefix4 rotated so that the address takes the low 32
// bits (and the length, which varies little, the top byte).
type map4[V any] struct{ m *intmap.Map[uint64, V] }

func key4(p prefix4) uint64     { return bits.RotateLeft64(uint64(p), -8) }
func fromKey4(k uint64) prefix4 { return prefix4(bits.RotateLeft64(k, 8)) }

func (m map4[V]) get(p prefix4) (V, bool) { return m.m.Get(key4(p)) }
func (m map4[V]) put(p prefix4, v V)      { m.m.Put(key4(p), v) }
func (m map4[V]) del(p prefix4)           { m.m.Del(key4(p)) }
func (m map4[V]) len() int                { return m.m.Len() }

func (m map4[V]) all() iter.Seq2[prefix4, V] {
	return func(yield func(prefix4, V) bool) {
		m.m.ForEach(func(k uint64, v V) bool { return yield(fromKey4(k), v) })
	}
}

func (m map4[V]) clone() prefixMap[prefix4, V] {
	c := intmap.New[uint64, V](m.m.Len())
	m.m.ForEach(func(k uint64, v V) bool { c.Put(k, v); return true })
	return map4[V]{c}
}

// goMap holds IPv6 prefixes.
type goMap[K comparable, V any] map[K]V

func (m goMap[K, V]) get(p K) (V, bool) { v, ok := m[p]; return v, ok }
func (m goMap[K, V]) put(p K, v V)      { m[p] = v }
func (m goMap[K, V]) del(p K)           { delete(m, p) }
func (m goMap[K, V]) len() int          { return len(m) }

func (m goMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range m {
			if !yield(k, v) {
				return
			}
		}
	}
}

func (m goMap[K, V]) clone() prefixMap[K, V] {
	c := make(goMap[K, V], len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

var _ prefixMap[netip.Prefix, uint32] = goMap[netip.Prefix, uint32]{}
