package forces

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// msgWith builds a message of the given type around a raw body, with a
// correct header Length.
func msgWith(typ MessageType, body []byte) []byte {
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	b[0] = ProtocolVersion << 4
	b[1] = byte(typ)
	b = append(b, body...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)/4))
	return b
}

// lfbBody wraps op TLVs in an LFBselect for class 10 instance 1.
func lfbBody(t *testing.T, ops string) []byte {
	t.Helper()
	inner := unhex(t, "0000000a 00000001"+ops)
	tlv := []byte{0x10, 0x00, 0, 0}
	binary.BigEndian.PutUint16(tlv[2:], uint16(4+len(inner)))
	tlv = append(tlv, inner...)
	for len(tlv)%4 != 0 {
		tlv = append(tlv, 0)
	}
	return tlv
}

func TestParseMalformed(t *testing.T) {
	good := unhex(t, vectors[4].hex) // config set
	if _, err := Parse(good); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	mod := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"truncated header", good[:23], ErrMalformed},
		{"wrong version", mod(func(b []byte) []byte { b[0] = 0x20; return b }), ErrVersion},
		{"version 0", mod(func(b []byte) []byte { b[0] = 0x00; return b }), ErrVersion},
		{"length longer than buffer", mod(func(b []byte) []byte { b[3]++; return b }), ErrLength},
		{"length shorter than buffer", mod(func(b []byte) []byte { b[3]--; return b }), ErrLength},
		{"buffer truncated", good[:len(good)-4], ErrLength},
		{"length below header", func() []byte {
			b := make([]byte, 24)
			b[0], b[3] = 0x10, 5
			return b
		}(), ErrLength},
		{"trailing bytes", append(append([]byte(nil), good...), 0, 0, 0, 0), ErrLength},
		{"TLV length < 4", msgWith(MsgConfig, unhex(t, "1000 0003 00000000")), ErrMalformed},
		{"TLV length 0", msgWith(MsgConfig, unhex(t, "8000 0000")), ErrMalformed},
		{"TLV length past end", msgWith(MsgConfig, unhex(t, "8000 0009 00000000")), ErrMalformed},
		{"op TLV length 0", msgWith(MsgConfig, lfbBody(t, "0001 0000")), ErrMalformed},
		{"truncated TLV header in LFBselect", msgWith(MsgConfig, lfbBody(t, "0001")), ErrMalformed},
		{"LFBselect too short", msgWith(MsgConfig, unhex(t, "1000 0008 0000000a")), ErrMalformed},
		{"LFBselect without ops", msgWith(MsgConfig, unhex(t, "1000 000c 0000000a 00000001")), ErrMalformed},
		{"op type 0", msgWith(MsgConfig, lfbBody(t, "0000 0004")), ErrMalformed},
		{"op length past LFBselect", msgWith(MsgConfig, lfbBody(t, "0001 0010 00000000")), ErrMalformed},
		{"non PATH-DATA in op", msgWith(MsgConfig, lfbBody(t, "0001 000c 0112 0008 00000000")), ErrMalformed},
		{"PATH-DATA too short", msgWith(MsgConfig, lfbBody(t, "0001 000c 0110 0006 0000 0000")), ErrMalformed},
		{"IDcount past end", msgWith(MsgConfig, lfbBody(t, "0001 0010 0110 000c 0000 0002 00000001")), ErrMalformed},
		{"IDcount huge", msgWith(MsgConfig, lfbBody(t, "0001 000c 0110 0008 0000 ffff")), ErrMalformed},
		{"unknown TLV in PATH-DATA", msgWith(MsgConfig, lfbBody(t, "0001 0014 0110 0010 0000 0000 8000 0008 00000000")), ErrMalformed},
		{"RESULT wrong size", msgWith(MsgConfig, lfbBody(t, "0001 0014 0110 0010 0000 0000 0114 0005 00000000")), ErrMalformed},
		{"two DATA kinds", msgWith(MsgConfig, lfbBody(t,
			"0001 001c 0110 0018 0000 0000 0114 0008 00000000 0112 0008 00000000")), ErrMalformed},
		{"KEYINFO after data", msgWith(MsgConfig, lfbBody(t,
			"0001 0020 0110 001c 0000 0000 0112 0008 00000000 0111 000c 00000001 0112 0004")), ErrMalformed},
		{"KEYINFO without FULLDATA", msgWith(MsgConfig, lfbBody(t,
			"0001 0014 0110 0010 0000 0000 0111 0008 00000001")), ErrMalformed},
		{"missing padding", msgWith(MsgConfig, lfbBody(t, "0001 000d 0110 0009 0000 0000 00")), ErrMalformed},
		{"duplicate ASResult", msgWith(MsgAssociationSetupResponse, unhex(t, "0010 0008 00000000 0010 0008 00000000")), ErrMalformed},
		{"ASResult wrong size", msgWith(MsgAssociationSetupResponse, unhex(t, "0010 000c 00000000 00000000")), ErrMalformed},
		{"ASTreason wrong size", msgWith(MsgAssociationTeardown, unhex(t, "0011 0004")), ErrMalformed},
		{"nesting too deep", func() []byte {
			// Build the chain as bytes, since MarshalBinary refuses it.
			p := unhex(t, "0110 0010 0000 0001 00000001 0114 0008 00000000")
			for i := 0; i < MaxPathDepth; i++ {
				hdr := unhex(t, "0110 0000 0000 0001 00000001")
				binary.BigEndian.PutUint16(hdr[2:], uint16(len(hdr)+len(p)))
				p = append(hdr, p...)
			}
			op := append(unhex(t, "0001 0000"), p...)
			binary.BigEndian.PutUint16(op[2:], uint16(len(op)))
			return msgWith(MsgConfig, lfbBody(t, hexOf(op)))
		}(), ErrTooDeep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse(c.in)
			if err == nil {
				t.Fatalf("Parse accepted %x as %+v", c.in, m)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestParseDoesNotAlias(t *testing.T) {
	in := unhex(t, vectors[4].hex)
	m, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), m.LFBs[0].Ops[0].Paths[0].FullData...)
	for i := range in {
		in[i] = 0xff
	}
	if !reflect.DeepEqual(m.LFBs[0].Ops[0].Paths[0].FullData, want) {
		t.Fatal("parsed message aliases its input")
	}
}

func FuzzParse(f *testing.F) {
	for _, v := range vectors {
		f.Add(unhex(f, v.hex))
	}
	// One message of every kind splitplane sends: Packet Redirects, COMMITs,
	// Query Responses and the rest.
	for _, s := range samples(f) {
		raw, err := s.msg.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add(unhex(f, "10030006 00000000 00000000 00000000 00000000 00000000"))
	dirty, err := samples(f)[0].msg.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Parse(in)
		// Parsed into a buffer that held another message: the same.
		var mb MessageBuffer
		if _, err := parseInto(dirty, &mb); err != nil {
			t.Fatal(err)
		}
		reused, rerr := parseInto(append([]byte(nil), in...), &mb)
		if (err == nil) != (rerr == nil) || err == nil && !reflect.DeepEqual(m, reused) {
			t.Fatalf("parsed into a reused buffer: %+v, %v; want %+v, %v", reused, rerr, m, err)
		}
		if err != nil {
			if m != nil {
				t.Fatal("non-nil message with error")
			}
			return
		}
		out, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("re-marshal of parsed message failed: %v", err)
		}
		if len(out) != len(in) {
			t.Fatalf("re-marshal changed length %d -> %d", len(in), len(out))
		}
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse failed: %v\nin  %x\nout %x", err, in, out)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", m, m2)
		}
	})
}

// MessageBuffer.Parse decodes every sample as Parse does, each into the
// buffer the one before it used, and rejects what Parse rejects.
func TestMessageBufferParse(t *testing.T) {
	var mb MessageBuffer
	for _, s := range samples(t) {
		raw, err := s.msg.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		want, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mb.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s parsed into a reused buffer:\n%+v\nwant\n%+v", s.name, got, want)
		}
		if _, err := mb.Parse(raw[:len(raw)-4]); err == nil {
			t.Fatalf("%s cut short by 4 bytes: no error", s.name)
		}
	}
}
