package prefix

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// Packing keeps exactly the masked prefix: it unpacks to netip's Masked, two
// prefixes get one key only if they mask to the same prefix.
func TestV4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[V4]netip.Prefix{}
	for range 100_000 {
		a := netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(256))})
		p := netip.PrefixFrom(a, r.IntN(33))
		k := FromV4(p)
		if got, want := k.Prefix(), p.Masked(); got != want {
			t.Fatalf("%s packs to %#x, unpacks to %s, want %s", p, uint64(k), got, want)
		}
		if k.Bits() != uint8(p.Bits()) || Make(k.Addr(), k.Bits()) != k {
			t.Fatalf("%s: Addr %#x Bits %d do not repack to the key", p, k.Addr(), k.Bits())
		}
		if other, ok := seen[k]; ok && other != p.Masked() {
			t.Fatalf("%s and %s share key %#x", p, other, uint64(k))
		}
		seen[k] = p.Masked()
	}
	if k := FromV4(netip.MustParsePrefix("0.0.0.0/0")); k != 0 || k.String() != "0.0.0.0/0" {
		t.Fatalf("the default route packs to %#x (%s)", uint64(k), k)
	}
	if k := FromV4(netip.MustParsePrefix("255.255.255.255/32")); k.Addr() != 0xFFFFFFFF || k.Bits() != 32 {
		t.Fatalf("/32 of all ones: %#x", uint64(k))
	}
}
