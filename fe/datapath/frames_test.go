//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// --- frame building (the test frames and the helpers that run them) ----

var (
	macPeer     = mac("02:00:00:00:aa:01") // sender of the test frames
	macRouter   = mac("02:00:00:00:aa:02") // the router port they arrive on
	macSrc1     = mac("02:00:00:00:01:01") // router MACs on the egress side
	macSrc2     = mac("02:00:00:00:02:01")
	macSrc3     = mac("02:00:00:00:03:01")
	macNeigh1   = mac("02:00:00:00:01:02") // neighbour MACs
	macNeigh2   = mac("02:00:00:00:02:02")
	macNeigh3   = mac("02:00:00:00:03:02")
	macNeigh6   = mac("02:00:00:00:06:02")
	macBcast    = mac("ff:ff:ff:ff:ff:ff")
	testSrcAddr = netip.MustParseAddr("192.0.2.100")
)

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err) // test constants only
	}
	return m
}

// ipv4Header describes the IPv4 header of a test frame. Zero values give a
// well-formed header: version 4, ihl 5, tot_len = header + payload, valid
// checksum.
type ipv4Header struct {
	version, ihl uint8 // 0 = 4 and 5
	tos          uint8
	id, fragOff  uint16
	ttl, proto   uint8
	src, dst     netip.Addr // zero src = testSrcAddr
}

// ethFrame returns an Ethernet frame with the given ethertype and payload.
func ethFrame(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, 0, 14+len(payload))
	f = append(f, dst...)
	f = append(f, src...)
	f = binary.BigEndian.AppendUint16(f, etherType)
	return append(f, payload...)
}

// ipv4Packet returns the IPv4 header h followed by payload.
func ipv4Packet(h ipv4Header, payload []byte) []byte {
	version, ihl := h.version, h.ihl
	if version == 0 {
		version = 4
	}
	if ihl == 0 {
		ihl = 5
	}
	hlen := int(ihl) * 4
	if hlen < 20 {
		hlen = 20 // a bad ihl still gets a full fixed header
	}
	src, dst := h.src, h.dst
	if !src.IsValid() {
		src = testSrcAddr
	}
	p := make([]byte, hlen, hlen+len(payload))
	p[0] = version<<4 | ihl
	p[1] = h.tos
	binary.BigEndian.PutUint16(p[2:], uint16(hlen+len(payload)))
	binary.BigEndian.PutUint16(p[4:], h.id)
	binary.BigEndian.PutUint16(p[6:], h.fragOff)
	p[8] = h.ttl
	p[9] = h.proto
	s, d := src.As4(), dst.As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	for i := 20; i < hlen; i++ {
		p[i] = 1 // IP option NOP
	}
	binary.BigEndian.PutUint16(p[10:], ^onesSum(p[:hlen]))
	return append(p, payload...)
}

// withTotLen returns a copy of the IPv4 frame with tot_len set to n and the
// header checksum made valid again.
func withTotLen(frame []byte, n int) []byte {
	f := bytes.Clone(frame)
	ip := f[14:34]
	binary.BigEndian.PutUint16(ip[2:], uint16(n))
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], ^onesSum(ip))
	return f
}

// onesSum is the folded 16-bit ones' complement sum of b (RFC 1071).
func onesSum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

func udpPayload(n int) []byte {
	p := make([]byte, 8+n)
	binary.BigEndian.PutUint16(p[0:], 40000) // sport
	binary.BigEndian.PutUint16(p[2:], 53)    // dport
	binary.BigEndian.PutUint16(p[4:], uint16(8+n))
	for i := range n {
		p[8+i] = byte(i * 7)
	}
	return p
}

func icmpEcho(n int) []byte {
	p := make([]byte, 8+n)
	p[0] = 8 // echo request
	binary.BigEndian.PutUint16(p[4:], 0x1234)
	binary.BigEndian.PutUint16(p[6:], 1)
	for i := range n {
		p[8+i] = byte(0xa0 + i)
	}
	binary.BigEndian.PutUint16(p[2:], ^onesSum(p))
	return p
}

// ipFrame is an IPv4 frame from the peer to the router.
func ipFrame(h ipv4Header, payload []byte) []byte {
	return ethFrame(macRouter, macPeer, 0x0800, ipv4Packet(h, payload))
}

func udpFrame(dst string, ttl uint8) []byte {
	return ipFrame(ipv4Header{ttl: ttl, proto: 17, dst: netip.MustParseAddr(dst)}, udpPayload(18))
}

// --- running the program ----------------------------------------------

func run(tb testing.TB, d *Datapath, frame []byte) (uint32, []byte) {
	tb.Helper()
	out := make([]byte, len(frame)+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: out}
	ret, err := d.Program().Run(&opts)
	if err != nil {
		tb.Fatalf("prog.Run: %v", err)
	}
	return ret, opts.DataOut
}

func counters(tb testing.TB, d *Datapath) Counters {
	tb.Helper()
	c, err := d.Counters()
	if err != nil {
		tb.Fatalf("counters: %v", err)
	}
	return c
}

// checkDelta fails unless the counters moved by exactly want between before
// and after (names not in want must not move).
func checkDelta(tb testing.TB, before, after Counters, want map[string]uint64) {
	tb.Helper()
	for _, name := range CounterNames() {
		if got := after[name] - before[name]; got != want[name] {
			tb.Errorf("counter %s moved by %d, want %d", name, got, want[name])
		}
	}
}
