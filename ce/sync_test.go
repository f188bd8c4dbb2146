package ce

import (
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// BenchmarkWriteChanges encodes a full table's changes (a nexthop, then
// 100,000 routes) as the full sync does, in syncChunk chunks.
func BenchmarkWriteChanges(b *testing.B) {
	const n = 100_000
	ch := []Change{{Kind: NexthopSet, ID: 1, NextHop: netip.MustParseAddr("10.0.0.2")}}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		ch = append(ch, Change{Kind: RouteSet, Row: uint32(i + 1), Prefix: netip.PrefixFrom(a, 32), ID: 1})
	}
	w := forces.NewConfigWriter(forces.Header{}, nil)
	w.MaxMessage = syncMessage
	b.ReportAllocs()
	for b.Loop() {
		for start := 0; start < len(ch); start += syncChunk {
			if err := writeChanges(w, ch[start:min(start+syncChunk, len(ch))]); err != nil {
				b.Fatal(err)
			}
			w.Flush()
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}
