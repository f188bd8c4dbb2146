package fe

import "testing"

func TestVethLostRedirects(t *testing.T) {
	if n, ok := xdpXmit(map[string]uint64{"rx_queue_0_xdp_packets": 9, "tx_queue_0_xdp_xmit": 3, "tx_queue_1_xdp_xmit": 4, "tx_queue_0_xdp_xmit_errors": 5}); !ok || n != 7 {
		t.Errorf("xdpXmit = %d, %v; want 7 (queues 0 and 1, not the errors)", n, ok)
	}
	if _, ok := xdpXmit(map[string]uint64{"rx_packets": 1}); ok {
		t.Error("xdpXmit found xdp_xmit in a device without it")
	}
	p := &vethPort{}
	for i, c := range []struct {
		tx, xmit, lost uint64
	}{
		{100, 50, 0}, // priming
		{110, 60, 0}, // every frame delivered
		{130, 60, 20},
		{140, 75, 0}, // more delivered than sent meanwhile (other senders): none lost
		{150, 76, 9},
		{10, 0, 0}, // counters reset (datapath reloaded): priming again
		{15, 1, 4},
	} {
		if got := p.check(c.tx, c.xmit); got != c.lost {
			t.Errorf("check %d (tx %d, xmit %d) = %d lost, want %d", i, c.tx, c.xmit, got, c.lost)
		}
	}
}
