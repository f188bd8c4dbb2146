package ife

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	testHeader = Header{
		Dst: [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x02},
		Src: [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01},
	}
	// testInner is a minimal inner frame: an Ethernet header for IPv4 and
	// four bytes of payload.
	testInner = []byte{
		0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, // inner dst MAC
		0x02, 0x11, 0x22, 0x33, 0x44, 0x55, // inner src MAC
		0x08, 0x00, // inner EtherType IPv4
		0xde, 0xad, 0xbe, 0xef, // payload
	}
)

// golden is testInner encapsulated with an egress port, a flow hash and a
// 16-bit tcindex (for the padding), written out byte by byte from RFC 8013's
// layout rather than produced by Encode.
var golden = []byte{
	// 0-5: outer destination MAC
	0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
	// 6-11: outer source MAC
	0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
	// 12-13: EtherType 0xED3E
	0xed, 0x3e,
	// 14-15: metadata length = 2 (itself) + 8 + 8 + 8 = 26
	0x00, 0x1a,
	// 16-23: TLV egress port: type 0x5350, length 8 (4 header + 4 value), port 3
	0x53, 0x50, 0x00, 0x08, 0x00, 0x00, 0x00, 0x03,
	// 24-31: TLV flow hash: type 2, length 8, hash 0x12345678
	0x00, 0x02, 0x00, 0x08, 0x12, 0x34, 0x56, 0x78,
	// 32-39: TLV tcindex: type 5, length 6 (4 + 2, padding not counted), value 0x0007, 2 bytes of padding
	0x00, 0x05, 0x00, 0x06, 0x00, 0x07, 0x00, 0x00,
	// 40-57: the original frame, from offset 14 + 26
	0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
	0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
	0x08, 0x00,
	0xde, 0xad, 0xbe, 0xef,
}

var goldenMeta = []Meta{
	EgressPort(3),
	FlowHash(0x12345678),
	{Type: TypeTCIndex, Value: []byte{0x00, 0x07}},
}

func TestEncodeGolden(t *testing.T) {
	got, err := Encode(nil, testHeader, goldenMeta, testInner)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Fatalf("Encode:\n got %x\nwant %x", got, golden)
	}
	if n := Overhead(goldenMeta); n != len(golden)-len(testInner) {
		t.Errorf("Overhead = %d, the golden frame adds %d", n, len(golden)-len(testInner))
	}
	if n := MetaLen(goldenMeta); n != 26 {
		t.Errorf("MetaLen = %d, want 26", n)
	}
}

func TestDecodeGolden(t *testing.T) {
	h, meta, inner, err := Decode(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h != testHeader {
		t.Errorf("header = %+v, want %+v", h, testHeader)
	}
	if !bytes.Equal(inner, testInner) {
		t.Errorf("inner = %x, want %x", inner, testInner)
	}
	if !equalMeta(meta, goldenMeta) {
		t.Errorf("meta = %v, want %v", meta, goldenMeta)
	}
	port, err := One(meta, TypeEgressPort)
	if err != nil || port != 3 {
		t.Errorf("One(egress port) = %d, %v; want 3", port, err)
	}
	if v, ok := Lookup(meta, TypeFlowHash); !ok || !bytes.Equal(v, []byte{0x12, 0x34, 0x56, 0x78}) {
		t.Errorf("Lookup(flow hash) = %x, %v", v, ok)
	}
}

// TestEncodeAppends checks that Encode appends after what dst holds and
// does not allocate when dst has room.
func TestEncodeAppends(t *testing.T) {
	buf := make([]byte, 3, 256)
	copy(buf, "abc")
	got, err := Encode(buf, testHeader, goldenMeta, testInner)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[:3]) != "abc" || !bytes.Equal(got[3:], golden) {
		t.Fatalf("Encode after a prefix: %x", got)
	}
	if &got[0] != &buf[0] {
		t.Error("Encode reallocated a buffer with room to spare")
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = Encode(buf[:0], testHeader, goldenMeta, testInner)
	})
	if allocs != 0 {
		t.Errorf("Encode into a large enough buffer: %v allocations, want 0", allocs)
	}
	meta := make([]Meta, 0, 8)
	allocs = testing.AllocsPerRun(100, func() {
		_, _, _, _ = Decode(golden, meta[:0])
	})
	if allocs != 0 {
		t.Errorf("Decode into a large enough meta slice: %v allocations, want 0", allocs)
	}
}

func TestRoundTrip(t *testing.T) {
	cases := map[string][]Meta{
		"none":         nil,
		"egress port":  {EgressPort(7)},
		"all ours":     {EgressPort(0xfffffffe), IngressFE(2), FlowHash(0xdeadbeef)},
		"empty value":  {{Type: 0x7777, Value: []byte{}}},
		"odd sizes":    {{Type: 0x7777, Value: []byte{1}}, {Type: 0x7778, Value: []byte{1, 2, 3}}, {Type: 0x7779, Value: []byte{1, 2, 3, 4, 5}}},
		"linux mark":   {Uint32(TypeSKBMark, 17), EgressPort(1)},
		"unknown type": {{Type: 0xffff, Value: bytes.Repeat([]byte{9}, 100)}},
	}
	for name, meta := range cases {
		t.Run(name, func(t *testing.T) {
			frame, err := Encode(nil, testHeader, meta, testInner)
			if err != nil {
				t.Fatal(err)
			}
			if len(frame) != Overhead(meta)+len(testInner) {
				t.Errorf("frame of %d bytes, Overhead says %d + %d", len(frame), Overhead(meta), len(testInner))
			}
			h, got, inner, err := Decode(frame, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h != testHeader || !bytes.Equal(inner, testInner) || !equalMeta(got, meta) {
				t.Errorf("round trip: %+v %v %x, want %+v %v %x", h, got, inner, testHeader, meta, testInner)
			}
		})
	}
}

func TestLinkMTU(t *testing.T) {
	if got := LinkMTU(1500, []Meta{EgressPort(1)}); got != 1524 {
		t.Errorf("LinkMTU(1500, egress port) = %d, want 1524", got)
	}
	if got := LinkMTU(1500, []Meta{EgressPort(1), IngressFE(1), FlowHash(1)}); got != 1540 {
		t.Errorf("LinkMTU(1500, egress port + ingress FE + flow hash) = %d, want 1540", got)
	}
	// The definition: the bytes after the outer Ethernet header of the
	// largest frame a 1500-byte port carries (its 14-byte header + 1500).
	meta := []Meta{EgressPort(1), FlowHash(2)}
	frame, err := Encode(nil, testHeader, meta, make([]byte, EthHeaderLen+1500))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := LinkMTU(1500, meta), len(frame)-EthHeaderLen; got != want {
		t.Errorf("LinkMTU = %d, the frame's L2 payload is %d", got, want)
	}
}

// frameWith returns golden with its bytes from off replaced by b.
func frameWith(off int, b ...byte) []byte {
	f := bytes.Clone(golden)
	copy(f[off:], b)
	return f
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		err   error
		says  string // a piece of the message naming the field and value
	}{
		{"empty", nil, ErrTruncated, "0 bytes"},
		{"header only", golden[:14], ErrTruncated, "14 bytes"},
		{"IPv4 EtherType", frameWith(12, 0x08, 0x00), ErrEtherType, "EtherType 0x0800"},
		{"metadata length 0", frameWith(14, 0x00, 0x00), ErrMetaLen, "metadata length 0"},
		{"metadata length 1", frameWith(14, 0x00, 0x01), ErrMetaLen, "metadata length 1"},
		{"metadata length past the end", frameWith(14, 0x01, 0x00), ErrMetaLen, "metadata length 256"},
		{"no room for the inner frame", frameWith(14, 0x00, 0x1a+10), ErrTruncated, "inner frame of 8 bytes"},
		{"frame cut in the inner header", golden[:len(golden)-5], ErrTruncated, "inner frame of 13 bytes"},
		{"TLV length 0", frameWith(18, 0x00, 0x00), ErrTLV, "length 0"},
		{"TLV length 3", frameWith(18, 0x00, 0x03), ErrTLV, "length 3"},
		{"TLV length past the metadata", frameWith(34, 0x00, 0x0a), ErrTLV, "length 10 (12 padded)"},
		{"TLV length far past the metadata", frameWith(18, 0xff, 0xff), ErrTLV, "length 65535"},
		{"metadata ends inside a TLV header", frameWith(14, 0x00, 0x1a+2), ErrTLV, "2 bytes left at offset 40"},
		{"egress port of 2 bytes", frameWith(18, 0x00, 0x06), ErrTLV, "2-byte value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prior := []Meta{FlowHash(1)}
			_, meta, _, err := Decode(c.frame, prior)
			if !errors.Is(err, c.err) {
				t.Fatalf("Decode: %v, want %v", err, c.err)
			}
			if !equalMeta(meta, prior) {
				t.Errorf("Decode returned meta %v on error, want what was passed (%v)", meta, prior)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

func TestDecodeKeepsUnknownTypes(t *testing.T) {
	// A Linux sender's mark and priority, and a type nobody defines, around
	// our egress port: all returned in order, the frame still decoded.
	meta := []Meta{Uint32(TypeSKBMark, 1), {Type: 0x4242, Value: []byte{1, 2}}, EgressPort(9), Uint32(TypePrio, 6)}
	frame, err := Encode(nil, testHeader, meta, testInner)
	if err != nil {
		t.Fatal(err)
	}
	_, got, _, err := Decode(frame, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !equalMeta(got, meta) {
		t.Fatalf("meta = %v, want %v", got, meta)
	}
	if Known(0x4242) || !Known(TypeEgressPort) || !Known(TypeQMap) {
		t.Error("Known is wrong")
	}
	if port, err := One(got, TypeEgressPort); err != nil || port != 9 {
		t.Errorf("One = %d, %v", port, err)
	}
}

func TestOne(t *testing.T) {
	if _, err := One([]Meta{FlowHash(1)}, TypeEgressPort); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "no type 0x5350") {
		t.Errorf("no egress port: %v", err)
	}
	if _, err := One([]Meta{EgressPort(1), EgressPort(2)}, TypeEgressPort); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "twice (1 and 2)") {
		t.Errorf("two egress ports: %v", err)
	}
	if _, err := One([]Meta{{Type: 0x4242, Value: []byte{1}}}, 0x4242); !errors.Is(err, ErrTLV) {
		t.Errorf("1-byte value: %v", err)
	}
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		meta  []Meta
		inner []byte
		err   error
		says  string
	}{
		{"short inner frame", nil, testInner[:13], ErrTruncated, "inner frame of 13 bytes"},
		{"egress port of 2 bytes", []Meta{{Type: TypeEgressPort, Value: []byte{0, 1}}}, testInner, ErrTLV, "type 0x5350) has a 2-byte value, its type takes 4"},
		{"value too long", []Meta{{Type: 0x7777, Value: make([]byte, 65530)}}, testInner, ErrTooLong, "65530-byte value"},
		{"metadata too long", []Meta{{Type: 0x7777, Value: make([]byte, 40000)}, {Type: 0x7778, Value: make([]byte, 40000)}}, testInner, ErrTooLong, "metadata length 80010"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Encode([]byte("keep"), testHeader, c.meta, c.inner)
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Encode: %v, want %v saying %q", err, c.err, c.says)
			}
			if string(out) != "keep" {
				t.Errorf("Encode changed dst on error: %q", out)
			}
		})
	}
	// The largest metadata that fits: one TLV filling the 16-bit length.
	big := []Meta{{Type: 0x7777, Value: make([]byte, MaxMetaLen-MetaLenLen-TLVHeaderLen-1)}}
	frame, err := Encode(nil, testHeader, big, testInner)
	if err != nil {
		t.Fatalf("largest metadata: %v", err)
	}
	if _, got, _, err := Decode(frame, nil); err != nil || !equalMeta(got, big) {
		t.Fatalf("largest metadata round trip: %v", err)
	}
}

func equalMeta(a, b []Meta) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// goldenFE is the frame the FE's XDP program sends (fe/datapath, bpf/ife.h):
// egress port, egress FE, NE nexthop key and flow hash, written out byte by
// byte.
var goldenFE = []byte{
	0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // outer destination MAC
	0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // outer source MAC
	0xed, 0x3e, // EtherType
	0x00, 0x22, // metadata length 2 + 4 * 8 = 34
	0x53, 0x50, 0x00, 0x08, 0x00, 0x00, 0x00, 0x07, // egress port 7
	0x53, 0x52, 0x00, 0x08, 0x00, 0x00, 0x00, 0x03, // egress FE 3
	0x53, 0x53, 0x00, 0x08, 0x00, 0x00, 0x12, 0x34, // nexthop key 0x1234
	0x00, 0x02, 0x00, 0x08, 0xca, 0xfe, 0xf0, 0x0d, // flow hash
	0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
	0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
	0x08, 0x00,
	0xde, 0xad, 0xbe, 0xef,
}

func TestEgressFEAndNexthopKey(t *testing.T) {
	meta := []Meta{EgressPort(7), EgressFE(3), NexthopKey(0x1234), FlowHash(0xcafef00d)}
	got, err := Encode(nil, testHeader, meta, testInner)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, goldenFE) {
		t.Fatalf("Encode:\n got % x\nwant % x", got, goldenFE)
	}
	if n := Overhead(meta); n != 48 || len(got) != n+len(testInner) {
		t.Errorf("Overhead %d, frame %d bytes: want 48 and %d", n, len(got), 48+len(testInner))
	}
	_, dec, inner, err := Decode(goldenFE, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(inner, testInner) {
		t.Errorf("inner % x, want % x", inner, testInner)
	}
	for _, want := range []struct {
		typ uint16
		v   uint32
	}{{TypeEgressPort, 7}, {TypeEgressFE, 3}, {TypeNexthopKey, 0x1234}, {TypeFlowHash, 0xcafef00d}} {
		if v, err := One(dec, want.typ); err != nil || v != want.v {
			t.Errorf("One(%#x) = %d, %v; want %d", want.typ, v, err, want.v)
		}
		if !Known(want.typ) {
			t.Errorf("Known(%#x) = false", want.typ)
		}
	}
	// Both are 32-bit: another size is a malformed TLV either way.
	for _, typ := range []uint16{TypeEgressFE, TypeNexthopKey} {
		if _, err := Encode(nil, testHeader, []Meta{{Type: typ, Value: []byte{1, 2}}}, testInner); !errors.Is(err, ErrTLV) {
			t.Errorf("Encode type %#x with a 2-byte value: %v, want ErrTLV", typ, err)
		}
		bad := bytes.Clone(goldenFE)
		off := map[uint16]int{TypeEgressFE: 24, TypeNexthopKey: 32}[typ]
		bad[off+3] = 6 // length 6: a 2-byte value
		if _, _, _, err := Decode(bad, nil); !errors.Is(err, ErrTLV) {
			t.Errorf("Decode type %#x of length 6: %v, want ErrTLV", typ, err)
		}
	}
}
