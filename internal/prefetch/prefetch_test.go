package prefetch

import "testing"

func TestIndexOutsideDoesNothing(t *testing.T) {
	s := make([]uint64, 4)
	for _, i := range []int{-1, 0, 3, 4, 1 << 40} {
		Index(s, i) // must not panic or fault
	}
	Index([]byte(nil), 0)
}
