package fe

import (
	"iter"
	"net/netip"

	"github.com/splitplane/splitplane/internal/flatmap"
	"github.com/splitplane/splitplane/internal/prefix"
)

// prefixMap maps an address family's prefixes to values. The FE keeps a
// million IPv4 prefixes in several of them (the table's index, what the
// datapath holds, what a batch touched), and a full sync fills them from
// empty: for IPv4 they are open-addressed integer maps (internal/flatmap),
// which insert about three times faster than Go's map at that size (one
// probe into one flat, pointer-free array). IPv6 prefixes, fewer and wider,
// stay in a Go map.
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
	// prefetch starts loading where a get, put or del of the prefix will
	// look, for a loop that knows its next prefixes (aheadOf).
	prefetch(K)
}

// newPrefixMap returns an empty map for about n prefixes.
func newPrefixMap[K comparable, V any](n int) prefixMap[K, V] {
	var k K
	if _, ok := any(k).(prefix.V4); ok {
		return any(map4[V]{flatmap.New[prefix.V4, V](n)}).(prefixMap[K, V])
	}
	return goMap[K, V](make(map[K]V, n))
}

// map4 holds IPv4 prefixes.
type map4[V any] struct{ m *flatmap.Map[prefix.V4, V] }

func (m map4[V]) get(p prefix.V4) (V, bool)    { return m.m.Get(p) }
func (m map4[V]) put(p prefix.V4, v V)         { m.m.Put(p, v) }
func (m map4[V]) del(p prefix.V4)              { m.m.Del(p) }
func (m map4[V]) len() int                     { return m.m.Len() }
func (m map4[V]) all() iter.Seq2[prefix.V4, V] { return m.m.All() }
func (m map4[V]) prefetch(p prefix.V4)         { m.m.Prefetch(p) }

func (m map4[V]) clone() prefixMap[prefix.V4, V] {
	c := flatmap.New[prefix.V4, V](m.m.Len())
	for k, v := range m.m.All() {
		c.Put(k, v)
	}
	return map4[V]{c}
}

// goMap holds IPv6 prefixes.
type goMap[K comparable, V any] map[K]V

func (m goMap[K, V]) get(p K) (V, bool) { v, ok := m[p]; return v, ok }
func (m goMap[K, V]) put(p K, v V)      { m[p] = v }
func (m goMap[K, V]) del(p K)           { delete(m, p) }
func (m goMap[K, V]) len() int          { return len(m) }
func (m goMap[K, V]) prefetch(K)        {}

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
