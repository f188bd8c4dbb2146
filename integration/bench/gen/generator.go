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

// Header is what every generated frame carries but its destination address:
// a UDP/IPv4 packet in an Ethernet frame of FrameLen bytes.
type Header struct {
	SrcMAC, DstMAC   net.HardwareAddr
	Src              netip.Addr
	SrcPort, DstPort uint16
	TTL              uint8
}

// Gen is the loaded BPF object of gen.c: generator, sink and bare redirect,
// and their maps. Close releases it and detaches nothing: links returned by
// the Attach methods are the caller's to close.
type Gen struct {
	objs  genObjects
	frame []byte
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
	if len(h.SrcMAC) != 6 || len(h.DstMAC) != 6 {
		return fmt.Errorf("set traffic: MACs %q and %q must be 6 bytes", h.SrcMAC, h.DstMAC)
	}
	if !h.Src.Is4() {
		return fmt.Errorf("set traffic: source %s is not IPv4", h.Src)
	}
	if len(dsts) == 0 {
		return errors.New("set traffic: no destinations")
	}
	tbl := make([]uint32, MaxDsts)
	for i := range tbl {
		d := dsts[i%len(dsts)]
		if !d.Is4() {
			return fmt.Errorf("set traffic: destination %s is not IPv4", d)
		}
		a := d.As4()
		tbl[i] = binary.NativeEndian.Uint32(a[:]) // network order in memory
	}
	tmpl := header(h)
	if err := g.objs.GenTmpl.Set(tmpl); err != nil {
		return fmt.Errorf("set traffic: template: %w", err)
	}
	if err := g.objs.GenDsts.Set(tbl); err != nil {
		return fmt.Errorf("set traffic: destinations: %w", err)
	}
	g.frame = make([]byte, FrameLen)
	copy(g.frame, tmpl[:])
	return nil
}

// header builds the template of gen.c: the headers with daddr 0 and the IPv4
// checksum over them, which xdp_gen completes for each destination.
func header(h Header) [hdrLen]byte {
	var b [hdrLen]byte
	copy(b[0:6], h.DstMAC)
	copy(b[6:12], h.SrcMAC)
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], FrameLen-14)
	ip[8] = h.TTL
	ip[9] = unix.IPPROTO_UDP
	src := h.Src.As4()
	copy(ip[12:16], src[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], h.DstPort)
	binary.BigEndian.PutUint16(udp[4:], FrameLen-34) // checksum 0: none, as IPv4 allows
	return b
}

func ipChecksum(hdr []byte) uint16 {
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
	_, err := g.objs.XdpGen.Run(&ebpf.RunOptions{
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

// SinkPackets returns how many frames xdp_sink has dropped, over all CPUs
// and ports.
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
