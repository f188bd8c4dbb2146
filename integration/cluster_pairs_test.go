package integration_test

import (
	"fmt"
	"testing"
	"time"
)

// TestClusterLabAllPairs: in a cluster of four FEs (the lab's largest),
// every host reaches every other host's site, IPv4 and IPv6: twelve ordered
// pairs over six mesh links, each packet encapsulated by the sender's FE and
// delivered by the receiver's, and no FE's kernel forwards any of them.
func TestClusterLabAllPairs(t *testing.T) {
	requireLab(t)
	const n = 4
	o := upCluster(t, "spq", n, 10)
	// Warm up: each FE learns its peers' MACs and its host's.
	for src := 1; src <= n; src++ {
		for dst := 1; dst <= n; dst++ {
			if src == dst {
				continue
			}
			h := o.ClusterHost(dst)
			for _, a := range []string{h.SiteAddr.String(), h.SiteAddr6.String()} {
				eventually(t, 20*time.Second, fmt.Sprintf("host %d reaches host %d's site %s", src, dst, a), func() error {
					return pingFromHost(o.ClusterHost(src).Namespace, a, 1, 0)
				})
			}
		}
	}
	const count = 3
	before := readIFECounters(t, o, n)
	for src := 1; src <= n; src++ {
		for dst := 1; dst <= n; dst++ {
			if src == dst {
				continue
			}
			h := o.ClusterHost(dst)
			for _, a := range []string{h.SiteAddr.String(), h.SiteAddr6.String()} {
				if err := pingFromHost(o.ClusterHost(src).Namespace, a, count, 0); err != nil {
					t.Errorf("host %d to host %d's site: %v", src, dst, err)
				}
			}
		}
	}
	after := readIFECounters(t, o, n)
	// Each FE sends (n-1) * 2 families * count echoes and as many answers
	// to its peers, and receives as many.
	want := uint64((n - 1) * 2 * count * 2)
	for i := range n {
		enc := after.ife[i]["ife_encap"] - before.ife[i]["ife_encap"]
		dec := after.ife[i]["ife_decap"] - before.ife[i]["ife_decap"]
		via := after.ife[i]["ife_via"] - before.ife[i]["ife_via"]
		if enc < want || dec < want || via != 0 {
			t.Errorf("FE %d: encapsulated %d, delivered %d, %d via an intermediate; want at least %d each, none via", i+1, enc, dec, via, want)
		}
		if after.forw[i] != before.forw[i] {
			t.Errorf("FE %d's kernel forwarded %d datagrams", i+1, after.forw[i]-before.forw[i])
		}
	}
}
