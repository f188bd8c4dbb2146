//go:build linux

package gen

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// SetPayload sizes the generator's frames: lengths and checksum right, the
// frame as long as the payload needs (at least FrameLen), and the same
// bytes Frame builds.
func TestSetPayload(t *testing.T) {
	g := loadForTest(t)
	h := Header{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.1"), SrcPort: 1234, DstPort: 9, TTL: 64,
	}
	dst := netip.MustParseAddr("198.51.100.7")
	if err := g.SetTraffic(h, []netip.Addr{dst}); err != nil {
		t.Fatal(err)
	}
	for _, payload := range []int{0, 18, 200, 1400, MaxPayload} {
		if err := g.SetPayload(payload); err != nil {
			t.Fatal(err)
		}
		if len(g.frame) != FrameLenFor(payload) {
			t.Errorf("payload %d: frame of %d bytes, want %d", payload, len(g.frame), FrameLenFor(payload))
		}
		out := make([]byte, len(g.frame))
		in := bytes.Repeat([]byte{0xee}, len(g.frame))
		copy(in[HeaderLen:], make([]byte, len(in)-HeaderLen)) // the payload Send starts from
		ret, err := g.objs.XdpGen.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpTX {
			t.Fatalf("payload %d: returned %d, want XDP_TX", payload, ret)
		}
		ip := out[14:34]
		if got := int(binary.BigEndian.Uint16(ip[2:])); got != 28+payload {
			t.Errorf("payload %d: IPv4 total length %d", payload, got)
		}
		if got := int(binary.BigEndian.Uint16(out[38:])); got != 8+payload {
			t.Errorf("payload %d: UDP length %d", payload, got)
		}
		if Checksum(ip) != 0 {
			t.Errorf("payload %d: IPv4 checksum does not verify", payload)
		}
		if want := Frame(h, dst, payload); !bytes.Equal(out, want) {
			t.Errorf("payload %d: generated\n% x\nFrame builds\n% x", payload, out[:HeaderLen], want[:HeaderLen])
		}
	}
	for _, bad := range []int{-1, MaxPayload + 1} {
		if err := g.SetPayload(bad); err == nil {
			t.Errorf("SetPayload(%d) accepted", bad)
		}
	}
}

func TestBareProgram(t *testing.T) {
	g := loadForTest(t)
	if g.BareProgram() != g.objs.XdpRedirectBare {
		t.Error("BareProgram is not xdp_redirect_bare")
	}
}
