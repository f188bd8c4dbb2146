package forces

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// A connected row, byte by byte, as a SET in a Config: the item is on
// class 65541 (0x00010005) instance 1, path [1 (the table), 3 (the row)],
// FULLDATA address, prefix length and padding, FE, port. The IPv6 table is
// class 65542 with a 16-byte address.
func TestConnectedEgressVector(t *testing.T) {
	for _, tc := range []struct {
		row      Row
		selector string
		data     string
	}{
		{
			Row{Op: OpSet, Table: TableIPv4Connected, Index: 3, Prefix: netip.MustParsePrefix("10.20.2.9/24"), Egress: NexthopEgressInfo{FE: 2, Port: 5}},
			"0001000500000001",
			"0a140200" + "18000000" + "00000002" + "00000005",
		},
		{
			Row{Op: OpSet, Table: TableIPv6Connected, Index: 3, Prefix: netip.MustParsePrefix("fd00:20:2::/64"), Egress: NexthopEgressInfo{FE: 3, Port: 0x0102}},
			"0001000600000001",
			"fd000020000200000000000000000000" + "40000000" + "00000003" + "00000102",
		},
	} {
		w := NewConfigWriter(Header{Src: testCE, Dst: testFE}, nil)
		if _, err := tc.row.AppendTo(w, nil); err != nil {
			t.Fatal(err)
		}
		raw := w.Flush()
		if len(raw) != 1 {
			t.Fatalf("%d messages", len(raw))
		}
		if want, _ := hex.DecodeString(tc.selector); !bytes.Contains(raw[0], want) {
			t.Fatalf("no LFB selector %x in %x", want, raw[0])
		}
		n := 4 + len(tc.data)/2
		path := "0000000200000001" + "00000003" + "0112" + hex.EncodeToString([]byte{byte(n >> 8), byte(n)}) + tc.data
		if want, _ := hex.DecodeString(path); !bytes.Contains(raw[0], want) {
			t.Fatalf("no path [1 3] with FULLDATA %s in %x", tc.data, raw[0])
		}
		m, err := Parse(raw[0])
		if err != nil {
			t.Fatal(err)
		}
		items := Items(m)
		got, err := DecodeRow(&items[0])
		want := tc.row
		want.Prefix = want.Prefix.Masked()
		if err != nil || got.Prefix != want.Prefix || got.Egress != want.Egress || got.Index != 3 || got.Table != want.Table {
			t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
		}
		if ClassName(want.Table.Class()) != map[bool]string{false: "SplitplaneIPv4ConnectedEgress", true: "SplitplaneIPv6ConnectedEgress"}[want.Table.IPv6()] {
			t.Errorf("class %d named %s", want.Table.Class(), ClassName(want.Table.Class()))
		}
	}
}

// Rows that cannot be encoded name what is wrong; FULLDATA that does not
// decode is ErrMalformed, naming the field.
func TestConnectedEgressBad(t *testing.T) {
	for _, tc := range []struct {
		c    ConnectedEgressInfo
		v6   bool
		want string
	}{
		{ConnectedEgressInfo{Prefix: netip.MustParsePrefix("fd00::/64"), FE: 1}, false, "not a valid IPv4 prefix"},
		{ConnectedEgressInfo{Prefix: netip.MustParsePrefix("10.0.0.0/8"), FE: 1}, true, "not a valid IPv6 prefix"},
		{ConnectedEgressInfo{FE: 1}, false, "not a valid IPv4 prefix"},
		{ConnectedEgressInfo{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, false, "FE 0"},
		{ConnectedEgressInfo{Prefix: netip.MustParsePrefix("10.0.0.0/8"), FE: MaxFESubID + 1}, false, "FE 1073741824"},
	} {
		if _, err := tc.c.AppendFullData(nil, tc.v6); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v v6=%t: %v, want ErrInvalid saying %q", tc.c, tc.v6, err, tc.want)
		}
	}
	good, _ := hex.DecodeString("0a141400" + "18000000" + "00000002" + "00000005")
	if c, err := ParseConnectedEgressInfo(good, false); err != nil || c.Prefix != netip.MustParsePrefix("10.20.20.0/24") {
		t.Fatalf("good row: %+v, %v", c, err)
	}
	mod := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	for _, tc := range []struct {
		b    []byte
		v6   bool
		want string
	}{
		{good[:15], false, "15 bytes, want 16"},
		{good, true, "16 bytes, want 28"},
		{mod(4, 33), false, "prefix length 33"},
		{mod(5, 1), false, "padding"},
		{mod(11, 0), false, "FE 0"},
		{mod(8, 0x40), false, "FE 1073741826"},
		{append(make([]byte, 10), append([]byte{0xff, 0xff, 1, 2, 3, 4, 128, 0, 0, 0}, good[8:]...)...), true, "IPv4-mapped"},
	} {
		if _, err := ParseConnectedEgressInfo(tc.b, tc.v6); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%x v6=%t: %v, want ErrMalformed saying %q", tc.b, tc.v6, err, tc.want)
		}
	}
}
