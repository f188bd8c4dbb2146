package datapath

import (
	"testing"

	"github.com/splitplane/splitplane/internal/routegen"
)

// BenchmarkDXRInstall installs an edge-shaped table of 1M routes into an
// empty FIB with its range table (plain slices), against DIR-24-8 alone.
func BenchmarkDXRInstall(b *testing.B) {
	ps := routegen.Generate(1_000_000, 1)
	ups, err := routegen.EdgeUpstreams(ps, 4, 1)
	if err != nil {
		b.Fatal(err)
	}
	rs := make([]Route, len(ps))
	for i, p := range ps {
		rs[i] = Route{Prefix: p, Nexthop: 1 + uint32(ups[i])}
	}
	for _, withDXR := range []bool{false, true} {
		name := "dir24_8"
		if withDXR {
			name = "dxr"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f, _ := memFIB(FIBGroups)
				if withDXR {
					newDXR(f, make([]uint32, dxrChunks), make([]uint32, DXRRangeRows*dxrRowEntries), make([]uint32, dxrValueCount), f.grace)
				}
				d := memDriver(f)
				b.StartTimer()
				if err := d.set(rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(rs))*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
		})
	}
}
