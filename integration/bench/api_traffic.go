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

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/integration/bench/gen"
)

// apiTraffic is the generator and the sink of the add measurements: a
// thread in the gen namespace sends a UDP frame to the current destination
// every interval from an AF_PACKET socket; a thread in the sink namespace
// reads the sink's port with another and notes when each destination first
// arrived.
type apiTraffic struct {
	dst     atomic.Uint32 // the current destination, 0: none
	sent    atomic.Uint64 // frames sent
	stopped atomic.Bool
	done    chan error // one per thread

	mu     sync.Mutex
	first  map[uint32]time.Time
	notify chan struct{}
	err    error // of a thread that ended early
}

func startAPITraffic(t *fwdTopo, interval time.Duration) (*apiTraffic, error) {
	tr := &apiTraffic{done: make(chan error, 2), first: map[uint32]time.Time{}, notify: make(chan struct{}, 1)}
	rx, err := tr.socket(t, roleSink, unix.ETH_P_IP)
	if err != nil {
		return nil, fmt.Errorf("sink socket: %w", err)
	}
	tx, err := tr.socket(t, roleGen, 0)
	if err != nil {
		unix.Close(rx)
		return nil, fmt.Errorf("generator socket: %w", err)
	}
	go tr.receive(rx)
	go tr.generate(tx, t.ifindex[roleGen], interval)
	return tr, nil
}

// socket opens an AF_PACKET socket on role's port in its namespace: bound to
// protocol, or for sending only (protocol 0, nothing received).
func (tr *apiTraffic) socket(t *fwdTopo, role, protocol int) (int, error) {
	fd := -1
	err := t.in(portNS(role), func() error {
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(uint16(protocol))))
		if err != nil {
			return err
		}
		if protocol != 0 {
			if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(uint16(protocol)), Ifindex: t.ifindex[role]}); err != nil {
				unix.Close(s)
				return err
			}
		}
		fd = s
		return nil
	})
	if err != nil {
		return -1, err
	}
	if protocol != 0 {
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return -1, err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// generate sends from its own locked thread, sleeping with
// clock_nanosleep and a timer slack of 1ns so that the interval is close to
// what was asked.
func (tr *apiTraffic) generate(fd, ifindex int, interval time.Duration) {
	runtime.LockOSThread() // the timer slack is the thread's
	err := func() error {
		defer unix.Close(fd)
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		frame := udpFrame()
		to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_IP), Halen: 6}
		copy(to.Addr[:], fwdMAC(roleRtrIn))
		// Frames go out at absolute times, a multiple of interval apart, so
		// the time a send takes does not stretch the interval; one that is
		// late moves the schedule rather than sending a burst.
		monotonic := func() int64 {
			var ts unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
			return ts.Nano()
		}
		sleepUntil := func(t int64) error {
			ts := unix.NsecToTimespec(t)
			if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("generator: %w", err)
			}
			return nil
		}
		var last uint32
		next := monotonic()
		for !tr.stopped.Load() {
			d := tr.dst.Load()
			if d == 0 {
				// Nothing to send (the bulk transfer): wake up seldom.
				next = monotonic() + time.Millisecond.Nanoseconds()
				if err := sleepUntil(next); err != nil {
					return err
				}
				continue
			}
			if d != last {
				setDestination(frame, d)
				last = d
			}
			if err := unix.Sendto(fd, frame, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return fmt.Errorf("generator: %w", err)
			}
			tr.sent.Add(1)
			next += interval.Nanoseconds()
			if now := monotonic(); next < now {
				next = now
			}
			if err := sleepUntil(next); err != nil {
				return err
			}
		}
		return nil
	}()
	tr.end(err)
}

// receive reads the sink's port and notes each destination's first frame
// from the generator.
func (tr *apiTraffic) receive(fd int) {
	err := func() error {
		defer unix.Close(fd)
		buf := make([]byte, 2048)
		src := fwdAddr(roleGen).As4()
		for !tr.stopped.Load() {
			n, err := unix.Read(fd, buf)
			now := time.Now()
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sink: %w", err)
			}
			b := buf[:n]
			// Ethernet, IPv4 from the generator, UDP.
			if n < 42 || binary.BigEndian.Uint16(b[12:]) != unix.ETH_P_IP || b[23] != unix.IPPROTO_UDP || [4]byte(b[26:30]) != src {
				continue
			}
			d := binary.BigEndian.Uint32(b[30:])
			tr.mu.Lock()
			if _, ok := tr.first[d]; !ok {
				tr.first[d] = now
				select {
				case tr.notify <- struct{}{}:
				default:
				}
			}
			tr.mu.Unlock()
		}
		return nil
	}()
	tr.end(err)
}

func (tr *apiTraffic) end(err error) {
	if err != nil {
		tr.mu.Lock()
		if tr.err == nil {
			tr.err = err
		}
		tr.mu.Unlock()
		select {
		case tr.notify <- struct{}{}:
		default:
		}
	}
	tr.done <- err
}

// send makes the generator send to dst from now on (none: the zero Addr).
func (tr *apiTraffic) send(dst netip.Addr) {
	var v uint32
	if dst.IsValid() {
		v = binary.BigEndian.Uint32(dst.AsSlice())
	}
	tr.dst.Store(v)
}

func (tr *apiTraffic) failed() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.err
}

// forget clears what the sink has seen.
func (tr *apiTraffic) forget() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	clear(tr.first)
}

// seen returns when dst first arrived at the sink.
func (tr *apiTraffic) seen(dst netip.Addr) (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	at, ok := tr.first[binary.BigEndian.Uint32(dst.AsSlice())]
	return at, ok
}

// wait returns when dst first arrived at the sink, waiting for it until
// deadline.
func (tr *apiTraffic) wait(ctx context.Context, dst netip.Addr, deadline time.Time) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if at, ok := tr.seen(dst); ok {
			return at, nil
		}
		if err := tr.failed(); err != nil {
			return time.Time{}, err
		}
		select {
		case <-tr.notify:
		case <-timer.C:
			if at, ok := tr.seen(dst); ok {
				return at, nil
			}
			return time.Time{}, errors.New("no frame for it reached the sink")
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// close stops both threads and returns the first error either had.
func (tr *apiTraffic) close() error {
	tr.stopped.Store(true)
	var errs []error
	for range 2 {
		errs = append(errs, <-tr.done)
	}
	return errors.Join(errs...)
}

// udpFrame is a 60-byte UDP frame from the generator to the router's
// ingress port, its destination to be set.
func udpFrame() []byte {
	b := make([]byte, 60)
	copy(b[0:6], fwdMAC(roleRtrIn))
	copy(b[6:12], fwdMAC(roleGen))
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 60-14)
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	src := fwdAddr(roleGen).As4()
	copy(ip[12:16], src[:])
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 60-34)
	return b
}

// setDestination writes the destination and the IPv4 header checksum.
func setDestination(frame []byte, dst uint32) {
	ip := frame[14:34]
	binary.BigEndian.PutUint32(ip[16:], dst)
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], gen.Checksum(ip))
}
