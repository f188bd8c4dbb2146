//go:build linux

package datapath

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestCloseFreesKernelObjects checks that nothing the datapath loads
// outlives it in the kernel once the control CPU and forward CPUs are set.
// A cpu_map entry holds its CPUMAP program and a program holds the maps it
// uses, so a CPUMAP program that used cpu_map, even in code it never runs,
// would keep cpu_map, itself and the FIB (hundreds of MB) for good: every
// FE that exited leaked them, until the machine ran out of memory.
func TestCloseFreesKernelObjects(t *testing.T) {
	needCPUs(t, 2)
	d := loadForTest(t, loadOptions{})
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	if err := d.SetForwardCPUs([]int{1}); err != nil {
		t.Fatal(err)
	}
	mapID := func(m *ebpf.Map) ebpf.MapID {
		t.Helper()
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, ok := info.ID()
		if !ok {
			t.Skip("the kernel does not report map IDs")
		}
		return id
	}
	cpuMap, fib := mapID(d.objs.CPUMap), mapID(d.objs.FibTbl24)
	for name, prog := range map[string]*ebpf.Program{"xdp_control": d.objs.XdpControl, "xdp_forward_cpumap": d.objs.XdpForwardCPUMap} {
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids, ok := info.MapIDs()
		if !ok {
			t.Skip("the kernel does not report a program's maps")
		}
		if slices.Contains(ids, cpuMap) {
			t.Errorf("%s uses cpu_map (id %d), which holds it: the two can never be freed", name, cpuMap)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel frees maps from a work queue after an RCU grace period.
	for _, id := range []ebpf.MapID{cpuMap, fib} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			m, err := ebpf.NewMapFromID(id)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err == nil {
				m.Close()
			}
			if time.Now().After(deadline) {
				t.Fatalf("map id %d still exists 10 s after Close (err %v): leaked in the kernel", id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
