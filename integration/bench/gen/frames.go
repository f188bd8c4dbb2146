//go:build linux

package gen

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// HeaderLen is the length of the headers of a UDP frame: Ethernet, IPv4
// (no options) and UDP.
const HeaderLen = 14 + 20 + 8

// MaxPayload is the largest UDP payload a frame can carry through ports of
// the default MTU, 1500 bytes.
const MaxPayload = 1500 - 20 - 8

// FrameLenFor returns the length of a UDP frame carrying payload bytes:
// the headers and the payload, or FrameLen for payloads too small to fill
// a minimum Ethernet frame (Ethernet padding follows the IPv4 packet).
func FrameLenFor(payload int) int {
	return max(FrameLen, HeaderLen+payload)
}

// SetPayload makes the UDP frames set by SetTraffic carry payload bytes of
// UDP payload (zeros), in frames of FrameLenFor(payload) bytes; payloads
// under FrameLen - HeaderLen leave Ethernet padding after the IPv4 packet.
// SetTraffic itself sets frames of FrameLen bytes, FrameLen - HeaderLen
// bytes of payload; call SetPayload after it.
func (g *Gen) SetPayload(payload int) error {
	if g.frame == nil {
		return fmt.Errorf("set payload: SetTraffic was not called")
	}
	if g.v6 {
		return fmt.Errorf("set payload: the traffic is IPv6 (SetTraffic6): its frames are FrameLen6 bytes")
	}
	if payload < 0 || payload > MaxPayload {
		return fmt.Errorf("set payload: %d bytes: must be 0 to %d", payload, MaxPayload)
	}
	tmpl := make([]byte, g.objs.GenTmpl.Size())
	if err := g.objs.GenTmpl.Get(tmpl); err != nil {
		return fmt.Errorf("set payload: read template: %w", err)
	}
	if len(tmpl) < HeaderLen || tmpl[14+9] != unix.IPPROTO_UDP {
		return fmt.Errorf("set payload: the traffic is not UDP")
	}
	setLengths(tmpl, payload)
	if err := g.objs.GenTmpl.Set(tmpl); err != nil {
		return fmt.Errorf("set payload: template: %w", err)
	}
	frame := make([]byte, FrameLenFor(payload))
	copy(frame, tmpl)
	g.frame = frame
	return nil
}

// setLengths writes the IPv4 total length and the UDP length of a UDP
// frame with payload bytes of payload, and the IPv4 header checksum.
func setLengths(frame []byte, payload int) {
	ip := frame[14:34]
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+payload))
	binary.BigEndian.PutUint16(frame[38:], uint16(8+payload))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip))
}

// Frame returns one UDP frame as the generator sends it after SetTraffic(h,
// ...) and SetPayload(payload), to dst: for senders other than the
// generator (probes, BPF_PROG_TEST_RUN). The payload is zeros; the UDP
// checksum is 0 (none).
func Frame(h Header, dst netip.Addr, payload int) []byte {
	f := make([]byte, FrameLenFor(payload))
	copy(f[0:6], h.DstMAC)
	copy(f[6:12], h.SrcMAC)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0] = 0x45
	ip[8] = h.TTL
	ip[9] = unix.IPPROTO_UDP
	if h.Src.Is4() {
		a := h.Src.As4()
		copy(ip[12:16], a[:])
	}
	if dst.Is4() {
		a := dst.As4()
		copy(ip[16:20], a[:])
	}
	binary.BigEndian.PutUint16(f[34:], h.SrcPort)
	binary.BigEndian.PutUint16(f[36:], h.DstPort)
	setLengths(f, payload)
	return f
}

// BareProgram returns xdp_redirect_bare, for timing it with
// BPF_PROG_TEST_RUN. It stays owned by the Gen.
func (g *Gen) BareProgram() *ebpf.Program {
	return g.objs.XdpRedirectBare
}
