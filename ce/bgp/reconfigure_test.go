package bgp

import (
	"context"
	"net/netip"
	"slices"
	"testing"
)

// SetNeighbors changes a neighbour's import policy in place, adds and
// removes neighbours, and leaves an unchanged neighbour's session alone.
func TestSetNeighbors(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	strict := Neighbor{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65002, Passive: true, Import: &Policy{
		Rules: []PrefixRule{{Prefix: netip.MustParsePrefix("10.1.0.0/16"), LE: 24, Action: Accept}},
	}}
	other := Neighbor{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65003, Passive: true, Import: acceptAll}
	sp, col := startCE(t, port, nil, strict, other)
	startPeer(t, "127.0.0.2", 65002, port, 0, 0, "192.0.2.10", pfxs("10.1.1.0/24", "198.51.100.0/24")...)
	startPeer(t, "127.0.0.3", 65003, port, 0, 0, "192.0.2.11", pfxs("203.0.113.0/24")...)
	learned := func() []netip.Prefix {
		var out []netip.Prefix
		for p := range col.snapshot() {
			out = append(out, p)
		}
		slices.SortFunc(out, netip.Prefix.Compare)
		return out
	}
	eventually(t, "the policy filters 198.51.100.0/24", func() bool {
		return slices.Equal(learned(), pfxs("10.1.1.0/24", "203.0.113.0/24"))
	})
	since := func(a string) string {
		for _, n := range sp.Neighbors() {
			if n.Address == a {
				return n.State + n.Since.String()
			}
		}
		return ""
	}
	before := since("127.0.0.3")

	// The policy now accepts everything: the filtered route comes in; the
	// other neighbour is not touched.
	loose := strict
	loose.Import = &Policy{Default: Accept}
	done, err := sp.SetNeighbors(context.Background(), []Neighbor{loose, other})
	if err != nil || !slices.Equal(done, []string{"~127.0.0.2"}) {
		t.Fatalf("SetNeighbors: %v %v", done, err)
	}
	eventually(t, "the changed policy lets 198.51.100.0/24 in", func() bool {
		return slices.Equal(learned(), pfxs("10.1.1.0/24", "198.51.100.0/24", "203.0.113.0/24"))
	})
	if got := since("127.0.0.3"); got != before {
		t.Fatalf("the unchanged neighbour was reset: %s, before %s", got, before)
	}

	// The policied neighbour removed: its routes and policy go.
	done, err = sp.SetNeighbors(context.Background(), []Neighbor{other})
	if err != nil || !slices.Equal(done, []string{"-127.0.0.2"}) {
		t.Fatalf("SetNeighbors: %v %v", done, err)
	}
	eventually(t, "its routes withdrawn", func() bool { return slices.Equal(learned(), pfxs("203.0.113.0/24")) })
	// Duplicates and bad neighbours change nothing.
	if _, err := sp.SetNeighbors(context.Background(), []Neighbor{other, other}); err == nil {
		t.Fatal("a neighbour listed twice was accepted")
	}
	if got := since("127.0.0.3"); got != before {
		t.Fatalf("the unchanged neighbour was reset: %s, before %s", got, before)
	}
}
