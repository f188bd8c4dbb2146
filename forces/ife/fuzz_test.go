package ife

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzDecode feeds Decode arbitrary frames: it must never panic, must keep
// every slice it returns inside the frame, and whatever it accepts must
// encode back to the same frame, padding bytes aside (Decode ignores their
// content, Encode writes zeros), and decode again to the same values.
func FuzzDecode(f *testing.F) {
	f.Add(golden)
	f.Add(golden[:16])
	f.Add(frameWith(14, 0x00, 0x02))
	f.Add(frameWith(18, 0x00, 0x00))
	f.Add(frameWith(34, 0x00, 0x0a))
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, meta, inner, err := Decode(frame, nil)
		if err != nil {
			return
		}
		again, err := Encode(nil, h, meta, inner)
		if err != nil {
			t.Fatalf("Decode accepted %x but Encode refuses its parts: %v", frame, err)
		}
		if len(again) != len(frame) {
			t.Fatalf("re-encoded to %d bytes, frame had %d", len(again), len(frame))
		}
		if !bytes.Equal(zeroPadding(bytes.Clone(frame)), again) {
			t.Fatalf("re-encoded\n %x\nfrom\n %x", again, frame)
		}
		h2, meta2, inner2, err := Decode(again, nil)
		if err != nil || h2 != h || !equalMeta(meta2, meta) || !bytes.Equal(inner2, inner) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}

// zeroPadding clears the padding after each TLV of a valid frame.
func zeroPadding(f []byte) []byte {
	end := EthHeaderLen + int(binary.BigEndian.Uint16(f[EthHeaderLen:]))
	for off := EthHeaderLen + MetaLenLen; off < end; {
		l := int(binary.BigEndian.Uint16(f[off+2:]))
		clear(f[off+l : off+align4(l)])
		off += align4(l)
	}
	return f
}

// FuzzEncode builds frames from arbitrary parts: whatever Encode accepts,
// Decode must give back unchanged (Decode(Encode(x)) == x).
func FuzzEncode(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint16(TypeEgressPort), []byte{0, 0, 0, 3}, uint16(0x7777), []byte{1}, testInner)
	f.Add(make([]byte, 12), uint16(TypeTCIndex), []byte{0, 7}, uint16(TypeFlowHash), []byte{1, 2, 3, 4}, make([]byte, 14))
	f.Fuzz(func(t *testing.T, macs []byte, t1 uint16, v1 []byte, t2 uint16, v2 []byte, inner []byte) {
		var h Header
		copy(h.Dst[:], macs)
		if len(macs) > 6 {
			copy(h.Src[:], macs[6:])
		}
		meta := []Meta{{Type: t1, Value: v1}, {Type: t2, Value: v2}}
		frame, err := Encode(nil, h, meta, inner)
		if err != nil {
			return
		}
		if len(frame) != Overhead(meta)+len(inner) {
			t.Fatalf("frame of %d bytes, Overhead %d + inner %d", len(frame), Overhead(meta), len(inner))
		}
		h2, meta2, inner2, err := Decode(frame, nil)
		if err != nil {
			t.Fatalf("Decode(Encode(x)): %v", err)
		}
		if h2 != h || !equalMeta(meta2, meta) || !bytes.Equal(inner2, inner) {
			t.Fatalf("Decode(Encode(x)) != x: %+v %v %x", h2, meta2, inner2)
		}
	})
}
