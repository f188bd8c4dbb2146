//go:build linux

package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/forces/ife"
	"github.com/splitplane/splitplane/internal/netnstest"
)

// The inter-FE test mesh: this FE is FE 1, with links to FEs 2, 3 and 4.
var (
	macLink  = map[uint32]net.HardwareAddr{2: mac("02:00:00:01:00:02"), 3: mac("02:00:00:01:00:03"), 4: mac("02:00:00:01:00:04")} // ours on each link
	macPeerF = map[uint32]net.HardwareAddr{2: mac("02:00:00:02:00:01"), 3: mac("02:00:00:03:00:01"), 4: mac("02:00:00:04:00:01")} // the peers'
)

const (
	ifeSelf     = 1
	ifeRemoteFE = 3
	ifeKey      = 77 // NE nexthop key of the remote nexthop
	ifePort     = 9  // its egress port on FE 3
	ifeRemoteNH = 20 // this FE's nexthop id of it
	ifeLocalNH  = 1  // the local nexthop key 77 maps to on the receiving side
)

// ifeFixture is a datapath in a test namespace with veth ports: in (where
// routed packets arrive), out (a local egress port) and one link to each
// of FEs 2, 3 and 4.
type ifeFixture struct {
	d       *Datapath
	in, out int
	link    map[uint32]int // ifindex by peer FE
}

func newIFEFixture(t *testing.T, h *netlink.Handle) *ifeFixture {
	t.Helper()
	d := loadForTest(t, loadOptions{})
	f := &ifeFixture{d: d, link: map[uint32]int{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	add := func(name string) int {
		must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}))
		l, err := h.LinkByName(name)
		must(err)
		must(d.addTxPort(l.Attrs().Index))
		return l.Attrs().Index
	}
	f.in, f.out = add("spin"), add("spout")
	must(d.SetPortLink(f.in, macRouter, 1500))
	must(d.SetPortLink(f.out, macSrc1, 1500))
	must(d.SetLocalFE(ifeSelf))
	for _, fe := range []uint32{2, 3, 4} {
		f.link[fe] = add(fmt.Sprintf("spfe%d", fe))
		must(d.SetPortLink(f.link[fe], macLink[fe], 1500+IFEOverhead))
		must(d.SetInterFELink(f.link[fe], fe, macPeerF[fe]))
	}
	gw := netip.MustParseAddr("10.0.0.1")
	must(d.SetNexthop(ifeLocalNH, Nexthop{Ifindex: f.out, Gateway: gw, SrcMAC: macSrc1}))
	must(d.SetNeighbor(f.out, gw, macNeigh1))
	must(d.SetNexthop(2, Nexthop{Ifindex: f.out, Gateway: netip.MustParseAddr("10.0.0.2"), SrcMAC: macSrc1})) // no neighbour
	must(d.SetNexthopKey(ifeKey, ifeLocalNH))
	must(d.SetNexthopKey(78, 2))
	must(d.SetNexthopKey(79, 5)) // an empty nexthop slot
	must(d.SetRemoteNexthop(ifeRemoteNH, RemoteNexthop{FE: ifeRemoteFE, Key: ifeKey, Port: ifePort}))
	must(d.SetRoutes([]Route{
		{netip.MustParsePrefix("198.51.100.0/24"), ifeRemoteNH},
		{netip.MustParsePrefix("2001:db8:9::/48"), ifeRemoteNH},
		{netip.MustParsePrefix("203.0.113.0/24"), ifeLocalNH},
	}))
	return f
}

// runIn runs frame as if it arrived on port ifindex and returns the action
// and the frame as the program left it.
func runIn(tb testing.TB, d *Datapath, ifindex int, frame []byte) (uint32, []byte) {
	tb.Helper()
	opts := ebpf.RunOptions{
		Data:    bytes.Clone(frame),
		DataOut: make([]byte, len(frame)+256),
		Context: xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)},
	}
	ret, err := d.Program().Run(&opts)
	if err != nil {
		tb.Fatalf("prog.Run on ifindex %d: %v", ifindex, err)
	}
	return ret, opts.DataOut
}

// The flow hash of bpf/forward.h, for checking the metadatum.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x7feb352d
	h ^= h >> 15
	h *= 0x846ca68b
	h ^= h >> 16
	return h
}

func hashAdd(h, v uint32) uint32 { return mix32(h^v) + 0x9e3779b9 }

// le32 reads 4 bytes as the program's 32-bit loads do on a little-endian host.
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// flowHash is flow_hash4 or flow_hash6 of the IP packet in frame, for
// UDP without options or extension headers.
func flowHash(frame []byte) uint32 {
	ip := frame[14:]
	if ip[0]>>4 == 4 {
		h := hashAdd(0, le32(ip[12:]))
		h = hashAdd(h, le32(ip[16:]))
		if binary.BigEndian.Uint16(ip[6:])&0x3fff == 0 {
			h = hashAdd(h, le32(ip[20:]))
		}
		return hashAdd(h, uint32(ip[9]))
	}
	var h uint32
	for i := 8; i < 40; i += 4 {
		h = hashAdd(h, le32(ip[i:]))
	}
	h = hashAdd(h, le32(ip[40:]))
	return hashAdd(h, uint32(ip[6]))
}

// decodeIFE decodes out with forces/ife and checks its outer header and
// metadata; it returns the inner frame.
func decodeIFE(t *testing.T, out []byte, dst, src net.HardwareAddr, port, fe, key, hash uint32) []byte {
	t.Helper()
	h, meta, inner, err := ife.Decode(out, nil)
	if err != nil {
		t.Fatalf("ife.Decode: %v\n% x", err, out)
	}
	if !bytes.Equal(h.Dst[:], dst) || !bytes.Equal(h.Src[:], src) {
		t.Errorf("outer MACs %s -> %s, want %s -> %s", net.HardwareAddr(h.Src[:]), net.HardwareAddr(h.Dst[:]), src, dst)
	}
	want := []ife.Meta{ife.EgressPort(port), ife.EgressFE(fe), ife.NexthopKey(key), ife.FlowHash(hash)}
	if len(meta) != len(want) {
		t.Fatalf("metadata %v, want %v", meta, want)
	}
	for i := range want {
		if meta[i].Type != want[i].Type || !bytes.Equal(meta[i].Value, want[i].Value) {
			t.Errorf("metadatum %d: type %#x value % x, want type %#x value % x", i, meta[i].Type, meta[i].Value, want[i].Type, want[i].Value)
		}
	}
	if len(out) != len(inner)+IFEOverhead || ife.Overhead(meta) != IFEOverhead {
		t.Errorf("frame %d bytes, inner %d: overhead %d, want %d", len(out), len(inner), len(out)-len(inner), IFEOverhead)
	}
	return inner
}

func txOn(t *testing.T, d *Datapath) map[int]uint64 {
	t.Helper()
	m := map[int]uint64{}
	for ifindex, pc := range portCounters(t, d) {
		m[ifindex] = pc.TxPackets
	}
	return m
}

func TestIFEEncap(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		for _, tc := range []struct {
			name  string
			frame []byte
			v6    bool
		}{
			{"IPv4", udpFrame("198.51.100.7", 64), false},
			{"IPv6", udp6Frame("2001:db8:9::7", 64), true},
		} {
			in := bytes.Clone(tc.frame)
			before, txBefore := counters(t, f.d), txOn(t, f.d)
			ret, out := runIn(t, f.d, f.in, tc.frame)
			if ret != xdpRedirect {
				t.Fatalf("%s: returned %d, want XDP_REDIRECT; counters %s", tc.name, ret, fmtDelta(before, counters(t, f.d)))
			}
			out = out[:len(in)+IFEOverhead]
			inner := decodeIFE(t, out, macPeerF[3], macLink[3], ifePort, ifeRemoteFE, ifeKey, flowHash(in))
			// The inner frame is the routed packet: its MACs as they came,
			// TTL / hop limit one less, the IPv4 checksum valid.
			if tc.v6 {
				checkForwarded6(t, in, inner, in[0:6], in[6:12])
			} else {
				checkForwarded(t, in, inner, in[0:6], in[6:12])
			}
			want := map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(out)), "ife_encap": 1}
			if tc.v6 {
				want["forwarded_ipv6"] = 1
			}
			checkDelta(t, before, counters(t, f.d), want)
			if tx := txOn(t, f.d); tx[f.link[3]]-txBefore[f.link[3]] != 1 {
				t.Errorf("%s: tx on the link to FE 3 moved by %d, want 1", tc.name, tx[f.link[3]]-txBefore[f.link[3]])
			}
		}
		// Expired TTL: the kernel's, before any encapsulation.
		checkPassedOn(t, f, f.in, udpFrame("198.51.100.7", 1), "pass_ttl")
		// A 1500-byte packet fits a link of MTU 1500 + IFEOverhead, and
		// not one byte less.
		big := ipFrame(ipv4Header{ttl: 64, proto: 17, dst: netip.MustParseAddr("198.51.100.7")}, udpPayload(1500-28))
		if ret, _ := runIn(t, f.d, f.in, big); ret != xdpRedirect {
			t.Errorf("1500 bytes: returned %d, want XDP_REDIRECT", ret)
		}
		must(t, f.d.SetPortLink(f.link[3], macLink[3], 1500+IFEOverhead-1))
		checkPassedOn(t, f, f.in, big, "pass_mtu")
		// Encapsulation needs this FE's ID.
		f.d.ifeMu.Lock()
		f.d.ife.self = 0
		err := f.d.writeMesh()
		f.d.ifeMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		checkPassedOn(t, f, f.in, udpFrame("198.51.100.7", 64), "pass_ife_no_link")
	})
}

// checkPassedOn runs frame on port ifindex and checks that it went to the
// kernel unmodified, counted in rx and under reason.
func checkPassedOn(t *testing.T, f *ifeFixture, ifindex int, frame []byte, reason string) {
	t.Helper()
	before := counters(t, f.d)
	ret, out := runIn(t, f.d, ifindex, frame)
	if ret != xdpPass {
		t.Errorf("%s: returned %d, want XDP_PASS", reason, ret)
	}
	if !bytes.Equal(out[:len(frame)], frame) {
		t.Errorf("%s: frame modified:\n in % x\nout % x", reason, frame, out[:len(frame)])
	}
	checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, reason: 1})
}

// ifeFrame is inner encapsulated as FE from sends it to FE 1 on their link.
func ifeFrame(t *testing.T, from uint32, meta []ife.Meta, inner []byte) []byte {
	t.Helper()
	var h ife.Header
	copy(h.Dst[:], macLink[from])
	copy(h.Src[:], macPeerF[from])
	frame, err := ife.Encode(nil, h, meta, inner)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

func forFE(fe, key uint32) []ife.Meta {
	return []ife.Meta{ife.EgressPort(5), ife.EgressFE(fe), ife.NexthopKey(key), ife.FlowHash(0x1234)}
}

func TestIFEDecap(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		for _, tc := range []struct {
			name  string
			inner []byte
			v6    bool
		}{
			{"IPv4", udpFrame("203.0.113.9", 64), false},
			{"IPv4 to a remote route's prefix", udpFrame("198.51.100.9", 64), false},
			{"IPv6", udp6Frame("2001:db8:9::9", 17), true},
		} {
			frame := ifeFrame(t, 2, forFE(ifeSelf, ifeKey), tc.inner)
			before, txBefore := counters(t, f.d), txOn(t, f.d)
			ret, out := runIn(t, f.d, f.link[2], frame)
			if ret != xdpRedirect {
				t.Fatalf("%s: returned %d, want XDP_REDIRECT; counters %s", tc.name, ret, fmtDelta(before, counters(t, f.d)))
			}
			out = out[:len(tc.inner)]
			// The inner frame with the local nexthop's MACs, every other
			// byte as sent: no second TTL decrement.
			checkEthernet(t, tc.inner, out, macNeigh1, macSrc1)
			if !bytes.Equal(out[12:], tc.inner[12:]) {
				t.Errorf("%s: inner frame changed past the MACs:\n in % x\nout % x", tc.name, tc.inner[12:], out[12:])
			}
			want := map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(tc.inner)), "ife_decap": 1}
			if tc.v6 {
				want["forwarded_ipv6"] = 1
			}
			checkDelta(t, before, counters(t, f.d), want)
			if tx := txOn(t, f.d); tx[f.out]-txBefore[f.out] != 1 {
				t.Errorf("%s: tx on the egress port moved by %d, want 1", tc.name, tx[f.out]-txBefore[f.out])
			}
		}
		// Unknown key, nexthop without neighbour, empty nexthop: the inner
		// frame goes to the kernel, addressed to the link port.
		for key, reason := range map[uint32]string{1000: "pass_ife_no_nexthop", 78: "pass_no_neigh", 79: "pass_ife_no_nexthop"} {
			inner := udpFrame("203.0.113.9", 64)
			before := counters(t, f.d)
			ret, out := runIn(t, f.d, f.link[2], ifeFrame(t, 2, forFE(ifeSelf, key), inner))
			if ret != xdpPass {
				t.Errorf("key %d: returned %d, want XDP_PASS", key, ret)
			}
			want := bytes.Clone(inner)
			copy(want, macLink[2])
			if !bytes.Equal(out[:len(want)], want) {
				t.Errorf("key %d: passed % x, want the inner frame % x", key, out[:len(want)], want)
			}
			checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, reason: 1})
		}
	})
}

func TestIFETransit(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		frame := ifeFrame(t, 2, forFE(4, ifeKey), udpFrame("198.51.100.9", 64))
		before, txBefore := counters(t, f.d), txOn(t, f.d)
		ret, out := runIn(t, f.d, f.link[2], frame)
		if ret != xdpRedirect {
			t.Fatalf("returned %d, want XDP_REDIRECT; counters %s", ret, fmtDelta(before, counters(t, f.d)))
		}
		out = out[:len(frame)]
		checkEthernet(t, frame, out, macPeerF[4], macLink[4])
		if !bytes.Equal(out[12:], frame[12:]) {
			t.Errorf("frame changed past the outer MACs:\n in % x\nout % x", frame[12:], out[12:])
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "forwarded": 1, "forwarded_bytes": uint64(len(frame)), "ife_transit": 1})
		if tx := txOn(t, f.d); tx[f.link[4]]-txBefore[f.link[4]] != 1 {
			t.Errorf("tx on the link to FE 4 moved by %d, want 1", tx[f.link[4]]-txBefore[f.link[4]])
		}
		// No second detour: with the link to FE 4 down, dropped.
		if err := f.d.SetInterFELinkUp(4, false); err != nil {
			t.Fatal(err)
		}
		before = counters(t, f.d)
		if ret, _ := runIn(t, f.d, f.link[2], frame); ret != xdpDrop {
			t.Errorf("link down: returned %d, want XDP_DROP", ret)
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "drop_ife_no_link": 1})
		// To an FE without any link: dropped too.
		before = counters(t, f.d)
		if ret, _ := runIn(t, f.d, f.link[2], ifeFrame(t, 2, forFE(9, ifeKey), udpFrame("198.51.100.9", 64))); ret != xdpDrop {
			t.Errorf("FE 9: returned %d, want XDP_DROP", ret)
		}
		checkDelta(t, before, counters(t, f.d), map[string]uint64{"rx": 1, "drop_ife_no_link": 1})
	})
}

// udpFlow is a UDP packet to 198.51.100.7 from source port sport.
func udpFlow(sport uint16) []byte {
	p := udpPayload(18)
	binary.BigEndian.PutUint16(p[0:], sport)
	return ipFrame(ipv4Header{ttl: 64, proto: 17, dst: netip.MustParseAddr("198.51.100.7")}, p)
}

// pathOf sends the flow and returns the FE whose link it left by (0 if it
// did not leave), checking that it is addressed to FE 3.
func pathOf(t *testing.T, f *ifeFixture, frame []byte) uint32 {
	t.Helper()
	ret, out := runIn(t, f.d, f.in, frame)
	if ret != xdpRedirect {
		return 0
	}
	out = out[:len(frame)+IFEOverhead]
	_, meta, _, err := ife.Decode(out, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if fe, err := ife.One(meta, ife.TypeEgressFE); err != nil || fe != ifeRemoteFE {
		t.Errorf("egress FE %d (%v), want %d", fe, err, ifeRemoteFE)
	}
	for fe, m := range macPeerF {
		if bytes.Equal(out[0:6], m) && bytes.Equal(out[6:12], macLink[fe]) {
			return fe
		}
	}
	t.Fatalf("left with MACs %s -> %s: no link's", net.HardwareAddr(out[6:12]), net.HardwareAddr(out[0:6]))
	return 0
}

func TestIFESpill(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		const flows = 4000
		share := func() map[uint32]int {
			n := map[uint32]int{}
			for i := range flows {
				n[pathOf(t, f, udpFlow(uint16(10000+i)))]++
			}
			return n
		}
		if n := share(); n[3] != flows {
			t.Errorf("spill 0: paths %v, want all %d direct to FE 3", n, flows)
		}
		// 25%: binomial, sd = sqrt(4000 * 0.25 * 0.75) = 27; 150 is 5.5 sd.
		if err := f.d.SetSpill(3, 250); err != nil {
			t.Fatal(err)
		}
		before := counters(t, f.d)
		n := share()
		via := n[2] + n[4]
		if via < flows/4-150 || via > flows/4+150 || n[0] != 0 || n[1] != 0 {
			t.Errorf("spill 250: paths %v, want about %d via FEs 2 and 4", n, flows/4)
		}
		if n[2] < via/2-150 || n[4] < via/2-150 {
			t.Errorf("spill 250: intermediates %v not evenly used", n)
		}
		if got := counters(t, f.d)["ife_via"] - before["ife_via"]; got != uint64(via) {
			t.Errorf("ife_via moved by %d, want %d", got, via)
		}
		// A flow keeps its path.
		for i := range 200 {
			frame := udpFlow(uint16(20000 + i))
			first := pathOf(t, f, frame)
			for range 3 {
				if p := pathOf(t, f, frame); p != first {
					t.Fatalf("flow %d went via FE %d, then via FE %d", i, first, p)
				}
			}
		}
		if err := f.d.SetSpill(3, 1000); err != nil {
			t.Fatal(err)
		}
		demBefore := demand(t, f.d)
		if n := share(); n[3] != 0 || n[2]+n[4] != flows {
			t.Errorf("spill 1000: paths %v, want all via FEs 2 and 4", n)
		}
		// The demand counts what is sent for FE 3, whichever way it goes,
		// and nothing for the intermediates.
		dem := demand(t, f.d)
		if got := dem[3].Packets - demBefore[3].Packets; got != flows {
			t.Errorf("demand towards FE 3 moved by %d packets, want %d", got, flows)
		}
		if got := dem[3].Bytes - demBefore[3].Bytes; got != flows*uint64(len(udpFlow(1))+IFEOverhead) {
			t.Errorf("demand towards FE 3 moved by %d bytes, want %d", got, flows*(len(udpFlow(1))+IFEOverhead))
		}
		for _, fe := range []uint32{2, 4} {
			if dem[fe] != demBefore[fe] {
				t.Errorf("demand towards intermediate FE %d moved: %+v -> %+v", fe, demBefore[fe], dem[fe])
			}
		}
	})
}

func demand(t *testing.T, d *Datapath) map[uint32]FEDemand {
	t.Helper()
	dem, err := d.InterFEDemand()
	if err != nil {
		t.Fatal(err)
	}
	if len(dem) != 3 {
		t.Fatalf("demand for %d peers (%v), want FEs 2, 3 and 4", len(dem), dem)
	}
	return dem
}

func TestIFELinkDown(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		if err := f.d.SetInterFELinkUp(3, false); err != nil {
			t.Fatal(err)
		}
		n := map[uint32]int{}
		for i := range 1000 {
			n[pathOf(t, f, udpFlow(uint16(30000+i)))]++
		}
		if n[3] != 0 || n[0] != 0 || n[2] < 400 || n[4] < 400 {
			t.Errorf("link to FE 3 down: paths %v, want all via FEs 2 and 4, about evenly", n)
		}
		// FE 4 down too: all via FE 2.
		if err := f.d.SetInterFELinkUp(4, false); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if p := pathOf(t, f, udpFlow(uint16(30000+i))); p != 2 {
				t.Fatalf("flow %d via %d, want 2", i, p)
			}
		}
		// No way at all: the kernel's.
		if err := f.d.DeleteInterFELink(2); err != nil {
			t.Fatal(err)
		}
		checkPassedOn(t, f, f.in, udpFlow(1), "pass_ife_no_link")
		// Back up: direct again.
		if err := f.d.SetInterFELinkUp(3, true); err != nil {
			t.Fatal(err)
		}
		if p := pathOf(t, f, udpFlow(1)); p != 3 {
			t.Errorf("link back up: via %d, want 3", p)
		}
	})
}

func TestIFEMalformed(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		f := newIFEFixture(t, h)
		inner := udpFrame("203.0.113.9", 64)
		good := ifeFrame(t, 2, forFE(ifeSelf, ifeKey), inner)
		set16 := func(b []byte, off int, v uint16) []byte {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint16(b[off:], v)
			return b
		}
		withMeta := func(meta ...ife.Meta) []byte { return ifeFrame(t, 2, meta, inner) }
		for name, frame := range map[string][]byte{
			"short":                  good[:15],
			"no inner frame":         good[:14+34+10],
			"metalen 1":              set16(good, 14, 1),
			"metalen past the frame": set16(good, 14, uint16(len(good))),
			"metalen over 256":       set16(good, 14, 300),
			"TLV length 3":           set16(good, 18, 3),
			"TLV past the metadata":  set16(good, 18, 40),
			"egress FE of 6 bytes":   set16(good, 26, 6),
			"no egress port":         withMeta(ife.EgressFE(ifeSelf), ife.NexthopKey(ifeKey)),
			"no egress FE":           withMeta(ife.EgressPort(5), ife.NexthopKey(ifeKey)),
			"no nexthop key":         withMeta(ife.EgressPort(5), ife.EgressFE(ifeSelf)),
			"egress FE twice":        withMeta(ife.EgressPort(5), ife.EgressFE(ifeSelf), ife.EgressFE(2), ife.NexthopKey(ifeKey)),
			"egress FE 0":            withMeta(ife.EgressPort(5), ife.EgressFE(0), ife.NexthopKey(ifeKey)),
			"egress FE 64":           withMeta(ife.EgressPort(5), ife.EgressFE(64), ife.NexthopKey(ifeKey)),
			"9 TLVs": withMeta(ife.EgressPort(5), ife.EgressFE(ifeSelf), ife.NexthopKey(ifeKey),
				ife.IngressFE(2), ife.IngressFE(2), ife.IngressFE(2), ife.IngressFE(2), ife.IngressFE(2), ife.IngressFE(2)),
			"inner not IP": ifeFrame(t, 2, forFE(ifeSelf, ifeKey), ethFrame(macRouter, macPeer, 0x0806, make([]byte, 28))),
		} {
			before := counters(t, f.d)
			if ret, _ := runIn(t, f.d, f.link[2], frame); ret != xdpDrop {
				t.Errorf("%s: returned %d, want XDP_DROP", name, ret)
			}
			if d := counters(t, f.d); d["drop_ife_malformed"]-before["drop_ife_malformed"] != 1 || d["rx"]-before["rx"] != 1 {
				t.Errorf("%s: counters %s, want rx and drop_ife_malformed", name, fmtDelta(before, d))
			}
		}
		// Unknown TLVs are passed over, up to eight in all.
		frame := withMeta(ife.Meta{Type: 0x7777, Value: []byte{1, 2, 3}}, ife.EgressPort(5), ife.IngressFE(2),
			ife.EgressFE(ifeSelf), ife.Uint32(ife.TypeSKBMark, 1), ife.NexthopKey(ifeKey), ife.FlowHash(1), ife.IngressFE(2))
		if ret, _ := runIn(t, f.d, f.link[2], frame); ret != xdpRedirect {
			t.Errorf("with unknown TLVs: returned %d, want XDP_REDIRECT", ret)
		}
		// Not an inter-FE link: no IFE frame, the kernel's.
		checkPassedOn(t, f, f.in, good, "pass_not_ipv4")
		// For another MAC, or multicast: the kernel's, as for any frame.
		other := bytes.Clone(good)
		copy(other, macPeer)
		checkPassedOn(t, f, f.link[2], other, "pass_other_host")
		bcast := bytes.Clone(good)
		copy(bcast, macBcast)
		checkPassedOn(t, f, f.link[2], bcast, "pass_not_unicast")
		// Deleted, the link is no link.
		if err := f.d.DeleteInterFELink(2); err != nil {
			t.Fatal(err)
		}
		checkPassedOn(t, f, f.link[2], good, "pass_not_ipv4")
	})
}

func TestIFEValidation(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		d := loadForTest(t, loadOptions{})
		must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "spfe"}, PeerName: "spfep"}))
		l, err := h.LinkByName("spfe")
		must(t, err)
		port := l.Attrs().Index
		m := mac("02:00:00:00:00:09")
		if err := d.SetInterFELink(port, 2, m); !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte("local FE not set")) {
			t.Errorf("link before SetLocalFE: %v", err)
		}
		for _, id := range []uint32{0, MaxFEs} {
			if err := d.SetLocalFE(id); !errors.Is(err, ErrInvalid) {
				t.Errorf("SetLocalFE(%d): %v, want ErrInvalid", id, err)
			}
		}
		must(t, d.SetLocalFE(1))
		if err := d.SetInterFELink(port, 2, m); !errors.Is(err, ErrNotAttached) {
			t.Errorf("link on a port not attached: %v, want ErrNotAttached", err)
		}
		must(t, d.addTxPort(port))
		for name, err := range map[string]error{
			"peer is self":      d.SetInterFELink(port, 1, m),
			"peer 64":           d.SetInterFELink(port, 64, m),
			"short MAC":         d.SetInterFELink(port, 2, m[:4]),
			"remote via self":   d.SetRemoteNexthop(3, RemoteNexthop{FE: 1, Key: 1}),
			"remote FE 0":       d.SetRemoteNexthop(3, RemoteNexthop{FE: 0, Key: 1}),
			"remote key":        d.SetRemoteNexthop(3, RemoteNexthop{FE: 2, Key: MaxNexthopKeys}),
			"remote id":         d.SetRemoteNexthop(MaxNexthops, RemoteNexthop{FE: 2}),
			"nexthop key":       d.SetNexthopKey(MaxNexthopKeys, 1),
			"nexthop key local": d.SetNexthopKey(1, MaxNexthops),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		must(t, d.SetInterFELink(port, 2, m))
		if err := d.SetLocalFE(2); !errors.Is(err, ErrInvalid) {
			t.Errorf("local FE with a link to itself: %v, want ErrInvalid", err)
		}
		for name, err := range map[string]error{
			"spill 1001": d.SetSpill(2, 1001),
			"spill -1":   d.SetSpill(2, -1),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		for name, err := range map[string]error{
			"spill to no link":  d.SetSpill(3, 10),
			"up of no link":     d.SetInterFELinkUp(3, true),
			"delete no link":    d.DeleteInterFELink(3),
			"delete no key":     d.DeleteNexthopKey(5),
			"delete no nexthop": d.DeleteNexthop(9),
		} {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", name, err)
			}
		}
		must(t, d.SetSpill(2, 500))
		must(t, d.SetInterFELinkUp(2, false))
		if got := d.InterFELinks(); len(got) != 1 || got[2].Ifindex != port || got[2].Up || got[2].SpillPermille != 500 || !bytes.Equal(got[2].PeerMAC, m) {
			t.Errorf("InterFELinks() = %+v", got)
		}
		must(t, d.SetRemoteNexthop(3, RemoteNexthop{FE: 2, Key: 4, Port: 5}))
		must(t, d.DeleteNexthop(3))
		must(t, d.SetNexthopKey(5, 3))
		must(t, d.DeleteNexthopKey(5))
		must(t, d.DeleteInterFELink(2))
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
