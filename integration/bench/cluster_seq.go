package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/bench/gen"
)

// reorderCounter counts, over the sequence numbers a receiver sees in turn,
// how many came out of order: a number lower than the highest seen before
// it. Numbers are 0 .. sent-1; a repeat is a duplicate, not a reordering,
// and a number outside the range is foreign.
type reorderCounter struct {
	sent    uint64
	seen    []uint64 // bitset over 0 .. sent-1
	highest uint64
	any     bool

	Received   uint64 // distinct numbers in range
	Reordered  uint64
	Duplicates uint64
	Foreign    uint64
}

func newReorderCounter(sent uint64) *reorderCounter {
	return &reorderCounter{sent: sent, seen: make([]uint64, (sent+63)/64)}
}

// add records the next number received.
func (r *reorderCounter) add(seq uint64) {
	if seq >= r.sent {
		r.Foreign++
		return
	}
	w, b := seq/64, uint64(1)<<(seq%64)
	if r.seen[w]&b != 0 {
		r.Duplicates++
		return
	}
	r.seen[w] |= b
	r.Received++
	if r.any && seq < r.highest {
		r.Reordered++
		return
	}
	r.highest, r.any = seq, true
}

// Lost is how many of the numbers sent never arrived.
func (r *reorderCounter) Lost() uint64 { return r.sent - r.Received }

// ReorderedPct is the share of the distinct packets received that arrived
// out of order, in percent (0 when none arrived).
func (r *reorderCounter) ReorderedPct() float64 {
	if r.Received == 0 {
		return 0
	}
	return 100 * float64(r.Reordered) / float64(r.Received)
}

// The sequenced flow: UDP from the generator's address and port to one
// destination in the cross prefix and this port, whose first 8 bytes of
// payload are the sequence number (big endian). The sinks' XDP counts only
// the generator's port (9) and passes this one to the kernel, where a
// packet socket reads it.
const (
	seqSrcPort  = 40001
	seqDstPort  = 10
	seqPayload  = 8
	seqRcvBuf   = 64 << 20
	seqRcvPoll  = 50 * time.Millisecond
	seqDrainFor = 300 * time.Millisecond
)

// seqEvent is something done while the flow runs, once At packets are sent.
type seqEvent struct {
	At   uint64
	Name string
	Do   func() error
}

// seqResult is one run of the sequenced flow.
type seqResult struct {
	Sent    uint64
	Counter *reorderCounter
	// SocketDrops is what the receiving socket dropped for want of buffer
	// (PACKET_STATISTICS): counted lost, but not by the router.
	SocketDrops uint32
}

// runSeqFlow sends n sequenced packets at rate per second from the
// generator's port through FE 1 to the cross prefix, reads them at sink3
// and counts reordering and loss. The events run on their own goroutine as
// the count of packets sent passes their At, while the sender goes on.
func (c *clusterTopo) runSeqFlow(ctx context.Context, n uint64, rate int, events []seqEvent) (_ seqResult, err error) {
	dst := seqDst()
	frame := gen.Frame(gen.Header{
		SrcMAC: cpGen.mac(), DstMAC: cpIn.mac(), Src: clusterAddr[cpGen],
		SrcPort: seqSrcPort, DstPort: seqDstPort, TTL: 64,
	}, dst, seqPayload)

	var rfd int
	err = c.nsRun(cnsSink, func() error {
		var err error
		rfd, err = openPacketSocket(c.ifindex[cpSink3], unix.ETH_P_IP)
		return err
	})
	if err != nil {
		return seqResult{}, fmt.Errorf("receiver: %w", err)
	}
	defer unix.Close(rfd)
	if err := unix.SetsockoptInt(rfd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, seqRcvBuf); err != nil {
		return seqResult{}, fmt.Errorf("receiver buffer: %w", err)
	}
	tv := unix.NsecToTimeval(seqRcvPoll.Nanoseconds())
	if err := unix.SetsockoptTimeval(rfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return seqResult{}, fmt.Errorf("receiver timeout: %w", err)
	}
	// Drop what the socket counted before the run (none expected).
	if _, err := packetStats(rfd); err != nil {
		return seqResult{}, err
	}

	counter := newReorderCounter(n)
	var stopRecv atomic.Bool
	recvDone := make(chan error, 1)
	go func() { recvDone <- receiveSeq(rfd, frame, counter, &stopRecv) }()

	var sent atomic.Uint64
	sendDone := make(chan struct{})
	var wg sync.WaitGroup
	evErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		evErr <- runSeqEvents(events, &sent, sendDone)
	}()
	sendErr := c.nsRun(cnsGen, func() error {
		defer close(sendDone)
		if err := pinThread(flowCPU()); err != nil {
			return err
		}
		return sendSeq(ctx, c.ifindex[cpGen], frame, n, rate, &sent)
	})
	wg.Wait()
	eerr := <-evErr
	time.Sleep(seqDrainFor)
	stopRecv.Store(true)
	rerr := <-recvDone
	if err := errors.Join(sendErr, eerr, rerr); err != nil {
		return seqResult{}, err
	}
	drops, err := packetStats(rfd)
	if err != nil {
		return seqResult{}, err
	}
	return seqResult{Sent: sent.Load(), Counter: counter, SocketDrops: drops}, nil
}

// flowCPU is the CPU the sequenced flow's sender runs on, and with it the
// XDP programs its packets go through: CPU 0 (-1, anywhere, on a machine
// of one CPU), the generator being on the last.
func flowCPU() int {
	if runtime.NumCPU() < 2 {
		return -1
	}
	return 0
}

// pinThread pins the calling (locked) thread to cpu; -1 does nothing.
func pinThread(cpu int) error {
	if cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// startLoad runs the generator, on its CPU, sending what it was last set
// to (SetTraffic) until the returned function is called, which returns
// the generator's error if any.
func (c *clusterTopo) startLoad(g *gen.Gen) (stop func() error) {
	var stopping atomic.Bool
	done := make(chan error, 1)
	cpu := -1
	if len(c.genCPUs) > 0 {
		cpu = c.genCPUs[0]
	}
	go func() {
		done <- c.nsRun(cnsGen, func() error {
			if err := pinThread(cpu); err != nil {
				return err
			}
			for !stopping.Load() {
				if err := g.Send(c.ifindex[cpGen], loadFrames); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	return func() error {
		stopping.Store(true)
		return <-done
	}
}

// loadFrames is the generator's frames per call under the sequenced flow:
// small enough to stop soon after it is asked to.
const loadFrames = 1 << 17

// runSeqEvents runs each event once sent reaches its At, in order, until
// done closes; an event not reached by then is an error.
func runSeqEvents(events []seqEvent, sent *atomic.Uint64, done <-chan struct{}) error {
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for _, e := range events {
		for sent.Load() < e.At {
			select {
			case <-done:
				if sent.Load() < e.At {
					return fmt.Errorf("flow ended at %d packets before %s (at %d)", sent.Load(), e.Name, e.At)
				}
			case <-tick.C:
			}
		}
		if err := e.Do(); err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	return nil
}

// openPacketSocket opens a raw packet socket bound to ifindex for
// protocol (0: send only) in the calling thread's namespace.
func openPacketSocket(ifindex int, protocol uint16) (int, error) {
	proto := int(htons(protocol))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(protocol), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind packet socket to ifindex %d: %w", ifindex, err)
	}
	return fd, nil
}

// packetStats returns the packets the socket dropped since the last call.
func packetStats(fd int) (uint32, error) {
	var st unix.TpacketStats
	l := uint32(unsafe.Sizeof(st))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("packet socket statistics: %w", errno)
	}
	return st.Drops, nil
}

// sendSeq sends n copies of frame numbered 0 .. n-1 out of ifindex (in the
// calling thread's namespace), paced to rate per second, counting them in
// sent.
func sendSeq(ctx context.Context, ifindex int, frame []byte, n uint64, rate int, sent *atomic.Uint64) error {
	fd, err := openPacketSocket(ifindex, 0)
	if err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_IP), Halen: 6}
	copy(to.Addr[:], frame[0:6])
	buf := append([]byte(nil), frame...)
	start := time.Now()
	const batch = 64
	for seq := uint64(0); seq < n; seq++ {
		binary.BigEndian.PutUint64(buf[gen.HeaderLen:], seq)
		if err := unix.Sendto(fd, buf, 0, to); err != nil {
			if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
				seq-- // the kernel did not take it: send it again
				time.Sleep(10 * time.Microsecond)
				continue
			}
			return fmt.Errorf("send packet %d: %w", seq, err)
		}
		sent.Store(seq + 1)
		if (seq+1)%batch == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if ahead := time.Duration(float64(seq+1)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return nil
}

// receiveSeq reads the flow's packets from fd into counter until stop is
// set and a read times out. Other packets (those the sink's XDP passes
// that are not the flow's) are skipped.
func receiveSeq(fd int, frame []byte, counter *reorderCounter, stop *atomic.Bool) error {
	buf := make([]byte, 2048)
	want := frame[12:gen.HeaderLen]
	for {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			if stop.Load() {
				return nil
			}
			continue
		case err != nil:
			return fmt.Errorf("receive: %w", err)
		}
		if m < gen.HeaderLen+seqPayload || !seqMatch(buf[12:gen.HeaderLen], want) {
			continue
		}
		counter.add(binary.BigEndian.Uint64(buf[gen.HeaderLen:]))
	}
}

// seqMatch tells whether the EtherType, IPv4 header and UDP header got
// (from byte 12 of a frame) are the flow's (want): protocol, addresses and
// ports, the fields no router changes.
func seqMatch(got, want []byte) bool {
	ip, wip := got[2:22], want[2:22]
	return got[0] == want[0] && got[1] == want[1] && ip[9] == wip[9] &&
		string(ip[12:20]) == string(wip[12:20]) && string(got[22:26]) == string(want[22:26])
}

// seqDst is the flow's destination, for the progress line.
func seqDst() netip.Addr { return clusterCrossPrefix.Addr().Next().Next() }
