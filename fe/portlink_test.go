package fe

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
)

// portLinkRecorder is the fake datapath with SetPortLink, which records
// what it was told.
type portLinkRecorder struct {
	*fakeDatapath
	mu  sync.Mutex
	got []string
}

func (r *portLinkRecorder) SetPortLink(ifindex int, mac net.HardwareAddr, mtu int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%d %s %d", ifindex, mac, mtu))
	return nil
}

// TestLinkUpdateSetsPortLink checks that a port's MAC and MTU reach the
// datapath when the link changes (the fast path checks frames and packets
// against them), and that other links do not.
func TestLinkUpdateSetsPortLink(t *testing.T) {
	rec := &portLinkRecorder{fakeDatapath: newFake()}
	a, err := New(Config{Ports: []string{"unused0"}}, slog.New(slog.DiscardHandler),
		WithDatapath(rec, func(netip.Addr) int { return 7 }), WithPort("p7", 7))
	if err != nil {
		t.Fatal(err)
	}
	a.prog.dp = rec
	stop := a.startLoop()
	defer stop()
	mac := net.HardwareAddr{2, 0, 0, 0, 7, 1}
	link := func(ifindex, mtu int) netlink.LinkUpdate {
		return netlink.LinkUpdate{Link: &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{
			Index: ifindex, MTU: mtu, HardwareAddr: mac, OperState: netlink.OperUp}}}
	}
	a.linkUpdate(link(7, 1280))
	a.linkUpdate(link(8, 1400)) // not a port
	a.linkUpdate(link(7, 65536))
	want := []string{"7 02:00:00:00:07:01 1280", "7 02:00:00:00:07:01 0"}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.got, want) {
		t.Errorf("SetPortLink calls %q, want %q", rec.got, want)
	}
}
