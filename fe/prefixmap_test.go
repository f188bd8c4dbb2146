package fe

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/internal/prefix"
	"github.com/splitplane/splitplane/internal/routegen"
)

// The IPv4 prefixMap behaves as a Go map through random puts, overwrites
// and deletes, including 0.0.0.0/0 (the integer 0, which flatmap keeps
// apart) and prefixes sharing an address; a clone is independent.
func TestPrefixMap4MatchesGoMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	keys := []prefix.V4{prefix.FromV4(netip.MustParsePrefix("0.0.0.0/0")), prefix.FromV4(netip.MustParsePrefix("10.0.0.0/8")), prefix.FromV4(netip.MustParsePrefix("10.0.0.0/16"))}
	for _, p := range routegen.Generate(5000, 3) {
		keys = append(keys, prefix.FromV4(p))
	}
	m := newPrefixMap[prefix.V4, uint32](0)
	if _, ok := m.(map4[uint32]); !ok {
		t.Fatalf("IPv4 prefixes are in a %T, want map4", m)
	}
	want := map[prefix.V4]uint32{}
	var snap prefixMap[prefix.V4, uint32]
	var snapWant map[prefix.V4]uint32
	for i := range 50_000 {
		k := keys[r.IntN(len(keys))]
		if r.IntN(3) == 0 {
			m.del(k)
			delete(want, k)
		} else {
			m.put(k, uint32(i))
			want[k] = uint32(i)
		}
		if i == 25_000 {
			snap, snapWant = m.clone(), maps.Clone(want)
		}
	}
	check := func(name string, m prefixMap[prefix.V4, uint32], want map[prefix.V4]uint32) {
		t.Helper()
		if got := maps.Collect(m.all()); !maps.Equal(got, want) {
			t.Fatalf("%s: %d entries differ from the model's %d", name, len(got), len(want))
		}
		if m.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", name, m.len(), len(want))
		}
		for _, k := range keys {
			v, ok := m.get(k)
			if w, wok := want[k]; v != w || ok != wok {
				t.Fatalf("%s: get %s = %d %t, want %d %t", name, k, v, ok, w, wok)
			}
		}
	}
	check("map", m, want)
	check("clone", snap, snapWant)
}
