package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/nsthread"
)

// birdCLI sends one command to a BIRD control socket and returns the reply's
// lines without their reply codes. A reply code of 8xxx or 9xxx (BIRD's
// errors) is returned as an error.
func birdCLI(socket, command string) ([]string, error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := readBIRDReply(r); err != nil { // the greeting
		return nil, err
	}
	if _, err := io.WriteString(conn, command+"\n"); err != nil {
		return nil, err
	}
	return readBIRDReply(r)
}

// readBIRDReply reads lines up to the last one of a reply ("NNNN text";
// "NNNN-text" and " text" continue it).
func readBIRDReply(r *bufio.Reader) ([]string, error) {
	var out []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out, err
		}
		line = strings.TrimRight(line, "\n")
		if len(line) >= 5 && isDigits(line[:4]) && (line[4] == ' ' || line[4] == '-') {
			code, text := line[:4], line[5:]
			out = append(out, text)
			if line[4] == ' ' {
				if code[0] == '8' || code[0] == '9' {
					return out, fmt.Errorf("bird: %s", text)
				}
				return out, nil
			}
			continue
		}
		if len(line) == 4 && isDigits(line) { // a final code with no text
			return out, nil
		}
		out = append(out, strings.TrimPrefix(line, " "))
	}
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// The lines of BIRD's replies that birdEstablished and birdRouteCounts read.
const (
	birdProtoLine = `^(\S+)\s+BGP\s+\S+\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+(.*)$`
	birdRoutes    = `Routes:\s+(\d+) imported, (?:\d+ filtered, )?(\d+) exported`
)

// birdEstablished finds protocol name in the reply of `show protocols` and,
// if its session is established, returns since when (the protocol time
// format must be "iso long ms").
func birdEstablished(lines []string, name string) (time.Time, bool) {
	re := regexp.MustCompile(birdProtoLine)
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != name || m[2] != "up" || !strings.HasPrefix(m[4], "Established") {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999", m[3], time.Local)
		return t, err == nil
	}
	return time.Time{}, false
}

// birdRouteCounts returns the imported and exported counts of the first
// channel in the reply of `show protocols all NAME`.
func birdRouteCounts(lines []string) (imported, exported int, ok bool) {
	re := regexp.MustCompile(birdRoutes)
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			imported, _ = strconv.Atoi(m[1])
			exported, _ = strconv.Atoi(m[2])
			return imported, exported, true
		}
	}
	return 0, 0, false
}

// routeSocket opens a NETLINK_ROUTE socket in namespace ns, joined to the
// given multicast groups, with a receive timeout.
func routeSocket(ns string, groups uint32, rcvbuf int, timeout time.Duration) (int, error) {
	fd := -1
	err := nsthread.Run(ns, func() error {
		s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		if err := unix.Bind(s, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
			unix.Close(s)
			return err
		}
		fd = s
		return nil
	})
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
		unix.Close(fd)
		return -1, err
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// The protocol numbers the receiving daemons mark their kernel routes with:
// BIRD's kernel protocol RTPROT_BIRD, FRR's zebra RTPROT_BGP for bgpd's.
const (
	rtprotBIRD = 12
	rtprotBGP  = 186
)

// mainRoute reports whether a route message (its payload, a struct rtmsg
// first) is an IPv4 route in the main table marked with protocol proto.
func mainRoute(payload []byte, proto byte) bool {
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
	return len(payload) >= 12 && payload[0] == unix.AF_INET && payload[4] == unix.RT_TABLE_MAIN && payload[5] == proto
}

// eachNetlinkMessage calls f with the type and payload of every message in b.
func eachNetlinkMessage(b []byte, f func(typ uint16, payload []byte) error) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return fmt.Errorf("netlink message of %d bytes in %d", l, len(b))
		}
		if err := f(binary.NativeEndian.Uint16(b[4:]), b[unix.NLMSG_HDRLEN:l]); err != nil {
			return err
		}
		l = (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return nil
}

// routeCounter counts one daemon's routes (those marked with its protocol
// number) in a namespace's main table from the kernel's route notifications (RTM_NEWROUTE less RTM_DELROUTE), and records
// when the count first reached its target. It costs the kernel nothing it
// does not do already (BIRD and zebra listen to the same notifications), and is
// exact where polling a dump of 1M routes (about a second each) is not.
type routeCounter struct {
	fd      int
	proto   byte
	target  int
	stopped atomic.Bool
	done    chan struct{}

	mu      sync.Mutex
	n       int
	reached time.Time
	err     error
}

func newRouteCounter(ns string, proto byte, target int) (*routeCounter, error) {
	fd, err := routeSocket(ns, unix.RTMGRP_IPV4_ROUTE, 256<<20, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	rc := &routeCounter{fd: fd, proto: proto, target: target, done: make(chan struct{})}
	go rc.run()
	return rc, nil
}

func (rc *routeCounter) run() {
	defer close(rc.done)
	buf := make([]byte, 1<<20)
	for !rc.stopped.Load() {
		n, _, err := unix.Recvfrom(rc.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ENOBUFS: notifications were lost; the count is no longer
			// exact, and the benchmark fails rather than guess.
			rc.mu.Lock()
			rc.err = fmt.Errorf("route notifications: %w", err)
			rc.mu.Unlock()
			return
		}
		delta := 0
		_ = eachNetlinkMessage(buf[:n], func(typ uint16, payload []byte) error {
			if !mainRoute(payload, rc.proto) {
				return nil
			}
			switch typ {
			case unix.RTM_NEWROUTE:
				delta++
			case unix.RTM_DELROUTE:
				delta--
			}
			return nil
		})
		if delta != 0 {
			now := time.Now()
			rc.mu.Lock()
			rc.n += delta
			if rc.n >= rc.target && rc.reached.IsZero() {
				rc.reached = now
			}
			rc.mu.Unlock()
		}
	}
}

// count returns the routes counted so far and the time the count holds for:
// when it reached the target, or now.
func (rc *routeCounter) count() (int, time.Time, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.reached.IsZero() {
		return rc.n, rc.reached, rc.err
	}
	return rc.n, time.Now(), rc.err
}

func (rc *routeCounter) close() {
	rc.stopped.Store(true)
	<-rc.done
	unix.Close(rc.fd)
}

// countKernelRoutes dumps the main IPv4 table of namespace ns and counts
// the routes in it marked with protocol proto.
func countKernelRoutes(ns string, proto byte) (int, error) {
	fd, err := routeSocket(ns, 0, 64<<20, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	const seq = 1
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofRtMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[unix.NLMSG_HDRLEN] = unix.AF_INET
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	errDone := errors.New("done")
	buf := make([]byte, 1<<20)
	count := 0
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return count, err
		}
		err = eachNetlinkMessage(buf[:n], func(typ uint16, payload []byte) error {
			switch typ {
			case unix.NLMSG_DONE:
				return errDone
			case unix.NLMSG_ERROR:
				if len(payload) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(payload)); e != 0 {
						return fmt.Errorf("route dump: %w", unix.Errno(-e))
					}
				}
				return errDone
			case unix.RTM_NEWROUTE:
				if mainRoute(payload, proto) {
					count++
				}
			}
			return nil
		})
		if errors.Is(err, errDone) {
			return count, nil
		}
		if err != nil {
			return count, err
		}
	}
}
