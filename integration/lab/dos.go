package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// The DoS-resilience test (issue 8): the lab's router under floods at the
// generator's full rate, once with the FE's classifier (protection on) and
// once without (protection off), measuring whether the BGP session survives,
// how long route updates take to reach the FE's datapath, and where the
// floods' packets went.
//
// Where the work lands on the two cores (docs/architecture.md, "The DoS
// test", has the reasons):
//
//	CPU 0, the control core: the CE (pinned), the BGP peer (pinned), the
//	  router port to-peer's receive queue 0 (threaded NAPI, pinned), where
//	  the peer's BGP packets arrive.
//	CPU 1, the forward core: the generators (pinned, nice 5), to-peer's
//	  receive queue 1 (threaded NAPI, pinned), where every flood frame
//	  arrives (veth puts an XDP-sent frame on queue sending CPU % queues).
//	Protection on: the FE's classifier steers the BGP session to CPU 0,
//	  polices the attack and forwards on CPU 1; the NIC it stands for steers
//	  the control flow to queue 0 and spreads the rest over the others.
//	Protection off: the FE passes whatever is for the router to the kernel
//	  where it arrived, and the kernel spreads it over all CPUs by flow hash
//	  (RPS on both queues, standing for RSS over all cores): half of the
//	  attack's kernel work lands on CPU 0, in the same input queues as the
//	  BGP session's packets.

// DoSOptions configure DoS. Zero values take the defaults.
type DoSOptions struct {
	// Name, Dir and Binary are the lab's (Options); Name is "spdos" by
	// default, so the test does not take the default lab's namespaces.
	Name, Dir, Binary string
	// Routes is how many generated prefixes the peer announces (10,000 by
	// default); the forwarded flood and the spoofed sources are random
	// hosts inside them.
	Routes int
	// Duration is how long the floods run in each mode (120 s by default,
	// at least 5 s).
	Duration time.Duration
	// UpdateInterval is how often the peer announces or withdraws the probe
	// prefix, in turn (2 s by default, at least 100 ms).
	UpdateInterval time.Duration
	// Protection is "on", "off" or "both" (the default): which modes run.
	Protection string
	// Each adds, in each mode's lab after every attack together, a run of
	// Duration for each attack kind alone beside the forwarded flood: the
	// session must hold whichever attack comes.
	Each bool
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// ErrDoSSetup is wrapped by errors about a machine the DoS test cannot run
// on (fewer than two CPUs, no multi-queue veth).
var ErrDoSSetup = errors.New("dos test setup")

func (o *DoSOptions) defaults() error {
	if o.Name == "" {
		o.Name = "spdos"
	}
	if o.Routes == 0 {
		o.Routes = 10000
	}
	if o.Duration == 0 {
		o.Duration = 120 * time.Second
	}
	if o.UpdateInterval == 0 {
		o.UpdateInterval = 2 * time.Second
	}
	if o.Protection == "" {
		o.Protection = "both"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	switch {
	case o.Routes < 1:
		return fmt.Errorf("routes %d: need at least 1 (the floods go to hosts inside them)", o.Routes)
	case o.Duration < 5*time.Second:
		return fmt.Errorf("duration %s: need at least 5s", o.Duration)
	case o.UpdateInterval < 100*time.Millisecond:
		return fmt.Errorf("update interval %s: need at least 100ms", o.UpdateInterval)
	case o.UpdateInterval > o.Duration/2:
		return fmt.Errorf("update interval %s: need at most half the duration (%s), for an announcement and a withdrawal", o.UpdateInterval, o.Duration)
	}
	switch o.Protection {
	case "on", "off", "both":
	default:
		return fmt.Errorf("protection %q: on, off or both", o.Protection)
	}
	return nil
}

// DoSResult is one run: a mode under an attack.
type DoSResult struct {
	Protection bool `json:"protection"`
	// Attack is AttackAll (every attack flood together) or the one attack
	// flood of the run ("syn", "udp", "ttl", "ack", "arp"); the forwarded
	// flood runs beside it either way.
	Attack   string        `json:"attack"`
	Duration time.Duration `json:"duration_ns"`

	// The BGP session, from the peer's side.
	SessionDrops int           `json:"bgp_session_drops"`
	SessionDown  time.Duration `json:"bgp_session_down_ns"`
	LastDown     string        `json:"bgp_last_down,omitempty"`

	// Route updates: the probe prefix announced or withdrawn by the peer
	// until the FE's datapath forwards to it or no longer does. Delays of
	// changes that never arrived count as the time until the test ended (a
	// lower bound).
	UpdatesSent    int           `json:"updates_sent"`
	UpdatesArrived int           `json:"updates_arrived"`
	DelayP50       time.Duration `json:"update_delay_p50_ns"`
	DelayP99       time.Duration `json:"update_delay_p99_ns"`
	DelayMax       time.Duration `json:"update_delay_max_ns"`

	// Rates, packets per second over the measured window: what the
	// generators offered, what host B received of the forwarded flood, what
	// the router's port could not take (its receive ring full).
	Offered     map[string]float64 `json:"offered_pps"` // "forward", "syn", "udp", "ttl", "ack", "arp"
	Forwarded   float64            `json:"forwarded_pps"`
	RingDropped float64            `json:"ring_dropped_pps"`
	// RingDroppedSKB is what the port dropped, its ring full, of the
	// frames the peer's kernel sent: the ARP flood and the BGP session,
	// which share queue 0 here as on a NIC whose RSS cannot hash ARP.
	RingDroppedSKB float64   `json:"ring_dropped_skb_pps"`
	QueueArrived   []float64 `json:"queue_arrived_pps"` // by receive queue of to-peer
	// Datapath are the FE's counters per second (rx, forwarded,
	// drop_policed, pass_local, to_control_cpu, ...), DatapathCPU the same
	// per CPU.
	Datapath    map[string]float64   `json:"datapath_pps"`
	DatapathCPU []map[string]float64 `json:"datapath_pps_per_cpu"`
	// Kernel are the router's kernel counters per second
	// ("TcpExt:SyncookiesSent", "Udp:NoPorts", "Icmp:OutDestUnreachs", ...).
	Kernel map[string]float64 `json:"kernel_per_s"`
	// BacklogDrops are the packets per second each CPU's input queue
	// dropped; CPUBusy and CPUSoftirq the share of each CPU's time (steal
	// excluded from busy), in percent. The whole machine.
	BacklogDrops []float64 `json:"backlog_drops_per_s"`
	CPUBusy      []float64 `json:"cpu_busy_pct"`
	CPUSoftirq   []float64 `json:"cpu_softirq_pct"`
}

// AttackOffered is the attack's offered rate: every flood at the router
// together (SYNs, UDP, expiring TTLs, spoofed ACKs, ARP).
func (r DoSResult) AttackOffered() float64 {
	var sum float64
	for _, f := range attackFloods {
		sum += r.Offered[floodName(f)]
	}
	return sum
}

// AttackAll is DoSResult.Attack of the run with every attack flood at once.
const AttackAll = "all"

// AttackKinds are the attack floods by name, in the order DoSOptions.Each
// runs them.
func AttackKinds() []string {
	var out []string
	for _, f := range attackFloods {
		out = append(out, floodName(f))
	}
	return out
}

// The CPUs of the test: the control core, and the forward core where the
// generators run and the floods arrive.
const (
	dosControlCPU = 0
	dosFloodCPU   = 1
)

// DoS runs the DoS-resilience test: for each mode asked for (protection on
// first), a lab of its own is brought up, set up as described at the top of
// this file, flooded for Duration while the probes run (and, with Each, again
// for each attack kind alone), and taken down. The results are in that
// order. Needs root, two CPUs and the lab's tools.
func DoS(ctx context.Context, o DoSOptions) ([]DoSResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if n := runtime.NumCPU(); n < 2 {
		return nil, fmt.Errorf("%w: %d CPU: needs two, one for the control plane and one for the floods", ErrDoSSetup, n)
	}
	var modes []bool
	switch o.Protection {
	case "on":
		modes = []bool{true}
	case "off":
		modes = []bool{false}
	default:
		modes = []bool{true, false}
	}
	var out []DoSResult
	for _, protect := range modes {
		rs, err := dosMode(ctx, o, protect)
		out = append(out, rs...)
		if err != nil {
			return out, fmt.Errorf("protection %s: %w", onOff(protect), err)
		}
	}
	return out, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// dosMode runs one mode in a lab of its own: every attack together, then
// with o.Each each alone.
func dosMode(ctx context.Context, o DoSOptions, protect bool) (rs []DoSResult, err error) {
	say := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "dos (protection %s): "+format+"\n", append([]any{onOff(protect)}, args...)...)
	}
	lo := Options{Name: o.Name, Dir: o.Dir, Binary: o.Binary, Routes: o.Routes, NoProtection: !protect, Out: o.Out}
	if err := lo.defaults(); err != nil {
		return nil, err
	}
	say("lab %s up, %d routes", lo.Name, lo.Routes)
	if err := Up(ctx, lo); err != nil {
		return nil, err
	}
	defer func() {
		say("lab down")
		if derr := Down(lo); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab down: %w", derr))
		}
	}()
	if err := dosPorts(ctx, &lo, protect); err != nil {
		return nil, err
	}
	sk, err := newSink(&lo)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sk.detach()) }()
	fl, err := newFloods(&lo, dosFloodCPU)
	if err != nil {
		return nil, err
	}
	defer fl.close()
	if err := pinQueues(&lo, fl); err != nil {
		return nil, err
	}
	if s, err := lo.loadState(); err == nil {
		if err := pinProcessTo(s.Processes["peer"], dosControlCPU); err != nil {
			return nil, fmt.Errorf("the BGP peer: %w", err)
		}
	}
	runs := [][]int{append([]int{floodForward}, attackFloods...)}
	if o.Each {
		for _, f := range attackFloods {
			runs = append(runs, []int{floodForward, f})
		}
	}
	for i, kinds := range runs {
		attack := AttackAll
		if i > 0 {
			attack = floodName(kinds[1])
			// The run before may have taken the session down.
			if err := dosReady(ctx, &lo); err != nil {
				return rs, fmt.Errorf("before the %s flood: %w", attack, err)
			}
		}
		say("%s: floods on CPU %d for %s (+2s to settle), route updates every %s", attackLabel(attack), dosFloodCPU, o.Duration, o.UpdateInterval)
		r, err := dosRun(ctx, o, &lo, fl, sk, kinds)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", attackLabel(attack), err)
		}
		r.Protection, r.Attack = protect, attack
		say("%s: session drops %d, updates %d/%d, forwarded %.2f Mpps, attack offered %.2f Mpps", attackLabel(attack),
			r.SessionDrops, r.UpdatesArrived, r.UpdatesSent, r.Forwarded/1e6, r.AttackOffered()/1e6)
		rs = append(rs, r)
	}
	return rs, nil
}

// attackLabel names a run's attack in progress lines and tables.
func attackLabel(attack string) string {
	if attack == AttackAll {
		return "every attack"
	}
	return attack + " flood alone"
}

// dosRun floods the lab with the floods kinds for o.Duration (after 2 s to
// settle) while the probes run, and measures.
func dosRun(ctx context.Context, o DoSOptions, lo *Options, fl *floods, sk *sink, kinds []int) (DoSResult, error) {
	fl.start(ctx, kinds)
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return DoSResult{}, errors.Join(err, fl.halt())
	}
	sw, err := watchSession(ctx, lo)
	if err != nil {
		return DoSResult{}, errors.Join(err, fl.halt())
	}
	before, err := takeSnapshot(lo, fl, sk)
	if err != nil {
		_, _ = sw.result()
		return DoSResult{}, errors.Join(err, fl.halt())
	}
	// The prober makes changes until the window ends, then gives the last
	// one up to the hold time to arrive, the floods still running.
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	type probed struct {
		u   updates
		err error
	}
	pc := make(chan probed, 1)
	end := before.at.Add(o.Duration)
	go func() {
		u, err := probeUpdates(pctx, lo, o.UpdateInterval, end, 9*time.Second)
		pc <- probed{u, err}
	}()
	var p probed
	proberDone := false
	select {
	case p = <-pc: // its last change arrived before the end, or it failed
		proberDone = true
		if p.err == nil {
			p.err = sleepCtx(ctx, time.Until(end))
		}
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	after, serr := takeSnapshot(lo, fl, sk)
	if !proberDone {
		p = <-pc
	}
	stopProbe()
	sess, werr := sw.result()
	herr := fl.halt()
	if err := errors.Join(ctx.Err(), p.err, serr, werr, herr); err != nil {
		return DoSResult{}, err
	}
	return results(before, after, sess, p.u), nil
}

// dosReady waits until the session is established and the FE has every
// route again.
func dosReady(ctx context.Context, o *Options) error {
	want := o.Routes + 2
	return o.waitFor(ctx, 60*time.Second, func(st Status) error {
		switch {
		case st.BGPState != "established":
			return fmt.Errorf("bgp session %q", st.BGPState)
		case !st.FEAssociated:
			return errors.New("FE not associated")
		case st.FERoutes < want:
			return fmt.Errorf("%d of %d routes in the FE", st.FERoutes, want)
		}
		return nil
	})
}

// dosPorts gives the router's port to-peer two receive queues with threaded
// NAPI and, without protection, RPS over every CPU; then restarts the FE so
// that its XDP program is attached to both queues (veth gives a queue added
// while a program is attached none), and waits until it has the routes again.
func dosPorts(ctx context.Context, o *Options, protect bool) error {
	rtr := o.Namespace("rtr")
	if err := inNS(rtr, "ethtool", "-L", "to-peer", "rx", "2"); err != nil {
		return fmt.Errorf("%w: two receive queues on to-peer: %w", ErrDoSSetup, err)
	}
	if err := writeNetSysfs(rtr, "to-peer", "threaded", "1"); err != nil {
		return fmt.Errorf("%w: threaded NAPI on to-peer: %w", ErrDoSSetup, err)
	}
	if !protect {
		mask := cpuMask(runtime.NumCPU())
		for q := range 2 {
			if err := writeNetSysfs(rtr, "to-peer", fmt.Sprintf("queues/rx-%d/rps_cpus", q), mask); err != nil {
				return fmt.Errorf("%w: RPS on to-peer: %w", ErrDoSSetup, err)
			}
		}
	}
	if err := Restart(*o, "fe", false); err != nil {
		return err
	}
	return dosReady(ctx, o)
}

// pinQueues pins the NAPI kthreads of to-peer's two receive queues, queue 0
// to the control CPU and queue 1 to the flood CPU, and checks the result
// with a burst of the flood: its frames (sent from the flood CPU, so on
// queue 1) must be counted by the FE's program on the flood CPU. NAPI IDs
// follow the queues' order on veth; the check swaps the pins if not.
func pinQueues(o *Options, fl *floods) error {
	threads, err := napiThreads(o.Namespace("rtr"), "to-peer")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDoSSetup, err)
	}
	if len(threads) != 2 {
		return fmt.Errorf("%w: to-peer has %d NAPI kthreads, want 2 (threaded, two queues)", ErrDoSSetup, len(threads))
	}
	cpus := []int{dosControlCPU, dosFloodCPU}
	for try := range 2 {
		for i, t := range threads {
			if err := pinTaskTo(t.PID, cpus[i]); err != nil {
				return err
			}
		}
		onFloodCPU, total, err := burstCPU(o, fl)
		if err != nil {
			return err
		}
		if total > 0 && onFloodCPU*10 >= total*9 {
			return interruptPriority(threads[0].PID)
		}
		if try == 0 {
			slices.Reverse(threads)
			continue
		}
		return fmt.Errorf("%w: a burst sent from CPU %d reached the FE's program on that CPU %d times out of %d, whatever the NAPI pins", ErrDoSSetup, dosFloodCPU, onFloodCPU, total)
	}
	return nil
}

// interruptPriority gives the control queue's NAPI kthread the priority of
// a threaded interrupt handler (SCHED_FIFO 50, what Linux gives those by
// default): a NIC's receive interrupt and softirq run before any thread of
// the CPU, while a NAPI kthread at nice 0 takes turns with the CE and the
// peer on the control CPU. At the turns' length, a few milliseconds, the
// queue's 256-frame veth ring fills under the ARP flood, which lands on
// queue 0 as on a NIC that cannot hash ARP, and drops the BGP segments that
// share it: each costs the session a retransmission timeout (200 ms or
// more), with or without protection. The flood queue's kthread stays at
// nice 0, taking half of the flood CPU from the generators (genNice).
func interruptPriority(tid int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("SCHED_FIFO for the control queue's NAPI kthread %d: %w", tid, err)
	}
	return nil
}

// burstCPU sends a burst of the UDP flood and returns how many packets the
// FE's program received on the flood CPU, and on all CPUs.
func burstCPU(o *Options, fl *floods) (onFloodCPU, total uint64, err error) {
	rx := func() ([]uint64, error) {
		st, err := GetStatus(*o)
		if err != nil {
			return nil, err
		}
		var out []uint64
		for _, c := range st.FE.PerCPU {
			out = append(out, c["rx"])
		}
		return out, nil
	}
	a, err := rx()
	if err != nil {
		return 0, 0, err
	}
	if err := fl.burst(floodUDP, 1<<16); err != nil {
		return 0, 0, err
	}
	time.Sleep(200 * time.Millisecond)
	b, err := rx()
	if err != nil {
		return 0, 0, err
	}
	for i := range min(len(a), len(b)) {
		d := b[i] - a[i]
		total += d
		if i == dosFloodCPU {
			onFloodCPU = d
		}
	}
	return onFloodCPU, total, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// results turns two snapshots and the probes into a DoSResult (its mode and
// attack left for the caller).
func results(a, b snapshot, s session, u updates) DoSResult {
	dt := b.at.Sub(a.at).Seconds()
	rate := func(x, y uint64) float64 {
		if y < x {
			return 0
		}
		return float64(y-x) / dt
	}
	r := DoSResult{
		Duration:     b.at.Sub(a.at),
		SessionDrops: s.Drops, SessionDown: s.Down, LastDown: s.LastDown,
		UpdatesSent: u.Sent, UpdatesArrived: u.Arrived,
		Offered:   map[string]float64{},
		Forwarded: rate(a.sink, b.sink),
		Datapath:  map[string]float64{},
		Kernel:    map[string]float64{},
	}
	delays := slices.Sorted(slices.Values(u.Delays))
	if n := len(delays); n > 0 {
		r.DelayP50 = delays[(n-1)*50/100]
		r.DelayP99 = delays[(n-1)*99/100]
		r.DelayMax = delays[n-1]
	}
	for i := range nFloods {
		name := floodName(i)
		r.Offered[name] = rate(a.sent[i], b.sent[i])
	}
	r.RingDropped = rate(a.ring.xmitErr, b.ring.xmitErr)
	// The peer's tx_dropped counts the XDP frames too.
	r.RingDroppedSKB = max(0, rate(a.ring.skbDropped, b.ring.skbDropped)-r.RingDropped)
	for q := 0; q < len(b.ring.queued); q++ {
		r.QueueArrived = append(r.QueueArrived, rate(a.ring.queued[q], b.ring.queued[q]))
	}
	for k, v := range b.fe {
		r.Datapath[k] = rate(a.fe[k], v)
	}
	for i := range min(len(a.feCPU), len(b.feCPU)) {
		m := map[string]float64{}
		for k, v := range b.feCPU[i] {
			m[k] = rate(a.feCPU[i][k], v)
		}
		r.DatapathCPU = append(r.DatapathCPU, m)
	}
	for k, v := range b.kernel {
		r.Kernel[k] = rate(a.kernel[k], v)
	}
	for i := range min(len(a.backlogDrops), len(b.backlogDrops)) {
		r.BacklogDrops = append(r.BacklogDrops, rate(a.backlogDrops[i], b.backlogDrops[i]))
	}
	for i := range min(len(a.cpu), len(b.cpu)) {
		total := float64(b.cpu[i].total - a.cpu[i].total)
		if total <= 0 {
			total = 1
		}
		r.CPUBusy = append(r.CPUBusy, 100*float64(b.cpu[i].busy-a.cpu[i].busy)/total)
		r.CPUSoftirq = append(r.CPUSoftirq, 100*float64(b.cpu[i].softirq-a.cpu[i].softirq)/total)
	}
	return r
}
