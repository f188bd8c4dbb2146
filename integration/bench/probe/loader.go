//go:build linux

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// ErrFrame is returned for a frame too short, or not IPv4 and UDP, to carry
// a timestamp.
var ErrFrame = errors.New("probe: not an Ethernet/IPv4/UDP frame with a 20-byte IP header")

// Probe is the loaded BPF object of probe.c. Close releases it; links
// returned by AttachLatencySink are the caller's to close.
type Probe struct {
	objs probeObjects
}

// Load loads the programs. It removes the memlock rlimit, which kernels
// before 5.11 charge BPF maps against.
func Load() (*Probe, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock rlimit: %w", err)
	}
	p := &Probe{}
	if err := loadProbeObjects(&p.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load probe programs: %+v", ve)
		}
		return nil, fmt.Errorf("load probe programs: %w", err)
	}
	return p, nil
}

// Close releases the programs and their maps.
func (p *Probe) Close() error {
	return p.objs.Close()
}

// AttachLatencySink attaches xdp_sink_latency natively to ifindex (in the
// calling thread's network namespace). It drops every frame and records
// the latency of the IPv4 UDP ones to port.
func (p *Probe) AttachLatencySink(ifindex int, port uint16) (link.Link, error) {
	if err := p.objs.LatPort.Set(uint32(port)); err != nil {
		return nil, fmt.Errorf("latency sink port: %w", err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: p.objs.XdpSinkLatency, Interface: ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach latency sink to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// ResetLatency forgets the samples recorded so far.
func (p *Probe) ResetLatency() error {
	if err := p.objs.LatCount.Set(uint32(0)); err != nil {
		return fmt.Errorf("reset latency samples: %w", err)
	}
	return nil
}

// Latencies returns the samples recorded since the last ResetLatency (the
// last MaxSamples of them if there were more) and how many probes arrived
// in all.
func (p *Probe) Latencies() (_ []time.Duration, arrived uint32, err error) {
	if err := p.objs.LatCount.Get(&arrived); err != nil {
		return nil, 0, fmt.Errorf("read latency count: %w", err)
	}
	raw := make([]uint32, MaxSamples)
	if err := p.objs.LatSamples.Get(raw); err != nil {
		return nil, 0, fmt.Errorf("read latency samples: %w", err)
	}
	n := min(int(arrived), MaxSamples)
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(raw[i])
	}
	return out, arrived, nil
}

// Stamp writes the low 32 bits of ns (CLOCK_MONOTONIC, the clock of
// bpf_ktime_get_ns) into an Ethernet/IPv4/UDP frame where the latency sink
// reads it, the IPv4 identification and the UDP checksum field, and
// recomputes the IPv4 header checksum. The UDP checksum then no longer
// verifies; routers do not check it, and the sink drops the frame.
func Stamp(frame []byte, ns int64) error {
	if len(frame) < 42 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 || frame[14] != 0x45 || frame[23] != 17 {
		return ErrFrame
	}
	ip := frame[14:34]
	binary.BigEndian.PutUint16(ip[4:], uint16(uint32(ns)>>16))
	binary.BigEndian.PutUint16(frame[40:], uint16(ns))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	return nil
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// KernelFIB returns the kernel-FIB forwarder, xdp_kernel_fib, to be run
// with BPF_PROG_TEST_RUN in the namespace whose FIB it looks up, with the
// ingress interface in the run's context (bpf_fib_lookup needs forwarding
// enabled on it). It stays owned by the Probe.
func (p *Probe) KernelFIB() *ebpf.Program {
	return p.objs.XdpKernelFib
}

// SetKernelFIB makes xdp_kernel_fib look up in the kernel routing table
// tbid, each run the next of dsts (IPv4; the first MaxDsts, repeated to
// fill MaxDsts slots), forwarding whatever the frame's TTL; it clears the
// return-code counters.
func (p *Probe) SetKernelFIB(tbid uint32, dsts []netip.Addr) error {
	if len(dsts) == 0 {
		return errors.New("kernel FIB: no destinations")
	}
	tbl := make([]uint32, MaxDsts)
	for i := range tbl {
		d := dsts[i%len(dsts)]
		if !d.Is4() {
			return fmt.Errorf("kernel FIB: destination %s is not IPv4", d)
		}
		a := d.As4()
		tbl[i] = binary.NativeEndian.Uint32(a[:]) // network order in memory
	}
	for _, set := range []struct {
		v   *ebpf.Variable
		val any
	}{
		{p.objs.KfibTbid, tbid},
		{p.objs.KfibIgnoreTtl, uint32(1)},
		{p.objs.KfibDsts, tbl},
		{p.objs.KfibNext, uint32(0)},
		{p.objs.KfibRcs, make([]uint64, kfibRCs)},
	} {
		if err := set.v.Set(set.val); err != nil {
			return fmt.Errorf("kernel FIB: %w", err)
		}
	}
	return nil
}

// KernelFIBResults returns how many lookups ended with each of
// bpf_fib_lookup's return codes (BPF_FIB_LKUP_RET_*, 0 for success) since
// SetKernelFIB; codes past the last slot count in the last slot.
func (p *Probe) KernelFIBResults() ([]uint64, error) {
	rcs := make([]uint64, kfibRCs)
	if err := p.objs.KfibRcs.Get(rcs); err != nil {
		return nil, fmt.Errorf("kernel FIB results: %w", err)
	}
	return rcs, nil
}
