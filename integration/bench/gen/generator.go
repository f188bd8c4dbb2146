//go:build linux

package gen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Header is what every generated frame carries but its rotating address (and
// port): a UDP/IPv4 packet, or a TCP SYN, in an Ethernet frame of FrameLen
// bytes.
type Header struct {
	SrcMAC, DstMAC   net.HardwareAddr
	Src              netip.Addr // SetTraffic: the source; SetFlood: unused (the sources rotate)
	SrcPort, DstPort uint16
	TTL              uint8
	// TCP makes every frame a TCP SYN (window 64240, no options, a valid
	// checksum) instead of a UDP datagram (checksum 0: none).
	TCP bool
	// TCPFlags, when not 0, are the TCP frames' flags instead of SYN (0x10:
	// an ACK, as of an established connection).
	TCPFlags uint8
}

// Ports rotates one port of a flood: Count ports starting at the header's
// port, the destination port if Dst, else the source port. Count is 0 (a
// fixed port) or a power of two up to 65536 that does not run past 65535.
type Ports struct {
	Dst   bool
	Count int
}

// Gen is the loaded BPF object of gen.c: generator, sinks and bare redirect,
// and their maps. Close releases it and detaches nothing: links returned by
// the Attach methods are the caller's to close. A Gen generates one kind of
// traffic at a time; load one per concurrent kind.
type Gen struct {
	objs  genObjects
	frame []byte
	v6    bool // SetTraffic6's frames: Send runs xdp_gen6
}

// Load loads the programs. It removes the memlock rlimit, which kernels
// before 5.11 charge BPF maps against.
func Load() (*Gen, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock rlimit: %w", err)
	}
	g := &Gen{}
	if err := loadGenObjects(&g.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load generator: %+v", ve)
		}
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return g, nil
}

// Close releases the programs and maps.
func (g *Gen) Close() error {
	return g.objs.Close()
}

// SetTraffic sets the frames Send generates: header h, to the destinations
// dsts in turn (the first MaxDsts of them, repeated to fill MaxDsts slots).
func (g *Gen) SetTraffic(h Header, dsts []netip.Addr) error {
	if !h.Src.Is4() {
		return fmt.Errorf("set traffic: source %s is not IPv4", h.Src)
	}
	return g.set(h, h.Src, false, dsts, Ports{})
}

// SetFlood sets the frames Send generates to a flood at dst from spoofed
// sources: header h (h.Src unused) from the sources srcs in turn (the first
// MaxDsts of them, repeated to fill MaxDsts slots), with one port rotating
// as ports says.
func (g *Gen) SetFlood(h Header, dst netip.Addr, srcs []netip.Addr, ports Ports) error {
	if !dst.Is4() {
		return fmt.Errorf("set flood: destination %s is not IPv4", dst)
	}
	if c := ports.Count; c < 0 || c > 65536 || c&(c-1) != 0 {
		return fmt.Errorf("set flood: %d ports: want 0 or a power of two up to 65536", c)
	}
	base := h.SrcPort
	if ports.Dst {
		base = h.DstPort
	}
	if ports.Count > 0 && int(base)+ports.Count-1 > 65535 {
		return fmt.Errorf("set flood: %d ports from %d run past 65535", ports.Count, base)
	}
	return g.set(h, dst, true, srcs, ports)
}

// set loads the template and the rotation into the generator's globals:
// fixed is the address that does not rotate, addrs the ones that do (the
// sources if src, else the destinations).
func (g *Gen) set(h Header, fixed netip.Addr, src bool, addrs []netip.Addr, ports Ports) error {
	if len(h.SrcMAC) != 6 || len(h.DstMAC) != 6 {
		return fmt.Errorf("set traffic: MACs %q and %q must be 6 bytes", h.SrcMAC, h.DstMAC)
	}
	if len(addrs) == 0 {
		return errors.New("set traffic: no addresses to rotate over")
	}
	tbl := make([]uint32, MaxDsts)
	for i := range tbl {
		a := addrs[i%len(addrs)]
		if !a.Is4() {
			return fmt.Errorf("set traffic: address %s is not IPv4", a)
		}
		b := a.As4()
		tbl[i] = binary.NativeEndian.Uint32(b[:]) // network order in memory
	}
	tmpl := header(h, fixed, src, ports)
	var portMask, portBase, portDst uint32
	if ports.Count > 0 {
		portMask = uint32(ports.Count - 1)
		portBase = uint32(h.SrcPort)
		if ports.Dst {
			portBase, portDst = uint32(h.DstPort), 1
		}
	}
	for _, v := range []struct {
		name string
		v    *ebpf.Variable
		val  any
	}{
		{"template", g.objs.GenTmpl, tmpl},
		{"addresses", g.objs.GenAddrs, tbl},
		{"rotation", g.objs.GenSrc, boolU32(src)},
		{"protocol", g.objs.GenTcp, boolU32(h.TCP)},
		{"port mask", g.objs.GenPortMask, portMask},
		{"port base", g.objs.GenPortBase, portBase},
		{"port field", g.objs.GenPortDst, portDst},
	} {
		if err := v.v.Set(v.val); err != nil {
			return fmt.Errorf("set traffic: %s: %w", v.name, err)
		}
	}
	g.frame, g.v6 = make([]byte, FrameLen), false
	copy(g.frame, tmpl[:])
	return nil
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// header builds the template of gen.c: the headers with the rotating
// address (the source if src, else the destination) and the rotating port
// 0, and the checksums over them, which xdp_gen completes for each frame.
func header(h Header, fixed netip.Addr, src bool, ports Ports) [hdrLen]byte {
	var b [hdrLen]byte
	copy(b[0:6], h.DstMAC)
	copy(b[6:12], h.SrcMAC)
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0] = 0x45
	ip[8] = h.TTL
	a := fixed.As4()
	if src {
		copy(ip[16:20], a[:])
	} else {
		copy(ip[12:16], a[:])
	}
	sport, dport := h.SrcPort, h.DstPort
	if ports.Count > 0 {
		if ports.Dst {
			dport = 0
		} else {
			sport = 0
		}
	}
	l4 := b[34:]
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if h.TCP {
		const tcpLen = 20
		binary.BigEndian.PutUint16(ip[2:], 20+tcpLen)
		ip[9] = unix.IPPROTO_TCP
		binary.BigEndian.PutUint32(l4[4:], 0x5eed0001) // sequence number
		l4[12] = 5 << 4                                // data offset: no options
		l4[13] = 0x02                                  // SYN
		binary.BigEndian.PutUint16(l4[14:], 64240)     // window
		if h.TCPFlags != 0 {
			l4[13] = h.TCPFlags
		}
		binary.BigEndian.PutUint16(l4[16:], tcpChecksum(ip, l4[:tcpLen]))
	} else {
		binary.BigEndian.PutUint16(ip[2:], FrameLen-14)
		ip[9] = unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(l4[4:], FrameLen-34) // checksum 0: none, as IPv4 allows
	}
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip))
	return b
}

// tcpChecksum is the TCP checksum of segment (checksum field 0) with the
// pseudo-header of IPv4 header ip.
func tcpChecksum(ip, segment []byte) uint16 {
	pseudo := make([]byte, 0, 12+len(segment))
	pseudo = append(pseudo, ip[12:20]...)
	pseudo = append(pseudo, 0, unix.IPPROTO_TCP, 0, byte(len(segment)))
	pseudo = append(pseudo, segment...)
	return Checksum(pseudo)
}

// Checksum is the Internet checksum (RFC 1071) of hdr: of an IPv4 header
// with its checksum field 0, the value to write there; of a whole header, 0.
func Checksum(hdr []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// xdpMd is struct xdp_md, the context of a BPF_PROG_RUN of an XDP program.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// Send runs the generator frames times as one BPF_PROG_RUN in live-frames
// mode: each run sends a frame out of the interface ifindex (XDP_TX), which
// must be in the calling thread's network namespace. A call costs a fixed
// ~24 ms besides the frames, so use a million frames or more per call.
func (g *Gen) Send(ifindex int, frames uint32) error {
	if g.frame == nil {
		return errors.New("send: SetTraffic was not called")
	}
	prog := g.objs.XdpGen
	if g.v6 {
		prog = g.objs.XdpGen6
	}
	_, err := prog.Run(&ebpf.RunOptions{
		Data:    g.frame,
		Context: xdpMd{DataEnd: uint32(len(g.frame)), IngressIfindex: uint32(ifindex)},
		Repeat:  frames,
		Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
	})
	if err != nil {
		return fmt.Errorf("send %d frames on ifindex %d: %w", frames, ifindex, err)
	}
	return nil
}

// AttachSink attaches xdp_sink natively to ifindex (in the calling thread's
// network namespace); it counts and drops every frame the port receives.
func (g *Gen) AttachSink(ifindex int) (link.Link, error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: g.objs.XdpSink, Interface: ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach sink to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// AttachSinkUDP attaches xdp_sink_udp natively to ifindex (in the calling
// thread's network namespace): it counts and drops the IPv4 UDP packets to
// port and passes everything else (ARP, the host's own traffic) to the
// kernel. It shares its counter with xdp_sink.
func (g *Gen) AttachSinkUDP(ifindex int, port uint16) (link.Link, error) {
	if err := g.objs.SinkUdpPort.Set(uint32(port)); err != nil {
		return nil, fmt.Errorf("sink port %d: %w", port, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: g.objs.XdpSinkUdp, Interface: ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach UDP sink to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// SinkPackets returns how many frames xdp_sink and xdp_sink_udp have
// dropped, over all CPUs and ports.
func (g *Gen) SinkPackets() (uint64, error) {
	var perCPU []uint64
	if err := g.objs.SinkPackets.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("read sink counter: %w", err)
	}
	var sum uint64
	for _, n := range perCPU {
		sum += n
	}
	return sum, nil
}

// AttachRedirectBare attaches xdp_redirect_bare natively to in, redirecting
// every frame out of out; both are resolved in the calling thread's network
// namespace.
func (g *Gen) AttachRedirectBare(in, out int) (link.Link, error) {
	if err := g.objs.BarePort.Put(uint32(0), uint32(out)); err != nil {
		return nil, fmt.Errorf("bare redirect to ifindex %d: %w", out, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: g.objs.XdpRedirectBare, Interface: in, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach bare redirect to ifindex %d: %w", in, err)
	}
	return l, nil
}
