package ife

import (
	"bytes"
	"errors"
	"testing"
)

// probeGolden is a probe reply written out byte by byte.
var probeGolden = []byte{
	0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // outer dst
	0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // outer src
	0xed, 0x3e, // EtherType
	0x00, 0x1e, // metadata length 2 + 4 + 24 = 30
	0x53, 0x54, 0x00, 0x1c, // TLV probe, length 28
	0x00, 0x00, 0x00, 0x01, // sender FE 1
	0x00, 0x00, 0x00, 0x03, // responder FE 3
	0x00, 0x00, 0x00, 0x01, // flags: reply
	0x00, 0x00, 0x01, 0x02, // sequence 258
	0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xca, 0x07, // time 1000000007
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // inner frame: 14 zero bytes
}

var probeGoldenValue = Probe{Sender: 1, Responder: 3, Reply: true, Seq: 258, Time: 1000000007}

func TestProbeGolden(t *testing.T) {
	got, err := EncodeProbe(nil, testHeader, probeGoldenValue)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, probeGolden) {
		t.Fatalf("EncodeProbe:\n got % x\nwant % x", got, probeGolden)
	}
	if len(got) != ProbeFrameLen {
		t.Errorf("frame of %d bytes, ProbeFrameLen %d", len(got), ProbeFrameLen)
	}
	h, p, err := DecodeProbe(probeGolden)
	if err != nil {
		t.Fatal(err)
	}
	if h != testHeader || p != probeGoldenValue {
		t.Errorf("DecodeProbe = %+v %+v, want %+v %+v", h, p, testHeader, probeGoldenValue)
	}
	// A request: no responder, no flag.
	req := Probe{Sender: 2, Seq: 1}
	frame, err := EncodeProbe(nil, testHeader, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, p, err := DecodeProbe(frame); err != nil || p != req {
		t.Errorf("request round trip = %+v, %v; want %+v", p, err, req)
	}
	// Flags other than reply are ignored.
	odd := bytes.Clone(probeGolden)
	odd[31] = 0xfe
	if _, p, err := DecodeProbe(odd); err != nil || p.Reply {
		t.Errorf("flags 0xfe: %+v, %v; want a request", p, err)
	}
}

func TestDecodeProbeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame func() []byte
		want  error
	}{
		{"truncated", func() []byte { return probeGolden[:15] }, ErrTruncated},
		{"short value", func() []byte {
			f := bytes.Clone(probeGolden)
			f[19] = 0x18 // TLV length 24: a 20-byte value
			return f
		}, ErrTLV},
		{"not a probe", func() []byte {
			f, _ := Encode(nil, testHeader, []Meta{EgressPort(1)}, testInner)
			return f
		}, ErrMissing},
		{"probe and more", func() []byte {
			f, _ := Encode(nil, testHeader, []Meta{probeGoldenValue.Meta(), EgressPort(1)}, testInner)
			return f
		}, ErrMetaLen},
	} {
		if _, _, err := DecodeProbe(tc.frame()); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := ParseProbe(make([]byte, 23)); !errors.Is(err, ErrTLV) {
		t.Errorf("ParseProbe of 23 bytes: %v, want ErrTLV", err)
	}
	if _, err := Encode(nil, testHeader, []Meta{{Type: TypeProbe, Value: make([]byte, 4)}}, testInner); !errors.Is(err, ErrTLV) {
		t.Errorf("Encode of a 4-byte probe: %v, want ErrTLV", err)
	}
}
