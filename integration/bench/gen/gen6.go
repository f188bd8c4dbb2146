//go:build linux

package gen

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// HeaderLen6 is the length of the headers of an IPv6 UDP frame: Ethernet,
// IPv6 and UDP. FrameLen6 is the length of the frames SetTraffic6 sets:
// the headers and the IPv4 frames' FrameLen - HeaderLen bytes of payload.
const (
	HeaderLen6 = 14 + 40 + 8
	FrameLen6  = HeaderLen6 + FrameLen - HeaderLen
)

// SetTraffic6 sets the frames Send generates to IPv6/UDP frames of
// FrameLen6 bytes: header h (h.TCP unsupported; h.TTL is the hop limit) to
// the destinations dsts in turn (the first MaxDsts of them, repeated to
// fill MaxDsts slots), with a correct UDP checksum. SetTraffic and SetFlood
// switch back to IPv4.
func (g *Gen) SetTraffic6(h Header, dsts []netip.Addr) error {
	switch {
	case !h.Src.Is6() || h.Src.Is4In6():
		return fmt.Errorf("set traffic6: source %s is not IPv6", h.Src)
	case h.TCP:
		return fmt.Errorf("set traffic6: TCP frames are IPv4 only")
	case len(h.SrcMAC) != 6 || len(h.DstMAC) != 6:
		return fmt.Errorf("set traffic6: MACs %q and %q must be 6 bytes", h.SrcMAC, h.DstMAC)
	case len(dsts) == 0:
		return fmt.Errorf("set traffic6: no destinations to rotate over")
	}
	tbl := make([][16]byte, MaxDsts)
	for i := range tbl {
		a := dsts[i%len(dsts)]
		if !a.Is6() || a.Is4In6() {
			return fmt.Errorf("set traffic6: destination %s is not IPv6", a)
		}
		tbl[i] = a.As16()
	}
	frame := Frame6(h, netip.IPv6Unspecified())
	if err := g.objs.Gen6Tmpl.Set(frame[:HeaderLen6]); err != nil {
		return fmt.Errorf("set traffic6: template: %w", err)
	}
	if err := g.objs.GenAddrs6.Set(tbl); err != nil {
		return fmt.Errorf("set traffic6: addresses: %w", err)
	}
	g.frame, g.v6 = frame, true
	return nil
}

// Frame6 returns one IPv6/UDP frame of FrameLen6 bytes as the generator
// sends it after SetTraffic6(h, ...), to dst, with its UDP checksum.
func Frame6(h Header, dst netip.Addr) []byte {
	f := make([]byte, FrameLen6)
	copy(f[0:6], h.DstMAC)
	copy(f[6:12], h.SrcMAC)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IPV6)
	ip := f[14:54]
	ip[0] = 0x60
	udpLen := uint16(FrameLen6 - 54)
	binary.BigEndian.PutUint16(ip[4:], udpLen)
	ip[6] = unix.IPPROTO_UDP
	ip[7] = h.TTL
	src, d := h.Src.As16(), dst.As16()
	copy(ip[8:24], src[:])
	copy(ip[24:40], d[:])
	udp := f[54:]
	binary.BigEndian.PutUint16(udp[0:], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], h.DstPort)
	binary.BigEndian.PutUint16(udp[4:], udpLen)
	binary.BigEndian.PutUint16(udp[6:], udpChecksum6(ip, udp))
	return f
}

// udpChecksum6 is the UDP checksum of datagram (checksum field 0) with the
// pseudo-header of IPv6 header ip (RFC 8200, 8.1), all ones for a sum of 0.
func udpChecksum6(ip, datagram []byte) uint16 {
	pseudo := make([]byte, 0, 40+len(datagram))
	pseudo = append(pseudo, ip[8:40]...)
	pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(len(datagram)))
	pseudo = append(pseudo, 0, 0, 0, unix.IPPROTO_UDP)
	pseudo = append(pseudo, datagram...)
	if c := Checksum(pseudo); c != 0 {
		return c
	}
	return 0xffff
}
