package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// xdpMd is struct xdp_md, the context of an XDP BPF_PROG_TEST_RUN.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// testRunAttr is the BPF_PROG_TEST_RUN part of union bpf_attr.
type testRunAttr struct {
	ProgFD, Retval, DataSizeIn, DataSizeOut uint32
	DataIn, DataOut                         uint64
	Repeat, Duration, CtxSizeIn, CtxSizeOut uint32
	CtxIn, CtxOut                           uint64
	Flags, CPU, BatchSize, _                uint32
}

const bpfProgTestRun = 10 // BPF_PROG_TEST_RUN

// testRunXDP runs an XDP program repeat times with BPF_PROG_TEST_RUN on
// frame, in the calling thread's network namespace, with the context
// naming ingress as the interface the frame arrived on (0: the namespace's
// loopback). It returns the last run's verdict and the kernel's time per
// run: the total from before the first run to after the last, divided by
// repeat. cilium/ebpf's Program.Run takes a context but drops the time,
// and Program.Benchmark keeps the time but takes no context.
func testRunXDP(prog *ebpf.Program, frame []byte, ingress int, repeat uint32) (uint32, time.Duration, error) {
	if len(frame) == 0 {
		return 0, 0, errors.New("test run: empty frame")
	}
	ctx := xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ingress)}
	attr := testRunAttr{
		ProgFD:     uint32(prog.FD()),
		DataSizeIn: uint32(len(frame)),
		DataIn:     uint64(uintptr(unsafe.Pointer(&frame[0]))),
		Repeat:     repeat,
		CtxSizeIn:  uint32(unsafe.Sizeof(ctx)),
		CtxIn:      uint64(uintptr(unsafe.Pointer(&ctx))),
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		runtime.KeepAlive(frame)
		runtime.KeepAlive(&ctx)
		runtime.KeepAlive(prog)
		if errno == unix.EINTR {
			continue // a signal stopped the runs: run them again
		}
		if errno != 0 {
			return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN of %v: %w", prog, errno)
		}
		break
	}
	return attr.Retval, time.Duration(attr.Duration), nil
}
