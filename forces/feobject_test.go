package forces

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

func TestSupportedLFBsEncoding(t *testing.T) {
	rows := []SupportedLFB{{"FEObject", ClassFEObject, "1.0"}, {"IPv4UcastLPM", ClassIPv4UcastLPM, "1.0"}}
	b, err := MarshalSupportedLFBs(rows)
	if err != nil {
		t.Fatal(err)
	}
	// Row 0: index 0, FULLDATA{ FULLDATA{"FEObject"} class 1 FULLDATA{"1.0"} }.
	row0 := unhex(t, `00000000 0112 001c  0112 000c 46454f62 6a656374  00000001  0112 0007 312e3000`)
	if !reflect.DeepEqual(b[:len(row0)], row0) {
		t.Fatalf("row 0\n got %x\nwant %x", b[:len(row0)], row0)
	}
	got, err := ParseSupportedLFBs(b)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	for _, bad := range []string{
		"000000",                       // short index
		"00000000 0113 0004",           // row not FULLDATA
		"00000000 0112 0008 0112 0004", // row ends before class ID
		"00000000 0112 0010 0112 0004 00000001 0113 0004",                                                 // version not FULLDATA
		"00000000 0112 0014 0112 0004 00000001 0112 0004 00000009",                                        // trailing field
		"00000000 0112 0014 0112 0004 00000001 0112 0004 00000000 0112 0014 0112 0004 00000001 0112 0004", // dup index
		"00000000 0112 0010 0112 0005 ff000000 00000001",                                                  // name not UTF-8
	} {
		if _, err := ParseSupportedLFBs(unhex(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := MarshalSupportedLFBs([]SupportedLFB{{Name: "\xff"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-UTF-8 name: %v", err)
	}
	if _, err := MarshalSupportedLFBs([]SupportedLFB{{Name: string(make([]byte, MaxTLVLen))}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge name: %v", err)
	}
}

func TestPortInfoEncoding(t *testing.T) {
	rows := []PortInfo{
		{ID: 1, Name: "eth0", MAC: [6]byte{2, 0, 0, 0, 0, 1}, Up: true},
		{ID: 2, Name: "", MAC: [6]byte{2, 0, 0, 0, 0, 2}},
	}
	b, err := MarshalPortInfos(rows)
	if err != nil {
		t.Fatal(err)
	}
	row0 := unhex(t, `00000000 0112 001c  00000001  0112 0008 65746830  020000000001 0000  01000000`)
	if !reflect.DeepEqual(b[:len(row0)], row0) {
		t.Fatalf("row 0\n got %x\nwant %x", b[:len(row0)], row0)
	}
	got, err := ParsePortInfos(b)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	for _, bad := range []string{
		"00000001 0113 0004 020000000001 0000 01000000", // name not in a FULLDATA-TLV
		"00000001 0112 0004 020000000001 0001 01000000", // MAC padding
		"00000001 0112 0004 020000000001 0000 02000000", // Up = 2
		"00000001 0112 0004 020000000001 0000 01000100", // Up padding
		"00000001 0112 0004 020000000001 0000",          // short
		"0000",
	} {
		if _, err := ParsePortInfo(unhex(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", bad, err)
		}
	}
}

// A port's addresses follow its Up flag: a count, then family, length, two
// zero bytes and 16 address bytes each.
func TestPortInfoAddrs(t *testing.T) {
	p := PortInfo{ID: 7, Name: "p", MAC: [6]byte{2, 0, 0, 0, 0, 7}, Up: true,
		Addrs: []netip.Prefix{netip.MustParsePrefix("10.10.2.1/24"), netip.MustParsePrefix("fd00:10:2::1/64")}}
	b, err := p.AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	tail := unhex(t, `00000002  04180000 0a0a0201 00000000 00000000 00000000  06400000 fd000010 00020000 00000000 00000001`)
	if !bytes.HasSuffix(b, tail) {
		t.Fatalf("encoding\n got %x\nwant suffix %x", b, tail)
	}
	got, err := ParsePortInfo(b)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	head := b[:len(b)-len(tail)]
	for name, bad := range map[string]string{
		"count 0":         `00000000`,
		"count too big":   `00000002  04180000 0a0a0201 00000000 00000000 00000000`,
		"family 5":        `00000001  05180000 0a0a0201 00000000 00000000 00000000`,
		"IPv4 /33":        `00000001  04210000 0a0a0201 00000000 00000000 00000000`,
		"IPv4 junk bytes": `00000001  04180000 0a0a0201 00000001 00000000 00000000`,
		"padding":         `00000001  04180100 0a0a0201 00000000 00000000 00000000`,
		"cut short":       `000000`,
		"half an address": `00000001  04180000 0a0a0201`,
	} {
		if _, err := ParsePortInfo(append(slices.Clone(head), unhex(t, bad)...)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := (PortInfo{Addrs: []netip.Prefix{{}}}).AppendFullData(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid prefix: %v", err)
	}
}

func TestScalarsAndPolicies(t *testing.T) {
	if v, err := ParseUint32FullData(Uint32FullData(30000)); err != nil || v != 30000 {
		t.Errorf("uint32 %v %v", v, err)
	}
	for _, b := range [][]byte{{2}, {2, 0, 0, 0}} {
		if s, err := ParseFEState(b); err != nil || s != FEStateOperEnable {
			t.Errorf("FEState % x: %v %v", b, s, err)
		}
	}
	for _, b := range [][]byte{{3}, {2, 0, 1, 0}, {}, {1, 2}, {2, 0, 0, 0, 0}} {
		if _, err := ParseFEState(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("FEState % x accepted: %v", b, err)
		}
	}
	if _, err := ParseUint32FullData([]byte{1, 2, 3}); !errors.Is(err, ErrMalformed) {
		t.Error("3-byte uint32 accepted")
	}
	if p, err := ParseCEHBPolicy([]byte{1, 0, 0, 0}); err != nil || p != CEHBPolicy1 {
		t.Errorf("CEHBPolicy %v %v", p, err)
	}
	if _, err := ParseFEHBPolicy([]byte{2}); !errors.Is(err, ErrMalformed) {
		t.Error("FEHBPolicy 2 accepted")
	}
	if FEStateOperDisable.String() != "OperDisable" || FEState(9).String() != "FEState(9)" {
		t.Error("FEState strings")
	}

	// The heartbeat policy goes out as one Config of four SETs on FE Protocol/1.
	hb := HeartbeatPolicy{CEHBPolicy: CEHBPolicy0, CEHDI: 3000, FEHBPolicy: FEHBPolicy1, FEHI: 1000}
	msgs, err := BuildConfig(Header{Src: testCE, Dst: testFE}, nil, hb.Ops())
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	items := Items(roundTrip(t, msgs[0]))
	if len(items) != 4 {
		t.Fatalf("items %+v", items)
	}
	got := HeartbeatPolicy{}
	for _, it := range items {
		if it.ClassID != ClassFEProtocol || it.InstanceID != 1 || it.Op != OpSet || len(it.Path) != 1 {
			t.Fatalf("item %+v", it)
		}
		switch it.Path[0] {
		case FEProtoCEHBPolicy:
			got.CEHBPolicy, err = ParseCEHBPolicy(it.FullData)
		case FEProtoCEHDI:
			got.CEHDI, err = ParseUint32FullData(it.FullData)
		case FEProtoFEHBPolicy:
			got.FEHBPolicy, err = ParseFEHBPolicy(it.FullData)
		case FEProtoFEHI:
			got.FEHI, err = ParseUint32FullData(it.FullData)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got != hb {
		t.Errorf("policy round trip %+v, want %+v", got, hb)
	}
	q := roundTrip(t, NewDiscoveryQuery(testCE, testFE, 1))
	if len(Items(q)) != 7 || q.Header.Type != MsgQuery {
		t.Errorf("discovery query %+v", Items(q))
	}
}
