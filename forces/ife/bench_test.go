package ife

import "testing"

// benchInner is a 64-byte frame, the size that costs most per byte.
var benchInner = append(append([]byte(nil), testInner[:14]...), make([]byte, 50)...)

func BenchmarkEncode(b *testing.B) {
	meta := []Meta{EgressPort(3), IngressFE(1), FlowHash(0x12345678)}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchInner)))
	for b.Loop() {
		out, err := Encode(buf[:0], testHeader, meta, benchInner)
		if err != nil {
			b.Fatal(err)
		}
		buf = out
	}
}

func BenchmarkDecode(b *testing.B) {
	frame, err := Encode(nil, testHeader, []Meta{EgressPort(3), IngressFE(1), FlowHash(0x12345678)}, benchInner)
	if err != nil {
		b.Fatal(err)
	}
	meta := make([]Meta, 0, 8)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		_, m, _, err := Decode(frame, meta[:0])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := One(m, TypeEgressPort); err != nil {
			b.Fatal(err)
		}
	}
}
