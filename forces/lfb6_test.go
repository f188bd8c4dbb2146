package forces

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestIPv6PrefixInfoVector(t *testing.T) {
	p := IPv6PrefixInfo{Prefix: netip.MustParsePrefix("2001:db8:1234::/48"), HopSelector: 7, DefaultRoute: false, ECMP: true}
	got := hex.EncodeToString(p.MarshalFullData())
	want := strings.Join([]string{"20010db8123400000000000000000000", "30000000", "00000007", "01000000", "00000000"}, "")
	if got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	back, err := ParseIPv6PrefixInfo(p.MarshalFullData())
	if err != nil || back != p {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	// Host bits are cleared.
	q := IPv6PrefixInfo{Prefix: netip.MustParsePrefix("2001:db8::1/32")}
	if back, _ := ParseIPv6PrefixInfo(q.MarshalFullData()); back.Prefix.String() != "2001:db8::/32" {
		t.Fatalf("masking: %s", back.Prefix)
	}
}

func TestIPv6NextHopInfoVector(t *testing.T) {
	n := IPv6NextHopInfo{L3PortID: 3, MTU: 1500, NextHop: netip.MustParseAddr("fe80::1"), LFBOutputSelectIndex: 2}
	got := hex.EncodeToString(n.MarshalFullData())
	want := "00000003" + "000005dc" + "fe800000000000000000000000000001" + "00000000" + "02000000"
	if got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	back, err := ParseIPv6NextHopInfo(n.MarshalFullData())
	if err != nil || back != n {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if back, _ := ParseIPv6NextHopInfo(IPv6NextHopInfo{}.MarshalFullData()); back.NextHop.IsValid() {
		t.Fatal(":: must come back as no next hop")
	}
}

func TestIPv6RowsRejectBadInput(t *testing.T) {
	if (IPv6PrefixInfo{Prefix: netip.MustParsePrefix("192.0.2.0/24")}).MarshalFullData() != nil {
		t.Error("an IPv4 prefix encoded as IPv6PrefixInfo")
	}
	if (IPv6NextHopInfo{NextHop: netip.MustParseAddr("::ffff:192.0.2.1")}).MarshalFullData() != nil {
		t.Error("an IPv4-mapped next hop encoded")
	}
	good := IPv6PrefixInfo{Prefix: netip.MustParsePrefix("2001:db8::/32")}.MarshalFullData()
	for name, mut := range map[string]func([]byte) []byte{
		"short":       func(b []byte) []byte { return b[:31] },
		"long prefix": func(b []byte) []byte { b[16] = 129; return b },
		"padding":     func(b []byte) []byte { b[17] = 1; return b },
		"boolean 2":   func(b []byte) []byte { b[24] = 2; return b },
		"ipv4-mapped": func(b []byte) []byte { copy(b, netip.MustParseAddr("::ffff:192.0.2.0").AsSlice()); return b },
	} {
		b := mut(append([]byte(nil), good...))
		if _, err := ParseIPv6PrefixInfo(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := ParseIPv6NextHopInfo(make([]byte, 20)); !errors.Is(err, ErrMalformed) {
		t.Errorf("short next hop: %v", err)
	}
}

func FuzzParseIPv6Rows(f *testing.F) {
	f.Add(IPv6PrefixInfo{Prefix: netip.MustParsePrefix("2001:db8::/32"), HopSelector: 1}.MarshalFullData())
	f.Add(IPv6NextHopInfo{NextHop: netip.MustParseAddr("2001:db8::1")}.MarshalFullData())
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := ParseIPv6PrefixInfo(b); err == nil {
			if again, err := ParseIPv6PrefixInfo(p.MarshalFullData()); err != nil || again != p {
				t.Fatalf("prefix row does not round-trip: %+v -> %+v %v", p, again, err)
			}
		}
		if n, err := ParseIPv6NextHopInfo(b); err == nil {
			if again, err := ParseIPv6NextHopInfo(n.MarshalFullData()); err != nil || again != n {
				t.Fatalf("next-hop row does not round-trip: %+v -> %+v %v", n, again, err)
			}
		}
	})
}
