package integration_test

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/lab"
)

// The DoS-resilience test, short (15 s per mode): the router flooded at the
// generator's full rate from the peer's side (UDP to forward to host B, TCP
// SYNs and spoofed "established" ACKs to the BGP port and UDP to closed
// ports from spoofed sources, UDP whose TTL expires at the router, ARP
// requests for the router's address) while
// the peer announces and withdraws a prefix every second. With the FE's
// classifier the BGP session never drops and every change reaches the FE's
// datapath; in both modes the floods really ran and went where the mode sends
// them. Figures are logged, not asserted: `splitplane lab dos` measures them.
func TestDoSResilience(t *testing.T) {
	requireLab(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one for the control plane, one for the floods")
	}
	bin := buildBinary(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := lab.DoS(ctx, lab.DoSOptions{
		Name: "spdost", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin,
		Routes: 1000, Duration: 15 * time.Second, UpdateInterval: time.Second,
		Out: &progress,
	})
	if err != nil {
		t.Fatalf("lab dos: %v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	if err := lab.PrintDoS(&table, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if len(rs) != 2 || !rs[0].Protection || rs[1].Protection {
		t.Fatalf("want protection on, then off; got %d results", len(rs))
	}
	on, off := rs[0], rs[1]

	// Protection on: the session holds and every route change arrives.
	if on.SessionDrops != 0 {
		t.Errorf("protection on: the BGP session dropped %d times (down %s, last: %s)", on.SessionDrops, on.SessionDown, on.LastDown)
	}
	if on.UpdatesSent < 10 || on.UpdatesArrived != on.UpdatesSent {
		t.Errorf("protection on: %d of %d route changes reached the FE's datapath (want all, at least 10)", on.UpdatesArrived, on.UpdatesSent)
	}

	// Both modes: the floods ran, arrived on the flood CPU's queue, and the
	// forwarded one came out at host B.
	for _, r := range rs {
		mode := "protection on"
		if !r.Protection {
			mode = "protection off"
		}
		for _, kind := range []string{"forward", "syn", "udp", "ttl", "ack", "arp"} {
			if r.Offered[kind] == 0 {
				t.Errorf("%s: the %s flood sent nothing", mode, kind)
			}
		}
		if len(r.QueueArrived) != 2 || r.QueueArrived[1] == 0 {
			t.Errorf("%s: nothing arrived on to-peer's queue 1 (per queue: %v)", mode, r.QueueArrived)
		}
		if r.Forwarded == 0 || r.Datapath["forwarded"] == 0 {
			t.Errorf("%s: nothing forwarded (host B received %.0f pps, XDP forwarded %.0f pps)", mode, r.Forwarded, r.Datapath["forwarded"])
		}
		if len(r.DatapathCPU) < 2 || r.DatapathCPU[1]["rx"] == 0 {
			t.Errorf("%s: the FE's program received nothing on CPU 1: %v", mode, r.DatapathCPU)
		}
	}
	// Protection on polices the attack in XDP; off hands all of it to the
	// kernel, which answers the SYNs with cookies.
	if on.Datapath["drop_policed"] == 0 {
		t.Errorf("protection on: the policer dropped nothing: %v", on.Datapath)
	}
	// Every class of the slow path is policed: expiring TTLs and ARP too.
	for _, c := range []string{"drop_policed_ttl_options", "drop_policed_arp_nd"} {
		if on.Datapath[c] == 0 {
			t.Errorf("protection on: %s is 0: that flood reached the kernel unpoliced: %v", c, on.Datapath)
		}
	}
	if off.Datapath["drop_policed"] != 0 || off.Datapath["pass_local"] == 0 {
		t.Errorf("protection off: policed %.0f pps, passed to the kernel %.0f pps (want 0 and more)", off.Datapath["drop_policed"], off.Datapath["pass_local"])
	}
	if off.Kernel["TcpExt:SyncookiesSent"] == 0 {
		t.Errorf("protection off: the kernel sent no SYN cookies: the SYN flood did not reach it")
	}
	// The session's packets reached the control CPU by the classifier's
	// CPUMAP (a keepalive every 3 s, each way).
	if on.Datapath["control_cpu_rx"] == 0 {
		t.Errorf("protection on: no BGP packet steered to the control CPU: %v", on.Datapath)
	}
}

// Each attack kind alone, beside the forwarded flood, protection on: the
// BGP session holds and every route change arrives whichever attack comes,
// and each run sends its attack and none of the others.
func TestDoSEachAttack(t *testing.T) {
	requireLab(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one for the control plane, one for the floods")
	}
	bin := buildBinary(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs, err := lab.DoS(ctx, lab.DoSOptions{
		Name: "spdose", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin,
		Routes: 1000, Duration: 10 * time.Second, UpdateInterval: time.Second,
		Protection: "on", Each: true, Out: &progress,
	})
	if err != nil {
		t.Fatalf("lab dos --each: %v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	if err := lab.PrintDoS(&table, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	kinds := lab.AttackKinds()
	if len(rs) != 1+len(kinds) || rs[0].Attack != lab.AttackAll {
		t.Fatalf("want every attack, then each of %v alone; got %d results", kinds, len(rs))
	}
	for i, kind := range kinds {
		r := rs[1+i]
		if r.Attack != kind || !r.Protection {
			t.Errorf("run %d: attack %q protection %v, want %q on", 1+i, r.Attack, r.Protection, kind)
			continue
		}
		if r.SessionDrops != 0 {
			t.Errorf("%s alone: the BGP session dropped %d times (down %s, last: %s)", kind, r.SessionDrops, r.SessionDown, r.LastDown)
		}
		if r.UpdatesSent < 5 || r.UpdatesArrived != r.UpdatesSent {
			t.Errorf("%s alone: %d of %d route changes reached the FE's datapath (want all, at least 5)", kind, r.UpdatesArrived, r.UpdatesSent)
		}
		if r.Offered[kind] == 0 || r.Offered["forward"] == 0 {
			t.Errorf("%s alone: offered %v: the attack or the forwarded flood sent nothing", kind, r.Offered)
		}
		for _, other := range kinds {
			if other != kind && r.Offered[other] != 0 {
				t.Errorf("%s alone: the %s flood ran too (%.0f pps)", kind, other, r.Offered[other])
			}
		}
	}
	for _, m := range lab.DoSMetrics(rs) {
		if strings.HasPrefix(m.Metric, lab.MetricDoSSessionDrops) && m.Value != 0 {
			t.Errorf("%s = %v", m.Metric, m.Value)
		}
	}
}
