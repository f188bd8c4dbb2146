package fe

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// --- unprivileged -------------------------------------------------------

func TestEtherTypeFilterProgram(t *testing.T) {
	prog, err := etherTypeFilter(nil)
	if err != nil || prog != nil {
		t.Fatalf("no EtherTypes: %v, %v; want no filter", prog, err)
	}
	prog, err = etherTypeFilter([]uint16{0x88b5, 0x88cc, 0x88b5})
	if err != nil {
		t.Fatal(err)
	}
	// Walk the program by hand for the cases that matter: it is small and
	// has no loops, so following the jumps is the interpreter.
	run := func(vlanPresent uint32, ethertype uint32) uint32 {
		var a uint32
		for pc := 0; pc < len(prog); pc++ {
			ins := prog[pc]
			switch ins.Code {
			case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
				if ins.K != skfAdVLANTagPresent {
					t.Fatalf("pc %d: unexpected load %#x", pc, ins.K)
				}
				a = vlanPresent
			case unix.BPF_LD | unix.BPF_H | unix.BPF_ABS:
				if ins.K != 12 {
					t.Fatalf("pc %d: load from %d, want 12", pc, ins.K)
				}
				a = ethertype
			case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
				if a == ins.K {
					pc += int(ins.Jt)
				} else {
					pc += int(ins.Jf)
				}
			case unix.BPF_RET | unix.BPF_K:
				return ins.K
			default:
				t.Fatalf("pc %d: unexpected instruction %+v", pc, ins)
			}
		}
		t.Fatal("program fell off its end")
		return 0
	}
	for _, c := range []struct {
		vlan, et uint32
		accept   bool
	}{
		{0, 0x88cc, true}, {0, 0x88b5, true}, {0, 0x0800, false}, {0, 0x86dd, false},
		{1, 0x88cc, false}, {1, 0x88b5, false},
	} {
		if got := run(c.vlan, c.et) != 0; got != c.accept {
			t.Errorf("vlan %d EtherType %#04x: accepted %v, want %v", c.vlan, c.et, got, c.accept)
		}
	}
}

func TestOpenRedirectorBadArguments(t *testing.T) {
	many := make([]uint16, maxRedirectEtherTypes+1)
	for i := range many {
		many[i] = 0x9000 + uint16(i)
	}
	for _, c := range []struct {
		name       string
		ifindexes  []int
		ethertypes []uint16
		onFrame    func(int, []byte)
		want       string
	}{
		{"no ports", nil, nil, nil, "no ports"},
		{"length not EtherType", []int{1}, []uint16{0x0100}, func(int, []byte) {}, "0x0100"},
		{"too many EtherTypes", []int{1}, many, func(int, []byte) {}, "at most"},
		{"no onFrame", []int{1}, []uint16{0x88cc}, nil, "no onFrame"},
	} {
		r, err := OpenRedirector(c.ifindexes, c.ethertypes, c.onFrame)
		if err == nil {
			r.Close()
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to mention %q", c.name, err, c.want)
		}
	}
	_, err := OpenRedirector([]int{1}, []uint16{0x0100}, func(int, []byte) {})
	if !errors.Is(err, ErrBadEtherType) {
		t.Errorf("EtherType 0x0100: %v, want ErrBadEtherType", err)
	}
}

// --- privileged: for real in a fresh network namespace ------------------

const (
	redirEtherTypeLLDP = 0x88cc
	redirEtherTypeExp  = 0x88b5 // IEEE 802 local experimental
)

// redirectVeth runs fn on a locked thread inside a fresh network namespace
// holding a veth pair v0/v1, both up with the given MTU, and restores the
// thread's namespace afterwards. Sockets fn creates belong to the new namespace.
func redirectVeth(t *testing.T, mtu int, fn func(v0, v1 int)) {
	t.Helper()
	netnstest.Run(t, func(h *netlink.Handle) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0", MTU: mtu}, PeerName: "v1"}
		if err := h.LinkAdd(veth); err != nil {
			t.Fatalf("add veth: %v", err)
		}
		var idx [2]int
		for i, name := range []string{"v0", "v1"} {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetMTU(l, mtu); err != nil {
				t.Fatalf("%s: set MTU %d: %v", name, mtu, err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatalf("%s: set up: %v", name, err)
			}
			idx[i] = l.Attrs().Index
		}
		// Until linkwatch (rate-limited to once a second) has seen the carrier,
		// a port's qdisc is noop and drops what is sent: wait for both to be up.
		deadline := time.Now().Add(3 * time.Second)
		for _, ifindex := range idx {
			for {
				l, err := h.LinkByIndex(ifindex)
				if err != nil {
					t.Fatal(err)
				}
				if l.Attrs().OperState == netlink.OperUp {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: still %v", l.Attrs().Name, l.Attrs().OperState)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		fn(idx[0], idx[1])
	})
}

// redirRawSocket opens an AF_PACKET socket on ifindex that receives frames of
// ethertype (0: none) with a short receive timeout. A port has traffic of its
// own (IPv6 router solicitations, MLD), so the tests listen to one EtherType.
func redirRawSocket(t *testing.T, ifindex int, ethertype uint16) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: hostToNet16(ethertype), Ifindex: ifindex}); err != nil {
		t.Fatalf("bind packet socket to ifindex %d: %v", ifindex, err)
	}
	tv := unix.NsecToTimeval((300 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

func redirSendRaw(t *testing.T, fd, ifindex int, frame []byte) {
	t.Helper()
	sa := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: hostToNet16(uint16(frame[12])<<8 | uint16(frame[13]))}
	if err := unix.Sendto(fd, frame, 0, sa); err != nil {
		t.Fatalf("send %d-byte frame on ifindex %d: %v", len(frame), ifindex, err)
	}
}

// redirRecvRaw returns the next frame on fd, or nil after the receive timeout.
func redirRecvRaw(t *testing.T, fd int) []byte {
	t.Helper()
	buf := make([]byte, 16384)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case err == nil:
			return buf[:n]
		case err == unix.EAGAIN:
			return nil
		case err != unix.EINTR:
			t.Fatalf("recv: %v", err)
		}
	}
}

// redirFrame builds an Ethernet frame of the given EtherType, padded to the
// Ethernet minimum, with a recognisable payload.
func redirFrame(dst string, ethertype uint16, payload string) []byte {
	f := []byte{0, 0, 0, 0, 0, 0, 0x02, 0x00, 0x5e, 0x00, 0x53, 0x01, byte(ethertype >> 8), byte(ethertype)}
	hw, _ := net.ParseMAC(dst)
	copy(f, hw)
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

type redirGotFrame struct {
	ifindex int
	frame   []byte
}

// redirRecorder is an onFrame that keeps what it is given.
type redirRecorder struct {
	mu     sync.Mutex
	frames []redirGotFrame
}

func (f *redirRecorder) onFrame(ifindex int, frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frames = append(f.frames, redirGotFrame{ifindex, frame})
}

func (f *redirRecorder) get() []redirGotFrame {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.frames)
}

// waitFor waits until n frames have arrived, then a little longer so that
// frames that should not arrive have had their chance.
func (f *redirRecorder) waitFor(n int) []redirGotFrame {
	deadline := time.Now().Add(2 * time.Second)
	for len(f.get()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return f.get()
}

func TestRedirectPunt(t *testing.T) {
	redirectVeth(t, 1500, func(v0, v1 int) {
		var rec redirRecorder
		r, err := OpenRedirector([]int{v0}, []uint16{redirEtherTypeLLDP, redirEtherTypeExp}, rec.onFrame)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		tx := redirRawSocket(t, v1, 0)

		ipv4 := redirFrame("ff:ff:ff:ff:ff:ff", unix.ETH_P_IP,
			"\x45\x00\x00\x1c\x00\x00\x00\x00\x40\x11\x00\x00\xc0\x00\x02\x01\xc0\x00\x02\x02")
		tagged := redirFrame("ff:ff:ff:ff:ff:ff", unix.ETH_P_8021Q, "\x00\x05\x88\xb5tagged")
		lldp := redirFrame("01:80:c2:00:00:0e", redirEtherTypeLLDP, "\x02\x07\x04\x02\x00\x5e\x00\x53\x01")
		exp := redirFrame("ff:ff:ff:ff:ff:ff", redirEtherTypeExp, "punt me")
		// The frames that must not arrive go first, so that waiting for the
		// others gives them time to show up if they were going to.
		for _, f := range [][]byte{ipv4, tagged, lldp, exp} {
			redirSendRaw(t, tx, v1, f)
		}

		got := rec.waitFor(2)
		if len(got) != 2 {
			t.Fatalf("onFrame called %d times, want 2 (LLDP and 0x88b5): %v", len(got), got)
		}
		for i, want := range [][]byte{lldp, exp} {
			if got[i].ifindex != v0 || !bytes.Equal(got[i].frame, want) {
				t.Errorf("frame %d: ifindex %d % x\nwant ifindex %d % x", i, got[i].ifindex, got[i].frame, v0, want)
			}
		}
		if s := r.Stats(); s.Received != 2 || s.Dropped != 0 || s.Truncated != 0 {
			t.Errorf("stats %+v, want 2 received", s)
		}
	})
}

func TestRedirectInject(t *testing.T) {
	redirectVeth(t, 1500, func(v0, v1 int) {
		var rec redirRecorder
		r, err := OpenRedirector([]int{v0}, []uint16{redirEtherTypeExp}, rec.onFrame)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rx := redirRawSocket(t, v1, redirEtherTypeExp)

		out := redirFrame("02:00:5e:00:53:02", redirEtherTypeExp, "from the CE")
		if err := r.Inject(v0, out); err != nil {
			t.Fatal(err)
		}
		if got := redirRecvRaw(t, rx); !bytes.Equal(got, out) {
			t.Errorf("v1 received % x\nwant % x", got, out)
		}

		// Another sender on the same port: PACKET_IGNORE_OUTGOING keeps
		// frames leaving the port out of the Redirector, not just its own.
		other := redirRawSocket(t, v0, 0)
		out2 := redirFrame("02:00:5e:00:53:02", redirEtherTypeExp, "from someone else")
		redirSendRaw(t, other, v0, out2)
		if got := redirRecvRaw(t, rx); !bytes.Equal(got, out2) {
			t.Errorf("v1 received % x\nwant % x", got, out2)
		}

		time.Sleep(200 * time.Millisecond)
		if got := rec.get(); len(got) != 0 {
			t.Errorf("redirector on v0 received frames sent out of v0: %v", got)
		}
		if s := r.Stats(); s.Injected != 1 || s.InjectErrors != 0 || s.Received != 0 {
			t.Errorf("stats %+v, want 1 injected", s)
		}
	})
}

func TestRedirectInjectBadInput(t *testing.T) {
	redirectVeth(t, 1500, func(v0, v1 int) {
		if _, err := OpenRedirector([]int{v0, 999999}, nil, nil); err == nil || !strings.Contains(err.Error(), "ifindex 999999") {
			t.Errorf("open on a missing ifindex: %v, want an error naming it", err)
		}
		if _, err := OpenRedirector([]int{v0, v0}, nil, nil); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("open with a duplicate ifindex: %v", err)
		}

		r, err := OpenRedirector([]int{v0}, nil, nil) // inject only
		if err != nil {
			t.Fatal(err)
		}
		rx := redirRawSocket(t, v1, redirEtherTypeExp)

		oversize := redirFrame("02:00:5e:00:53:02", redirEtherTypeExp, strings.Repeat("x", 1501))
		if len(oversize) != 1500+14+1 {
			t.Fatalf("oversize frame is %d bytes", len(oversize))
		}
		for _, c := range []struct {
			name    string
			ifindex int
			frame   []byte
			want    error
			mention string
		}{
			{"unknown port", v1, redirFrame("02:00:5e:00:53:02", redirEtherTypeExp, "x"), ErrUnknownPort, "ifindex " + strconv.Itoa(v1)},
			{"10 bytes", v0, make([]byte, 10), ErrFrameTooShort, "10 bytes"},
			{"MTU+15 bytes", v0, oversize, ErrFrameTooLong, "1515 bytes, MTU 1500"},
		} {
			err := r.Inject(c.ifindex, c.frame)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), "ifindex") {
				t.Errorf("%s: %v, want %v mentioning %q", c.name, err, c.want, c.mention)
			}
		}
		// The largest frame the MTU allows does go out.
		largest := oversize[:len(oversize)-1]
		if err := r.Inject(v0, largest); err != nil {
			t.Errorf("MTU+14 bytes: %v", err)
		}
		if got := redirRecvRaw(t, rx); !bytes.Equal(got, largest) {
			t.Errorf("v1 received %d bytes, want the %d-byte frame", len(got), len(largest))
		}
		if got := redirRecvRaw(t, rx); got != nil {
			t.Errorf("v1 received a rejected frame: % x", got)
		}
		if s := r.Stats(); s.Injected != 1 || s.InjectErrors != 3 {
			t.Errorf("stats %+v, want 1 injected and 3 inject errors", s)
		}

		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Inject(v0, largest); !errors.Is(err, ErrRedirectorClosed) {
			t.Errorf("inject after close: %v, want ErrRedirectorClosed", err)
		}
	})
}

func TestRedirectClose(t *testing.T) {
	redirectVeth(t, 1500, func(v0, v1 int) {
		baseline := runtime.NumGoroutine()
		r, err := OpenRedirector([]int{v0, v1}, []uint16{redirEtherTypeExp}, func(int, []byte) {})
		if err != nil {
			t.Fatal(err)
		}
		if n := runtime.NumGoroutine(); n < baseline+2 {
			t.Errorf("%d goroutines after opening 2 ports, baseline %d", n, baseline)
		}
		time.Sleep(50 * time.Millisecond) // let the readers block waiting for a frame

		start := time.Now()
		if err := r.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("close took %v", d)
		}
		if err := r.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > baseline {
			t.Errorf("%d goroutines after close, baseline %d", n, baseline)
		}
		_ = r.Stats() // after close: no socket to read, no panic
	})
}

func TestRedirectSlowConsumerAndTruncation(t *testing.T) {
	redirectVeth(t, 9500, func(v0, v1 int) {
		release := make(chan struct{})
		var (
			mu  sync.Mutex
			got int
		)
		r, err := OpenRedirector([]int{v0}, []uint16{redirEtherTypeExp}, func(int, []byte) {
			<-release
			mu.Lock()
			got++
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		tx := redirRawSocket(t, v1, 0)

		// A jumbo frame over MaxRedirectFrame is counted and skipped.
		redirSendRaw(t, tx, v1, redirFrame("ff:ff:ff:ff:ff:ff", redirEtherTypeExp, strings.Repeat("j", MaxRedirectFrame)))
		// While onFrame blocks, the socket buffer fills and the kernel drops.
		const sent = 3000
		for range sent {
			redirSendRaw(t, tx, v1, redirFrame("ff:ff:ff:ff:ff:ff", redirEtherTypeExp, strings.Repeat("s", 1000)))
		}
		close(release)

		var s RedirectStats
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			prev := s
			time.Sleep(100 * time.Millisecond)
			if s = r.Stats(); s.Received == prev.Received && s.Received > 0 {
				break
			}
		}
		if s.Truncated != 1 {
			t.Errorf("truncated %d, want 1 (stats %+v)", s.Truncated, s)
		}
		if s.Dropped == 0 || s.Received == 0 || s.Received+s.Dropped > sent {
			t.Errorf("stats %+v after %d frames to a blocked consumer, want some received and some dropped", s, sent)
		}
		t.Logf("%d sent: %+v", sent, s)
	})
}
