package forces

import (
	"errors"
	"reflect"
	"testing"
)

func TestECMPGroupInfo(t *testing.T) {
	g := ECMPGroupInfo{Members: []uint32{3, 1, 0xFBFF}}
	b, err := g.AppendFullData(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0xFB, 0xFF}; !reflect.DeepEqual(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	back, err := ParseECMPGroupInfo(b)
	if err != nil || !reflect.DeepEqual(back, g) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	for _, bad := range []ECMPGroupInfo{{}, {Members: make([]uint32, 17)}, {Members: []uint32{1, 0}}} {
		if _, err := bad.AppendFullData(nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: err = %v, want ErrInvalid", bad.Members, err)
		}
	}
	for _, bad := range [][]byte{nil, {0, 0, 1}, make([]byte, 68), {0, 0, 0, 1, 0, 0, 0, 0}} {
		if _, err := ParseECMPGroupInfo(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("% x: err = %v, want ErrMalformed", bad, err)
		}
	}
	if ClassName(ClassIPv4ECMP) != "SplitplaneIPv4ECMP" || ClassName(ClassIPv6ECMP) != "SplitplaneIPv6ECMP" {
		t.Error("ECMP class names")
	}
}
