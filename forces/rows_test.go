package forces

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// sampleRows has a SET and a DEL of a row of every table, and a DEL of each
// whole table.
func sampleRows() []Row {
	rows := []Row{
		{Op: OpSet, Table: TableIPv4NextHop, Index: 7, NextHop: netip.MustParseAddr("192.0.2.1")},
		{Op: OpSet, Table: TableIPv6NextHop, Index: 8, NextHop: netip.MustParseAddr("2001:db8::1")},
		{Op: OpSet, Table: TableIPv4Group, Index: 3, Members: []uint32{7, 9}},
		{Op: OpSet, Table: TableIPv6Group, Index: 4, Members: []uint32{8}},
		{Op: OpSet, Table: TableIPv4Prefix, Index: 1, Prefix: netip.MustParsePrefix("198.51.100.0/24"), HopSelector: 7},
		{Op: OpSet, Table: TableIPv4Prefix, Index: 2, Prefix: netip.MustParsePrefix("0.0.0.0/0"), HopSelector: 3, ECMP: true},
		{Op: OpSet, Table: TableIPv6Prefix, Index: 1, Prefix: netip.MustParsePrefix("2001:db8:1::/48"), HopSelector: 4, ECMP: true},
		{Op: OpSet, Table: TableIPv4Egress, Index: 7, Egress: NexthopEgressInfo{FE: 2, Port: 5}},
		{Op: OpSet, Table: TableIPv6Egress, Index: 8, Egress: NexthopEgressInfo{FE: 1, Port: 9}},
		{Op: OpSet, Table: TableIPv4Connected, Index: 0, Prefix: netip.MustParsePrefix("10.20.2.0/24"), Egress: NexthopEgressInfo{FE: 2, Port: 4}},
		{Op: OpSet, Table: TableIPv6Connected, Index: 4095, Prefix: netip.MustParsePrefix("fd00:20:2::/64"), Egress: NexthopEgressInfo{FE: 2, Port: 4}},
	}
	for t := TableIPv4Prefix; t <= lastTable; t++ {
		rows = append(rows, Row{Op: OpDel, Table: t, Index: 11}, Row{Op: OpDel, Table: t, Whole: true})
	}
	return rows
}

// Rows written with AppendTo come back from DecodeRow as they were, on the
// LFB class and component RFC 6956 gives their table.
func TestRowRoundTrip(t *testing.T) {
	rows := sampleRows()
	w := NewConfigWriter(Header{Src: testCE, Dst: testFE}, nil)
	var scratch []byte
	for i := range rows {
		var err error
		if scratch, err = rows[i].AppendTo(w, scratch); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	var got []Row
	for _, raw := range w.Flush() {
		m, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range Items(m) {
			r, err := DecodeRow(&it)
			if err != nil {
				t.Fatalf("%+v: %v", it, err)
			}
			if want, _ := TableOfClass(it.ClassID); it.ClassID != r.Table.Class() || want != r.Table || it.Path[0] != r.Table.Component() {
				t.Fatalf("row of %v on class %d path %v", r.Table, it.ClassID, it.Path)
			}
			got = append(got, r)
		}
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("rows back:\n%+v\nwant\n%+v", got, rows)
	}
}

func TestDecodeRowErrors(t *testing.T) {
	v4 := IPv4PrefixInfo{Prefix: netip.MustParsePrefix("198.51.100.0/24"), HopSelector: 1}.MarshalFullData()
	for _, c := range []struct {
		name string
		it   Item
		want error
	}{
		{"FE protocol class", Item{ClassID: ClassFEProtocol, InstanceID: 1, Op: OpSet, Path: []uint32{1}}, ErrRowClass},
		{"instance 2", Item{ClassID: ClassIPv4UcastLPM, InstanceID: 2, Op: OpDel, Path: []uint32{1, 1}}, ErrRowInstance},
		{"wrong component", Item{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Op: OpDel, Path: []uint32{2, 1}}, ErrRowPath},
		{"path too long", Item{ClassID: ClassIPv4NextHop, InstanceID: 1, Op: OpDel, Path: []uint32{1, 1, 1}}, ErrRowPath},
		{"no path", Item{ClassID: ClassIPv4ECMP, InstanceID: 1, Op: OpDel}, ErrRowPath},
		{"SET of a whole table", Item{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Op: OpSet, Path: []uint32{1}, FullData: v4, HasFullData: true}, ErrRowData},
		{"SET without data", Item{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Op: OpSet, Path: []uint32{1, 1}}, ErrRowData},
		{"IPv6 data in an IPv4 row", Item{ClassID: ClassIPv6UcastLPM, InstanceID: 1, Op: OpSet, Path: []uint32{1, 1}, FullData: v4, HasFullData: true}, ErrRowData},
		{"empty group", Item{ClassID: ClassIPv6ECMP, InstanceID: 1, Op: OpSet, Path: []uint32{1, 1}, FullData: []byte{}, HasFullData: true}, ErrRowData},
		{"GET", Item{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Op: OpGet, Path: []uint32{1}}, ErrRowOp},
	} {
		r, err := DecodeRow(&c.it)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if !reflect.DeepEqual(r, Row{}) {
			t.Errorf("%s: a failed decode left %+v", c.name, r)
		}
	}
	// A row that fails to decode leaves nothing of an earlier one behind.
	r := sampleRows()[4]
	if err := r.Decode(&Item{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Op: OpSet, Path: []uint32{1, 1}, FullData: v4[:4], HasFullData: true}); err == nil || !reflect.DeepEqual(r, Row{}) {
		t.Errorf("short data: %v, %+v", err, r)
	}
}

// Whatever decodes as a row re-encodes, through AppendTo, to an item that
// decodes to the same row.
func FuzzDecodeRow(f *testing.F) {
	f.Add(ClassIPv4UcastLPM, uint32(1), IPv4PrefixInfo{Prefix: netip.MustParsePrefix("198.51.100.0/24"), HopSelector: 1}.MarshalFullData())
	f.Add(ClassIPv6NextHop, uint32(5), IPv6NextHopInfo{NextHop: netip.MustParseAddr("2001:db8::1")}.MarshalFullData())
	f.Add(ClassIPv4ECMP, uint32(0), []byte{0, 0, 0, 1, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, class, row uint32, data []byte) {
		it := Item{ClassID: class, InstanceID: 1, Op: OpSet, Path: []uint32{1, row}, FullData: data, HasFullData: true}
		r, err := DecodeRow(&it)
		if err != nil {
			return
		}
		w := NewConfigWriter(Header{}, nil)
		if _, err := r.AppendTo(w, nil); err != nil {
			t.Fatalf("%+v does not encode: %v", r, err)
		}
		m, err := Parse(w.Flush()[0])
		if err != nil {
			t.Fatal(err)
		}
		items := Items(m)
		again, err := DecodeRow(&items[0])
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip %+v -> %+v, %v", r, again, err)
		}
	})
}

func TestTableIn(t *testing.T) {
	pairs := [][2]Table{{TableIPv4Prefix, TableIPv6Prefix}, {TableIPv4NextHop, TableIPv6NextHop}, {TableIPv4Group, TableIPv6Group}, {TableIPv4Egress, TableIPv6Egress}, {TableIPv4Connected, TableIPv6Connected}}
	for _, p := range pairs {
		for _, from := range p {
			if got := from.In(false); got != p[0] || got.IPv6() {
				t.Errorf("%d.In(IPv4) = %d, want %d", from, got, p[0])
			}
			if got := from.In(true); got != p[1] || !got.IPv6() {
				t.Errorf("%d.In(IPv6) = %d, want %d", from, got, p[1])
			}
		}
	}
}
