package forces

import (
	"errors"
	"reflect"
	"testing"
)

func TestRedirectVector(t *testing.T) {
	m := NewPacketRedirect(testFE, testCE, 0, Redirect{
		Metadata: []Metadata{PortMetadata(7), {ID: MetaVlanPriority, Value: []byte{5}}},
		Data:     []byte{0xde, 0xad, 0xbe, 0xef, 0x01},
	})
	want := unhex(t, `10 06 0011  00000001  40000000  0000000000000000  08000000
		0001 002c
		  0115 001c  00000001 0000000c 00000007
		             00000007 00000009 05000000
		  0116 0009  deadbeef 01000000`)
	// REDIRECT-TLV: METADATA-TLV (two ILVs: PHYPortID=7 length 12; VlanPriority=5
	// length 9, padded) and REDIRECTDATA-TLV of 5 bytes, padded.
	got, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
	p, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Redirects) != 1 || !reflect.DeepEqual(p.Redirects[0], m.Redirects[0]) {
		t.Fatalf("round trip: %+v", p.Redirects)
	}
	if port, ok := p.Redirects[0].Port(); !ok || port != 7 {
		t.Errorf("Port() = %d, %v", port, ok)
	}
	if _, ok := (Redirect{}).Port(); ok {
		t.Error("Port() of a redirect without metadata")
	}
	if _, ok := (Redirect{Metadata: []Metadata{{ID: MetaPHYPortID, Value: []byte{1}}}}).Port(); ok {
		t.Error("Port() accepted a 1-byte PHYPortID")
	}

	// Without metadata, an empty METADATA-TLV is still sent.
	raw, _ := NewPacketRedirect(testCE, testFE, 0, Redirect{Data: []byte{1, 2, 3, 4}}).MarshalBinary()
	if want := unhex(t, "0001 0010 0115 0004 0116 0008 01020304"); !reflect.DeepEqual(raw[HeaderLen:], want) {
		t.Errorf("no-metadata redirect %x", raw[HeaderLen:])
	}
	if p, err := Parse(raw); err != nil || p.Redirects[0].Metadata != nil {
		t.Errorf("parse no-metadata: %+v %v", p, err)
	}
}

func TestRedirectMalformed(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"no REDIRECTDATA", "0001 000c 0115 0008 00000000"},
		{"no METADATA", "0001 000c 0116 0008 01020304"},
		{"METADATA after data", "0001 0010 0116 0008 01020304 0115 0004"},
		{"two METADATA", "0001 0010 0115 0004 0115 0004 0116 0004"},
		{"two REDIRECTDATA", "0001 0010 0115 0004 0116 0004 0116 0004"},
		{"foreign TLV", "0001 0010 0115 0004 0112 0004 0116 0004"},
		{"ILV too short", "0001 0014 0115 000c 00000001 00000004 0116 0004"},
		{"ILV past end", "0001 0014 0115 000c 00000001 0000000c 0116 0004"},
		{"ILV header cut", "0001 0010 0115 0008 00000001 0116 0004"},
		{"ILV huge length", "0001 0014 0115 000c 00000001 fffffffe 0116 0004"},
	} {
		_, err := Parse(msgWith(MsgPacketRedirect, unhex(t, c.body)))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", c.name, err)
		}
	}
	// In other messages a REDIRECT-TLV stays an Extra TLV, as before.
	m, err := Parse(msgWith(MsgConfig, unhex(t, "0001 0008 01020304")))
	if err != nil || len(m.Extra) != 1 || m.Redirects != nil {
		t.Errorf("REDIRECT-TLV in a Config: %+v, %v", m, err)
	}
	// And a PacketRedirect cannot smuggle one in Extra.
	bad := NewPacketRedirect(testFE, testCE, 0)
	bad.Extra = []TLV{{Type: TLVRedirect}}
	if _, err := bad.MarshalBinary(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Extra REDIRECT-TLV: %v", err)
	}
	big := NewPacketRedirect(testFE, testCE, 0, Redirect{Data: make([]byte, MaxTLVLen)})
	if _, err := big.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized packet: %v", err)
	}
}
