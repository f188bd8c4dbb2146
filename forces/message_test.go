package forces

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// unhex decodes a hex string that may contain spaces, newlines and | separators.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func u8p(v uint8) *uint8 { return &v }

var (
	testFE = FEID(1) // 0x00000001
	testCE = CEID(0) // 0x40000000
)

func prefixRow198() []byte {
	return IPv4PrefixInfo{Prefix: netip.MustParsePrefix("198.51.100.0/24"), HopSelector: 7}.MarshalFullData()
}

// Vectors are computed by hand from RFC 5810's layouts; comments show the fields.
var vectors = []struct {
	name string
	msg  func() *Message
	hex  string
}{
	{
		name: "heartbeat",
		msg:  func() *Message { return NewHeartbeat(testFE, testCE, 0x0102030405060708, AlwaysACK) },
		hex:  `10 0f 0006  00000001  40000000  0102030405060708  f8000000`,
		// ver=1 type=0x0F len=6 words | src FE(1) | dst CE(0) | correlator | ACK=AlwaysACK (bits 31-30) | priority 7 (bits 29-27)
	},
	{
		name: "association setup",
		msg:  func() *Message { return NewAssociationSetup(testFE, testCE, 1) },
		hex:  `10 01 0006  00000001  40000000  0000000000000001  38000000`, // priority 7
	},
	{
		name: "association setup response",
		msg: func() *Message {
			return NewAssociationSetupResponse(NewAssociationSetup(testFE, testCE, 1), uint32(SetupSuccess))
		},
		hex: `10 11 0008  40000000  00000001  0000000000000001  38000000
		      0010 0008 00000000`, // priority 7 (echoed); ASResult-TLV, len 8, success
	},
	{
		name: "association teardown",
		msg:  func() *Message { return NewAssociationTeardown(testCE, testFE, uint32(TeardownLossOfHeartbeats)) },
		hex: `10 02 0008  40000000  00000001  0000000000000000  38000000
		      0011 0008 00000001`, // priority 7; ASTreason-TLV, len 8, loss of heartbeats
	},
	{
		name: "config set IPv4PrefixInfo",
		msg:  configSet,
		hex: `10 03 0014  40000000  00000001  000000000000002a  c8400000
		      1000 0038  0000000a 00000001
		        0001 002c
		          0110 0028  0000 0002  00000001 00000005
		            0112 0018  c6336400 18000000 00000007 00000000 00000000`,
		// flags: AlwaysACK(0xC0000000) | priority 1 (1<<27) | EM all-or-none (1<<22)
		// LFBselect class 10 (IPv4UcastLPM) instance 1 / SET / PATH-DATA {1, 5} / FULLDATA:
		// 198.51.100.0 | prefixlen 24 + pad | HopSelector 7 | ECMP 0 + pad | Default 0 + pad
	},
	{
		name: "config del",
		msg: func() *Message {
			return &Message{
				Header: Header{Version: 1, Type: MsgConfig, Src: testCE, Dst: testFE, Correlator: 0x2b},
				LFBs: []LFBSelect{{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Ops: []Operation{{
					Type: OpDel, Paths: []PathData{{IDs: []uint32{CompIPv4PrefixTable, 5}}},
				}}}},
			}
		},
		hex: `10 03 000e  40000000  00000001  000000000000002b  00000000
		      1000 0020  0000000a 00000001
		        0005 0014
		          0110 0010  0000 0002  00000001 00000005`,
	},
	{
		name: "config response",
		msg: func() *Message {
			m, err := NewConfigResponse(configSet(), ResultSuccess)
			if err != nil {
				panic(err)
			}
			return m
		},
		hex: `10 13 0010  00000001  40000000  000000000000002a  08000000
		      1000 0028  0000000a 00000001
		        0003 001c
		          0110 0018  0000 0002  00000001 00000005
		            0114 0008  00 000000`,
		// echoes correlator and priority, swaps src/dst; SET-RESPONSE; RESULT SUCCESS
	},
	{
		name: "padding and extra TLV",
		msg: func() *Message {
			return &Message{
				Header: Header{Version: 1, Type: MsgQueryResponse, Src: testFE, Dst: testCE, Correlator: 9},
				LFBs: []LFBSelect{{ClassID: ClassFEObject, InstanceID: 1, Ops: []Operation{{
					Type: OpGetResponse, Paths: []PathData{{
						IDs: []uint32{2}, Key: &KeyInfo{KeyID: 3, Data: []byte{0xaa}},
						FullData: []byte{1, 2, 3, 4, 5}, HasFullData: true,
					}},
				}}}},
				Extra: []TLV{{Type: 0x8001, Value: []byte{0xde, 0xad, 0xbe}}},
			}
		},
		hex: `10 14 0016  00000001  40000000  0000000000000009  00000000
		      1000 0038  00000001 00000001
		        0009 002c
		          0110 0028  0000 0001  00000002
		            0111 0010  00000003  0112 0005 aa000000
		            0112 0009  0102030405 000000
		      8001 0007  deadbe 00`,
	},
}

func configSet() *Message {
	return &Message{
		Header: Header{
			Version: 1, Type: MsgConfig, Src: testCE, Dst: testFE, Correlator: 0x2a,
			Flags: Flags{ACK: AlwaysACK, Priority: 1, ExecMode: ExecAllOrNone},
		},
		LFBs: []LFBSelect{{ClassID: ClassIPv4UcastLPM, InstanceID: 1, Ops: []Operation{{
			Type: OpSet, Paths: []PathData{{
				IDs:      []uint32{CompIPv4PrefixTable, 5},
				FullData: prefixRow198(), HasFullData: true,
			}},
		}}}},
	}
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			want := unhex(t, v.hex)
			m := v.msg()
			got, err := m.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("MarshalBinary:\n got %x\nwant %x", got, want)
			}
			if int(m.Header.Length)*4 != len(want) {
				t.Errorf("Header.Length = %d words, want %d", m.Header.Length, len(want)/4)
			}
			parsed, err := Parse(want)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(parsed, m) {
				t.Fatalf("Parse mismatch:\n got %+v\nwant %+v", parsed, m)
			}
			// AppendBinary appends after existing bytes.
			pre := []byte{0xff, 0xee}
			app, err := m.AppendBinary(pre)
			if err != nil || !bytes.Equal(app[:2], pre) || !bytes.Equal(app[2:], want) {
				t.Fatalf("AppendBinary = %x, %v", app, err)
			}
		})
	}
}

func TestPrefixInfoVector(t *testing.T) {
	got := prefixRow198()
	want := unhex(t, "c6336400 18000000 00000007 00000000 00000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("IPv4PrefixInfo = %x, want %x", got, want)
	}
	p := IPv4PrefixInfo{Prefix: netip.MustParsePrefix("0.0.0.0/0"), HopSelector: 0x01020304, ECMP: true, DefaultRoute: true}
	got = p.MarshalFullData()
	want = unhex(t, "00000000 00000000 01020304 01000000 01000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("IPv4PrefixInfo default = %x, want %x", got, want)
	}
	back, err := ParseIPv4PrefixInfo(got)
	if err != nil || back != p {
		t.Fatalf("ParseIPv4PrefixInfo = %+v, %v; want %+v", back, err, p)
	}
	// Host bits are cleared.
	p = IPv4PrefixInfo{Prefix: netip.MustParsePrefix("10.1.2.3/8")}
	if back, _ := ParseIPv4PrefixInfo(p.MarshalFullData()); back.Prefix != netip.MustParsePrefix("10.0.0.0/8") {
		t.Fatalf("masked prefix = %v", back.Prefix)
	}
	for _, bad := range []IPv4PrefixInfo{{}, {Prefix: netip.MustParsePrefix("2001:db8::/32")}} {
		if bad.MarshalFullData() != nil || bad.Validate() == nil {
			t.Errorf("%+v: encoded or validated", bad)
		}
	}
	for _, h := range []string{
		"c6336400 18000000 00000007 00000000",          // short
		"c6336400 21000000 00000007 00000000 00000000", // prefixlen 33
		"c6336400 18000100 00000007 00000000 00000000", // padding
		"c6336400 18000000 00000007 02000000 00000000", // boolean 2
		"c6336400 18000000 00000007 01000100 00000000", // ECMP padding
		"c6336400 18000000 00000007 00000000 00000001", // default-route padding
		"c6336400 18000000 00000007 00000000 ff000000", // default-route boolean 255
	} {
		if _, err := ParseIPv4PrefixInfo(unhex(t, h)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseIPv4PrefixInfo(%s) err = %v, want ErrMalformed", h, err)
		}
	}
}

func TestNextHopInfoVector(t *testing.T) {
	n := IPv4NextHopInfo{L3PortID: 3, MTU: 1500, NextHop: netip.MustParseAddr("192.0.2.1"), MediaEncapInfoIndex: 9, LFBOutputSelectIndex: 2}
	got := n.MarshalFullData()
	want := unhex(t, "00000003 000005dc c0000201 00000009 02000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("IPv4NextHopInfo = %x, want %x", got, want)
	}
	back, err := ParseIPv4NextHopInfo(got)
	if err != nil || back != n {
		t.Fatalf("ParseIPv4NextHopInfo = %+v, %v", back, err)
	}
	direct := IPv4NextHopInfo{L3PortID: 1}
	if back, err := ParseIPv4NextHopInfo(direct.MarshalFullData()); err != nil || back != direct {
		t.Fatalf("directly connected round trip = %+v, %v", back, err)
	}
	if (IPv4NextHopInfo{NextHop: netip.MustParseAddr("::1")}).MarshalFullData() != nil {
		t.Error("IPv6 next hop encoded")
	}
	if _, err := ParseIPv4NextHopInfo(unhex(t, "00000003 000005dc c0000201 00000009 02000001")); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad padding err = %v", err)
	}
}

func TestIDs(t *testing.T) {
	if FEID(5) != 5 || !FEID(5).IsFE() || FEID(5).IsCE() {
		t.Errorf("FEID(5) = %#x", uint32(FEID(5)))
	}
	if CEID(5) != 0x40000005 || !CEID(5).IsCE() || CEID(5).IsFE() {
		t.Errorf("CEID(5) = %#x", uint32(CEID(5)))
	}
	if CEID(0xFFFFFFFF) != 0x7FFFFFFF {
		t.Errorf("CEID does not mask: %#x", uint32(CEID(0xFFFFFFFF)))
	}
	for id, want := range map[ID]string{FEID(1): "FE(1)", CEID(2): "CE(2)", AllFEsBroadcast: "AllFEs", 0xC0000001: "Multicast(0xc0000001)"} {
		if id.String() != want {
			t.Errorf("%#x.String() = %q, want %q", uint32(id), id.String(), want)
		}
	}
	if !AllBroadcast.IsBroadcast() || AllBroadcast.IsMulticast() || !ID(0xC0000000).IsMulticast() {
		t.Error("broadcast/multicast classification")
	}
}

func TestStrings(t *testing.T) {
	for got, want := range map[string]string{
		MsgConfigResponse.String():           "ConfigResponse",
		MessageType(0x77).String():           "MessageType(0x77)",
		ResultLFBInstanceIDNotFound.String(): "LFB_INSTANCE_ID_NOT_FOUND",
		ResultInternalError.String():         "INTERNAL_ERROR",
		ResultUnspecifiedError.String():      "UNSPECIFIED_ERROR",
		TeardownLossOfHeartbeats.String():    "error - loss of heartbeats",
		SetupPermissionDenied.String():       "permission denied",
		OpGetPropResponse.String():           "GET-PROP-RESPONSE",
		ExecUntilFailure.String():            "execute-until-failure",
		ClassName(ClassIPv4UcastLPM):         "IPv4UcastLPM",
		ClassName(999):                       "LFBClass(999)",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if OpSet.Response() != OpSetResponse || OpDel.Response() != OpDelResponse || OpCommit.Response() != OpCommitResponse {
		t.Error("OpType.Response")
	}
}

func TestFlagsBits(t *testing.T) {
	for _, c := range []struct {
		f Flags
		w uint32
	}{
		{Flags{ACK: FailureACK}, 0x80000000},
		{Flags{Priority: 7}, 0x38000000},
		{Flags{ExecMode: ExecContinueOnFailure}, 0x00C00000},
		{Flags{Atomic: true}, 0x00200000},
		{Flags{TP: PhaseABT}, 0x00180000},
	} {
		w, err := c.f.encode()
		if err != nil || w != c.w {
			t.Errorf("%+v encodes to %#08x, %v; want %#08x", c.f, w, err, c.w)
		}
		if decodeFlags(c.w) != c.f {
			t.Errorf("%#08x decodes to %+v", c.w, decodeFlags(c.w))
		}
	}
	// Reserved bits are ignored on receipt.
	if decodeFlags(0x0707FFFF) != (Flags{}) {
		t.Errorf("reserved bits decoded: %+v", decodeFlags(0x0707FFFF))
	}
}

func TestMarshalErrors(t *testing.T) {
	big := make([]byte, MaxTLVLen)
	cases := []struct {
		name string
		m    *Message
		want error
	}{
		{"version", &Message{Header: Header{Version: 2}}, ErrVersion},
		{"priority", &Message{Header: Header{Flags: Flags{Priority: 8}}}, ErrInvalid},
		{"extra TLV too large", &Message{Extra: []TLV{{Type: 0x8000, Value: big}}}, ErrTooLarge},
		{"message too large", &Message{Extra: []TLV{
			{Type: 1, Value: big[:60000]}, {Type: 1, Value: big[:60000]}, {Type: 1, Value: big[:60000]},
			{Type: 1, Value: big[:60000]}, {Type: 1, Value: big[:60000]},
		}}, ErrTooLarge},
		{"LFBselect without ops", &Message{LFBs: []LFBSelect{{ClassID: 1}}}, ErrInvalid},
		{"two data kinds", &Message{LFBs: []LFBSelect{{Ops: []Operation{{Type: OpSet, Paths: []PathData{
			{FullData: []byte{1}, Result: u8p(0)},
		}}}}}}, ErrInvalid},
		{"too deep", &Message{LFBs: []LFBSelect{{Ops: []Operation{{Type: OpSet, Paths: []PathData{deepPath(MaxPathDepth + 1)}}}}}}, ErrTooDeep},
		{"typed TLV in Extra", &Message{Extra: []TLV{{Type: TLVASResult, Value: make([]byte, 4)}}}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pre := []byte{1, 2, 3}
			b, err := c.m.AppendBinary(pre)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !bytes.Equal(b, pre) {
				t.Fatalf("AppendBinary changed b on error: %x", b)
			}
		})
	}
	// Depth MaxPathDepth is fine.
	ok := &Message{LFBs: []LFBSelect{{Ops: []Operation{{Type: OpSet, Paths: []PathData{deepPath(MaxPathDepth)}}}}}}
	b, err := ok.MarshalBinary()
	if err != nil {
		t.Fatalf("depth %d: %v", MaxPathDepth, err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("Parse depth %d: %v", MaxPathDepth, err)
	}
}

// deepPath returns a PATH-DATA chain n levels deep ending in a RESULT.
func deepPath(n int) PathData {
	p := PathData{IDs: []uint32{uint32(n)}, Result: u8p(0)}
	for i := n - 1; i > 0; i-- {
		p = PathData{IDs: []uint32{uint32(i)}, Children: []PathData{p}}
	}
	return p
}

func TestItemsAndResults(t *testing.T) {
	// A nested request: {1} -> [{5} SET data, {6} SET data], plus a flat DEL.
	req := &Message{
		Header: Header{Type: MsgConfig, Src: testCE, Dst: testFE, Correlator: 77},
		LFBs: []LFBSelect{{ClassID: ClassIPv4NextHop, InstanceID: 1, Ops: []Operation{
			{Type: OpSet, Paths: []PathData{{IDs: []uint32{1}, Children: []PathData{
				{IDs: []uint32{5}, FullData: []byte{1, 2, 3, 4}},
				{IDs: []uint32{6}, FullData: []byte{5, 6, 7, 8}},
			}}}},
			{Type: OpDel, Paths: []PathData{{IDs: []uint32{1, 9}}}},
		}}},
	}
	items := Items(req)
	if len(items) != 3 {
		t.Fatalf("Items = %d, want 3", len(items))
	}
	wantPaths := [][]uint32{{1, 5}, {1, 6}, {1, 9}}
	for i, it := range items {
		if !reflect.DeepEqual(it.Path, wantPaths[i]) || it.ClassID != ClassIPv4NextHop {
			t.Errorf("item %d = %+v", i, it)
		}
	}
	if items[2].Op != OpDel || !items[0].HasFullData || items[2].HasFullData {
		t.Errorf("item ops/data wrong: %+v", items)
	}

	resp, err := NewConfigResponse(req, ResultSuccess, ResultExists, ResultNotFound)
	if err != nil {
		t.Fatal(err)
	}
	b, err := resp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Header.Correlator != 77 || back.Header.Src != testFE || back.Header.Dst != testCE {
		t.Errorf("response header = %+v", back.Header)
	}
	if back.LFBs[0].Ops[0].Type != OpSetResponse || back.LFBs[0].Ops[1].Type != OpDelResponse {
		t.Errorf("response op types = %v %v", back.LFBs[0].Ops[0].Type, back.LFBs[0].Ops[1].Type)
	}
	codes, err := ConfigResults(back)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(codes, []ResultCode{ResultSuccess, ResultExists, ResultNotFound}) {
		t.Errorf("ConfigResults = %v", codes)
	}
	if _, err := NewConfigResponse(req, ResultSuccess, ResultSuccess); !errors.Is(err, ErrInvalid) {
		t.Errorf("wrong result count err = %v", err)
	}
	if _, err := ConfigResults(req); !errors.Is(err, ErrInvalid) {
		t.Errorf("ConfigResults(Config) err = %v", err)
	}
	back.LFBs[0].Ops[1].Paths[0].Result = nil
	if _, err := ConfigResults(back); !errors.Is(err, ErrMalformed) {
		t.Errorf("missing RESULT err = %v", err)
	}
}
