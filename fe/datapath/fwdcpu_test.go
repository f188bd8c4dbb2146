//go:build linux

package datapath

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// needCPUs skips the test unless the machine has at least n possible CPUs.
func needCPUs(tb testing.TB, n int) {
	tb.Helper()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		tb.Fatal(err)
	}
	if ncpu < n {
		tb.Skipf("needs %d CPUs, has %d", n, ncpu)
	}
}

// TestForwardCPUs runs the program on CPU 0 with CPU 1 as the only forward
// CPU and CPU 0 as the control CPU: forwardable packets go to CPU 1
// unmodified, everything else is handled as without forward CPUs; on CPU 1
// packets are forwarded as before.
func TestForwardCPUs(t *testing.T) {
	needCPUs(t, 2)
	f := newFixture6(t, loadOptions{})
	d := f.d
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.AddControlFlow(flow4))
	must(d.SetControlCPU(0))
	must(d.SetForwardCPUs([]int{1}))
	if got := d.ForwardCPUs(); !slices.Equal(got, []int{1}) {
		t.Fatalf("ForwardCPUs() = %v, want [1]", got)
	}
	fwd4 := udpFrame("198.51.100.77", 64)
	fwd6 := tcpFrame(flow6.Src, ap("[2001:db8:1::9]:40001"), 64)

	// No subtests while pinned: they run on other goroutines.
	unpin := pinCPU(t, 0)
	startPorts := portCounters(t, d)[f.lo]
	for _, frame := range [][]byte{fwd4, fwd6} {
		in := bytes.Clone(frame)
		before := counters(t, d)
		ret, out := run(t, d, frame)
		if ret != xdpRedirect {
			t.Errorf("on CPU 0: returned %d, want XDP_REDIRECT (to CPU 1)", ret)
		}
		if !bytes.Equal(out, in) {
			t.Errorf("frame modified on CPU 0:\n in % x\nout % x", in, out)
		}
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "to_fe_cpu": 1})
	}
	// Port counters: the rx here, the tx on the forward CPU.
	pc := portCounters(t, d)[f.lo]
	if pc.RxPackets-startPorts.RxPackets != 2 || pc.TxPackets != startPorts.TxPackets ||
		pc.Passed != startPorts.Passed || pc.Dropped != startPorts.Dropped {
		t.Errorf("port counters moved from %+v to %+v, want 2 rx only", startPorts, pc)
	}
	// Not forwardable: as without forward CPUs.
	checkPassed(t, d, udpFrame("8.8.8.8", 64), "pass_no_route")
	checkPassed(t, d, udpFrame("198.51.100.77", 1), "pass_ttl")
	checkPassed(t, d, udpFrame("100.64.5.9", 64), "pass_no_neigh")
	checkPassed(t, d, udpFrame("198.51.100.1", 64), "pass_local")
	checkPassed(t, d, udp6Frame("2001:db8::1", 64), "pass_local")
	checkOne(t, d, tcpFrame(flow4.Src, flow4.Dst, 64), xdpRedirect, "to_control_cpu")
	perCPU, err := d.CPUCounters()
	must(err)
	if perCPU[0]["to_fe_cpu"] != 2 || perCPU[0]["forwarded"] != 0 {
		t.Errorf("CPU 0: to_fe_cpu %d, forwarded %d; want 2 and 0", perCPU[0]["to_fe_cpu"], perCPU[0]["forwarded"])
	}
	unpin()

	// On the forward CPU: forwarded there, as before.
	unpin = pinCPU(t, 1)
	for range 2 {
		in := bytes.Clone(fwd4)
		before := counters(t, d)
		ret, out := run(t, d, bytes.Clone(in))
		if ret != xdpRedirect {
			t.Errorf("on CPU 1: returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded(t, in, out, macNeigh1, macSrc1)
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in))})
		in = bytes.Clone(fwd6)
		before = counters(t, d)
		ret, out = run(t, d, bytes.Clone(in))
		if ret != xdpRedirect {
			t.Errorf("IPv6 on CPU 1: returned %d, want XDP_REDIRECT", ret)
		}
		checkForwarded6(t, in, out, macNeigh2, macSrc2)
		checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_ipv6": 1, "forwarded_bytes": uint64(len(in))})
	}
	unpin()

	// Off again: CPU 0 forwards what it receives.
	must(d.SetForwardCPUs(nil))
	if err := d.objs.CPUMap.Lookup(uint32(1), new(cpumapVal)); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("cpu_map[1] after SetForwardCPUs(nil): %v, want no entry", err)
	}
	unpin = pinCPU(t, 0)
	in := bytes.Clone(fwd4)
	before := counters(t, d)
	ret, out := run(t, d, bytes.Clone(in))
	if ret != xdpRedirect {
		t.Errorf("off, on CPU 0: returned %d, want XDP_REDIRECT", ret)
	}
	checkForwarded(t, in, out, macNeigh1, macSrc1)
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in))})
	unpin()
}

// TestForwardCPUsMissingEntry checks the fallback while the set changes: a
// forward CPU without its cpu_map entry makes the packet forward where it
// arrived.
func TestForwardCPUsMissingEntry(t *testing.T) {
	needCPUs(t, 2)
	f := newFixture(t, loadOptions{})
	d := f.d
	if err := d.SetForwardCPUs([]int{1}); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.CPUMap.Delete(uint32(1)); err != nil {
		t.Fatal(err)
	}
	defer pinCPU(t, 0)()
	in := udpFrame("198.51.100.77", 64)
	before := counters(t, d)
	ret, out := run(t, d, bytes.Clone(in))
	if ret != xdpRedirect {
		t.Fatalf("returned %d, want XDP_REDIRECT", ret)
	}
	checkForwarded(t, in, out, macNeigh1, macSrc1)
	checkDelta(t, before, counters(t, d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(in))})
}

// cpumapProgAsXDP loads the code of xdp_forward_cpumap as a plain XDP
// program on d's maps: the kernel refuses BPF_PROG_TEST_RUN for CPUMAP
// programs (EINVAL), but the code is the same and reads nothing that only
// a CPUMAP context has (ingress_ifindex is the receiving port there too).
func cpumapProgAsXDP(t *testing.T, d *Datapath) *ebpf.Program {
	t.Helper()
	spec, err := loadXdp()
	if err != nil {
		t.Fatal(err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps[xdpMapCpuMap].MaxEntries = uint32(ncpu)
	spec.Maps[xdpMapFwdCpus].MaxEntries = uint32(ncpu)
	spec.Programs[xdpProgXdpForwardCpumap].AttachType = ebpf.AttachNone
	// Every map of the datapath, by its name in the object: the program
	// must see the same state as the datapath's own.
	maps := map[string]*ebpf.Map{}
	v := reflect.ValueOf(&d.objs).Elem()
	for i := range v.NumField() {
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil {
			maps[v.Type().Field(i).Tag.Get("ebpf")] = m
		}
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"xdp_forward_cpumap"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: maps}); err != nil {
		t.Fatalf("load xdp_forward_cpumap as XDP: %v", err)
	}
	t.Cleanup(func() { objs.Prog.Close() })
	return objs.Prog
}

// TestForwardCPUMapProgram runs the forward CPUs' CPUMAP program on frames
// as cpu_map hands them over: it forwards them, counting everything but rx
// (the receiving CPU counted that), and never sends them on to another
// forward CPU, whatever fwd_steer says on this CPU.
func TestForwardCPUMapProgram(t *testing.T) {
	needCPUs(t, 2)
	f := newFixture6(t, loadOptions{})
	d := f.d
	in := udpFrame("198.51.100.77", 64)
	opts := ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	if _, err := d.objs.XdpForwardCPUMap.Run(&opts); err == nil {
		t.Error("the kernel now runs CPUMAP programs with BPF_PROG_TEST_RUN: test xdp_forward_cpumap directly")
	} else {
		t.Logf("BPF_PROG_TEST_RUN of the CPUMAP program: %v (as expected)", err)
	}
	prog := cpumapProgAsXDP(t, d)
	if err := d.SetForwardCPUs([]int{1}); err != nil {
		t.Fatal(err)
	}
	// On CPU 0, whose fwd_steer says "steer": the CPUMAP program must not.
	defer pinCPU(t, 0)()
	runProg := func(frame []byte) (uint32, []byte) {
		t.Helper()
		opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
		ret, err := prog.Run(&opts)
		if err != nil {
			t.Fatalf("prog.Run: %v", err)
		}
		return ret, opts.DataOut
	}
	startPorts := portCounters(t, d)[f.lo]
	before := counters(t, d)
	ret, out := runProg(bytes.Clone(in))
	if ret != xdpRedirect {
		t.Errorf("returned %d, want XDP_REDIRECT", ret)
	}
	checkForwarded(t, in, out, macNeigh1, macSrc1)
	checkDelta(t, before, counters(t, d), map[string]uint64{"forwarded": 1, "forwarded_bytes": uint64(len(in))})

	in6 := tcpFrame(flow6.Src, ap("[2001:db8:1::9]:40001"), 64)
	before = counters(t, d)
	ret, out = runProg(bytes.Clone(in6))
	if ret != xdpRedirect {
		t.Errorf("IPv6: returned %d, want XDP_REDIRECT", ret)
	}
	checkForwarded6(t, in6, out, macNeigh2, macSrc2)
	checkDelta(t, before, counters(t, d), map[string]uint64{"forwarded": 1, "forwarded_ipv6": 1, "forwarded_bytes": uint64(len(in6))})

	// The route went away in between: passed on this CPU, not counted as
	// rx again.
	before = counters(t, d)
	ret, _ = runProg(udpFrame("8.8.8.8", 64))
	if ret != xdpPass {
		t.Errorf("no route: returned %d, want XDP_PASS", ret)
	}
	checkDelta(t, before, counters(t, d), map[string]uint64{"pass_no_route": 1})

	want := startPorts
	want.TxPackets += 2
	want.TxBytes += uint64(len(in) + len(in6))
	want.Passed++
	if pc := portCounters(t, d)[f.lo]; pc != want {
		t.Errorf("port counters %+v, want %+v (tx and passed, no rx)", pc, want)
	}
}

func TestForwardCPUsValidation(t *testing.T) {
	needCPUs(t, 2)
	f := newFixture(t, loadOptions{})
	d := f.d
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cpus []int
	}{{[]int{0}}, {[]int{1, 0}}, {[]int{-1}}, {[]int{ncpu}}, {[]int{1, 1}}} {
		if err := d.SetForwardCPUs(tc.cpus); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetForwardCPUs(%v): %v, want ErrInvalid", tc.cpus, err)
		}
	}
	if got := d.ForwardCPUs(); got != nil {
		t.Errorf("forward CPUs %v after refused calls, want none", got)
	}
	if err := d.SetForwardCPUs([]int{1}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(1); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetControlCPU(forward CPU 1): %v, want ErrInvalid", err)
	}
	// cpu_map: the control CPU keeps xdp_control, the forward CPU gets
	// xdp_forward_cpumap (the kernel returns program ids).
	for cpu, prog := range map[int]*ebpf.Program{0: d.objs.XdpControl, 1: d.objs.XdpForwardCPUMap} {
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		var v cpumapVal
		if err := d.objs.CPUMap.Lookup(uint32(cpu), &v); err != nil || v.ProgFD != int32(id) {
			t.Errorf("cpu_map[%d] = %+v, %v; want program %d", cpu, v, err, id)
		}
	}
	// The same set again changes nothing; moving the control CPU off 0
	// and making 0 a forward CPU works.
	if err := d.SetForwardCPUs([]int{1}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetControlCPU(-1); err != nil {
		t.Fatal(err)
	}
	if err := d.SetForwardCPUs([]int{1, 0}); err != nil {
		t.Fatal(err)
	}
	if got := d.ForwardCPUs(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("ForwardCPUs() = %v, want [0 1]", got)
	}
	var steer []uint32
	if err := d.objs.FwdSteer.Lookup(uint32(0), &steer); err != nil {
		t.Fatal(err)
	}
	for cpu, n := range steer {
		want := uint32(2)
		if cpu < 2 {
			want = 0
		}
		if n != want {
			t.Errorf("fwd_steer on CPU %d: %d, want %d", cpu, n, want)
		}
	}
}
