//go:build linux

package datapath

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mmapU32Array maps the BPF_F_MMAPABLE array m into the process as one u32
// slice, so that the FIB is written with plain stores instead of one
// syscall per entry. cilium/ebpf's Map.Memory only offers ReadAt/WriteAt
// (copies that give no guarantee about 32-bit atomicity), hence the own
// mapping. The kernel stores array values at an 8-byte stride, so the
// values must be a multiple of 8 bytes for the slice to be their plain
// concatenation. The slice is valid until unmap is called.
func mmapU32Array(m *ebpf.Map) (entries []uint32, unmap func() error, err error) {
	if m.ValueSize()%8 != 0 {
		return nil, nil, fmt.Errorf("map %v: value size %d is not a multiple of 8", m, m.ValueSize())
	}
	size := int(m.MaxEntries()) * int(m.ValueSize())
	b, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap map %v: %w", m, err)
	}
	entries = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	return entries, func() error { return unix.Munmap(b) }, nil
}

// rcuBarrier waits for a grace period of RCU, the lock every BPF program run
// holds: once wait returns, every run that started before the call has
// finished. It uses the one syscall that promises this to user space:
// updating a map-in-map calls synchronize_rcu before returning
// (maybe_wait_bpf_programs in kernel/bpf/syscall.c), so that user space
// knows no program still uses the old inner map.
type rcuBarrier struct {
	outer, inner *ebpf.Map
}

func newRCUBarrier() (*rcuBarrier, error) {
	innerSpec := &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(innerSpec)
	if err != nil {
		return nil, fmt.Errorf("create RCU barrier inner map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{
		Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: innerSpec,
	})
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("create RCU barrier map: %w", err)
	}
	return &rcuBarrier{outer: outer, inner: inner}, nil
}

func (r *rcuBarrier) wait() error {
	if err := r.outer.Put(uint32(0), r.inner); err != nil {
		return fmt.Errorf("RCU barrier: %w", err)
	}
	return nil
}

func (r *rcuBarrier) Close() error {
	return errors.Join(r.outer.Close(), r.inner.Close())
}
