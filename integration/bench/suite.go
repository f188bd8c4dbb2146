package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/fe/datapath"
	"github.com/splitplane/splitplane/integration/bench/gen"
	"github.com/splitplane/splitplane/integration/bench/probe"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/routegen"
)

// fwdSuite runs the sections of All that need the gen -- router -- sink
// topology of Forward, in one topology: forwarding rates at the small and
// the big table, then with the big table the payload sweep, the per-packet
// overhead, the end-to-end latency and the lookup figures.
type fwdSuite struct {
	opts     *AllOptions
	rep      *Report
	progress func(string, ...any)

	t    *fwdTopo
	g    *gen.Gen
	p    *probe.Probe
	sink link.Link // what is attached to the sink port: the counting or the latency sink
	d    *datapath.Datapath

	loaded  int          // the size of the table in the kernel and the datapath
	bigDsts []netip.Addr // destinations inside the big table
	limits  []float64    // every bare-redirect rate of 64-byte frames, both tables
}

// fwdModes are the forwarders the suite compares, in the order they take
// turns.
type suiteMode int

const (
	modeSplitplane suiteMode = iota
	modeKernel
	modeBare
	numModes
)

func (m suiteMode) String() string {
	return [...]string{"splitplane", "kernel", "bare redirect"}[m]
}

// genHeader is the generator's header: from gen to the router's ingress
// port, port 9 (discard).
func genHeader() gen.Header {
	return gen.Header{
		SrcMAC: fwdMAC(roleGen), DstMAC: fwdMAC(roleRtrIn), Src: fwdAddr(roleGen),
		SrcPort: 40000, DstPort: 9, TTL: 64,
	}
}

// run runs the sections; one that fails is reported through fail and the
// others go on, unless the topology itself fails (the returned error).
func (s *fwdSuite) run(ctx context.Context, fail func(string, error)) (err error) {
	o := s.opts
	s.t = newFwdTopo("spb")
	s.t.frames = o.frames
	defer func() {
		if s.d != nil {
			if cerr := s.d.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if cerr := s.t.down(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	s.progress("topology %s, %s, %s", s.t.ns[roleGen], s.t.ns[roleRtr], s.t.ns[roleSink])
	if err := s.t.up(ctx); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	if s.g, err = gen.Load(); err != nil {
		return err
	}
	s.t.closers = append(s.t.closers, s.g.Close)
	if s.p, err = probe.Load(); err != nil {
		return err
	}
	s.t.closers = append(s.t.closers, s.p.Close, func() error {
		if s.sink == nil {
			return nil
		}
		l := s.sink
		s.sink = nil
		return l.Close()
	})
	if err := s.attachSink(false); err != nil {
		return err
	}

	section := func(name string, f func() error) {
		if !o.runs(name) || ctx.Err() != nil {
			return
		}
		if err := f(); err != nil {
			fail(name, err)
		}
	}
	section(SectionForward, func() error { return s.forward(ctx, o.SmallRoutes) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.loaded != o.BigRoutes {
		if err := s.loadTable(ctx, o.BigRoutes); err != nil {
			return err
		}
	}
	section(SectionForward, func() error {
		if err := s.forward(ctx, o.BigRoutes); err != nil {
			return err
		}
		limit := median(s.limits)
		s.rep.Metrics = append(s.rep.Metrics, Result{Metric: MetricRedirectLimitPPS, Value: limit, Unit: "pps"})
		for _, row := range s.rep.Forward {
			_, _, vs := ForwardMetrics(row.Routes)
			s.rep.Metrics = append(s.rep.Metrics, Result{Metric: vs, Value: row.Splitplane / limit, Unit: "ratio", Baseline: MetricRedirectLimitPPS, BaselineValue: limit})
		}
		return s.edge(ctx)
	})
	section(SectionPayload, func() error { return s.payloads(ctx) })
	section(SectionOverhead, func() error { return s.overhead(ctx) })
	section(SectionLatency, func() error { return s.latency(ctx) })
	section(SectionLookup, func() error { return s.lookup(ctx) })
	return ctx.Err()
}

// attachSink attaches the counting sink, or the latency sink, to the sink
// port in place of what is there.
func (s *fwdSuite) attachSink(latency bool) error {
	if s.sink != nil {
		l := s.sink
		s.sink = nil
		if err := l.Close(); err != nil {
			return err
		}
	}
	return s.t.in(roleSink, func() error {
		var (
			l   link.Link
			err error
		)
		if latency {
			l, err = s.p.AttachLatencySink(s.t.ifindex[roleSink], genHeader().DstPort)
		} else {
			l, err = s.g.AttachSink(s.t.ifindex[roleSink])
		}
		if err == nil {
			s.sink = l
		}
		return err
	})
}

// loadTable puts n routegen routes into the router namespace's kernel FIB
// (main table, replacing the routes there) and into a freshly loaded
// datapath, and points the generator at random destinations inside them.
func (s *fwdSuite) loadTable(ctx context.Context, n int) error {
	prefixes := routegen.Generate(n, s.opts.Seed)
	if len(prefixes) != n {
		return fmt.Errorf("route generator returned %d of %d prefixes", len(prefixes), n)
	}
	if s.d != nil {
		err := s.d.Close()
		s.d, s.loaded = nil, 0
		if err != nil {
			return err
		}
	}
	if err := s.t.flushKernelRoutes(ctx); err != nil {
		return fmt.Errorf("kernel FIB: %w", err)
	}
	start := time.Now()
	if err := s.t.installKernelRoutes(ctx, prefixes); err != nil {
		return fmt.Errorf("kernel FIB: %w", err)
	}
	s.progress("%d routes into the kernel FIB in %.1fs", n, time.Since(start).Seconds())
	d, _, err := s.t.loadDatapath(prefixes, false)
	if err != nil {
		return fmt.Errorf("datapath: %w", err)
	}
	s.d = d
	dsts := destinations(prefixes, s.opts.Seed)
	if err := s.g.SetTraffic(genHeader(), dsts); err != nil {
		return err
	}
	s.loaded = n
	if n == s.opts.BigRoutes {
		s.bigDsts = dsts
	}
	return nil
}

// measure runs the generator with mode forwarding for dur and returns the
// sink's rate.
func (s *fwdSuite) measure(ctx context.Context, m suiteMode, dur time.Duration) (float64, error) {
	switch m {
	case modeSplitplane:
		return s.t.measureDatapath(ctx, s.g, s.d, dur)
	case modeKernel:
		return s.t.measureKernel(ctx, s.g, dur)
	}
	return s.t.measureBare(ctx, s.g, dur)
}

// forward measures the rate of 64-byte frames with a table of n routes.
func (s *fwdSuite) forward(ctx context.Context, n int) error {
	if n != s.loaded {
		if err := s.loadTable(ctx, n); err != nil {
			return err
		}
	}
	var rates [numModes][]float64
	for r := range s.opts.Rounds {
		var line []string
		for m := range numModes {
			pps, err := s.measure(ctx, m, s.opts.ForwardDuration)
			if err != nil {
				return fmt.Errorf("%d routes, %s, round %d: %w", n, m, r+1, err)
			}
			rates[m] = append(rates[m], pps)
			line = append(line, fmt.Sprintf("%s %.2f Mpps", m, pps/1e6))
		}
		s.progress("forward, %d routes, round %d/%d: %s", n, r+1, s.opts.Rounds, strings.Join(line, ", "))
	}
	s.limits = append(s.limits, rates[modeBare]...)
	row := ForwardRow{Routes: n, Splitplane: median(rates[modeSplitplane]), Kernel: median(rates[modeKernel]), Limit: median(rates[modeBare])}
	s.rep.Forward = append(s.rep.Forward, row)
	fwd, kern, _ := ForwardMetrics(n)
	s.rep.Metrics = append(s.rep.Metrics,
		Result{Metric: fwd, Value: row.Splitplane, Unit: "pps", Baseline: kern, BaselineValue: row.Kernel},
		Result{Metric: kern, Value: row.Kernel, Unit: "pps"})
	return nil
}

// payloads measures the rate of every payload size with the big table.
func (s *fwdSuite) payloads(ctx context.Context) error {
	o := s.opts
	rates := make([][numModes][]float64, len(o.Payloads))
	defer s.g.SetPayload(gen.FrameLen - gen.HeaderLen) // back to 64-byte frames
	for r := range o.Rounds {
		for i, p := range o.Payloads {
			if err := s.g.SetPayload(p); err != nil {
				return err
			}
			var line []string
			for m := range numModes {
				pps, err := s.measure(ctx, m, o.PayloadDuration)
				if err != nil {
					return fmt.Errorf("payload %d, %s, round %d: %w", p, m, r+1, err)
				}
				rates[i][m] = append(rates[i][m], pps)
				line = append(line, fmt.Sprintf("%s %.2f Mpps %.0f Mbps", m, pps/1e6, pps*float64(p)*8/1e6))
			}
			s.progress("payload %d bytes, round %d/%d: %s", p, r+1, o.Rounds, strings.Join(line, ", "))
		}
	}
	for i, p := range o.Payloads {
		row := PayloadRow{Payload: p, Frame: gen.FrameLenFor(p),
			Splitplane: median(rates[i][modeSplitplane]), Kernel: median(rates[i][modeKernel]), Limit: median(rates[i][modeBare])}
		s.rep.Payload = append(s.rep.Payload, row)
		pps, kpps, lpps, mbps, kmbps, lmbps := PayloadMetrics(p)
		s.rep.Metrics = append(s.rep.Metrics,
			Result{Metric: pps, Value: row.Splitplane, Unit: "pps", Baseline: kpps, BaselineValue: row.Kernel},
			Result{Metric: kpps, Value: row.Kernel, Unit: "pps"},
			Result{Metric: lpps, Value: row.Limit, Unit: "pps"})
		if p > 0 {
			s.rep.Metrics = append(s.rep.Metrics,
				Result{Metric: mbps, Value: row.Mbps(row.Splitplane), Unit: "Mbps", Baseline: kmbps, BaselineValue: row.Mbps(row.Kernel)},
				Result{Metric: kmbps, Value: row.Mbps(row.Kernel), Unit: "Mbps"},
				Result{Metric: lmbps, Value: row.Mbps(row.Limit), Unit: "Mbps"})
		}
	}
	return nil
}

// withMode sets the router up for mode m (splitplane's datapath attached to
// both ports, the kernel forwarding, or the bare redirect), runs f, and
// undoes it.
func (s *fwdSuite) withMode(ctx context.Context, m suiteMode, f func() error) (err error) {
	t := s.t
	if err := t.setIPForward(ctx, m == modeKernel); err != nil {
		return err
	}
	defer func() {
		if m == modeKernel {
			if ferr := t.setIPForward(context.Background(), false); err == nil {
				err = ferr
			}
		}
	}()
	switch m {
	case modeSplitplane:
		var attached []int
		defer func() {
			for _, ifindex := range attached {
				if derr := s.d.Detach(ifindex); derr != nil && err == nil {
					err = derr
				}
			}
		}()
		err := t.in(roleRtr, func() error {
			for _, ifindex := range []int{t.ifindex[roleRtrIn], t.ifindex[roleRtrOut]} {
				if err := s.d.Attach(ifindex, datapath.ModeNative); err != nil {
					return err
				}
				attached = append(attached, ifindex)
			}
			return nil
		})
		if err != nil {
			return err
		}
	case modeBare:
		var l link.Link
		err := t.in(roleRtr, func() error {
			var err error
			l, err = s.g.AttachRedirectBare(t.ifindex[roleRtrIn], t.ifindex[roleRtrOut])
			return err
		})
		if err != nil {
			return err
		}
		defer func() {
			if cerr := l.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	return f()
}

// overheadBatch is the number of repeats in one BPF_PROG_TEST_RUN call of
// the batch figures; the frame's TTL starts at 255 so that every repeat
// forwards (a test run hands each repeat the frame the last one left).
const overheadBatch = 64

// overhead times BPF_PROG_TEST_RUN runs of splitplane's XDP program and of
// the bare redirect, per payload size, in the router namespace with the
// frame arriving on the router's ingress port, every call to the next of
// the generator's random destinations. Two ways:
//   - single runs (repeat 1): the kernel's clock read before and after one
//     run covers the program with its lookup, rewrite and redirect
//     decision, and the test harness's fixed cost around a run (bottom
//     halves off and on, two clock reads), which the bare redirect's
//     figure shows on its own; the caches are as the system call left
//     them, as for a packet that reaches an idle router;
//   - batches (repeat overheadBatch, one destination per batch): the
//     kernel's time for the batch divided by its runs, the warm per-packet
//     cost of a router under load, one cold first run spread over the
//     batch.
//
// Not covered either way: copying the frame in, and the transmission (a
// test run decides to redirect but does not send).
func (s *fwdSuite) overhead(ctx context.Context) error {
	o := s.opts
	t := s.t
	batches := max(10, o.OverheadRuns/5)
	// per payload, per round: percentiles
	type sample struct{ sp, bare, spBatch, bareBatch []Pcts }
	all := make([]sample, len(o.Payloads))
	runs := func(prog suiteMode, frame []byte, calls int, repeat uint32) ([]float64, error) {
		ns := make([]float64, 0, calls)
		err := s.withMode(ctx, prog, func() error {
			return t.in(roleRtr, func() error {
				p := s.d.Program()
				if prog == modeBare {
					p = s.g.BareProgram()
				}
				if prog == modeSplitplane && repeat > 1 {
					// Each repeat gets the frame the last one left, addressed
					// to the next hop's MAC: for the batch, the ingress
					// port takes that MAC, so the program's check that a
					// frame is for the port still runs, and passes.
					restore, err := s.portMAC(t.ifindex[roleRtrIn], fwdMAC(roleSink))
					if err != nil {
						return err
					}
					defer restore()
				}
				for i := range calls {
					if i%1024 == 0 && ctx.Err() != nil {
						return ctx.Err()
					}
					setDst(frame, s.bigDsts[i%len(s.bigDsts)])
					ret, d, err := testRunXDP(p, frame, t.ifindex[roleRtrIn], repeat)
					if err != nil {
						return err
					}
					if ret != xdpRedirect {
						return fmt.Errorf("%s returned %d, want XDP_REDIRECT (4): %w", prog, ret, ErrIncomplete)
					}
					ns = append(ns, float64(d.Nanoseconds()))
				}
				return nil
			})
		})
		return ns, err
	}
	for r := range o.Rounds {
		for i, p := range o.Payloads {
			frame := gen.Frame(genHeader(), s.bigDsts[0], p)
			batchFrame := slices.Clone(frame)
			batchFrame[14+8] = 255 // TTL
			copy(batchFrame[0:6], fwdMAC(roleSink))
			var figs [4][]float64
			for k, c := range []struct {
				mode   suiteMode
				frame  []byte
				calls  int
				repeat uint32
			}{
				{modeSplitplane, frame, o.OverheadRuns, 1},
				{modeBare, frame, o.OverheadRuns, 1},
				{modeSplitplane, batchFrame, batches, overheadBatch},
				{modeBare, batchFrame, batches, overheadBatch},
			} {
				ns, err := runs(c.mode, c.frame, c.calls, c.repeat)
				if err != nil {
					return fmt.Errorf("payload %d, %s, repeat %d, round %d: %w", p, c.mode, c.repeat, r+1, err)
				}
				figs[k] = ns
			}
			all[i].sp = append(all[i].sp, pcts(figs[0]))
			all[i].bare = append(all[i].bare, pcts(figs[1]))
			all[i].spBatch = append(all[i].spBatch, pcts(figs[2]))
			all[i].bareBatch = append(all[i].bareBatch, pcts(figs[3]))
			s.progress("overhead p10/p50/p90, payload %d bytes, round %d/%d: single runs: splitplane %s ns, bare redirect %s ns; batches of %d: splitplane %s ns, bare redirect %s ns",
				p, r+1, o.Rounds, fmtPcts(all[i].sp[r], 0), fmtPcts(all[i].bare[r], 0),
				overheadBatch, fmtPcts(all[i].spBatch[r], 0), fmtPcts(all[i].bareBatch[r], 0))
		}
	}
	for i, p := range o.Payloads {
		row := OverheadRow{Payload: p, Splitplane: medianPcts(all[i].sp), Bare: medianPcts(all[i].bare),
			SplitplaneBatch: medianPcts(all[i].spBatch), BareBatch: medianPcts(all[i].bareBatch)}
		s.rep.Overhead = append(s.rep.Overhead, row)
		for j, q := range Percentiles() {
			sp, bare := OverheadMetrics(q, p)
			spb, bareb := OverheadBatchMetrics(q, p)
			s.rep.Metrics = append(s.rep.Metrics,
				Result{Metric: sp, Value: row.Splitplane[j], Unit: "ns", Baseline: bare, BaselineValue: row.Bare[j]},
				Result{Metric: bare, Value: row.Bare[j], Unit: "ns"},
				Result{Metric: spb, Value: row.SplitplaneBatch[j], Unit: "ns", Baseline: bareb, BaselineValue: row.BareBatch[j]},
				Result{Metric: bareb, Value: row.BareBatch[j], Unit: "ns"})
		}
	}
	return nil
}

const xdpRedirect = 4 // XDP_REDIRECT

// portMAC gives the datapath's port ifindex the MAC mac (with the link's
// MTU) and returns what puts its own back; it runs in the router's
// namespace.
func (s *fwdSuite) portMAC(ifindex int, mac net.HardwareAddr) (restore func(), err error) {
	ifi, err := net.InterfaceByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	if err := s.d.SetPortLink(ifindex, mac, ifi.MTU); err != nil {
		return nil, err
	}
	return func() { _ = s.d.SetPortLink(ifindex, ifi.HardwareAddr, ifi.MTU) }, nil
}

// latency sends timestamped probes, one every ProbeInterval, from an
// AF_PACKET socket in the generator namespace through the router to the
// latency sink, per payload and mode. A probe's latency runs from the
// sender's clock read just before sendto to the sink's XDP program: the
// sender's socket and veth transmit, the router, the second veth, the
// sink's receive. The bare redirect's figure is that path with a router
// that does nothing.
func (s *fwdSuite) latency(ctx context.Context) (err error) {
	o := s.opts
	t := s.t
	if err := s.attachSink(true); err != nil {
		return err
	}
	defer func() {
		if serr := s.attachSink(false); serr != nil && err == nil {
			err = serr
		}
	}()
	sender, err := newProbeSender(t)
	if err != nil {
		return err
	}
	defer sender.close()
	all := make([][numModes][]Pcts, len(o.Payloads))
	for r := range o.Rounds {
		for i, p := range o.Payloads {
			frame := gen.Frame(genHeader(), s.bigDsts[0], p)
			var line []string
			for m := range numModes {
				var lat []time.Duration
				err := s.withMode(ctx, m, func() error {
					if err := s.p.ResetLatency(); err != nil {
						return err
					}
					if err := sender.send(ctx, frame, s.bigDsts, o.Probes, o.ProbeInterval); err != nil {
						return err
					}
					// The last probes may still be on their way.
					deadline := time.Now().Add(time.Second)
					for {
						got, n, err := s.p.Latencies()
						if err != nil {
							return err
						}
						lat = got
						if int(n) >= o.Probes || time.Now().After(deadline) {
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
					if len(lat) < o.Probes*9/10 {
						return fmt.Errorf("%d of %d probes reached the sink: %w", len(lat), o.Probes, ErrIncomplete)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("payload %d, %s, round %d: %w", p, m, r+1, err)
				}
				us := make([]float64, len(lat))
				for k, d := range lat {
					us[k] = float64(d) / 1e3
				}
				all[i][m] = append(all[i][m], pcts(us))
				line = append(line, fmt.Sprintf("%s %s µs", m, fmtPcts(all[i][m][r], 1)))
			}
			s.progress("latency p10/p50/p90, payload %d bytes, round %d/%d: %s", p, r+1, o.Rounds, strings.Join(line, ", "))
		}
	}
	for i, p := range o.Payloads {
		row := LatencyRow{Payload: p, Splitplane: medianPcts(all[i][modeSplitplane]), Kernel: medianPcts(all[i][modeKernel]), Bare: medianPcts(all[i][modeBare])}
		s.rep.Latency = append(s.rep.Latency, row)
		for j, q := range Percentiles() {
			sp, kern, bare := LatencyMetrics(q, p)
			s.rep.Metrics = append(s.rep.Metrics,
				Result{Metric: sp, Value: row.Splitplane[j], Unit: "us", Baseline: kern, BaselineValue: row.Kernel[j]},
				Result{Metric: kern, Value: row.Kernel[j], Unit: "us"},
				Result{Metric: bare, Value: row.Bare[j], Unit: "us"})
		}
	}
	return nil
}

// flushKernelRoutes deletes the routes installKernelRoutes added (all
// static routes of the main table; connected routes stay).
func (t *fwdTopo) flushKernelRoutes(ctx context.Context) error {
	return harness.Run(ctx, "ip", "-n", t.ns[roleRtr], "route", "flush", "table", "main", "proto", "boot")
}

// installKernelTable puts the prefixes into routing table table of the
// router namespace, via the sink, with one `ip -batch`.
func (t *fwdTopo) installKernelTable(ctx context.Context, prefixes []netip.Prefix, table int) error {
	var b bytes.Buffer
	b.Grow(len(prefixes) * 56)
	via, dev := fwdAddr(roleSink).String(), fwdPort(roleRtrOut)
	for _, p := range prefixes {
		fmt.Fprintf(&b, "route add %s via %s dev %s table %d\n", p, via, dev, table)
	}
	cmd := exec.CommandContext(ctx, "ip", "-n", t.ns[roleRtr], "-batch", "-")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ip -batch: %w: %s", err, harness.FirstLines(out, 5))
	}
	return nil
}

// defaultRoute adds (or, with add false, removes) a default route via the
// sink to routing table table of the router namespace.
func (t *fwdTopo) defaultRoute(ctx context.Context, table int, add bool) error {
	verb := "replace"
	if !add {
		verb = "del"
	}
	args := []string{"-n", t.ns[roleRtr], "route", verb, "default", "via", fwdAddr(roleSink).String(),
		"dev", fwdPort(roleRtrOut), "table", strconv.Itoa(table)}
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, harness.FirstLines(out, 5))
	}
	return nil
}

// setDst writes dst into an Ethernet/IPv4 frame and recomputes the header
// checksum.
func setDst(frame []byte, dst netip.Addr) {
	setDestination(frame, binary.BigEndian.Uint32(dst.AsSlice()))
}

// pcts returns the values at Percentiles of v (nearest rank).
func pcts(v []float64) Pcts {
	s := slices.Clone(v)
	slices.Sort(s)
	out := make(Pcts, len(Percentiles()))
	if len(s) == 0 {
		return out
	}
	for i, q := range Percentiles() {
		k := int(math.Ceil(float64(q)/100*float64(len(s)))) - 1
		out[i] = s[max(0, min(k, len(s)-1))]
	}
	return out
}

// medianPcts returns, for each percentile, the median over the rounds.
func medianPcts(rounds []Pcts) Pcts {
	out := make(Pcts, len(Percentiles()))
	for i := range out {
		var v []float64
		for _, r := range rounds {
			v = append(v, r[i])
		}
		out[i] = median(v)
	}
	return out
}

// fmtPcts writes the 10th, 50th and 90th percentile.
func fmtPcts(p Pcts, decimals int) string {
	return fmt.Sprintf("%.*f/%.*f/%.*f", decimals, p[0], decimals, p[2], decimals, p[4])
}

// probeSender sends timestamped probes from an AF_PACKET socket on the
// generator's port.
type probeSender struct {
	fd int
	to *unix.SockaddrLinklayer
}

func newProbeSender(t *fwdTopo) (*probeSender, error) {
	ps := &probeSender{fd: -1}
	err := t.in(roleGen, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("probe socket: %w", err)
		}
		ps.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	ps.to = &unix.SockaddrLinklayer{Ifindex: t.ifindex[roleGen], Protocol: htons(unix.ETH_P_IP), Halen: 6}
	copy(ps.to.Addr[:], fwdMAC(roleRtrIn))
	return ps, nil
}

// send sends n probes built from frame, to dsts in turn, one every
// interval: the thread spins between them (sleeping would add the timer's
// slack to the interval), each stamped with CLOCK_MONOTONIC just before
// its sendto.
func (ps *probeSender) send(ctx context.Context, frame []byte, dsts []netip.Addr, n int, interval time.Duration) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := slices.Clone(frame)
	var ts unix.Timespec
	now := func() int64 {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	next := now()
	for i := range n {
		if i%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		setDst(f, dsts[i%len(dsts)])
		for now() < next {
		}
		stamp := now()
		if err := probe.Stamp(f, stamp); err != nil {
			return err
		}
		if err := unix.Sendto(ps.fd, f, 0, ps.to); err != nil && !errors.Is(err, unix.ENOBUFS) {
			return fmt.Errorf("probe: %w", err)
		}
		next = stamp + interval.Nanoseconds()
	}
	return nil
}

func (ps *probeSender) close() {
	if ps.fd >= 0 {
		unix.Close(ps.fd)
		ps.fd = -1
	}
}
