package routegen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
)

// The edge profile: what an edge router with a few upstream providers holds
// for a generated table. Its best path for a prefix, and so its next hop, is
// a property of the prefix's origin (the AS announcing it): every upstream
// carries the whole table, and the one whose path to an origin is best
// (shortest, cheapest) is best for all of that origin's prefixes. Origins
// hold blocks of neighbouring address space, so neighbouring prefixes share
// their next hop far more often than a random choice would have it.
//
// The model, in the table's address order:
//   - the prefixes not nested in another start runs of one origin, of
//     geometric length with mean edgeRunMean (the Internet has about one
//     origin per 13 prefixes, not all of them contiguous);
//   - a nested prefix is its cover's own more-specific (edgeOwnShare of
//     them), announced for traffic engineering and so reaching the router
//     through another upstream in edgeTEShare of the cases, or a customer's
//     block with an origin of its own;
//   - each origin's upstream is drawn with weight 1/2 for the first
//     upstream and the other half split evenly among the rest, as for a
//     router with one main provider (with two: 3/4 and 1/4 would also be
//     plausible; 1/2 keeps the next hops mixed).
const (
	edgeRunMean  = 8
	edgeOwnShare = 0.5
	edgeTEShare  = 0.3
)

// Upstreams bounds the upstream count of EdgeUpstreams.
const (
	MinUpstreams = 1
	MaxUpstreams = 16
)

// EdgeUpstreams returns, for each prefix of ps (sorted by address then
// length, as Generate returns them), the index (0 to upstreams-1) of the
// upstream an edge router with that many providers would forward it to,
// deterministic for a seed. See the edge profile above for the model.
func EdgeUpstreams(ps []netip.Prefix, upstreams int, seed int64) ([]int, error) {
	if upstreams < MinUpstreams || upstreams > MaxUpstreams {
		return nil, fmt.Errorf("upstreams %d: want %d to %d", upstreams, MinUpstreams, MaxUpstreams)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x65646765)) // "edge"
	pick := func() int {
		if upstreams == 1 || rng.Float64() < 0.5 {
			return 0
		}
		return 1 + rng.IntN(upstreams-1)
	}
	out := make([]int, len(ps))
	// covers is the stack of prefixes covering the current one: their
	// indexes into ps.
	var covers []int
	run, current := 0, 0 // prefixes left in the current origin's run, its upstream
	for i, p := range ps {
		for len(covers) > 0 && !ps[covers[len(covers)-1]].Contains(p.Addr()) {
			covers = covers[:len(covers)-1]
		}
		switch {
		case len(covers) > 0:
			up := out[covers[len(covers)-1]]
			if rng.Float64() < edgeOwnShare {
				if upstreams > 1 && rng.Float64() < edgeTEShare {
					up = (up + 1 + rng.IntN(upstreams-1)) % upstreams
				}
			} else {
				up = pick()
			}
			out[i] = up
		default:
			if run == 0 {
				run, current = geometric(rng, edgeRunMean), pick()
			}
			run--
			out[i] = current
		}
		covers = append(covers, i)
	}
	return out, nil
}

// geometric draws a run length of at least 1 with the given mean.
func geometric(rng *rand.Rand, mean float64) int {
	p := 1 / mean
	return 1 + int(math.Log(1-rng.Float64())/math.Log(1-p))
}

// Zipf returns n indexes into a table of size prefixes, drawn with the
// probability of rank r (1-based) proportional to 1/r^s, the ranks being a
// seeded permutation of the table (so the popular prefixes are spread over
// it, not its first entries): traffic as it is, where a few thousand
// prefixes carry most of it. s must be above 0; s near 1 is what
// measurements of Internet traffic find.
func Zipf(size, n int, s float64, seed int64) ([]int, error) {
	if size < 1 {
		return nil, fmt.Errorf("zipf over %d prefixes: need at least 1", size)
	}
	if !(s > 0) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("zipf exponent %g: must be above 0", s)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7a697066)) // "zipf"
	// The cumulative weights of the ranks, searched per draw: exact for
	// any s, where math/rand's Zipf needs s > 1.
	cdf := make([]float64, size)
	sum := 0.0
	for r := range cdf {
		sum += math.Pow(float64(r+1), -s)
		cdf[r] = sum
	}
	perm := rng.Perm(size)
	out := make([]int, n)
	for i := range out {
		x := rng.Float64() * sum
		lo, hi := 0, size-1
		for lo < hi {
			mid := (lo + hi) / 2
			if cdf[mid] < x {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		out[i] = perm[lo]
	}
	return out, nil
}
