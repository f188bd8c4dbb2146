package forces

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

// The inter-FE link table, byte by byte: row index, FULLDATA TLV (type
// 0x0112, length 4+8), port, peer FE.
func TestInterFELinksVector(t *testing.T) {
	rows := []InterFELink{{Port: 7, PeerFE: 2}, {Port: 0x0102, PeerFE: 3}}
	b, err := MarshalInterFELinks(rows)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("00000000" + "0112000c" + "00000007" + "00000002" +
		"00000001" + "0112000c" + "00000102" + "00000003")
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", b, want)
	}
	got, err := ParseInterFELinks(want)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, rows)
	}
}

// A later version may append fields to a link row: they are ignored. A row
// shorter than 8 bytes, not in steps of 4, or naming peer FE 0 is refused.
func TestInterFELinkParse(t *testing.T) {
	l, err := ParseInterFELink([]byte{0, 0, 0, 7, 0, 0, 0, 2, 0xaa, 0xbb, 0xcc, 0xdd})
	if err != nil || l != (InterFELink{Port: 7, PeerFE: 2}) {
		t.Fatalf("with a trailing field: %+v, %v", l, err)
	}
	for _, bad := range [][]byte{
		{0, 0, 0, 7, 0, 0, 0},
		{0, 0, 0, 7, 0, 0, 0, 2, 0},
		{0, 0, 0, 7, 0, 0, 0, 0},
		{0, 0, 0, 7, 0x40, 0, 0, 1},
	} {
		if _, err := ParseInterFELink(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := MarshalInterFELinks([]InterFELink{{Port: 1, PeerFE: 0}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("peer FE 0 encoded: %v", err)
	}
}

// An egress row, byte by byte, as a SET in a Config: the item is on class
// 65539 (0x00010003) instance 1, path [1 (the table), 7 (the nexthop row)],
// FULLDATA FE 2 port 5.
func TestNexthopEgressVector(t *testing.T) {
	r := Row{Op: OpSet, Table: TableIPv4Egress, Index: 7, Egress: NexthopEgressInfo{FE: 2, Port: 5}}
	b, err := r.Egress.AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := hex.DecodeString("0000000200000005"); !bytes.Equal(b, want) {
		t.Fatalf("FULLDATA %x, want %x", b, want)
	}
	w := NewConfigWriter(Header{Src: testCE, Dst: testFE}, nil)
	if _, err := r.AppendTo(w, nil); err != nil {
		t.Fatal(err)
	}
	raw := w.Flush()
	if len(raw) != 1 {
		t.Fatalf("%d messages", len(raw))
	}
	// The LFB selector: class and instance, then the operation's PATH-DATA.
	if want, _ := hex.DecodeString("0001000300000001"); !bytes.Contains(raw[0], want) {
		t.Fatalf("no LFB selector %x in %x", want, raw[0])
	}
	if want, _ := hex.DecodeString("0000000200000001" + "00000007" + "0112000c" + "0000000200000005"); !bytes.Contains(raw[0], want) {
		t.Fatalf("no path [1 7] with FULLDATA FE 2 port 5 in %x", raw[0])
	}
	m, err := Parse(raw[0])
	if err != nil {
		t.Fatal(err)
	}
	items := Items(m)
	got, err := DecodeRow(&items[0])
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, r)
	}
	if ClassName(ClassIPv6NexthopEgress) != "SplitplaneIPv6NexthopEgress" {
		t.Errorf("class name %q", ClassName(ClassIPv6NexthopEgress))
	}
}

func TestNexthopEgressParse(t *testing.T) {
	for _, bad := range [][]byte{
		{0, 0, 0, 2, 0, 0, 0},
		{0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 5},
		{0xff, 0, 0, 0, 0, 0, 0, 5},
	} {
		if _, err := ParseNexthopEgressInfo(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := (NexthopEgressInfo{FE: 0}).AppendFullData(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("FE 0 encoded: %v", err)
	}
}

// A PortInfo row tolerates nothing after its addresses, which is why the
// inter-FE links are a component of their own: an old CE would refuse a
// port row that carried them.
func TestPortInfoRefusesTrailingBytes(t *testing.T) {
	b, err := PortInfo{ID: 1, Name: "ife2", Up: true}.AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePortInfo(b); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePortInfo(append(b, 0, 0, 0, 0, 0, 0, 0, 2)); err == nil {
		t.Fatal("a PortInfo with 8 trailing bytes parsed")
	}
}
