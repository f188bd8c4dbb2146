package forces

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"
)

// Ports and addresses PcapWriter puts on its synthetic UDP datagrams, so that
// the direction of every message is visible: CE 127.0.0.1:6700 <-> FE
// 127.0.0.2:6701. Decode with, e.g., tshark -d udp.port==6700,forces.
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
	ipUDPHeaderLen = 20 + 8
	// PcapMaxMessage is the largest message recorded whole: the largest UDP
	// payload an IPv4 datagram can carry.
	PcapMaxMessage = 65535 - ipUDPHeaderLen
)

// PcapWriter writes ForCES messages to a classic libpcap file
// (LINKTYPE_RAW), each as one IPv4/UDP datagram from the CE or FE address
// and port above. It is safe for concurrent use.
//
// A message longer than PcapMaxMessage (65507 bytes; ForCES allows up to
// 262140) does not fit one datagram. It is recorded truncated, with snaplen
// semantics: the record's captured length covers the first PcapMaxMessage
// bytes while its original length is the full 28+len(raw); the IPv4 and UDP
// length fields say 65535 and 65515, the most they can. tshark shows such a
// frame as "N bytes on wire, 65535 bytes captured" and warns that the ForCES
// header Length exceeds the datagram ("Bogus: ForCES Header length (N bytes)
// is wrong), should be (65507 bytes)").
type PcapWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	ipID uint16
	err  error
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

// WriteMessage records raw, the bytes of one message, sent at t by the CE
// (fromCE) or by the FE. raw is not retained.
func (p *PcapWriter) WriteMessage(raw []byte, fromCE bool, t time.Time) error {
	capLen := min(len(raw), PcapMaxMessage)
	ipLen := ipUDPHeaderLen + capLen

	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buf[:0]
	us := t.UnixMicro()
	b = binary.LittleEndian.AppendUint32(b, uint32(us/1e6))
	b = binary.LittleEndian.AppendUint32(b, uint32(us%1e6))
	b = binary.LittleEndian.AppendUint32(b, uint32(ipLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(ipUDPHeaderLen+len(raw)))

	src, dst, sport, dport := pcapFEAddr, pcapCEAddr, uint16(PcapFEPort), uint16(PcapCEPort)
	if fromCE {
		src, dst, sport, dport = dst, src, dport, sport
	}
	p.ipID++
	ip := len(b)
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(ipLen))
	b = binary.BigEndian.AppendUint16(b, p.ipID)
	b = append(b, 0x40, 0, 64, 17, 0, 0) // DF, TTL 64, UDP, checksum below
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	binary.BigEndian.PutUint16(b[ip+10:], ipChecksum(b[ip:ip+20]))
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint16(b, uint16(8+capLen))
	b = append(b, 0, 0) // no UDP checksum (allowed over IPv4)
	b = append(b, raw[:capLen]...)
	if cap(b) <= 1<<17 {
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

// Tap returns a Conn tap (see Conn.SetTap) that records every message through
// p. localIsCE says which end the Conn is: its sent messages come from the CE
// when true. Write errors are kept for Err.
func (p *PcapWriter) Tap(localIsCE bool) func(raw []byte, sent bool) {
	return func(raw []byte, sent bool) {
		_ = p.WriteMessage(raw, sent == localIsCE, time.Now())
	}
}

// Err returns the first write error, if any.
func (p *PcapWriter) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return ^uint16(s)
}
