//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
)

// Group ids of the ECMP fixture.
const (
	group2 = GroupIDBase + 2
	group4 = GroupIDBase + 4
	group1 = GroupIDBase + 1
)

// macMember is the neighbour MAC of ECMP member nexthop 20+i, by which the
// tests see which member a packet took.
func macMember(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0, 0, 0, 0x20, byte(i)}
}

// newGroupFixture adds to newFixture6 the nexthops 21..24 (each with its own
// neighbour MAC), the groups group2 {21, 22}, group4 {21..24} and group1
// {1}, and routes via them.
func newGroupFixture(tb testing.TB) *fixture {
	tb.Helper()
	f := newFixture6(tb, loadOptions{})
	d := f.d
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	for i := 1; i <= 4; i++ {
		gw := netip.AddrFrom4([4]byte{10, 0, 20, byte(i)})
		must(d.SetNexthop(uint32(20+i), Nexthop{Ifindex: f.lo, Gateway: gw, SrcMAC: macSrc1}))
		must(d.SetNeighbor(f.lo, gw, macMember(i)))
	}
	must(d.SetNexthopGroup(group2, []uint32{21, 22}))
	must(d.SetNexthopGroup(group4, []uint32{21, 22, 23, 24}))
	must(d.SetNexthopGroup(group1, []uint32{1}))
	must(d.SetRoutes([]Route{
		{netip.MustParsePrefix("198.19.2.0/24"), group2},
		{netip.MustParsePrefix("198.19.4.0/24"), group4},
		{netip.MustParsePrefix("198.19.1.0/24"), group1},
		{netip.MustParsePrefix("2001:db8:44::/48"), group4},
	}))
	return f
}

// udpFlowFrame is a UDP frame to dst from source port sport.
func udpFlowFrame(dst string, sport uint16) []byte {
	d := netip.MustParseAddr(dst)
	p := udpPayload(18)
	binary.BigEndian.PutUint16(p[0:], sport)
	if d.Is4() {
		return ipFrame(ipv4Header{ttl: 64, proto: 17, dst: d}, p)
	}
	l4 := withL4Checksum6(testSrcAddr6, d, nhUDP, p, 6)
	return ip6Frame(ipv6Header{nextHeader: nhUDP, hopLimit: 64, payloadLen: -1, dst: d}, l4)
}

// member runs frame and returns the member (1..4) it was sent to.
func member(tb testing.TB, d *Datapath, frame []byte) int {
	tb.Helper()
	ret, out := run(tb, d, frame)
	if ret != xdpRedirect {
		tb.Fatalf("returned %d, want XDP_REDIRECT; counters %v", ret, counters(tb, d))
	}
	for i := 1; i <= 4; i++ {
		if bytes.Equal(out[0:6], macMember(i)) {
			return i
		}
	}
	tb.Fatalf("sent to %s, which is no member", net.HardwareAddr(out[0:6]))
	return 0
}

func TestGroupSpread(t *testing.T) {
	f := newGroupFixture(t)
	const flows = 4000
	for _, tc := range []struct {
		dst     string
		members []int
		min     float64 // least share of the flows each member must get
	}{
		{"198.19.2.9", []int{1, 2}, 0.35},
		{"198.19.4.9", []int{1, 2, 3, 4}, 0.15},
		{"2001:db8:44::9", []int{1, 2, 3, 4}, 0.15},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			before := counters(t, f.d)
			got := map[int]int{}
			for sport := range uint16(flows) {
				got[member(t, f.d, udpFlowFrame(tc.dst, 10000+sport))]++
			}
			if len(got) != len(tc.members) {
				t.Errorf("flows went to members %v, want exactly %v", got, tc.members)
			}
			for _, m := range tc.members {
				if share := float64(got[m]) / flows; share < tc.min {
					t.Errorf("member %d got %.1f%% of the flows, want at least %.0f%% (all: %v)", m, 100*share, 100*tc.min, got)
				}
			}
			t.Logf("flows per member: %v", got)
			after := counters(t, f.d)
			if n := after["forwarded"] - before["forwarded"]; n != flows {
				t.Errorf("forwarded %d, want %d: %s", n, flows, fmtDelta(before, after))
			}
		})
	}
}

func TestGroupStable(t *testing.T) {
	f := newGroupFixture(t)
	for _, dst := range []string{"198.19.4.9", "2001:db8:44::9"} {
		for sport := uint16(1); sport < 200; sport += 37 {
			frame := udpFlowFrame(dst, sport)
			want := member(t, f.d, bytes.Clone(frame))
			for range 50 {
				if got := member(t, f.d, bytes.Clone(frame)); got != want {
					t.Fatalf("%s sport %d: member %d, earlier %d", dst, sport, got, want)
				}
			}
		}
	}
	// Fragments carry ports only in the first one, so none is hashed by
	// ports: all fragments of a datagram take the same member.
	first := ipFrame(ipv4Header{ttl: 64, proto: 17, fragOff: 0x2000, dst: netip.MustParseAddr("198.19.4.9")}, udpPayload(100))
	want := member(t, f.d, first)
	for off := uint16(1); off < 40; off++ {
		p := udpPayload(100)
		binary.BigEndian.PutUint16(p[0:], 1000+off) // garbage where ports were
		frag := ipFrame(ipv4Header{ttl: 64, proto: 17, fragOff: 0x2000 | off, dst: netip.MustParseAddr("198.19.4.9")}, p)
		if got := member(t, f.d, frag); got != want {
			t.Fatalf("fragment at offset %d: member %d, first fragment %d", off*8, got, want)
		}
	}
}

func TestGroupOneMember(t *testing.T) {
	f := newGroupFixture(t)
	for sport := uint16(0); sport < 100; sport++ {
		in := udpFlowFrame("198.19.1.9", sport)
		before := counters(t, f.d)
		ret, out := run(t, f.d, bytes.Clone(in))
		if ret != xdpRedirect {
			t.Fatalf("returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded(t, in, out, macNeigh1, macSrc1)
		checkDelta(t, before, counters(t, f.d), map[string]uint64{
			"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in)),
		})
	}
}

func TestGroupEmptyMember(t *testing.T) {
	f := newGroupFixture(t)
	d := f.d
	// Nexthop 4 is empty in the fixture; 21 is not.
	if err := d.SetNexthopGroup(group2, []uint32{4}); err != nil {
		t.Fatal(err)
	}
	passNoNexthop := func(t *testing.T, frame []byte) {
		t.Helper()
		before := counters(t, d)
		if ret, _ := run(t, d, frame); ret != xdpPass {
			t.Fatalf("returned %d, want XDP_PASS", ret)
		}
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "pass_no_nexthop": 1})
	}
	passNoNexthop(t, udpFlowFrame("198.19.2.9", 1))

	// With one empty member of two, that member's flows pass and the
	// others are forwarded.
	if err := d.SetNexthopGroup(group2, []uint32{4, 21}); err != nil {
		t.Fatal(err)
	}
	var passed, forwarded int
	for sport := range uint16(200) {
		ret, _ := run(t, d, udpFlowFrame("198.19.2.9", sport))
		switch ret {
		case xdpPass:
			passed++
		case xdpRedirect:
			forwarded++
		}
	}
	if passed == 0 || forwarded == 0 || passed+forwarded != 200 {
		t.Errorf("%d passed, %d forwarded of 200, want some of each", passed, forwarded)
	}

	// A deleted group is empty too.
	if err := d.DeleteNexthopGroup(group2); err != nil {
		t.Fatal(err)
	}
	passNoNexthop(t, udpFlowFrame("198.19.2.9", 1))
	if err := d.DeleteNexthopGroup(group2); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting group %d again: %v, want ErrNotFound", group2, err)
	}
	// As is a group never set.
	if err := d.SetRoute(netip.MustParsePrefix("198.19.9.0/24"), GroupIDBase+MaxGroups-1); err != nil {
		t.Fatal(err)
	}
	passNoNexthop(t, udpFlowFrame("198.19.9.9", 1))
}

func TestGroupChange(t *testing.T) {
	f := newGroupFixture(t)
	d := f.d
	picks := func(dst string) map[int]int {
		got := map[int]int{}
		for sport := range uint16(400) {
			got[member(t, d, udpFlowFrame(dst, sport))]++
		}
		return got
	}
	check := func(got map[int]int, want ...int) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("flows went to %v, want members %v", got, want)
		}
		for _, m := range want {
			if got[m] == 0 {
				t.Fatalf("flows went to %v, want members %v", got, want)
			}
		}
	}
	check(picks("198.19.2.9"), 1, 2)
	for _, tc := range []struct {
		members []uint32
		want    []int
	}{
		{[]uint32{23, 24}, []int{3, 4}},
		{[]uint32{22, 23, 24}, []int{2, 3, 4}},
		{[]uint32{24}, []int{4}},
		{[]uint32{21, 22}, []int{1, 2}},
	} {
		t.Run(fmt.Sprint(tc.members), func(t *testing.T) {
			if err := d.SetNexthopGroup(group2, tc.members); err != nil {
				t.Fatal(err)
			}
			check(picks("198.19.2.9"), tc.want...)
		})
	}
	// Setting the same members again keeps every flow where it was.
	before := map[uint16]int{}
	for sport := range uint16(100) {
		before[sport] = member(t, d, udpFlowFrame("198.19.4.9", sport))
	}
	if err := d.SetNexthopGroup(group4, []uint32{21, 22, 23, 24}); err != nil {
		t.Fatal(err)
	}
	for sport, m := range before {
		if got := member(t, d, udpFlowFrame("198.19.4.9", sport)); got != m {
			t.Errorf("sport %d moved from member %d to %d", sport, m, got)
		}
	}
}

func TestGroupErrors(t *testing.T) {
	f := newGroupFixture(t)
	d := f.d
	for _, tc := range []struct {
		name    string
		err     error
		is      error
		mention string
	}{
		{"id below the range", d.SetNexthopGroup(GroupIDBase-1, []uint32{1}), ErrInvalid, "group id 65535"},
		{"id above the range", d.SetNexthopGroup(GroupIDBase+MaxGroups, []uint32{1}), ErrInvalid, "group id 69632"},
		{"no members", d.SetNexthopGroup(group2, []uint32{}), ErrInvalid, "0 members"},
		{"too many members", d.SetNexthopGroup(group2, make([]uint32, MaxGroupMembers+1)), ErrInvalid, "17 members"},
		{"member out of range", d.SetNexthopGroup(group2, []uint32{1, 2, 1 << 20}), ErrInvalid, "member 2: nexthop id 1048576"},
		{"delete id out of range", d.DeleteNexthopGroup(3), ErrInvalid, "group id 3"},
		{"delete empty group", d.DeleteNexthopGroup(GroupIDBase), ErrNotFound, "group 65536"},
		{"route id between the ranges", d.SetRoute(netip.MustParsePrefix("198.19.8.0/24"), 1<<20), ErrInvalid, "nexthop id 1048576"},
	} {
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%s: error %v, want %v", tc.name, tc.err, tc.is)
			continue
		}
		if !bytes.Contains([]byte(tc.err.Error()), []byte(tc.mention)) {
			t.Errorf("%s: error %q does not mention %q", tc.name, tc.err, tc.mention)
		}
	}
	// The failed calls left the group as it was.
	got := map[int]int{}
	for sport := range uint16(200) {
		got[member(t, d, udpFlowFrame("198.19.2.9", sport))]++
	}
	if len(got) != 2 || got[1] == 0 || got[2] == 0 {
		t.Errorf("after failed changes flows went to %v, want members 1 and 2", got)
	}
}

// BenchmarkXDPForwardGroup is BenchmarkXDPForward via a 4-member group: the
// cost of the flow hash and the group lookup.
func BenchmarkXDPForwardGroup(b *testing.B) {
	f := benchFixture(b)
	for i := 1; i <= 4; i++ {
		gw := netip.AddrFrom4([4]byte{10, 0, 20, byte(i)})
		if err := f.d.SetNexthop(uint32(20+i), Nexthop{Ifindex: f.lo, Gateway: gw, SrcMAC: macSrc1}); err != nil {
			b.Fatal(err)
		}
		if err := f.d.SetNeighbor(f.lo, gw, macMember(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.d.SetNexthopGroup(group4, []uint32{21, 22, 23, 24}); err != nil {
		b.Fatal(err)
	}
	if err := f.d.SetRoute(netip.MustParsePrefix("198.19.4.0/24"), group4); err != nil {
		b.Fatal(err)
	}
	var gws []netip.Addr
	for i := 1; i <= 4; i++ {
		gws = append(gws, netip.AddrFrom4([4]byte{10, 0, 20, byte(i)}))
	}
	checksOn(b, f, gws...)
	benchForward(b, f.d, udpFrame("198.19.4.9", 255))
}
