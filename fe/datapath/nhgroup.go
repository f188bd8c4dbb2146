//go:build linux

package datapath

import "fmt"

// SetNexthopGroup makes id (GroupIDBase .. GroupIDBase+MaxGroups-1) the ECMP
// group of members (1 .. MaxGroupMembers nexthop ids, which need not be set
// yet), replacing what was there. Routes via id send each flow, by a hash of
// its addresses, protocol and ports, to one member; a flow keeps its member
// while the group is unchanged. A member may appear more than once to get
// a larger share. A member whose slot is empty sends its flows to the
// kernel.
func (d *Datapath) SetNexthopGroup(id uint32, members []uint32) error {
	if err := checkGroupID(id); err != nil {
		return fmt.Errorf("set nexthop group: %w", err)
	}
	if len(members) == 0 || len(members) > MaxGroupMembers {
		return fmt.Errorf("set nexthop group %d: %d members, want 1 to %d: %w",
			id, len(members), MaxGroupMembers, ErrInvalid)
	}
	for i, m := range members {
		if err := checkNexthopID(m); err != nil {
			return fmt.Errorf("set nexthop group %d: member %d: %w", id, i, err)
		}
	}
	v := xdpNhGroup{Count: uint32(len(members))}
	// Every slot holds a member, repeating them, so that a program run
	// that reads the value while it is being overwritten still picks an
	// old or a new member (see struct nh_group in xdp.c).
	for i := range v.Members {
		v.Members[i] = members[i%len(members)]
	}
	if err := d.objs.NhGroups.Put(id-GroupIDBase, &v); err != nil {
		return fmt.Errorf("set nexthop group %d: %w", id, err)
	}
	return nil
}

// DeleteNexthopGroup empties group id; routes still pointing at it then send
// their packets to the kernel. An empty group gives an error wrapping
// ErrNotFound.
func (d *Datapath) DeleteNexthopGroup(id uint32) error {
	if err := checkGroupID(id); err != nil {
		return fmt.Errorf("delete nexthop group: %w", err)
	}
	var v xdpNhGroup
	if err := d.objs.NhGroups.Lookup(id-GroupIDBase, &v); err != nil {
		return fmt.Errorf("delete nexthop group %d: %w", id, err)
	}
	if v.Count == 0 {
		return fmt.Errorf("delete nexthop group %d: %w", id, ErrNotFound)
	}
	// Array slots cannot be deleted; count 0 marks them empty.
	if err := d.objs.NhGroups.Put(id-GroupIDBase, &xdpNhGroup{}); err != nil {
		return fmt.Errorf("delete nexthop group %d: %w", id, err)
	}
	return nil
}

func checkGroupID(id uint32) error {
	if id < GroupIDBase || id >= GroupIDBase+MaxGroups {
		return fmt.Errorf("group id %d out of range [%d, %d): %w", id, GroupIDBase, GroupIDBase+MaxGroups, ErrInvalid)
	}
	return nil
}

// checkRouteTarget accepts what a route may point at: a nexthop id or a
// group id.
func checkRouteTarget(id uint32) error {
	if id < MaxNexthops || (id >= GroupIDBase && id < GroupIDBase+MaxGroups) {
		return nil
	}
	return fmt.Errorf("nexthop id %d out of range: want a nexthop [0, %d) or a group [%d, %d): %w",
		id, MaxNexthops, GroupIDBase, GroupIDBase+MaxGroups, ErrInvalid)
}
