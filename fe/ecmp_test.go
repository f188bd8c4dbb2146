package fe

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

func setGroup(id uint32, members ...uint32) forces.TableOp {
	b, err := forces.ECMPGroupInfo{Members: members}.AppendFullData(nil)
	if err != nil {
		panic(err)
	}
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4ECMP, InstanceID: 1, Path: []uint32{1, id}, FullData: b}
}

func setECMPRoute(row uint32, p string, group uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4UcastLPM, InstanceID: 1, Path: []uint32{1, row},
		FullData: forces.IPv4PrefixInfo{Prefix: netip.MustParsePrefix(p), HopSelector: group, ECMP: true}.MarshalFullData()}
}

// ECMP routes go through one datapath group per set of gateways; groups are
// shared, follow member changes, degrade to a plain nexthop with one member
// left, and are freed with their last route.
func TestApplyECMP(t *testing.T) {
	a, dp := testAgent(t, Config{})
	apply := func(ops ...forces.TableOp) []forces.ResultCode {
		t.Helper()
		resp, _ := a.applyConfig(configMsg(t, ops...))
		return results(t, resp)
	}
	ok := func(r []forces.ResultCode) {
		t.Helper()
		for _, c := range r {
			if c != forces.ResultSuccess {
				t.Fatalf("results %v", r)
			}
		}
	}
	ok(apply(setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"), setNH(3, "192.0.2.3"),
		setGroup(10, 2, 1), setGroup(11, 1, 2), // the same set twice
		setECMPRoute(1, "198.51.100.0/24", 10), setECMPRoute(2, "203.0.113.0/24", 11)))
	for _, p := range []string{"198.51.100.0/24", "203.0.113.0/24"} {
		if gw := dp.Gateway(p); gw != "192.0.2.1,192.0.2.2" {
			t.Fatalf("%s -> %q, want the group 192.0.2.1,192.0.2.2", p, gw)
		}
	}
	id1, _ := dp.Route("198.51.100.0/24")
	id2, _ := dp.Route("203.0.113.0/24")
	if id1 != id2 || len(dp.Groups()) != 1 {
		t.Fatalf("two CE groups of the same gateways: datapath groups %v, route targets %d and %d; want one shared", dp.Groups(), id1, id2)
	}

	// A group's member changes: its routes follow.
	ok(apply(setGroup(10, 1, 2, 3)))
	if gw := dp.Gateway("198.51.100.0/24"); gw != "192.0.2.1,192.0.2.2,192.0.2.3" {
		t.Fatalf("after the group grew: %q", gw)
	}
	if gw := dp.Gateway("203.0.113.0/24"); gw != "192.0.2.1,192.0.2.2" {
		t.Fatalf("the other group's route moved: %q", gw)
	}
	// A member nexthop's gateway changes: groups using it change.
	ok(apply(setNH(2, "192.0.2.22")))
	if gw := dp.Gateway("203.0.113.0/24"); gw != "192.0.2.1,192.0.2.22" {
		t.Fatalf("after nexthop 2 moved: %q", gw)
	}
	// One member left: a plain nexthop.
	ok(apply(setGroup(11, 1)))
	if gw := dp.Gateway("203.0.113.0/24"); gw != "192.0.2.1" {
		t.Fatalf("a one-member group: %q", gw)
	}
	// Bad rows: unknown group, unknown member, bad size.
	got := apply(setECMPRoute(3, "192.0.2.0/24", 99), setGroup(12, 1, 77),
		forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassIPv4ECMP, InstanceID: 1, Path: []uint32{1, 13}, FullData: []byte{1, 2}},
		del(forces.ClassIPv4ECMP, 55))
	want := []forces.ResultCode{forces.ResultNotFound, forces.ResultNotFound, forces.ResultInvalidParameters, forces.ResultNotFound}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bad rows: %v, want %v", got, want)
	}
	// Routes off the groups, groups deleted: the datapath's groups go.
	ok(apply(setRoute(1, "198.51.100.0/24", 3), del(forces.ClassIPv4UcastLPM, 2), del(forces.ClassIPv4ECMP, 10), del(forces.ClassIPv4ECMP, 11)))
	if len(dp.Groups()) != 0 {
		t.Fatalf("datapath groups left: %v", dp.Groups())
	}
	if gw := dp.Gateway("198.51.100.0/24"); gw != "192.0.2.3" {
		t.Fatalf("route moved off its group: %q", gw)
	}
	st := a.Status()
	if st.Gateways != 1 {
		t.Fatalf("gateway slots left: %d, want 1 (192.0.2.3)", st.Gateways)
	}
}
