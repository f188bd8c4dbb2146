package bgp

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
)

// With multipath enabled, GoBGP's best-path event carries a delta of the
// multipath set of each changed prefix (server.locRIBPathsForBMP): the paths
// that joined or changed (withdrawal false) and those that left (withdrawal
// true), told apart by neighbour and ADD-PATH identifier
// (table.Path.EqualBySourceAndPathID). The set is the head of the prefix's
// sorted path list whose paths table.Path.Compare finds equal to the best:
// both eBGP or both iBGP, and the same LOCAL_PREF, AS_PATH length, ORIGIN and
// MED. The neighbour's AS is not compared, so paths from different
// neighbouring ASes are equal too. An event without any delta (a neighbour
// re-sent a path unchanged, which only renews its age and so may reorder the
// set) carries every changed set whole instead, as does the initial table
// dump; both are handled here as paths that joined. A reorder in the same
// event as another prefix's delta is not told at all: NextHop may then name
// the previous best until that prefix's set next changes.

// pathKey identifies a path within its prefix as GoBGP's delta does.
type pathKey struct {
	peer netip.Addr
	id   uint32 // ADD-PATH path identifier, 0 without ADD-PATH
}

// mpath is one member of a prefix's multipath set.
type mpath struct {
	key      pathKey
	nextHop  netip.Addr
	ibgp     bool
	routerID netip.Addr
	age      int64 // when GoBGP received the path, in whole seconds
}

// multipaths keeps the multipath set of every prefix, built from GoBGP's
// deltas, and turns each batch of deltas into updates. It is owned by the
// goroutine delivering GoBGP's best-path events.
type multipaths struct {
	asn  uint32 // the speaker's: a path from this AS is iBGP
	sets map[netip.Prefix][]mpath
}

func newMultipaths(asn uint32) *multipaths {
	return &multipaths{asn: asn, sets: map[netip.Prefix][]mpath{}}
}

// apply folds one best-path event into the sets and returns one update per
// prefix whose next hops it changed, in the order the prefixes first appear.
func (m *multipaths) apply(paths []*apiutil.Path) []Update {
	var touched []netip.Prefix
	before := map[netip.Prefix]Update{}
	for _, p := range paths {
		pfx, ok := unicastPrefix(p)
		if !ok {
			continue
		}
		if _, ok := before[pfx]; !ok {
			before[pfx] = m.update(pfx)
			touched = append(touched, pfx)
		}
		key := pathKey{peer: p.PeerAddress, id: p.RemoteID}
		set := slices.DeleteFunc(m.sets[pfx], func(q mpath) bool { return q.key == key })
		// A path without a usable next hop cannot be forwarded to, so it
		// counts as gone.
		if nh := nextHop(p); !p.Withdrawal && usable(nh) {
			set = append(set, mpath{
				key: key, nextHop: nh, routerID: p.PeerID, age: p.Age,
				ibgp: p.PeerASN != 0 && p.PeerASN == m.asn,
			})
		}
		if len(set) == 0 {
			delete(m.sets, pfx)
		} else {
			m.sets[pfx] = set
		}
	}
	out := make([]Update, 0, len(touched))
	for _, pfx := range touched {
		if u := m.update(pfx); !u.equal(before[pfx]) {
			out = append(out, u)
		}
	}
	return out
}

// update describes the current set of pfx.
func (m *multipaths) update(pfx netip.Prefix) Update {
	set := m.sets[pfx]
	if len(set) == 0 {
		return Update{Prefix: pfx, Withdraw: true}
	}
	best := slices.MinFunc(set, rank)
	u := Update{Prefix: pfx, NextHop: best.nextHop, IBGP: best.ibgp}
	hops := make([]netip.Addr, len(set))
	for i, p := range set {
		hops[i] = p.nextHop
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	if hops = slices.Compact(hops); len(hops) > 1 {
		u.NextHops = hops
	}
	return u
}

// rank orders the members of one set as GoBGP's table.destination.insertSort
// does once table.Path.Compare finds them equal, so that the first is GoBGP's
// best path (the delta does not say which one that is): eBGP before iBGP;
// between eBGP paths the older one, to the second (compareByAge, which this
// speaker never disables with external-compare-router-id); between iBGP paths
// the lower router ID; then the lower neighbour address.
func rank(a, b mpath) int {
	switch {
	case a.ibgp != b.ibgp:
		if a.ibgp {
			return 1
		}
		return -1
	case !a.ibgp:
		if c := cmp.Compare(a.age, b.age); c != 0 {
			return c
		}
	default:
		if c := a.routerID.Compare(b.routerID); c != 0 {
			return c
		}
	}
	return a.key.peer.Compare(b.key.peer)
}

func (u Update) equal(v Update) bool {
	return u.Prefix == v.Prefix && u.Withdraw == v.Withdraw && u.NextHop == v.NextHop && slices.Equal(u.NextHops, v.NextHops)
}
