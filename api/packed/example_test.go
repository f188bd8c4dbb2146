package packed_test

import (
	"fmt"
	"net/netip"

	"github.com/splitplane/splitplane/api/packed"
)

// A program pushing many routes packs them into a RouteBatch's packed_ops
// (spv1.RouteBatch{Id: 1, PackedOps: b}) and sends it on a Routes.Bulk
// stream.
func Example() {
	gw := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	var b []byte
	for _, p := range []string{"198.51.100.0/24", "203.0.113.0/24"} {
		var err error
		if b, err = packed.AppendReplace(b, netip.MustParsePrefix(p), gw, 0); err != nil {
			panic(err)
		}
	}
	b, _ = packed.AppendDelete(b, netip.MustParsePrefix("2001:db8::/32"))
	fmt.Println(len(b), "bytes")
	ops, _ := packed.Decode(b)
	for _, op := range ops {
		fmt.Println(op.Kind, op.Prefix, op.NextHops)
	}
	// Output:
	// 45 bytes
	// 1 198.51.100.0/24 [192.0.2.1]
	// 1 203.0.113.0/24 [192.0.2.1]
	// 2 2001:db8::/32 []
}
