// Package gen is the traffic side of the forwarding benchmark and of the
// DoS test: an XDP generator run with BPF_PROG_RUN in live-frames mode (UDP
// to rotating destinations, or UDP or TCP SYN floods from rotating spoofed
// sources), XDP sinks that count and drop, and a bare XDP redirect (no
// lookup, no rewrite) that measures the most a forwarder can reach on the
// same ports. gen.c holds the programs.
//
// Attaching and sending resolve interface indexes in the network namespace
// of the calling thread, so callers that work across namespaces switch the
// locked OS thread first.
package gen

// The generated gen_bpfel.go and gen_bpfel.o are committed, so building needs
// no clang; rerun this after editing gen.c.
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" gen gen.c -- -I/usr/include/x86_64-linux-gnu

const (
	// FrameLen is the length of a generated frame: the minimum Ethernet
	// frame, 64 bytes on the wire with the FCS the veth does not carry.
	FrameLen = 60
	// MaxDsts is how many addresses (destinations, or spoofed sources) the
	// generator rotates over; longer lists are cut, shorter ones repeated.
	MaxDsts = 65536
	// hdrLen is GEN_HDR_LEN in gen.c: Ethernet, IPv4 and TCP headers (a UDP
	// frame's bytes after its UDP header are zero payload).
	hdrLen = 14 + 20 + 20
)
