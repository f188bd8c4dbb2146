package fe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/internal/prefix"
)

// ipRoutes is a fake netlink handle for the kernel copy: it keeps the
// routes it was given and logs each request as the ip route command that
// would make it.
type ipRoutes struct {
	mu     sync.Mutex
	routes map[netip.Prefix]string // prefix -> "via GW proto N"
	log    []string
	fail   map[netip.Prefix]bool // replacing these fails
}

var errFakeRoute = errors.New("fake: RTNETLINK answers: Network is unreachable")

func routeText(r *netlink.Route) (netip.Prefix, string) {
	ones, _ := r.Dst.Mask.Size()
	a, _ := netip.AddrFromSlice(r.Dst.IP)
	p := netip.PrefixFrom(a.Unmap(), ones)
	if r.Gw == nil {
		return p, fmt.Sprintf("proto %d", r.Protocol)
	}
	gw, _ := netip.AddrFromSlice(r.Gw)
	return p, fmt.Sprintf("via %s proto %d", gw.Unmap(), r.Protocol)
}

func (f *ipRoutes) RouteReplace(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, text := routeText(r)
	f.log = append(f.log, "ip route replace "+p.String()+" "+text)
	if f.fail[p] {
		return errFakeRoute
	}
	f.routes[p] = text
	return nil
}

func (f *ipRoutes) RouteDel(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, text := routeText(r)
	f.log = append(f.log, "ip route del "+p.String()+" "+text)
	if _, ok := f.routes[p]; !ok {
		return errFakeRoute
	}
	delete(f.routes, p)
	return nil
}

func (f *ipRoutes) RouteListFiltered(family int, filter *netlink.Route, _ uint64) ([]netlink.Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netlink.Route
	for p, text := range f.routes {
		if (family == netlink.FAMILY_V4) != p.Addr().Is4() || !strings.HasSuffix(text, fmt.Sprintf("proto %d", filter.Protocol)) {
			continue
		}
		out = append(out, netlink.Route{Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Protocol: filter.Protocol})
	}
	return out, nil
}

func (f *ipRoutes) Close() {}

// step renders the requests since the last step (sorted: the writer takes a
// batch as a set) and the routes the fake kernel then has.
func (f *ipRoutes) step(title string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n", title)
	slices.Sort(f.log)
	for _, l := range f.log {
		b.WriteString(l + "\n")
	}
	f.log = nil
	b.WriteString("# ip route show\n")
	ps := make([]netip.Prefix, 0, len(f.routes))
	for p := range f.routes {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %s\n", p, f.routes[p])
	}
	return b.String()
}

// The kernel copy, unprivileged, across a sequence of changes in each mode:
// what it asks netlink to do and what the kernel then holds, against
// testdata/kernel.golden.
func TestKernelFIBGolden(t *testing.T) {
	var out strings.Builder
	pp := func(s string) prefix.V4 { return prefix.FromV4(netip.MustParsePrefix(s)) }
	gw := func(s string) uint32 { return ip4(netip.MustParseAddr(s)) }
	for _, mode := range []string{KernelRoutesDefault, KernelRoutesAll} {
		fmt.Fprintf(&out, "# mode %s\n", mode)
		f := &ipRoutes{routes: map[netip.Prefix]string{
			// Left by an earlier FE (ours) and by someone else.
			netip.MustParsePrefix("203.0.113.0/24"): fmt.Sprintf("via 10.9.0.9 proto %d", kernelProto),
			netip.MustParsePrefix("10.9.0.0/24"):    "proto 2",
		}, fail: map[netip.Prefix]bool{netip.MustParsePrefix("192.0.2.0/24"): true}}
		k := newKernelFIBOn(mode, f)
		if err := k.sweep(); err != nil {
			t.Fatal(err)
		}
		out.WriteString(f.step("sweep what an earlier FE left"))
		steps := []struct {
			title string
			do    func()
		}{
			{"a default route and a prefix", func() {
				k.sync(pp("0.0.0.0/0"), gw("10.9.0.2"))
				k.sync(pp("198.51.100.0/24"), gw("10.9.0.2"))
				k.sync6(netip.MustParsePrefix("2001:db8::/32"), netip.MustParseAddr("fd00:9::2"))
			}},
			{"the same again changes nothing", func() {
				k.sync(pp("0.0.0.0/0"), gw("10.9.0.2"))
				k.sync(pp("198.51.100.0/24"), gw("10.9.0.2"))
			}},
			{"move both to another gateway", func() {
				k.sync(pp("0.0.0.0/0"), gw("10.9.0.3"))
				k.sync(pp("198.51.100.0/24"), gw("10.9.0.3"))
			}},
			{"a change undone before it is written", func() {
				// Both under one hold of k's lock, so the writer sees only
				// the outcome.
				p := pp("198.51.100.0/24")
				if k.wants(p.Prefix()) {
					k.record(func() bool {
						a := k.v4.record(p, gw("10.9.0.4"))
						return k.v4.record(p, gw("10.9.0.3")) || a
					})
				}
			}},
			{"a route the kernel refuses", func() {
				k.sync(pp("192.0.2.0/24"), gw("10.9.0.2"))
			}},
			{"withdraw everything", func() {
				k.sync(pp("0.0.0.0/0"), 0)
				k.sync(pp("198.51.100.0/24"), 0)
				k.sync6(netip.MustParsePrefix("2001:db8::/32"), netip.Addr{})
			}},
		}
		for _, s := range steps {
			s.do()
			k.flush()
			out.WriteString(f.step(s.title))
		}
		st := k.stats()
		fmt.Fprintf(&out, "# routes %d, errors %d\n\n", st.routes, st.errors)
		k.close()
	}
	checkGolden(t, "kernel.golden", out.String())
}
