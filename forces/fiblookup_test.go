package forces

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// TestFIBLookupQuery sends lookups of both families through a Query and its
// response, on the wire, and decodes every answer back.
func TestFIBLookupQuery(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("10.0.0.1")}
	answers := map[netip.Addr]FIBLookup{
		addrs[0]: {Kind: FIBLookupRoute, ID: 0x10003, Hops: []FIBLookupHop{
			{ID: 4, Gateway: netip.MustParseAddr("10.10.2.2"), Port: 7, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, Resolved: true},
			{ID: 5, Gateway: netip.MustParseAddr("fe80::1"), RemoteFE: 2, RemotePort: 9},
			{ID: 6, Port: 3}, // connected, unresolved
		}},
		addrs[1]: {Kind: FIBLookupNone},
		addrs[2]: {Kind: FIBLookupLocal},
	}
	q := roundTrip(t, NewQuery(testCE, testFE, 9, LookupSelect(addrs)))
	var asked []netip.Addr
	resp, err := NewQueryResponse(q, func(it Item) ([]byte, ResultCode) {
		if it.ClassID != PortTableClass || len(it.Path) != 1 || it.Path[0] != FIBLookupComponent {
			return nil, ResultInvalidPath
		}
		a, err := ParseLookupKey(it.Key)
		if err != nil {
			t.Errorf("key: %v", err)
			return nil, ResultInvalidPath
		}
		asked = append(asked, a)
		b, err := answers[a].MarshalFullData()
		if err != nil {
			t.Fatal(err)
		}
		return b, ResultSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(asked, addrs) {
		t.Fatalf("asked for %v, want %v", asked, addrs)
	}
	items := Items(roundTrip(t, resp))
	if len(items) != len(addrs) {
		t.Fatalf("%d answers for %d addresses", len(items), len(addrs))
	}
	for i, it := range items {
		got, err := ParseFIBLookup(it.FullData)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := answers[addrs[i]]; !reflect.DeepEqual(got, want) {
			t.Errorf("answer for %s:\n got %+v\nwant %+v", addrs[i], got, want)
		}
	}
}

func TestFIBLookupMalformed(t *testing.T) {
	good, err := FIBLookup{Kind: FIBLookupRoute, ID: 1, Hops: []FIBLookupHop{{ID: 1, Gateway: netip.MustParseAddr("10.0.0.1")}}}.MarshalFullData()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"short":           good[:7],
		"truncated hop":   good[:len(good)-1],
		"extra bytes":     append(append([]byte{}, good...), 0),
		"unknown kind":    append([]byte{9}, good[1:]...),
		"unknown family":  func() []byte { b := append([]byte{}, good...); b[8+4] = 5; return b }(),
		"more hops said":  func() []byte { b := append([]byte{}, good...); b[1] = 2; return b }(),
		"no hops but has": func() []byte { b := append([]byte{}, good...); b[1] = 0; return b }(),
	}
	for name, b := range bad {
		if _, err := ParseFIBLookup(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	for name, k := range map[string]*KeyInfo{
		"none":       nil,
		"wrong id":   {KeyID: 2, Data: []byte{10, 0, 0, 1}},
		"five bytes": {KeyID: FIBLookupKeyID, Data: []byte{10, 0, 0, 1, 0}},
		"empty":      {KeyID: FIBLookupKeyID},
	} {
		if _, err := ParseLookupKey(k); !errors.Is(err, ErrMalformed) {
			t.Errorf("key %s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := (FIBLookup{Hops: make([]FIBLookupHop, MaxFIBLookupHops+1)}).MarshalFullData(); !errors.Is(err, ErrInvalid) {
		t.Errorf("too many hops: %v", err)
	}
}
