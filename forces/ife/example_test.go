package ife_test

import (
	"fmt"

	"github.com/splitplane/splitplane/forces/ife"
)

// An FE sends a frame to the FE owning port 3, and that FE finds the port.
func Example() {
	inner := []byte{
		0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x08, 0x00, // the frame as port 3 will send it
		0x45, 0x00, // ... its IPv4 packet
	}
	meta := []ife.Meta{ife.EgressPort(3), ife.FlowHash(0x9e3779b9)}
	out := ife.Header{Dst: [6]byte{0x02, 0, 0, 0, 0, 2}, Src: [6]byte{0x02, 0, 0, 0, 0, 1}}

	frame, err := ife.Encode(make([]byte, 0, 2048), out, meta, inner)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes: %d of overhead, inter-FE MTU %d for 1500-byte ports\n",
		len(frame), ife.Overhead(meta), ife.LinkMTU(1500, meta))

	_, got, payload, err := ife.Decode(frame, make([]ife.Meta, 0, 8))
	if err != nil {
		panic(err)
	}
	port, err := ife.One(got, ife.TypeEgressPort)
	fmt.Println("egress port", port, err, "inner", len(payload), "bytes")
	// Output:
	// 48 bytes: 32 of overhead, inter-FE MTU 1532 for 1500-byte ports
	// egress port 3 <nil> inner 16 bytes
}
