//go:build linux

package datapath

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestPolicerClassRates: each class is policed at its own rate and burst,
// so that one class's rate limits that class and no other: with ARP/ND at
// a burst of 2, TTL/options at 5, the router's own traffic not policed and
// the rest at 3, each class passes exactly its burst (ARP and NDP sharing
// theirs), whatever the others have used up.
func TestPolicerClassRates(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	var rates PoliceRates
	rates[PoliceARPND] = PoliceRate{PPS: 1, Burst: 2}
	rates[PoliceTTLOptions] = PoliceRate{PPS: 1, Burst: 5}
	rates[PoliceOther] = PoliceRate{PPS: 1, Burst: 3}
	if err := d.SetPolicers(rates); err != nil {
		t.Fatal(err)
	}
	arp := ethFrame(macBcast, macPeer, 0x0806, append([]byte{0, 1, 8, 0, 6, 4, 0, 1}, make([]byte, 20)...))
	ttl4 := udpFrame("198.51.100.77", 1)
	noRoute := udp6Frame("2400:cb00::1", 64)
	udp := ipFrame(ipv4Header{ttl: 64, proto: 17, src: otherPeer, dst: local4}, udpPayload(8))
	// At one packet per second the buckets gain a token per second: the
	// packets below take microseconds, so the counts are exact.
	defer pinCPU(t, 0)()
	start := time.Now()

	// ARP/ND: its burst of 2, then dropped.
	checkPassed(t, d, arp, "pass_not_ipv4")
	checkPassed(t, d, arp, "pass_not_ipv4")
	if moved := runWant(t, d, arp, xdpDrop); !maps.Equal(moved, Counters{"rx": 1, "pass_not_ipv4": 1, "drop_policed_arp_nd": 1}) {
		t.Errorf("ARP over its burst of 2 moved %v", moved)
	}
	// TTL expiry still has its own 5, more than ARP's 2.
	for range 5 {
		checkPassed(t, d, ttl4, "pass_ttl")
	}
	if moved := runWant(t, d, ttl4, xdpDrop); !maps.Equal(moved, Counters{"rx": 1, "pass_ttl": 1, "drop_policed_ttl_options": 1}) {
		t.Errorf("TTL expiry over its burst of 5 moved %v", moved)
	}
	// The rest: 3.
	for range 3 {
		checkPassed(t, d, noRoute, "pass_no_route")
	}
	if moved := runWant(t, d, noRoute, xdpDrop); !maps.Equal(moved, Counters{"rx": 1, "pass_no_route": 1, "drop_policed_other": 1}) {
		t.Errorf("no route over its burst of 3 moved %v", moved)
	}
	// The router's own traffic: not policed at all.
	for range 50 {
		checkPassed(t, d, udp, "pass_local")
	}
	// ARP is still limited: the other classes gave it nothing.
	if ret, _ := run(t, d, arp); ret != xdpDrop {
		t.Errorf("ARP after the other classes: returned %d, want XDP_DROP", ret)
	}
	if el := time.Since(start); el >= time.Second {
		t.Fatalf("the sequence took %v, more than a token's interval: counts are not exact", el)
	}

	// Changing one class's rate refills every bucket and leaves the other
	// rates as given.
	rates[PoliceToRouter] = PoliceRate{PPS: 1, Burst: 1}
	if err := d.SetPolicers(rates); err != nil {
		t.Fatal(err)
	}
	checkPassed(t, d, udp, "pass_local")
	checkOne(t, d, udp, xdpDrop, "drop_policed")
	checkPassed(t, d, arp, "pass_not_ipv4")
	checkPassed(t, d, arp, "pass_not_ipv4")
	checkPassed(t, d, ttl4, "pass_ttl")
}

// SetPolicers refuses a bad rate or burst naming its class, and changes
// nothing then.
func TestSetPolicersValidation(t *testing.T) {
	var d Datapath
	for _, tc := range []struct {
		class   PoliceClass
		rate    PoliceRate
		mention string
	}{
		{PoliceARPND, PoliceRate{PPS: 100}, "arp_nd: burst 0"},
		{PoliceTTLOptions, PoliceRate{PPS: 100, Burst: MaxPoliceBurst + 1}, "ttl_options: burst 1073741825"},
		{PoliceOther, PoliceRate{PPS: MaxPoliceRate + 1, Burst: 1}, "other: rate 1000000001"},
		{PoliceToRouter, PoliceRate{PPS: MaxPoliceRate + 1, Burst: 1}, "to_router: rate 1000000001"},
	} {
		var r PoliceRates
		r[tc.class] = tc.rate
		if err := d.SetPolicers(r); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s %+v: %v, want an error mentioning %q", tc.class, tc.rate, err, tc.mention)
		}
	}
	if got := PoliceClass(7).String(); got != "police class 7" {
		t.Errorf("PoliceClass(7) = %q", got)
	}
}

// A packet of a learned control flow whose TCP checksum does not verify is
// passed unsteered and counted on that flow's rule (and in
// pass_steer_bad_csum), not on another flow's.
func TestSteerBadChecksumPerFlow(t *testing.T) {
	f := newFixture6(t, loadOptions{})
	d := f.d
	other := ControlFlow{Src: netip.AddrPortFrom(bgpPeer, 179), Dst: netip.AddrPortFrom(local4, 40002)}
	for _, fl := range []ControlFlow{flow4, other, flow6} {
		if err := d.AddControlFlow(fl); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetControlCPU(0); err != nil {
		t.Fatal(err)
	}
	bad := func(fl ControlFlow) []byte {
		seg := withTCPChecksum(fl.Src.Addr(), fl.Dst.Addr(), tcpSegment(fl.Src.Port(), fl.Dst.Port()))
		seg[18] ^= 0x10 // the urgent pointer, after the checksum was made
		if fl.Src.Addr().Is4() {
			return ipFrame(ipv4Header{ttl: 64, proto: 6, src: fl.Src.Addr(), dst: fl.Dst.Addr()}, seg)
		}
		return ip6Frame(ipv6Header{nextHeader: 6, hopLimit: 64, payloadLen: -1, src: fl.Src.Addr(), dst: fl.Dst.Addr()}, seg)
	}
	for range 3 {
		checkPassed(t, d, bad(flow4), "pass_steer_bad_csum")
	}
	checkOne(t, d, tcpFrame(flow4.Src, flow4.Dst, 64), xdpRedirect, "to_control_cpu")
	checkOne(t, d, tcpFrame(other.Src, other.Dst, 64), xdpRedirect, "to_control_cpu")
	checkPassed(t, d, bad(flow6), "pass_steer_bad_csum")
	_, counts, err := d.ControlFlows()
	if err != nil {
		t.Fatal(err)
	}
	for fl, want := range map[ControlFlow]FlowCounts{
		flow4: {Packets: 4, BadChecksum: 3},
		other: {Packets: 1},
		flow6: {Packets: 1, BadChecksum: 1},
	} {
		if counts[fl] != want {
			t.Errorf("%s: %+v, want %+v", fl, counts[fl], want)
		}
	}
	if c := counters(t, d); c["pass_steer_bad_csum"] != 4 {
		t.Errorf("pass_steer_bad_csum %d, want 4", c["pass_steer_bad_csum"])
	}
}
