package packed

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func mustReplace(t *testing.T, b []byte, p string, d uint8, hops ...string) []byte {
	t.Helper()
	var hs []netip.Addr
	for _, h := range hops {
		hs = append(hs, netip.MustParseAddr(h))
	}
	b, err := AppendReplace(b, netip.MustParsePrefix(p), hs, d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	b := mustReplace(t, nil, "198.51.100.0/24", 0, "192.0.2.1")
	b = mustReplace(t, b, "0.0.0.0/0", 200, "192.0.2.1", "192.0.2.2")
	b = mustReplace(t, b, "2001:db8::/32", 7, "2001:db8:ffff::1")
	b, err := AppendDelete(b, netip.MustParsePrefix("203.0.113.128/25"))
	if err != nil {
		t.Fatal(err)
	}
	b, err = AppendDelete(b, netip.MustParsePrefix("2001:db8:1::1/128"))
	if err != nil {
		t.Fatal(err)
	}
	// The layout the package documents, for the first operation.
	if want := []byte{1, 4, 24, 198, 51, 100, 0, 0, 1, 192, 0, 2, 1}; !bytes.Equal(b[:13], want) {
		t.Fatalf("first operation % x, want % x", b[:13], want)
	}
	ops, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	want := []Op{
		{Kind: Replace, Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHops: addrs("192.0.2.1")},
		{Kind: Replace, Prefix: netip.MustParsePrefix("0.0.0.0/0"), NextHops: addrs("192.0.2.1", "192.0.2.2"), Distance: 200},
		{Kind: Replace, Prefix: netip.MustParsePrefix("2001:db8::/32"), NextHops: addrs("2001:db8:ffff::1"), Distance: 7},
		{Kind: Delete, Prefix: netip.MustParsePrefix("203.0.113.128/25")},
		{Kind: Delete, Prefix: netip.MustParsePrefix("2001:db8:1::1/128")},
	}
	if !reflect.DeepEqual(ops, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", ops, want)
	}
	// Next hops share an array but never each other's elements.
	ops[0].NextHops = append(ops[0].NextHops, netip.MustParseAddr("192.0.2.9"))
	if ops[1].NextHops[0] != netip.MustParseAddr("192.0.2.1") {
		t.Fatal("appending to one operation's next hops overwrote the next one's")
	}
	if ops, err := Decode(nil); err != nil || len(ops) != 0 {
		t.Fatalf("empty: %v %v", ops, err)
	}
}

func TestAppendRejects(t *testing.T) {
	p4, p6 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32")
	a4, a6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	many := make([]netip.Addr, 17)
	for i := range many {
		many[i] = a4
	}
	for _, tc := range []struct {
		name string
		p    netip.Prefix
		hops []netip.Addr
		want string
	}{
		{"no next hop", p4, nil, "0 next hops"},
		{"17 next hops", p4, many, "17 next hops"},
		{"v6 hop for v4", p4, []netip.Addr{a6}, "not of the prefix's family"},
		{"v4 hop for v6", p6, []netip.Addr{a4}, "not of the prefix's family"},
		{"host bits", netip.MustParsePrefix("198.51.100.1/24"), []netip.Addr{a4}, "host bits set (want 198.51.100.0/24)"},
		{"invalid", netip.Prefix{}, []netip.Addr{a4}, "not an IPv4 or IPv6 prefix"},
	} {
		b, err := AppendReplace([]byte{9}, tc.p, tc.hops, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if !bytes.Equal(b, []byte{9}) {
			t.Errorf("%s: appended % x on an error", tc.name, b[1:])
		}
	}
	if _, err := AppendDelete(nil, netip.MustParsePrefix("2001:db8::1/32")); err == nil {
		t.Error("delete with host bits accepted")
	}
}

func TestDecodeRejects(t *testing.T) {
	good := mustReplace(t, nil, "198.51.100.0/24", 0, "192.0.2.1") // 13 bytes
	for _, tc := range []struct {
		name  string
		b     []byte
		field string
		value string
		why   string
	}{
		{"kind 0", []byte{0, 4, 0, 0, 0, 0, 0}, "kind", "0", "want 1 (replace) or 2 (delete)"},
		{"kind 3", []byte{3, 4, 0, 0, 0, 0, 0}, "kind", "3", "want 1"},
		{"family 5", []byte{2, 5, 0, 0, 0, 0, 0}, "family", "5", "want 4 or 6"},
		{"length 33", []byte{2, 4, 33, 0, 0, 0, 0}, "length", "33", "want 0 to 32"},
		{"length 129", append([]byte{2, 6, 129}, make([]byte, 16)...), "length", "129", "want 0 to 128"},
		{"host bits", []byte{2, 4, 8, 10, 0, 0, 1}, "address", "10.0.0.1/8", "host bits set (want 10.0.0.0/8)"},
		{"ends in kind", []byte{}, "", "", ""},
		{"ends in family", []byte{1}, "family", "", "the bytes end inside it"},
		{"ends in length", []byte{1, 4}, "length", "", "the bytes end"},
		{"ends in address", []byte{1, 4, 24, 198, 51}, "address", "", "the bytes end"},
		{"ends in distance", good[:7], "distance", "", "the bytes end"},
		{"ends in count", good[:8], "count", "", "the bytes end"},
		{"ends in next hop", good[:12], "next_hops[0]", "", "the bytes end"},
		{"count 0", append(good[:8:8], 0), "count", "0", "want 1 to 16"},
		{"count 17", append(good[:8:8], 17), "count", "17", "want 1 to 16"},
	} {
		b := append(append([]byte{}, good...), tc.b...) // the second operation is the bad one
		ops, err := Decode(b)
		if tc.field == "" {
			if err != nil || len(ops) != 1 {
				t.Errorf("%s: %v %v", tc.name, ops, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v (%v), want an *Error", tc.name, err, ops)
			continue
		}
		if e.Index != 1 || e.Offset != len(good) || e.Field != tc.field || e.Value != tc.value || !strings.Contains(e.Why, tc.why) {
			t.Errorf("%s: %+v, want operation 1 at byte %d, field %q value %q why %q", tc.name, e, len(good), tc.field, tc.value, tc.why)
		}
		if ops != nil {
			t.Errorf("%s: returned operations with the error", tc.name)
		}
	}
}

// FuzzDecode: any bytes decode or fail with an *Error, never panic, and
// what decodes encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	b := mustReplaceF(f, nil, "198.51.100.0/24", "192.0.2.1")
	b = mustReplaceF(f, b, "2001:db8::/32", "2001:db8::1")
	f.Add(b)
	f.Add([]byte{2, 4, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 6, 128})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := Decode(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		var again []byte
		for _, op := range ops {
			if op.Kind == Delete {
				again, err = AppendDelete(again, op.Prefix)
			} else {
				again, err = AppendReplace(again, op.Prefix, op.NextHops, op.Distance)
			}
			if err != nil {
				// Decoding does not check next hops' usability (the CE
				// does); encoding checks their family only.
				t.Fatalf("re-encoding %+v: %v", op, err)
			}
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x, want % x", again, b)
		}
	})
}

func mustReplaceF(f *testing.F, b []byte, p, hop string) []byte {
	b, err := AppendReplace(b, netip.MustParsePrefix(p), []netip.Addr{netip.MustParseAddr(hop)}, 0)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
