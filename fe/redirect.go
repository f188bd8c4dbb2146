package fe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of the Redirector, wrapped with the port and the details.
var (
	// ErrUnknownPort is returned by Inject for an ifindex the Redirector was not opened on.
	ErrUnknownPort = errors.New("not a redirector port")
	// ErrFrameTooShort is returned by Inject for a frame without a whole Ethernet header.
	ErrFrameTooShort = errors.New("frame shorter than an Ethernet header")
	// ErrFrameTooLong is returned by Inject for a frame longer than the port's MTU plus the Ethernet header.
	ErrFrameTooLong = errors.New("frame longer than the port MTU")
	// ErrRedirectorClosed is returned by Inject after Close.
	ErrRedirectorClosed = errors.New("redirector closed")
	// ErrBadEtherType is returned by OpenRedirector for a value below 0x0600,
	// which in an Ethernet header is an 802.3 length, not an EtherType.
	ErrBadEtherType = errors.New("not an EtherType")
)

const (
	// MaxRedirectFrame is the largest frame the Redirector passes to the CE:
	// a jumbo frame. Longer frames are counted in RedirectStats.Truncated and
	// skipped, since a cut frame would mislead the CE.
	MaxRedirectFrame = 9216
	// maxRedirectEtherTypes bounds the filter so that every jump offset of the
	// classic BPF program fits its 8-bit field.
	maxRedirectEtherTypes = 64
	ethHeaderLen          = 14
	// Classic BPF ancillary load of "the skb carries a VLAN tag"
	// (SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT, linux/filter.h; not in x/sys).
	skfAdVLANTagPresent = 0xfffff000 + 48
	// recvErrorBackoff keeps a reader from spinning if a socket reports an
	// error repeatedly (the port going down reports ENETDOWN once).
	recvErrorBackoff = 10 * time.Millisecond
)

// RedirectStats are the Redirector's counters since it was opened, summed over its ports.
type RedirectStats struct {
	Received     uint64 // frames passed to onFrame
	Truncated    uint64 // frames longer than MaxRedirectFrame, skipped
	Dropped      uint64 // frames the kernel dropped because the socket buffer was full (slow consumer)
	RecvErrors   uint64 // receive errors other than Close (e.g. the port went down)
	Injected     uint64 // frames sent by Inject
	InjectErrors uint64 // Inject calls that failed, including rejected input
}

// Redirector receives frames of selected EtherTypes on the FE's ports, for
// redirection to the CE, and sends frames the CE injects out of a port.
// Its methods are safe for concurrent use.
type Redirector struct {
	ports   map[int]*redirectPort
	onFrame func(ifindex int, frame []byte)
	readers sync.WaitGroup

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	received, truncated, recvErrors atomic.Uint64
	injected, injectErrors          atomic.Uint64
}

// redirectPort is one port's AF_PACKET socket. The socket is non-blocking and
// owned by an *os.File, so reads wait in the runtime's poller and closing the
// file wakes them; the fd is closed only once no call is using it.
type redirectPort struct {
	ifindex int
	name    string
	mtu     atomic.Uint32
	file    *os.File
	conn    syscall.RawConn

	dropsMu sync.Mutex // PACKET_STATISTICS resets on read, so reads and the sum go together
	drops   uint64
}

// OpenRedirector opens one AF_PACKET socket per port, bound to the port's
// ifindex, and calls onFrame(ifindex, frame) with a copy of every received
// untagged frame whose EtherType is one of ethertypes, from one reader
// goroutine per port. onFrame runs synchronously: while it is busy the
// socket buffer fills and the kernel drops frames (counted in Stats). Frames
// sent out of the ports (by the kernel, Inject or others) are not received.
// Empty ethertypes opens the ports for Inject only. The ports are looked up
// in the network namespace of the calling thread. The sockets see what the
// XDP datapath passes to the kernel (every non-IPv4 EtherType), never what it
// forwards.
func OpenRedirector(ifindexes []int, ethertypes []uint16, onFrame func(ifindex int, frame []byte)) (*Redirector, error) {
	if len(ifindexes) == 0 {
		return nil, errors.New("open redirector: no ports")
	}
	filter, err := etherTypeFilter(ethertypes)
	if err != nil {
		return nil, fmt.Errorf("open redirector: %w", err)
	}
	if filter != nil && onFrame == nil {
		return nil, errors.New("open redirector: EtherTypes to receive but no onFrame")
	}
	r := &Redirector{ports: make(map[int]*redirectPort, len(ifindexes)), onFrame: onFrame}
	for _, ifindex := range ifindexes {
		if _, dup := r.ports[ifindex]; dup {
			r.closePorts()
			return nil, fmt.Errorf("open redirector: ifindex %d listed twice", ifindex)
		}
		p, err := openRedirectPort(ifindex, filter)
		if err != nil {
			r.closePorts()
			return nil, fmt.Errorf("open redirector: %w", err)
		}
		r.ports[ifindex] = p
	}
	if filter != nil {
		for _, p := range r.ports {
			r.readers.Add(1)
			go r.read(p)
		}
	}
	return r, nil
}

// etherTypeFilter returns a classic BPF program accepting untagged frames of
// the given EtherTypes, or nil for none. The kernel moves an 802.1Q tag out of
// the frame before packet taps see it, so a tagged frame would show its inner
// EtherType at offset 12 and reach the CE as if untagged; the filter rejects it.
func etherTypeFilter(ethertypes []uint16) ([]unix.SockFilter, error) {
	types := slices.Clone(ethertypes)
	slices.Sort(types)
	types = slices.Compact(types)
	if len(types) == 0 {
		return nil, nil
	}
	if len(types) > maxRedirectEtherTypes {
		return nil, fmt.Errorf("%d EtherTypes, at most %d", len(types), maxRedirectEtherTypes)
	}
	for _, et := range types {
		if et < 0x0600 {
			return nil, fmt.Errorf("%#04x: %w", et, ErrBadEtherType)
		}
	}
	n := len(types)
	// 0: ld vlan_tag_present; 1: jeq 0 ? next : reject; 2: ldh [12];
	// 3..3+n-1: jeq type ? accept : next; 3+n: reject; 4+n: accept.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdVLANTagPresent},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0, Jt: 0, Jf: uint8(n + 1)},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 12},
	}
	for i, et := range types {
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(et), Jt: uint8(n - i), Jf: 0})
	}
	prog = append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
	)
	return prog, nil
}

// openRedirectPort opens the port's socket. It is created with protocol 0,
// which receives nothing, and only bound to ETH_P_ALL once the filter is
// attached, so no unfiltered frame is ever queued on it.
func openRedirectPort(ifindex int, filter []unix.SockFilter) (*redirectPort, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("ifindex %d: packet socket: %w", ifindex, err)
	}
	p := &redirectPort{ifindex: ifindex}
	fail := func(what string, err error) (*redirectPort, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("ifindex %d: %s: %w", ifindex, what, err)
	}
	// ioctls on the socket act in its network namespace, whatever thread runs them later.
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return fail("ifreq", err)
	}
	ifr.SetUint32(uint32(ifindex))
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
		return fail("interface name", err)
	}
	p.name = ifr.Name()
	mtu, err := packetSockMTU(fd, p.name)
	if err != nil {
		return fail("MTU", err)
	}
	p.mtu.Store(mtu)
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	proto := uint16(0)
	if filter != nil {
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return fail("attach EtherType filter", err)
		}
		proto = unix.ETH_P_ALL
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: hostToNet16(proto), Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	p.file = os.NewFile(uintptr(fd), "packet:"+p.name)
	if p.conn, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		return nil, fmt.Errorf("ifindex %d: %w", ifindex, err)
	}
	return p, nil
}

func packetSockMTU(fd int, name string) (uint32, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFMTU, ifr); err != nil {
		return 0, err
	}
	return ifr.Uint32(), nil
}

// read is a port's reader goroutine; it returns when the socket is closed.
func (r *Redirector) read(p *redirectPort) {
	defer r.readers.Done()
	buf := make([]byte, MaxRedirectFrame)
	var (
		n    int
		rerr error
	)
	recv := func(fd uintptr) bool {
		// MSG_TRUNC makes a packet socket return the frame's real length.
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
		return rerr != unix.EAGAIN
	}
	for {
		if err := p.conn.Read(recv); err != nil {
			return // closed
		}
		switch {
		case rerr == unix.EINTR:
		case rerr != nil:
			if r.closed.Load() {
				return
			}
			r.recvErrors.Add(1)
			time.Sleep(recvErrorBackoff)
		case n > len(buf):
			r.truncated.Add(1)
		default:
			r.received.Add(1)
			r.onFrame(p.ifindex, slices.Clone(buf[:n]))
		}
	}
}

// Inject sends a whole Ethernet frame, as given, out of the port with the
// given ifindex, which must be one of the Redirector's ports.
func (r *Redirector) Inject(ifindex int, frame []byte) error {
	err := r.inject(ifindex, frame)
	if err != nil {
		r.injectErrors.Add(1)
		return fmt.Errorf("inject on ifindex %d: %w", ifindex, err)
	}
	r.injected.Add(1)
	return nil
}

func (r *Redirector) inject(ifindex int, frame []byte) error {
	p, ok := r.ports[ifindex]
	if !ok {
		return ErrUnknownPort
	}
	if r.closed.Load() {
		return ErrRedirectorClosed
	}
	if len(frame) < ethHeaderLen {
		return fmt.Errorf("%s: %d bytes: %w", p.name, len(frame), ErrFrameTooShort)
	}
	if err := p.checkLen(len(frame)); err != nil {
		return err
	}
	sa := &unix.SockaddrLinklayer{
		Ifindex:  ifindex,
		Protocol: hostToNet16(uint16(frame[12])<<8 | uint16(frame[13])),
	}
	var serr error
	err := p.conn.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), frame, 0, sa)
		return serr != unix.EAGAIN // a full queue: wait until writable
	})
	if errors.Is(err, os.ErrClosed) {
		return ErrRedirectorClosed
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%s: send: %w", p.name, err)
	}
	return nil
}

// checkLen checks a frame length against the MTU seen at open; a frame over
// it has the MTU read again, in case it was raised since. A lowered MTU is
// enforced by the kernel (EMSGSIZE).
func (p *redirectPort) checkLen(n int) error {
	if n <= int(p.mtu.Load())+ethHeaderLen {
		return nil
	}
	var (
		mtu  uint32
		merr error
	)
	if err := p.conn.Control(func(fd uintptr) { mtu, merr = packetSockMTU(int(fd), p.name) }); err != nil {
		return ErrRedirectorClosed
	}
	if merr != nil {
		return fmt.Errorf("%s: MTU: %w", p.name, merr)
	}
	p.mtu.Store(mtu)
	if n > int(mtu)+ethHeaderLen {
		return fmt.Errorf("%s: %d bytes, MTU %d + %d: %w", p.name, n, mtu, ethHeaderLen, ErrFrameTooLong)
	}
	return nil
}

// Stats returns the counters, summed over the ports. Dropped is read from
// the kernel while the Redirector is open, and stays at its last value after Close.
func (r *Redirector) Stats() RedirectStats {
	s := RedirectStats{
		Received:     r.received.Load(),
		Truncated:    r.truncated.Load(),
		RecvErrors:   r.recvErrors.Load(),
		Injected:     r.injected.Load(),
		InjectErrors: r.injectErrors.Load(),
	}
	for _, p := range r.ports {
		s.Dropped += p.kernelDrops()
	}
	return s
}

// kernelDrops adds the drops the kernel counted since the last read to the
// port's total and returns it.
func (p *redirectPort) kernelDrops() uint64 {
	p.dropsMu.Lock()
	defer p.dropsMu.Unlock()
	var (
		st  *unix.TpacketStats
		err error
	)
	if cerr := p.conn.Control(func(fd uintptr) {
		st, err = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	}); cerr == nil && err == nil {
		p.drops += uint64(st.Drops)
	}
	return p.drops
}

// Close stops the readers, waiting for onFrame calls in progress to return
// (so onFrame must not call Close), and closes the sockets. Closing wakes a
// reader waiting for a frame at once. Calling Close again returns the result of the first call.
func (r *Redirector) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		for _, p := range r.ports {
			p.kernelDrops() // the kernel's count goes with the socket
		}
		r.closeErr = r.closePorts()
		r.readers.Wait()
	})
	return r.closeErr
}

func (r *Redirector) closePorts() error {
	var errs []error
	for _, p := range r.ports {
		if err := p.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close ifindex %d: %w", p.ifindex, err))
		}
	}
	return errors.Join(errs...)
}

// hostToNet16 converts a 16-bit value to network byte order, as AF_PACKET
// wants for protocols in socket addresses (x/sys passes them unchanged).
func hostToNet16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
