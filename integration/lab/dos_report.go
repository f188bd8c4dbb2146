package lab

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// The metric names of the DoS test (issue 8), fixed so that results compare
// across versions. Each is the protection-on figure; its baseline, when
// both modes ran, is the same figure with protection off, named with the
// suffix DoSBaselineSuffix.
const (
	MetricDoSSessionDrops = "dos_bgp_session_drops"
	MetricDoSDelayP99     = "dos_update_delay_p99_ms"
	MetricDoSForwardPPS   = "dos_forward_pps"
	MetricDoSAttackPPS    = "dos_attack_pps"
	DoSBaselineSuffix     = "_protection_off"
)

// DoSMetric is one figure in the benchmark output convention (DESIGN.md):
// one JSON object per line. BaselineValue is a pointer so that a baseline of
// 0 (no session drops) is printed, not left out.
type DoSMetric struct {
	Metric        string   `json:"metric"`
	Value         float64  `json:"value"`
	Unit          string   `json:"unit"`
	Baseline      string   `json:"baseline,omitempty"`
	BaselineValue *float64 `json:"baseline_value,omitempty"`
}

type dosFigure struct {
	name, unit string
	get        func(DoSResult) float64
}

var (
	dosDrops = dosFigure{MetricDoSSessionDrops, "drops", func(r DoSResult) float64 { return float64(r.SessionDrops) }}
	dosDelay = dosFigure{MetricDoSDelayP99, "ms", func(r DoSResult) float64 { return ms(r.DelayP99) }}
)

// DoSMetrics returns the four figures of the run with every attack: with
// protection on (or, when only protection off ran, of that run, without
// baselines), each with the protection-off figure as its baseline when both
// ran. Runs of one attack alone (DoSOptions.Each) add its session drops and
// update delay, named with the attack as suffix: dos_bgp_session_drops_syn.
func DoSMetrics(rs []DoSResult) []DoSMetric {
	var out []DoSMetric
	out = append(out, dosFigures(rs, AttackAll, "", dosDrops, dosDelay,
		dosFigure{MetricDoSForwardPPS, "pps", func(r DoSResult) float64 { return math.Round(r.Forwarded) }},
		dosFigure{MetricDoSAttackPPS, "pps", func(r DoSResult) float64 { return math.Round(r.AttackOffered()) }},
	)...)
	for _, kind := range AttackKinds() {
		out = append(out, dosFigures(rs, kind, "_"+kind, dosDrops, dosDelay)...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// dosFigures are the figures of the runs under attack, named with suffix.
func dosFigures(rs []DoSResult, attack, suffix string, figures ...dosFigure) []DoSMetric {
	var on, off *DoSResult
	for i := range rs {
		if a := rs[i].Attack; a != attack && (a != "" || attack != AttackAll) {
			continue
		}
		if rs[i].Protection {
			on = &rs[i]
		} else {
			off = &rs[i]
		}
	}
	head, base := on, off
	if head == nil {
		head, base = off, nil
	}
	if head == nil {
		return nil
	}
	var out []DoSMetric
	for _, f := range figures {
		name := f.name + suffix
		m := DoSMetric{Metric: name, Value: f.get(*head), Unit: f.unit}
		if base != nil {
			v := f.get(*base)
			m.Baseline, m.BaselineValue = name+DoSBaselineSuffix, &v
		}
		out = append(out, m)
	}
	return out
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// PrintDoS writes the modes side by side as a table, for every attack
// together; then, when there were runs of one attack alone, a table of those.
func PrintDoS(w io.Writer, rs []DoSResult) error {
	var all, each []DoSResult
	for _, r := range rs {
		if r.Attack == "" || r.Attack == AttackAll {
			all = append(all, r)
		} else {
			each = append(each, r)
		}
	}
	if err := printDoSAll(w, all); err != nil {
		return err
	}
	if len(each) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\neach attack alone, beside the forwarded flood:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tprotection\tBGP session drops\troute updates\tupdate delay p99\tattack offered\tforwarded")
	for _, r := range each {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d of %d\t%.1f ms\t%s\t%s\n", r.Attack, onOff(r.Protection), r.SessionDrops,
			r.UpdatesArrived, r.UpdatesSent, ms(r.DelayP99), pps(r.AttackOffered()), pps(r.Forwarded))
	}
	return tw.Flush()
}

func printDoSAll(w io.Writer, rs []DoSResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label string, f func(DoSResult) string) {
		cells := []string{label}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("", func(r DoSResult) string { return "protection " + onOff(r.Protection) })
	row("measured for", func(r DoSResult) string { return r.Duration.Round(100 * time.Millisecond).String() })
	row("BGP session drops (hold time 9s)", func(r DoSResult) string {
		if r.SessionDrops == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (down %s: %s)", r.SessionDrops, r.SessionDown.Round(100*time.Millisecond), r.LastDown)
	})
	row("route updates in the FE's datapath", func(r DoSResult) string { return fmt.Sprintf("%d of %d", r.UpdatesArrived, r.UpdatesSent) })
	row("update delay p50 / p99 / max", func(r DoSResult) string {
		lost := ""
		if r.UpdatesArrived < r.UpdatesSent {
			lost = " (some lost: at least)"
		}
		return fmt.Sprintf("%.1f / %.1f / %.1f ms%s", ms(r.DelayP50), ms(r.DelayP99), ms(r.DelayMax), lost)
	})
	row("forwarded flood offered", func(r DoSResult) string { return pps(r.Offered["forward"]) })
	row("forwarded (received at host B)", func(r DoSResult) string { return pps(r.Forwarded) })
	row("attack offered (SYN to :179 + UDP + TTL 1 + ACK to :179 + ARP)", func(r DoSResult) string {
		var parts []string
		for _, f := range attackFloods {
			parts = append(parts, pps(r.Offered[floodName(f)]))
		}
		return fmt.Sprintf("%s (%s)", pps(r.AttackOffered()), strings.Join(parts, " + "))
	})
	row("dropped at to-peer, ring full: XDP frames / skbs (ARP, BGP)", func(r DoSResult) string {
		return pps(r.RingDropped) + " / " + pps(r.RingDroppedSKB)
	})
	row("arrived on to-peer queue 0 / 1", func(r DoSResult) string { return joinRates(r.QueueArrived, pps) })
	row("share of the floods' arrivals: forward / to the router / TTL 1 (of the offered)", arrivalShares)
	for _, c := range []struct{ label, counter string }{
		{"XDP: forwarded", "forwarded"},
		{"XDP: dropped by the policer (for us)", "drop_policed"},
		{"XDP: dropped by the policer (TTL, options)", "drop_policed_ttl_options"},
		{"XDP: dropped by the policer (ARP, ND)", "drop_policed_arp_nd"},
		{"XDP: dropped by the policer (other)", "drop_policed_other"},
		{"XDP: passed to the kernel (for us)", "pass_local"},
		{"XDP: for the kernel, TTL expired (policed after)", "pass_ttl"},
		{"XDP: for the kernel, ARP (policed after)", "pass_not_ipv4"},
		{"XDP: steered to the control CPU", "to_control_cpu"},
	} {
		row(c.label, func(r DoSResult) string {
			return pps(r.Datapath[c.counter]) + " (" + perCPU(r, c.counter) + ")"
		})
	}
	for _, k := range []struct{ label, counter string }{
		{"kernel: SYN cookies sent", "TcpExt:SyncookiesSent"},
		{"kernel: SYNs dropped (listen queue)", "TcpExt:ListenDrops"},
		{"kernel: UDP to closed ports", "Udp:NoPorts"},
		{"kernel: ICMP unreachables sent", "Icmp:OutDestUnreachs"},
		{"kernel: ICMP time exceeded sent", "Icmp:OutTimeExcds"},
	} {
		row(k.label, func(r DoSResult) string { return pps(r.Kernel[k.counter]) })
	}
	row("input queue drops, CPU 0 / 1", func(r DoSResult) string { return joinRates(r.BacklogDrops, pps) })
	row("CPU 0 / 1 busy (softirq)", func(r DoSResult) string {
		var parts []string
		for i := range r.CPUBusy {
			parts = append(parts, fmt.Sprintf("%.0f%% (%.0f%%)", r.CPUBusy[i], r.CPUSoftirq[i]))
		}
		return strings.Join(parts, " / ")
	})
	return tw.Flush()
}

// arrivalShares compares what each kind of flood got of the flood queue's
// ring (by the datapath's counters: forwarded, policed or passed for the
// router, TTL expiry) with its share of what the generators offered. A
// generator fills the ring in the microseconds after the NAPI kthread
// drained it and the rest of its frames find it full, so the shares follow
// the scheduler's order on the generators' CPU, not the offered rates, and
// dos_forward_pps measures that order as much as the router: the router
// forwards every frame of the forwarded flood that arrives.
func arrivalShares(r DoSResult) string {
	d, o := r.Datapath, r.Offered
	got := []float64{d["forwarded"], d["drop_policed"] + d["pass_local"], d["pass_ttl"]}
	offered := []float64{o["forward"], o["syn"] + o["udp"] + o["ack"], o["ttl"]}
	pct := func(v []float64) string {
		var sum float64
		for _, x := range v {
			sum += x
		}
		if sum == 0 {
			return "-"
		}
		var parts []string
		for _, x := range v {
			parts = append(parts, fmt.Sprintf("%.0f%%", 100*x/sum))
		}
		return strings.Join(parts, " / ")
	}
	return pct(got) + " (" + pct(offered) + ")"
}

// pps formats a rate: 1.23 Mpps, 45.6 kpps, 7 pps.
func pps(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f Mpps", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kpps", v/1e3)
	}
	return fmt.Sprintf("%.0f pps", v)
}

func joinRates(vs []float64, f func(float64) string) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, f(v))
	}
	return strings.Join(parts, " / ")
}

// perCPU shows a datapath counter's rate on the test's two CPUs: "cpu0 x, cpu1 y".
func perCPU(r DoSResult, counter string) string {
	var parts []string
	for i, m := range r.DatapathCPU {
		if i > dosFloodCPU {
			break
		}
		parts = append(parts, fmt.Sprintf("cpu%d %s", i, pps(m[counter])))
	}
	return strings.Join(parts, ", ")
}
