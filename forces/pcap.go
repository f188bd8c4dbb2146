package forces

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"
)

// Ports and addresses of the synthetic TCP streams PcapWriter records, so
// that the direction of every message is visible: CE 127.0.0.1:6700, FE
// 127.0.0.2:6701 (the first stream opened; each further stream takes the
// next FE port). Decode with tshark -d tcp.port==6700,forces.
const (
	PcapCEPort = 6700
	PcapFEPort = 6701
)

var (
	pcapCEAddr = [4]byte{127, 0, 0, 1}
	pcapFEAddr = [4]byte{127, 0, 0, 2}
)

const (
	pcapMagicMicro = 0xa1b2c3d4
	linktypeRaw    = 101 // LINKTYPE_RAW: each packet starts with an IPv4 or IPv6 header
	pcapSnapLen    = 262144
	pcapRecLen     = 16
	ipHeaderLen    = 20
	tcpHeaderLen   = 20

	// PcapMaxSegment is the most message bytes one recorded TCP segment
	// carries, the most an IPv4 packet without options holds (and the MSS
	// Linux uses on loopback), so every packet in the file is a valid one.
	PcapMaxSegment = 65535 - ipHeaderLen - tcpHeaderLen

	// PcapTMLPrefixLen is the length of the prefix written before every
	// message in the recorded stream (see PcapWriter).
	PcapTMLPrefixLen = 2

	pcapWindowShift = 7       // advertised in the SYNs: an 8 MiB window
	pcapAckEvery    = 1 << 20 // unacknowledged bytes after which the receiver ACKs
)

// PcapWriter writes ForCES messages to a classic libpcap file (LINKTYPE_RAW)
// as synthetic IPv4 TCP streams between the CE address and port above and an
// FE one, so that every message is recorded whole, up to the 262140 bytes
// ForCES allows. It is safe for concurrent use.
//
// Each stream starts with a SYN, SYN-ACK, ACK handshake (the FE connects, as
// in the real TML) that advertises window scaling; a message is split into
// segments of at most PcapMaxSegment bytes, the last one pushed, with
// consecutive sequence numbers, each segment acknowledging all the other
// direction has sent, and a pure ACK from the receiver once a direction has
// 1 MiB unacknowledged. IPv4 and TCP checksums are valid. Streams are never
// closed: a capture ends when the file does.
//
// Wireshark's ForCES dissector (as of tshark 4.0) reads a message sent over
// TCP as starting 2 bytes into the TCP payload, after a TML header of an old
// TCP/UDP TML draft that splitplane's TML (RFC 5810 messages back to back)
// does not have. So that the capture decodes, every message in the recorded
// stream is preceded by PcapTMLPrefixLen bytes, which is what that dissector
// reads: the message's first byte (the dissector shows the version from
// there) and a zero. The ForCES bytes themselves are recorded unchanged; a
// reader that skips the prefix gets the messages exactly as sent. That
// dissector also takes each TCP segment as one message and does not ask TCP
// to reassemble, so it shows a message longer than one segment (more than
// PcapMaxSegment-PcapTMLPrefixLen bytes) by its header only, with the later
// segments as garbage; the bytes are whole in the file all the same.
type PcapWriter struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	ipID    uint16
	err     error
	streams int
	def     *pcapStream
}

// pcapStream is one synthetic TCP connection.
type pcapStream struct {
	fePort  uint16
	started bool
	// seq is the next sequence number of each direction and unacked the
	// bytes it sent since the other direction last acknowledged; index 0 is
	// CE to FE, 1 FE to CE.
	seq     [2]uint32
	unacked [2]uint32
}

// NewPcapWriter writes the pcap file header to w and returns a writer.
func NewPcapWriter(w io.Writer) (*PcapWriter, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagicMicro)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(h[20:], linktypeRaw)
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("forces: pcap header: %w", err)
	}
	return &PcapWriter{w: w}, nil
}

// newStream returns the next stream; p.mu must be held.
func (p *PcapWriter) newStream() *pcapStream {
	n := p.streams
	p.streams++
	// Deterministic initial sequence numbers, distinct per stream.
	isn := uint32(n) * 0x01000193
	return &pcapStream{
		fePort: uint16(PcapFEPort + n%(65536-PcapFEPort)),
		seq:    [2]uint32{0x5ce00000 + isn, 0x0fe00000 + isn},
	}
}

// WriteMessage records raw, the bytes of one message, sent at t by the CE
// (fromCE) or by the FE, on one stream that all WriteMessage calls share
// (opened by the first). raw is not retained.
func (p *PcapWriter) WriteMessage(raw []byte, fromCE bool, t time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.def == nil {
		p.def = p.newStream()
	}
	return p.write(p.def, raw, fromCE, t)
}

// Tap returns a Conn tap (see Conn.SetTap) that records every message through
// p on a stream of its own, so that each connection is a TCP stream in the
// capture. localIsCE says which end the Conn is: its sent messages come from
// the CE when true. Write errors are kept for Err.
func (p *PcapWriter) Tap(localIsCE bool) func(raw []byte, sent bool) {
	p.mu.Lock()
	s := p.newStream()
	p.mu.Unlock()
	return func(raw []byte, sent bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = p.write(s, raw, sent == localIsCE, time.Now())
	}
}

// Err returns the first write error, if any.
func (p *PcapWriter) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// write records one message on s with a single Write, so that a failed or
// concurrent write never leaves half a message; p.mu must be held.
func (p *PcapWriter) write(s *pcapStream, raw []byte, fromCE bool, t time.Time) error {
	b := p.buf[:0]
	if !s.started {
		s.started = true
		b = p.handshake(b, s, t)
	}
	d := 1
	if fromCE {
		d = 0
	}
	var prefix [PcapTMLPrefixLen]byte
	if len(raw) > 0 {
		prefix[0] = raw[0]
	}
	total := PcapTMLPrefixLen + len(raw)
	for off := 0; off < total; {
		n := min(total-off, PcapMaxSegment)
		flags := byte(tcpACK)
		if off+n == total {
			flags |= tcpPSH
		}
		// The recorded stream is prefix+raw; this segment carries bytes
		// [off, off+n) of it.
		pre := prefix[min(off, PcapTMLPrefixLen):min(off+n, PcapTMLPrefixLen)]
		body := raw[max(off-PcapTMLPrefixLen, 0) : off+n-PcapTMLPrefixLen]
		b = p.segment(b, s, d, flags, nil, pre, body, t)
		off += n
	}
	s.unacked[1-d] = 0 // the segments acknowledged the other direction
	if s.unacked[d] >= pcapAckEvery {
		b = p.segment(b, s, 1-d, tcpACK, nil, nil, nil, t)
		s.unacked[d] = 0
	}
	if cap(b) <= 1<<19 {
		p.buf = b
	}
	if _, err := p.w.Write(b); err != nil {
		err = fmt.Errorf("forces: pcap write: %w", err)
		if p.err == nil {
			p.err = err
		}
		return err
	}
	return nil
}

// TCP flags.
const (
	tcpSYN = 0x02
	tcpPSH = 0x08
	tcpACK = 0x10
)

// handshake appends the SYN (FE to CE), SYN-ACK and ACK that open s.
func (p *PcapWriter) handshake(b []byte, s *pcapStream, t time.Time) []byte {
	// MSS, NOP, window scale: what a Linux loopback connection offers.
	opts := []byte{2, 4, byte(PcapMaxSegment >> 8), byte(PcapMaxSegment & 0xff), 1, 3, 3, pcapWindowShift}
	b = p.segment(b, s, 1, tcpSYN, opts, nil, nil, t)
	s.seq[1]++
	b = p.segment(b, s, 0, tcpSYN|tcpACK, opts, nil, nil, t)
	s.seq[0]++
	return p.segment(b, s, 1, tcpACK, nil, nil, nil, t)
}

// segment appends one pcap record: an IPv4 TCP segment of s in direction d
// (0 CE to FE, 1 FE to CE) carrying pre and then body, and advances the
// direction's sequence number past them.
func (p *PcapWriter) segment(b []byte, s *pcapStream, d int, flags byte, opts, pre, body []byte, t time.Time) []byte {
	n := len(pre) + len(body)
	tcpLen := tcpHeaderLen + len(opts) + n
	ipLen := ipHeaderLen + tcpLen
	us := t.UnixMicro()
	b = binary.LittleEndian.AppendUint32(b, uint32(us/1e6))
	b = binary.LittleEndian.AppendUint32(b, uint32(us%1e6))
	b = binary.LittleEndian.AppendUint32(b, uint32(ipLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(ipLen))

	src, dst, sport, dport := pcapFEAddr, pcapCEAddr, s.fePort, uint16(PcapCEPort)
	if d == 0 {
		src, dst, sport, dport = dst, src, dport, sport
	}
	p.ipID++
	ip := len(b)
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(ipLen))
	b = binary.BigEndian.AppendUint16(b, p.ipID)
	b = append(b, 0x40, 0, 64, 6, 0, 0) // DF, TTL 64, TCP, checksum below
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	binary.BigEndian.PutUint16(b[ip+10:], ipChecksum(b[ip:ip+ipHeaderLen]))

	tcp := len(b)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint32(b, s.seq[d])
	var ack uint32
	if flags&tcpACK != 0 {
		ack = s.seq[1-d]
	}
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, byte((tcpHeaderLen+len(opts))/4)<<4, flags)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // window (scaled after the SYNs)
	b = append(b, 0, 0, 0, 0)                    // checksum below, urgent pointer
	b = append(b, opts...)
	b = append(b, pre...)
	b = append(b, body...)
	// The TCP checksum covers a pseudo-header of the addresses, protocol
	// and TCP length.
	sum := onesSum(b[ip+12:ip+20], 6+uint32(tcpLen))
	binary.BigEndian.PutUint16(b[tcp+16:], ^fold(onesSum(b[tcp:], sum)))
	s.seq[d] += uint32(n)
	s.unacked[d] += uint32(n)
	return b
}

func ipChecksum(h []byte) uint16 {
	return ^fold(onesSum(h, 0))
}

// onesSum adds b as big-endian 16-bit words (an odd last byte padded with a
// zero) to s, the Internet checksum's running sum.
func onesSum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
		if s >= 1<<31 {
			s = s>>16 + s&0xFFFF
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

// fold reduces a running sum to 16 bits with end-around carry.
func fold(s uint32) uint16 {
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return uint16(s)
}
