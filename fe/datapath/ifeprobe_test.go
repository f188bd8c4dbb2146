//go:build linux

package datapath

import (
	"bytes"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/forces/ife"
	"github.com/splitplane/splitplane/internal/netnstest"
)

const xdpTx = 3 // enum xdp_action

// probeFrame is a probe as FE from sends it to FE 1 on their link.
func probeFrame(t *testing.T, from uint32, p ife.Probe) []byte {
	t.Helper()
	var h ife.Header
	copy(h.Dst[:], macLink[from])
	copy(h.Src[:], macPeerF[from])
	frame, err := ife.EncodeProbe(nil, h, p)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// TestIFEProbe: the datapath answers a probe request on an inter-FE link
// itself (XDP_TX, MACs swapped, its FE ID and the reply flag written, the
// rest echoed) and passes a probe reply to the kernel, unpoliced.
func TestIFEProbe(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		req := ife.Probe{Sender: 2, Seq: 77, Time: 0x0102030405060708}
		before := counters(t, f.d)
		ret, out := runIn(t, f.d, f.link[2], probeFrame(t, 2, req))
		if ret != xdpTx {
			t.Fatalf("request: returned %d, want XDP_TX; counters %s", ret, fmtDelta(before, counters(t, f.d)))
		}
		hdr, got, err := ife.DecodeProbe(out[:ife.ProbeFrameLen])
		if err != nil {
			t.Fatalf("answer does not decode: %v\n% x", err, out[:ife.ProbeFrameLen])
		}
		want := req
		want.Responder, want.Reply = ifeSelf, true
		if got != want {
			t.Errorf("answer %+v, want %+v", got, want)
		}
		if !bytes.Equal(hdr.Dst[:], macPeerF[2]) || !bytes.Equal(hdr.Src[:], macLink[2]) {
			t.Errorf("answer from %x to %x, want from %s to %s", hdr.Src, hdr.Dst, macLink[2], macPeerF[2])
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "ife_probe_reply": 1})

		// A reply goes to the kernel unchanged, even with every class of
		// the slow path policed to nothing.
		must(t, f.d.SetPolicer(1, 1))
		reply := probeFrame(t, 3, ife.Probe{Sender: 1, Responder: 3, Reply: true, Seq: 5})
		for range 3 {
			checkPassedOn(t, f, f.link[3], reply, "ife_probe_rx")
		}
		must(t, f.d.SetPolicer(0, 0))

		// A probe for another MAC, or on a port that is no inter-FE link,
		// is not answered.
		other := probeFrame(t, 2, req)
		other[5] ^= 0x40
		checkPassedOn(t, f, f.link[2], other, "pass_other_host")
		checkPassedOn(t, f, f.in, probeFrame(t, 2, req), "pass_not_ipv4")

		// A probe TLV of the wrong length, or behind another TLV, is no
		// probe: the frame is parsed as any IFE frame, and lacks the
		// egress port.
		bad := probeFrame(t, 2, req)
		bad[19]-- // TLV length 27
		checkDroppedMalformed(t, f, f.link[2], bad)
		var hh ife.Header
		copy(hh.Dst[:], macLink[2])
		copy(hh.Src[:], macPeerF[2])
		second, err := ife.Encode(nil, hh, []ife.Meta{ife.FlowHash(1), req.Meta()}, make([]byte, 14))
		must(t, err)
		checkDroppedMalformed(t, f, f.link[2], second)
		// Truncated: one byte short of the inner frame.
		checkDroppedMalformed(t, f, f.link[2], probeFrame(t, 2, req)[:ife.ProbeFrameLen-1])

		// Without a local FE ID there is no one to answer as.
		f.d.ifeMu.Lock()
		f.d.ife.self = 0
		err = f.d.writeMesh()
		f.d.ifeMu.Unlock()
		must(t, err)
		before = counters(t, f.d)
		if ret, _ := runIn(t, f.d, f.link[2], probeFrame(t, 2, req)); ret != xdpDrop {
			t.Errorf("no local FE: returned %d, want XDP_DROP", ret)
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "drop_ife_no_link": 1})
	})
}

func checkDroppedMalformed(t *testing.T, f *ifeFixture, ifindex int, frame []byte) {
	t.Helper()
	before := counters(t, f.d)
	if ret, _ := runIn(t, f.d, ifindex, frame); ret != xdpDrop {
		t.Errorf("returned %d, want XDP_DROP", ret)
	}
	checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "drop_ife_malformed": 1})
}
