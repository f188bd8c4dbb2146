package prefix

import (
	"net/netip"
	"testing"
)

// Masking with U128 agrees with netip's own masking at every length, and
// the host part is what the mask leaves out.
func TestU128Mask(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff")
	for bits := 0; bits <= 128; bits++ {
		want := netip.PrefixFrom(a, bits).Masked().Addr().As16()
		m := Mask128(bits)
		if got := U128Of(a.As16()).And(m).Bytes(); got != want {
			t.Fatalf("/%d: masked %x, want %x", bits, got, want)
		}
		if back := U128Of(a.As16()).And(m).Or(U128Of(a.As16()).And(m.Not())).Bytes(); back != a.As16() {
			t.Fatalf("/%d: network | host = %x, want %x", bits, back, a.As16())
		}
	}
}
