package forces

import (
	"errors"
	"fmt"
	"net/netip"
)

// Table names one of the RFC 6956 tables a CE programs into an FE: an
// address family's prefix table (UcastLPM), next-hop table, or ECMP group
// table. Its LFB class and component are spelled here and nowhere else.
type Table uint8

// The route tables. Every one is component 1 of instance 1 of its LFB class.
const (
	TableIPv4Prefix Table = iota + 1
	TableIPv4NextHop
	TableIPv4Group
	TableIPv6Prefix
	TableIPv6NextHop
	TableIPv6Group
	// The nexthop egress tables (egress.go): per nexthop row, the FE and
	// port its gateway is behind.
	TableIPv4Egress
	TableIPv6Egress
	// The connected egress tables (connected.go): per port subnet, the FE
	// and port it is on.
	TableIPv4Connected
	TableIPv6Connected

	lastTable = TableIPv6Connected
)

// routeInstance is the one instance of each route LFB an FE has.
const routeInstance = 1

var tableClass = [...]uint32{
	TableIPv4Prefix:  ClassIPv4UcastLPM,
	TableIPv4NextHop: ClassIPv4NextHop,
	TableIPv4Group:   ClassIPv4ECMP,
	TableIPv6Prefix:  ClassIPv6UcastLPM,
	TableIPv6NextHop: ClassIPv6NextHop,
	TableIPv6Group:   ClassIPv6ECMP,
	TableIPv4Egress:  ClassIPv4NexthopEgress,
	TableIPv6Egress:  ClassIPv6NexthopEgress,

	TableIPv4Connected: ClassIPv4ConnectedEgress,
	TableIPv6Connected: ClassIPv6ConnectedEgress,
}

var tableComponent = [...]uint32{
	TableIPv4Prefix:  CompIPv4PrefixTable,
	TableIPv4NextHop: CompIPv4NextHopTable,
	TableIPv4Group:   CompECMPGroupTable,
	TableIPv6Prefix:  CompIPv6PrefixTable,
	TableIPv6NextHop: CompIPv6NextHopTable,
	TableIPv6Group:   CompECMPGroupTable,
	TableIPv4Egress:  CompNexthopEgressTable,
	TableIPv6Egress:  CompNexthopEgressTable,

	TableIPv4Connected: CompConnectedEgressTable,
	TableIPv6Connected: CompConnectedEgressTable,
}

// TableOfClass returns the route table held by LFB class, if it holds one.
func TableOfClass(class uint32) (Table, bool) {
	for t := TableIPv4Prefix; t <= lastTable; t++ {
		if tableClass[t] == class {
			return t, true
		}
	}
	return 0, false
}

// Class is the LFB class that holds t.
func (t Table) Class() uint32 { return tableClass[t] }

// Component is t's component ID in its LFB.
func (t Table) Component() uint32 { return tableComponent[t] }

// IPv6 reports whether t is an IPv6 table.
func (t Table) IPv6() bool {
	return t == TableIPv6Egress || t == TableIPv6Connected || t >= TableIPv6Prefix && t <= TableIPv6Group
}

// In returns t's counterpart in IPv6 when v6, in IPv4 otherwise.
func (t Table) In(v6 bool) Table {
	switch {
	case t.IsEgress() && v6:
		return TableIPv6Egress
	case t.IsEgress():
		return TableIPv4Egress
	case t.IsConnected() && v6:
		return TableIPv6Connected
	case t.IsConnected():
		return TableIPv4Connected
	case v6 && t < TableIPv6Prefix:
		return t + TableIPv6Prefix - TableIPv4Prefix
	case !v6 && t >= TableIPv6Prefix:
		return t - (TableIPv6Prefix - TableIPv4Prefix)
	}
	return t
}

// IsPrefix reports whether t is a prefix (UcastLPM) table.
func (t Table) IsPrefix() bool { return t == TableIPv4Prefix || t == TableIPv6Prefix }

// IsNextHop reports whether t is a next-hop table.
func (t Table) IsNextHop() bool { return t == TableIPv4NextHop || t == TableIPv6NextHop }

// IsGroup reports whether t is an ECMP group table.
func (t Table) IsGroup() bool { return t == TableIPv4Group || t == TableIPv6Group }

// IsEgress reports whether t is a nexthop egress table.
func (t Table) IsEgress() bool { return t == TableIPv4Egress || t == TableIPv6Egress }

// IsConnected reports whether t is a connected egress table.
func (t Table) IsConnected() bool { return t == TableIPv4Connected || t == TableIPv6Connected }

// Row is one operation on a route table: a SET or DEL of the row at Index,
// or, with Whole, a DEL of the whole table. A SET carries the row's value in
// the fields of its table's kind; the others stay zero.
type Row struct {
	Op    OpType // OpSet or OpDel
	Table Table
	Whole bool   // the operation is on the whole table (only a DEL)
	Index uint32 // the row, unless Whole

	// Prefix rows: the prefix (masked), the next-hop row it goes through or,
	// with ECMP, the group row. Connected egress rows: the port's subnet.
	Prefix      netip.Prefix
	HopSelector uint32
	ECMP        bool

	// Next-hop rows: the gateway.
	NextHop netip.Addr

	// Group rows: the members' next-hop rows.
	Members []uint32

	// Egress rows (Index is the nexthop row): the FE and port its gateway
	// is behind. Connected egress rows (Index is the connected row): the FE
	// and port the subnet (Prefix) is on.
	Egress NexthopEgressInfo
}

// AppendTo adds r to w. scratch is memory for the row's FULLDATA, returned
// (possibly grown) for the next row: w keeps no reference to it.
func (r *Row) AppendTo(w *ConfigWriter, scratch []byte) ([]byte, error) {
	if r.Table == 0 || int(r.Table) >= len(tableClass) {
		return scratch, fmt.Errorf("%w: row of table %d", ErrInvalid, r.Table)
	}
	var path [2]uint32
	path[0] = r.Table.Component()
	p := path[:1]
	if !r.Whole {
		path[1] = r.Index
		p = path[:2]
	}
	var data []byte
	if r.Op == OpSet {
		var err error
		switch r.Table {
		case TableIPv4Prefix:
			data, err = IPv4PrefixInfo{Prefix: r.Prefix, HopSelector: r.HopSelector, ECMP: r.ECMP}.AppendFullData(scratch[:0])
		case TableIPv6Prefix:
			data, err = IPv6PrefixInfo{Prefix: r.Prefix, HopSelector: r.HopSelector, ECMP: r.ECMP}.AppendFullData(scratch[:0])
		case TableIPv4NextHop:
			data, err = IPv4NextHopInfo{NextHop: r.NextHop}.AppendFullData(scratch[:0])
		case TableIPv6NextHop:
			data, err = IPv6NextHopInfo{NextHop: r.NextHop}.AppendFullData(scratch[:0])
		case TableIPv4Egress, TableIPv6Egress:
			data, err = r.Egress.AppendFullData(scratch[:0])
		case TableIPv4Connected, TableIPv6Connected:
			data, err = ConnectedEgressInfo{Prefix: r.Prefix, FE: r.Egress.FE, Port: r.Egress.Port}.AppendFullData(scratch[:0], r.Table.IPv6())
		default:
			data, err = ECMPGroupInfo{Members: r.Members}.AppendFullData(scratch[:0])
		}
		if err != nil {
			return scratch, err
		}
		scratch = data
	}
	return scratch, w.Add(r.Op, r.Table.Class(), routeInstance, p, data)
}

// Errors DecodeRow wraps, one per RFC 5810 result an FE answers with.
var (
	// ErrRowClass: the item's LFB class holds no route table.
	ErrRowClass = errors.New("no route table in this LFB class")
	// ErrRowInstance: the LFB instance does not exist.
	ErrRowInstance = errors.New("no such LFB instance")
	// ErrRowPath: the path names neither a table nor a row of one.
	ErrRowPath = errors.New("path is not a table or a row")
	// ErrRowData: a SET without a row, without FULLDATA or with FULLDATA
	// that does not decode.
	ErrRowData = errors.New("bad row data")
	// ErrRowOp: an operation other than SET and DEL.
	ErrRowOp = errors.New("operation not supported on a route table")
)

// DecodeRow reads a Config item as a route-table row, the inverse of
// AppendTo. Its errors wrap one of the ErrRow errors. The row aliases
// nothing of it.
func DecodeRow(it *Item) (Row, error) {
	var r Row
	err := r.Decode(it)
	return r, err
}

// Decode is DecodeRow into r, which it overwrites (zero on error): for a
// loop decoding a message's rows into a reused slice without copying each.
func (r *Row) Decode(it *Item) error {
	*r = Row{}
	t, ok := TableOfClass(it.ClassID)
	if !ok {
		return fmt.Errorf("%w: %s", ErrRowClass, ClassName(it.ClassID))
	}
	if it.InstanceID != routeInstance {
		return fmt.Errorf("%w: %s instance %d", ErrRowInstance, ClassName(it.ClassID), it.InstanceID)
	}
	comp := t.Component()
	whole := len(it.Path) == 1 && it.Path[0] == comp
	if !whole && (len(it.Path) != 2 || it.Path[0] != comp) {
		return fmt.Errorf("%w: path %v: want [%d] (the table) or [%d row]", ErrRowPath, it.Path, comp, comp)
	}
	switch it.Op {
	case OpDel, OpSet:
	default:
		return fmt.Errorf("%w: %s", ErrRowOp, it.Op)
	}
	var index uint32
	if !whole {
		index = it.Path[1]
	}
	if it.Op == OpDel {
		r.Op, r.Table, r.Whole, r.Index = it.Op, t, whole, index
		return nil
	}
	if whole || !it.HasFullData {
		return fmt.Errorf("%w: SET of path %v needs a row and FULLDATA", ErrRowData, it.Path)
	}
	var err error
	switch t {
	case TableIPv4Prefix:
		var i IPv4PrefixInfo
		if i, err = ParseIPv4PrefixInfo(it.FullData); err == nil {
			r.Prefix, r.HopSelector, r.ECMP = i.Prefix, i.HopSelector, i.ECMP
		}
	case TableIPv6Prefix:
		var i IPv6PrefixInfo
		if i, err = ParseIPv6PrefixInfo(it.FullData); err == nil {
			r.Prefix, r.HopSelector, r.ECMP = i.Prefix, i.HopSelector, i.ECMP
		}
	case TableIPv4NextHop:
		var i IPv4NextHopInfo
		if i, err = ParseIPv4NextHopInfo(it.FullData); err == nil {
			r.NextHop = i.NextHop
		}
	case TableIPv6NextHop:
		var i IPv6NextHopInfo
		if i, err = ParseIPv6NextHopInfo(it.FullData); err == nil {
			r.NextHop = i.NextHop
		}
	case TableIPv4Egress, TableIPv6Egress:
		r.Egress, err = ParseNexthopEgressInfo(it.FullData)
	case TableIPv4Connected, TableIPv6Connected:
		var c ConnectedEgressInfo
		if c, err = ParseConnectedEgressInfo(it.FullData, t.IPv6()); err == nil {
			r.Prefix, r.Egress = c.Prefix, NexthopEgressInfo{FE: c.FE, Port: c.Port}
		}
	default:
		var g ECMPGroupInfo
		if g, err = ParseECMPGroupInfo(it.FullData); err == nil {
			r.Members = g.Members
		}
	}
	if err != nil {
		*r = Row{}
		return fmt.Errorf("%w: row %d: %w", ErrRowData, index, err)
	}
	r.Op, r.Table, r.Index = it.Op, t, index
	return nil
}
