package forces

import (
	"errors"
	"testing"
)

// A boolean component is one byte, 0 or 1, with or without its padding;
// anything else is malformed.
func TestBoolFullData(t *testing.T) {
	for _, v := range []bool{false, true} {
		b := BoolFullData(v)
		if len(b) != 4 {
			t.Fatalf("BoolFullData(%v) = %v, want 4 bytes", v, b)
		}
		if got, err := ParseBoolFullData(b); err != nil || got != v {
			t.Fatalf("ParseBoolFullData(%v) = %v, %v; want %v", b, got, err, v)
		}
	}
	if got, err := ParseBoolFullData([]byte{1}); err != nil || !got {
		t.Fatalf("a bare byte 1: %v, %v", got, err)
	}
	for _, b := range [][]byte{{2, 0, 0, 0}, {1, 1, 0, 0}, {}, {1, 0}} {
		if _, err := ParseBoolFullData(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseBoolFullData(%v) = %v, want ErrMalformed", b, err)
		}
	}
}
