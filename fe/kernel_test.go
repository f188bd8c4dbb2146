package fe

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/internal/netnstest"
	"github.com/splitplane/splitplane/internal/prefix"
)

func kernelRoutes(t *testing.T, h *netlink.Handle) map[string]string {
	t.Helper()
	rs, err := h.RouteListFiltered(unix.AF_UNSPEC, &netlink.Route{Protocol: kernelProto}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[r.Dst.String()] = r.Gw.String()
	}
	return out
}

// Gateways on kernelTestLink's subnets, and a prefix to route via them.
var (
	kgw1, kgw2   = ip4(netip.MustParseAddr("10.9.0.2")), ip4(netip.MustParseAddr("10.9.0.3"))
	kgw6a, kgw6b = netip.MustParseAddr("fd00:9::2"), netip.MustParseAddr("fd00:9::3")
	kp           = prefix.FromV4(netip.MustParsePrefix("198.51.100.0/24"))
)

// kernelTestLink adds a veth on 10.9.0.0/24 and fd00:9::/64, for gateways.
func kernelTestLink(t *testing.T, h *netlink.Handle) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "k0"}, PeerName: "k1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	l, _ := h.LinkByName("k0")
	h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 9, 0, 1), Mask: net.CIDRMask(24, 32)}})
	h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("fd00:9::1"), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD})
	h.LinkSetUp(l)
}

// The kernel copy follows the mode, replaces, removes, and a new FE sweeps
// what an old one left.
func TestKernelFIB(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		kernelTestLink(t, h)

		gw1, gw2, p := kgw1, kgw2, kp
		def := prefix.FromV4(netip.MustParsePrefix("0.0.0.0/0"))

		k := newKernelFIB(KernelRoutesDefault)
		defer k.close()
		k.sync(p, gw1)
		k.sync(def, gw1)
		k.flush()
		if got := kernelRoutes(t, h); len(got) != 1 || got["0.0.0.0/0"] != "10.9.0.2" {
			t.Fatalf("mode default: kernel has %v, want only the default", got)
		}

		k = newKernelFIB(KernelRoutesAll)
		defer k.close()
		k.sync(p, gw1)
		k.sync(p, gw2)
		k.flush()
		if got := kernelRoutes(t, h); got["198.51.100.0/24"] != "10.9.0.3" {
			t.Fatalf("mode all: kernel has %v, want 198.51.100.0/24 via 10.9.0.3", got)
		}
		k.sync(p, 0)
		k.flush()
		if _, ok := kernelRoutes(t, h)["198.51.100.0/24"]; ok || k.stats().errors != 0 {
			t.Fatalf("route not removed (%+v)", k.stats())
		}

		// IPv6 the same way: the slow path answers ICMPv6 too.
		p6 := netip.MustParsePrefix("2001:db8:100::/48")
		k.sync6(p6, kgw6a)
		k.sync6(p6, kgw6b)
		k.flush()
		if got := kernelRoutes(t, h); got["2001:db8:100::/48"] != "fd00:9::3" || k.stats().routes != 1 {
			t.Fatalf("mode all: kernel has %v (%+v), want 2001:db8:100::/48 via fd00:9::3", got, k.stats())
		}
		k6 := newKernelFIB(KernelRoutesDefault)
		defer k6.close()
		k6.sync6(netip.MustParsePrefix("2001:db8:200::/48"), kgw6a)
		k6.sync6(netip.MustParsePrefix("::/0"), kgw6a)
		k6.flush()
		if got := kernelRoutes(t, h); got["::/0"] != "fd00:9::2" || got["2001:db8:200::/48"] != "" {
			t.Fatalf("mode default: kernel has %v, want the IPv6 default and not 2001:db8:200::/48", got)
		}
		k6.removeAll()
		k.sync6(p6, netip.Addr{})
		k.flush()
		if got, st := kernelRoutes(t, h), k.stats(); got["::/0"] != "" || got["2001:db8:100::/48"] != "" || st.errors != 0 || st.routes != 0 {
			t.Fatalf("IPv6 routes not removed: %v (%+v)", got, st)
		}
		k.sync6(p6, kgw6a)
		k.flush()
		sweeper := newKernelFIB(KernelRoutesAll)
		defer sweeper.close()
		if err := sweeper.sweep(); err != nil {
			t.Fatal(err)
		}
		if got := kernelRoutes(t, h); len(got) != 0 {
			t.Fatalf("sweep left %v", got)
		}
		// Unreachable gateways are counted, not fatal.
		k.sync(p, ip4(netip.MustParseAddr("192.0.2.1")))
		k.flush()
		if st := k.stats(); st.errors != 1 || st.lastErr == "" {
			t.Fatalf("%+v after a route via an unreachable gateway, want 1 error", st)
		}
	})
}

// sync only records: the kernel gets the routes from k's writer, and later
// changes of a prefix replace earlier ones still pending.
func TestKernelFIBAsync(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		kernelTestLink(t, h)
		gw1, gw2 := kgw1, kgw2
		const n = 20000
		ps := make([]prefix.V4, n)
		for i := range ps {
			ps[i] = prefix.FromV4(netip.PrefixFrom(addr4(ip4(netip.MustParseAddr("198.18.0.0"))+uint32(i)), 32))
		}

		k := newKernelFIB(KernelRoutesAll)
		defer k.close()
		start := time.Now()
		for _, p := range ps {
			k.sync(p, gw1)
		}
		recorded := time.Since(start)
		k.flush()
		t.Logf("%d routes recorded in %v, written in %v", n, recorded, time.Since(start))
		got := kernelRoutes(t, h)
		if st := k.stats(); len(got) != n || st.routes != n || st.pending != 0 {
			t.Fatalf("kernel has %d routes, %+v; want %d", len(got), st, n)
		}
		for _, p := range ps {
			if got[p.String()] != "10.9.0.2" {
				t.Fatalf("%s via %q, want 10.9.0.2", p, got[p.String()])
			}
		}

		// A new gateway for all, then half withdrawn before the writer is done.
		for _, p := range ps {
			k.sync(p, gw2)
		}
		for _, p := range ps[:n/2] {
			k.sync(p, 0)
		}
		k.flush()
		got = kernelRoutes(t, h)
		if st := k.stats(); len(got) != n/2 || st.routes != n/2 || st.pending != 0 || st.errors != 0 {
			t.Fatalf("kernel has %d routes, %+v; want %d and no errors", len(got), st, n/2)
		}
		for _, p := range ps[n/2:] {
			if got[p.String()] != "10.9.0.3" {
				t.Fatalf("%s via %q, want 10.9.0.3", p, got[p.String()])
			}
		}

		k.removeAll()
		if got := kernelRoutes(t, h); len(got) != 0 || k.stats().routes != 0 {
			t.Fatalf("removeAll left %d routes (%+v)", len(got), k.stats())
		}
	})
}

// A prefix that flaps ends as its last change said, and close writes what
// is pending; syncs after close are ignored.
func TestKernelFIBCoalesce(t *testing.T) {
	netnstest.Run(t, func(h *netlink.Handle) {
		kernelTestLink(t, h)
		gw1, gw2, p := kgw1, kgw2, kp
		q := prefix.FromV4(netip.MustParsePrefix("203.0.113.0/24"))
		p6 := netip.MustParsePrefix("2001:db8:100::/48")
		gw6a, gw6b := kgw6a, kgw6b

		k := newKernelFIB(KernelRoutesAll)
		k.sync(p, gw1)
		k.sync(p, gw2)
		k.sync(p, 0)
		k.sync(p, gw1)
		k.sync(q, gw2)
		k.sync(q, 0) // never in the kernel: nothing to delete
		k.sync6(p6, gw6b)
		k.sync6(p6, netip.Addr{})
		k.sync6(p6, gw6a)
		k.flush()
		got := kernelRoutes(t, h)
		if st := k.stats(); len(got) != 2 || got["198.51.100.0/24"] != "10.9.0.2" || got["2001:db8:100::/48"] != "fd00:9::2" || st.errors != 0 {
			t.Fatalf("kernel has %v (%+v), want 198.51.100.0/24 via 10.9.0.2 and 2001:db8:100::/48 via fd00:9::2", got, st)
		}

		// Back to what the kernel has: nothing changes.
		k.sync(p, gw2)
		k.sync(p, gw1)
		k.sync6(p6, netip.Addr{})
		k.sync6(p6, gw6a)
		k.sync(q, gw1)
		k.close()
		got = kernelRoutes(t, h)
		if st := k.stats(); len(got) != 3 || got["198.51.100.0/24"] != "10.9.0.2" || got["2001:db8:100::/48"] != "fd00:9::2" ||
			got["203.0.113.0/24"] != "10.9.0.2" || st.errors != 0 || st.pending != 0 {
			t.Fatalf("after close kernel has %v (%+v), want also 203.0.113.0/24 via 10.9.0.2", got, st)
		}
		k.sync(p, 0)
		k.sync6(p6, gw6b)
		k.flush()
		k.removeAll()
		k.close()
		if got := kernelRoutes(t, h); len(got) != 3 {
			t.Fatalf("kernel changed after close: %v", got)
		}
	})
}

// The writer runs on a thread of its own at the lowest priority, and that
// thread ends with close.
func TestKernelFIBWriterThread(t *testing.T) {
	k := newKernelFIB(KernelRoutesAll)
	<-k.started
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, k.tid)
	if err != nil {
		t.Fatal(err)
	}
	if nice := 20 - prio; nice != writerNice { // the raw call returns 20 - nice
		t.Errorf("writer thread %d at nice %d, want %d", k.tid, nice, writerNice)
	}
	if k.tid == unix.Gettid() {
		t.Fatal("writer on the test's thread")
	}
	task := fmt.Sprintf("/proc/self/task/%d", k.tid)
	if _, err := os.Stat(task); err != nil {
		t.Fatalf("writer thread: %v", err)
	}
	k.close()
	if k.tid == unix.Getpid() {
		return // the main thread: Go parks it for good instead of ending it
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer thread %d (process %d) still there after close", k.tid, unix.Getpid())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
