// Package probe holds the measuring programs of `splitplane bench all`: a
// sink that records the latency of timestamped probe frames, and a
// forwarder whose lookup is the kernel's FIB (bpf_fib_lookup), the baseline
// of splitplane's own FIB. probe.c holds the programs; neither is part of
// the router.
//
// Attaching and running resolve interface indexes in the network namespace
// of the calling thread, so callers that work across namespaces switch the
// locked OS thread first.
package probe

// The generated probe_bpfel.go and probe_bpfel.o are committed, so building
// needs no clang; rerun this after editing probe.c.
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" probe probe.c -- -I/usr/include/x86_64-linux-gnu

const (
	// MaxSamples is how many latency samples the sink keeps (LAT_SAMPLES
	// in probe.c); later ones overwrite the first.
	MaxSamples = 65536
	// MaxDsts is how many destinations the kernel-FIB forwarder rotates
	// over (KFIB_DSTS); longer lists are cut, shorter ones repeated.
	MaxDsts = 65536
	// kfibRCs is KFIB_RCS: slots of the return-code counters.
	kfibRCs = 16
)
