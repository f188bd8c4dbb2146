package fe

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/splitplane/splitplane/fe/datapath"
)

// Frames lost in a veth (docs/troubleshooting.md, "Native redirect into
// veth: the peer needs XDP or GRO"). A native XDP redirect into a veth is
// delivered only if the veth's peer has an XDP program or GRO on;
// otherwise the kernel drops the frame and counts it nowhere but a
// tracepoint: the datapath's forwarded counter grows and the destination
// sees nothing. That is what a router set up by hand in namespaces of its
// own, with default veths, meets first. The veth itself counts what it
// does deliver (its ethtool statistics tx_queue_N_xdp_xmit, the peer's
// receive queues), so the FE compares the two for each veth port: frames
// the datapath sent out of the port that the veth did not take are lost,
// counted per port (redirect_lost in the status, a metric) and warned
// about, naming the fix.

// vethCheckInterval is how often the FE compares the counters.
const vethCheckInterval = 2 * time.Second

// vethPort is a native-mode veth port under watch.
type vethPort struct {
	name    string
	ifindex int
	// The counters at the last check: the datapath's tx, the veth's
	// delivered xdp_xmit.
	tx, xmit uint64
	primed   bool
	lost     atomic.Uint64
	warned   bool
}

// vethPortsOf returns the ports, among links, that are veths.
func vethPortsOf(links []netlink.Link) []*vethPort {
	var out []*vethPort
	for _, l := range links {
		if l.Type() == "veth" {
			out = append(out, &vethPort{name: l.Attrs().Name, ifindex: l.Attrs().Index})
		}
	}
	return out
}

// xdpXmit sums a veth's tx_queue_N_xdp_xmit statistics: the frames
// redirected into it that it delivered to its peer.
func xdpXmit(stats map[string]uint64) (uint64, bool) {
	var n uint64
	found := false
	for k, v := range stats {
		if strings.HasPrefix(k, "tx_queue_") && strings.HasSuffix(k, "_xdp_xmit") {
			n += v
			found = true
		}
	}
	return n, found
}

// check takes the port's counters now and returns how many frames were
// lost since the last check (0 at the first).
func (p *vethPort) check(tx, xmit uint64) uint64 {
	if !p.primed || tx < p.tx || xmit < p.xmit {
		p.tx, p.xmit, p.primed = tx, xmit, true
		return 0
	}
	dtx, dxmit := tx-p.tx, xmit-p.xmit
	p.tx, p.xmit = tx, xmit
	if dtx <= dxmit {
		return 0
	}
	return dtx - dxmit
}

// watchVeths checks the native-mode veth ports until ctx ends.
func (a *Agent) watchVeths(ctx context.Context, dp Datapath, ports []*vethPort) {
	if len(ports) == 0 {
		return
	}
	et, err := ethtool.NewEthtool()
	if err != nil {
		a.log.Warn("fe: veth ports not watched for lost redirects", "err", err)
		return
	}
	defer et.Close()
	t := time.NewTicker(vethCheckInterval)
	defer t.Stop()
	for {
		native := map[int]bool{}
		a.do(func() {
			for _, p := range a.ports {
				native[p.Ifindex] = p.Mode == datapath.ModeNative.String()
			}
		})
		pcs, err := dp.PortCounters()
		if err == nil {
			for _, p := range ports {
				stats, err := et.Stats(p.name)
				xmit, ok := xdpXmit(stats)
				if err != nil || !ok || !native[p.ifindex] {
					continue // a redirect from a generic-mode port goes another way
				}
				lost := p.check(pcs[p.ifindex].TxPackets, xmit)
				if lost == 0 {
					continue
				}
				p.lost.Add(lost)
				if !p.warned {
					p.warned = true
					a.log.Error("fe: frames forwarded out of a veth port are dropped by the kernel: its peer has neither an XDP program nor GRO; in the peer's namespace run 'ethtool -K PEER gro on' (docs/troubleshooting.md)",
						"port", p.name, "lost", lost)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
