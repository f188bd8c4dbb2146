//go:build linux

package ife

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
)

// TestLinuxDecodesOurFrames checks the layout against Linux's own reader:
// in a fresh network namespace, a veth's ingress runs `tc ... action ife
// decode`, and frames built by Encode are sent into the other end of the
// pair. A good frame carries, in this order, splitplane's egress port (a
// type Linux does not know and must pass over), Linux's skb mark 17 and a
// flow hash, around a UDP datagram for a socket in the namespace: the
// datagram must arrive, intact, with mark 17. That holds only if Linux
// reads the metadata length as counting itself and the TLV length as
// counting the TLV header but not the padding, as Encode writes them: any
// other reading lands the mark or the inner frame at the wrong offset. A
// frame Decode rejects (a TLV whose length runs past the metadata) is sent
// first and must be dropped by Linux too.
//
// The kernel needs CONFIG_NET_ACT_IFE and the skb mark metadata
// (CONFIG_NET_IFE_SKBMARK), plus u32 and the ingress qdisc; the test skips,
// saying so, when `tc actions add action ife decode` fails.
func TestLinuxDecodesOurFrames(t *testing.T) {
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc (iproute2)")
	}
	netnstest.Run(t, func(h *netlink.Handle) {
		// Processes started from this locked thread inherit its namespace.
		tc := func(args ...string) error {
			out, err := exec.Command("tc", args...).CombinedOutput()
			if err != nil {
				return errors.New("tc " + strings.Join(args, " ") + ": " + err.Error() + ": " + strings.TrimSpace(string(out)))
			}
			return nil
		}
		la := netlink.NewLinkAttrs()
		la.Name = "ife-a"
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "ife-b"}); err != nil {
			t.Fatalf("veth: %v", err)
		}
		a, err := h.LinkByName("ife-a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.LinkByName("ife-b")
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr("192.0.2.2/24")
		if err := h.AddrAdd(b, addr); err != nil {
			t.Fatal(err)
		}
		for _, l := range []netlink.Link{a, b} {
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
		// Until the kernel's link watch has seen the carrier, the veths'
		// qdisc is noop and drops what is sent.
		for _, name := range []string{"ife-a", "ife-b"} {
			waitOperUp(t, h, name)
		}
		// The receiver: a UDP socket on 192.0.2.2:9999 that reports skb->mark.
		rx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(rx)
		if err := unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVMARK, 1); err != nil {
			t.Fatalf("SO_RCVMARK: %v", err)
		}
		if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(rx, &unix.SockaddrInet4{Port: 9999, Addr: [4]byte{192, 0, 2, 2}}); err != nil {
			t.Fatal(err)
		}

		// The sender: a packet socket on ife-a, FE 1's end of the inter-FE link.
		tx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(tx)
		var outer Header
		copy(outer.Dst[:], b.Attrs().HardwareAddr)
		copy(outer.Src[:], a.Attrs().HardwareAddr)
		send := func(frame []byte) {
			t.Helper()
			to := &unix.SockaddrLinklayer{Ifindex: a.Attrs().Index, Halen: 6}
			copy(to.Addr[:], outer.Dst[:])
			if err := unix.Sendto(tx, frame, 0, to); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		inner := func(payload string) []byte {
			return udpFrame(b.Attrs().HardwareAddr, a.Attrs().HardwareAddr, payload)
		}

		// The plumbing first, so that it is proven on any kernel: the inner
		// frame alone reaches the socket, unmarked. It is sent again until
		// it does, in case the veths were not quite ready.
		for try := 1; ; try++ {
			send(inner("plain"))
			pfd := []unix.PollFd{{Fd: int32(rx), Events: unix.POLLIN}}
			if n, err := unix.Poll(pfd, 200); err == nil && n == 1 {
				break
			}
			if try == 25 {
				t.Fatal("a plain UDP frame sent into ife-a never reached the socket behind ife-b")
			}
		}
		if p, mark, err := recvMark(rx, 0); err != nil || string(p) != "plain" || mark != 0 {
			t.Fatalf("plain frame: %q, mark %d, %v", p, mark, err)
		}

		// The modules, where they are modules; built in or absent, this fails quietly.
		_ = exec.Command("modprobe", "-q", "act_ife").Run()
		_ = exec.Command("modprobe", "-q", "act_meta_mark").Run()
		if err := tc("actions", "add", "action", "ife", "decode", "index", "7"); err != nil {
			t.Skipf("Linux's IFE action is not available, so the interop test cannot run past its plumbing "+
				"(kernel built without CONFIG_NET_ACT_IFE, or without its skb mark metadata CONFIG_NET_IFE_SKBMARK): %v", err)
		}
		if err := tc("actions", "del", "action", "ife", "index", "7"); err != nil {
			t.Fatal(err)
		}
		if err := tc("qdisc", "add", "dev", "ife-b", "ingress"); err != nil {
			t.Fatal(err)
		}
		if err := tc("filter", "add", "dev", "ife-b", "parent", "ffff:", "protocol", "0xed3e",
			"u32", "match", "u32", "0", "0", "action", "ife", "decode", "pass"); err != nil {
			t.Fatal(err)
		}

		meta := []Meta{EgressPort(3), Uint32(TypeSKBMark, 17), FlowHash(0x12345678)}

		bad, err := Encode(nil, outer, meta, inner("bad frame"))
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint16(bad[EthHeaderLen+MetaLenLen+8+2:], 0x20) // the mark TLV's length: past the metadata
		if _, _, _, err := Decode(bad, nil); !errors.Is(err, ErrTLV) {
			t.Fatalf("the bad frame should fail Decode: %v", err)
		}
		send(bad)
		good, err := Encode(nil, outer, meta, inner("hello from FE 1"))
		if err != nil {
			t.Fatal(err)
		}
		send(good)

		payload, mark, err := recvMark(rx, 0)
		if err != nil {
			t.Fatalf("no datagram decapsulated by Linux: %v", err)
		}
		if string(payload) != "hello from FE 1" {
			t.Fatalf("first datagram delivered: %q, want the good frame's (Linux accepted the frame with a TLV past the metadata)", payload)
		}
		if mark != 17 {
			t.Errorf("skb mark %d, want 17 from the skb mark TLV behind our egress port TLV (or the kernel lacks CONFIG_NET_IFE_SKBMARK)", mark)
		}
		// Both frames were sent from this thread, the bad one first: had
		// Linux delivered it, it would be queued by now.
		if p, _, err := recvMark(rx, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
			t.Errorf("another datagram delivered: %q, %v", p, err)
		}
	})
}

// waitOperUp waits up to 5 s for link name to be operationally up.
func waitOperUp(t *testing.T, h *netlink.Handle, name string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %v after 5 s", name, l.Attrs().OperState)
		}
	}
}

// recvMark reads a datagram and the skb mark SO_RCVMARK reports with it.
func recvMark(fd, flags int) ([]byte, uint32, error) {
	buf := make([]byte, 2048)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, flags)
	if err != nil {
		return nil, 0, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, 0, err
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_MARK && len(m.Data) >= 4 {
			return buf[:n], binary.NativeEndian.Uint32(m.Data), nil
		}
	}
	return buf[:n], 0, nil
}

// udpFrame is an Ethernet frame holding an IPv4 UDP datagram from
// 192.0.2.1:40000 to 192.0.2.2:9999 (no UDP checksum, as IPv4 allows).
func udpFrame(dst, src net.HardwareAddr, payload string) []byte {
	f := make([]byte, 0, 14+20+8+len(payload))
	f = append(f, dst...)
	f = append(f, src...)
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	ip := len(f)
	f = append(f, 0x45, 0) // version 4, IHL 5; TOS
	f = binary.BigEndian.AppendUint16(f, uint16(20+8+len(payload)))
	f = append(f, 0, 1, 0x40, 0, 64, unix.IPPROTO_UDP, 0, 0) // ID, DF, TTL, protocol, checksum (below)
	f = append(f, 192, 0, 2, 1, 192, 0, 2, 2)
	var sum uint32
	for i := ip; i < ip+20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(f[ip+10:], ^uint16(sum))
	f = binary.BigEndian.AppendUint16(f, 40000)
	f = binary.BigEndian.AppendUint16(f, 9999)
	f = binary.BigEndian.AppendUint16(f, uint16(8+len(payload)))
	f = append(f, 0, 0)
	return append(f, payload...)
}

// TestUDPFrame checks the test's own frame builder, so a failure of the
// interop test is not a bad inner packet: the IPv4 header checksum of a
// known datagram, and the header summing to 0xffff.
func TestUDPFrame(t *testing.T) {
	f := udpFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1}, "x")
	if len(f) != 14+20+8+1 || !bytes.Equal(f[12:14], []byte{8, 0}) {
		t.Fatalf("frame %x", f)
	}
	var sum uint32
	for i := 14; i < 34; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv4 header sums to %#x, want 0xffff", sum)
	}
}
