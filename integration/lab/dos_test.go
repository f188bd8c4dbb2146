package lab

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDoSOptions(t *testing.T) {
	o := DoSOptions{}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Name != "spdos" || o.Duration != 120*time.Second || o.UpdateInterval != 2*time.Second || o.Routes != 10000 || o.Protection != "both" {
		t.Errorf("defaults: %+v", o)
	}
	for _, bad := range []DoSOptions{
		{Duration: time.Second},
		{UpdateInterval: time.Millisecond},
		{Duration: 10 * time.Second, UpdateInterval: 6 * time.Second},
		{Routes: -1},
		{Protection: "maybe"},
	} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

func TestDoSMetrics(t *testing.T) {
	on := DoSResult{Protection: true, DelayP99: 12345 * time.Microsecond, Forwarded: 1e6 + 0.4,
		Offered: map[string]float64{"syn": 2e6, "udp": 1e6}}
	off := DoSResult{SessionDrops: 2, DelayP99: 3 * time.Second, Forwarded: 2e5, Offered: map[string]float64{"syn": 1e6}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, m := range DoSMetrics([]DoSResult{on, off}) {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"metric":"dos_bgp_session_drops","value":0,"unit":"drops","baseline":"dos_bgp_session_drops_protection_off","baseline_value":2}
{"metric":"dos_update_delay_p99_ms","value":12.35,"unit":"ms","baseline":"dos_update_delay_p99_ms_protection_off","baseline_value":3000}
{"metric":"dos_forward_pps","value":1000000,"unit":"pps","baseline":"dos_forward_pps_protection_off","baseline_value":200000}
{"metric":"dos_attack_pps","value":3000000,"unit":"pps","baseline":"dos_attack_pps_protection_off","baseline_value":1000000}
`
	if b.String() != want {
		t.Errorf("JSON lines:\n%s\nwant\n%s", b.String(), want)
	}
	// A baseline of 0 is printed, not left out; one mode alone has none.
	b.Reset()
	for _, m := range DoSMetrics([]DoSResult{off, on}) {
		_ = enc.Encode(m)
	}
	if !strings.Contains(b.String(), `"value":0,"unit":"drops","baseline":"dos_bgp_session_drops_protection_off","baseline_value":2`) {
		t.Errorf("order of the modes changed the figures:\n%s", b.String())
	}
	for _, m := range DoSMetrics([]DoSResult{off}) {
		if m.Baseline != "" || m.BaselineValue != nil {
			t.Errorf("protection off alone: %+v has a baseline", m)
		}
	}
	if DoSMetrics(nil) != nil {
		t.Error("no results: figures")
	}
}

// Runs of one attack alone give figures named by the attack, each with its
// protection-off run as baseline, after the four of every attack together.
func TestDoSMetricsEach(t *testing.T) {
	rs := []DoSResult{
		{Protection: true, Attack: AttackAll},
		{Protection: true, Attack: "syn", DelayP99: 5 * time.Millisecond},
		{Protection: true, Attack: "arp"},
		{Attack: AttackAll, SessionDrops: 1},
		{Attack: "syn", SessionDrops: 3},
		{Attack: "arp", SessionDrops: 2, DelayP99: time.Second},
	}
	got := map[string]DoSMetric{}
	var order []string
	for _, m := range DoSMetrics(rs) {
		got[m.Metric] = m
		order = append(order, m.Metric)
	}
	want := []string{"dos_bgp_session_drops", "dos_update_delay_p99_ms", "dos_forward_pps", "dos_attack_pps",
		"dos_bgp_session_drops_syn", "dos_update_delay_p99_ms_syn", "dos_bgp_session_drops_arp", "dos_update_delay_p99_ms_arp"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("figures %v, want %v", order, want)
	}
	for name, v := range map[string][2]float64{
		"dos_bgp_session_drops": {0, 1}, "dos_bgp_session_drops_syn": {0, 3}, "dos_bgp_session_drops_arp": {0, 2},
		"dos_update_delay_p99_ms_syn": {5, 0}, "dos_update_delay_p99_ms_arp": {0, 1000},
	} {
		m := got[name]
		if m.Value != v[0] || m.BaselineValue == nil || *m.BaselineValue != v[1] || m.Baseline != name+DoSBaselineSuffix {
			t.Errorf("%s: %+v (baseline %v), want %v against %v", name, m, m.BaselineValue, v[0], v[1])
		}
	}
	var b bytes.Buffer
	if err := PrintDoS(&b, rs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"each attack alone", "syn  ", "arp  "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestPrintDoS(t *testing.T) {
	r := DoSResult{Protection: true, Duration: 15 * time.Second, UpdatesSent: 15, UpdatesArrived: 15,
		Offered: map[string]float64{"forward": 2e6, "syn": 2e6, "udp": 2e6, "ttl": 1e6, "ack": 1e6, "arp": 3e5}, Forwarded: 567300,
		QueueArrived: []float64{1, 1.8e6}, Datapath: map[string]float64{"drop_policed": 1.2e6},
		DatapathCPU: []map[string]float64{{}, {"drop_policed": 1.2e6}}, CPUBusy: []float64{20, 99}, CPUSoftirq: []float64{0, 5}}
	off := r
	off.Protection, off.SessionDrops, off.SessionDown, off.LastDown, off.UpdatesArrived = false, 1, 9*time.Second, "hold timer expired", 14
	var b bytes.Buffer
	if err := PrintDoS(&b, []DoSResult{r, off}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"protection on", "protection off", "567.3 kpps", "1.20 Mpps (cpu0 0 pps, cpu1 1.20 Mpps)",
		"6.30 Mpps (2.00 Mpps + 2.00 Mpps + 1.00 Mpps + 1.00 Mpps + 300.0 kpps)", "1 (down 9s: hold timer expired)", "14 of 15", "(some lost: at least)", "20% (0%) / 99% (5%)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseSNMP(t *testing.T) {
	m := map[string]uint64{}
	parseSNMP("TcpExt: SyncookiesSent ListenDrops\nTcpExt: 12 3\nUdp: InDatagrams NoPorts\nUdp: 5 7\n", m)
	if m["TcpExt:SyncookiesSent"] != 12 || m["TcpExt:ListenDrops"] != 3 || m["Udp:NoPorts"] != 7 || len(m) != 4 {
		t.Errorf("parsed %v", m)
	}
}

func TestParseNlAttrs(t *testing.T) {
	var b []byte
	attr := func(typ uint16, v []byte) {
		h := make([]byte, 4)
		binary.NativeEndian.PutUint16(h, uint16(4+len(v)))
		binary.NativeEndian.PutUint16(h[2:], typ)
		b = append(append(b, h...), v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	attr(2, []byte{1, 2, 3, 4})
	attr(4|0x8000, []byte{9}) // nested flag, padded
	attr(1, []byte{5, 6, 7, 8})
	got, err := parseNlAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Attr.Type != 2 || got[1].Attr.Type != 4 || len(got[1].Value) != 1 || got[2].Value[3] != 8 {
		t.Errorf("parsed %+v", got)
	}
	if _, err := parseNlAttrs([]byte{40, 0, 1, 0, 0, 0, 0, 0}); err == nil {
		t.Error("an attribute longer than its buffer: accepted")
	}
}

func TestProbeFrame(t *testing.T) {
	f := probeFrame([]byte{2, 0, 0, 0, 0, 9})
	ip := f[14:34]
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv4 checksum does not verify: % x", ip)
	}
	if f[0] != 2 || f[5] != 9 || ip[9] != 17 || [4]byte(ip[16:20]) != probeDst().As4() {
		t.Errorf("frame % x", f[:42])
	}
}

func TestCPUMask(t *testing.T) {
	if got := cpuMask(2); got != "3" {
		t.Errorf("cpuMask(2) = %q", got)
	}
	if got := cpuMask(12); got != "fff" {
		t.Errorf("cpuMask(12) = %q", got)
	}
}
