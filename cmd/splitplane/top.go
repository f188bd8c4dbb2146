package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

// routesEvery bounds how often top lists the routes to count them: a full
// table is a million routes, too many to stream every second.
const routesEvery = 5 * time.Second

func topCmd() *cobra.Command {
	var (
		f        apiFlags
		interval time.Duration
		once     bool
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live view of the router: per-core and per-port packet rates, drops, BGP, FIB size",
		Long: "A live view of the router through the CE's API, redrawn every --interval: per FE its\n" +
			"packet rates (received, forwarded, passed to the kernel, dropped) in total, per core and\n" +
			"per port, the exception reasons (packets passed to the kernel or dropped, by reason),\n" +
			"the BGP sessions, and the FIB's size with the routes by origin and the unresolved ones\n" +
			"by reason (counted every 5s).\n" +
			"Rates come from successive counter samples; counters the FEs do not report show \"-\".\n" +
			"Ctrl-C quits. --once takes two samples --interval apart, prints one frame with the\n" +
			"rates and exits (for scripts and tests); it fails only if the API cannot be reached.\n" +
			exitCodesHelp,
		Example: "  splitplane top\n  splitplane top --once --interval 2s",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usageError(cmd, fmt.Errorf("--interval %v: must be positive", interval))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return withAPI(cmd, &f, func(c *apiConn) error {
				w := cmd.OutOrStdout()
				if once {
					return topOnce(ctx, c, w, interval)
				}
				tty := false
				if fd, ok := w.(interface{ Fd() uintptr }); ok {
					tty = term.IsTerminal(int(fd.Fd()))
				}
				return topLive(ctx, c, w, interval, tty)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between refreshes (and, with --once, between the two samples)")
	cmd.Flags().BoolVar(&once, "once", false, "print one frame (two samples --interval apart) and exit")
	return cmd
}

// topOnce prints one frame from two samples interval apart.
func topOnce(ctx context.Context, c *apiConn, w io.Writer, interval time.Duration) error {
	first := takeSample(ctx, c, nil)
	if err := first.failed(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(interval):
	}
	second := takeSample(ctx, c, first)
	if err := second.failed(); err != nil {
		return err
	}
	_, err := w.Write(renderTop(first, second, c.addr, interval))
	return err
}

// topLive redraws a frame every interval until ctx ends. On a terminal each
// frame replaces the last (plain ANSI sequences); elsewhere frames
// follow each other. An unreachable API is shown, and retried.
func topLive(ctx context.Context, c *apiConn, w io.Writer, interval time.Duration, tty bool) error {
	if tty {
		fmt.Fprint(w, "\033[?25l")       // hide the cursor
		defer fmt.Fprint(w, "\033[?25h") // and show it again
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var prev *topSample
	for {
		cur := takeSample(ctx, c, prev)
		if ctx.Err() != nil {
			return nil
		}
		frame := renderTop(prev, cur, c.addr, interval)
		if tty {
			// Overwrite the last frame in place rather than clear the
			// screen first, which flickers: cursor home, each line cleared
			// to its end, the rest of the screen cleared after the frame.
			frame = bytes.ReplaceAll(frame, []byte("\n"), []byte("\033[K\n"))
			frame = append(append([]byte("\033[H"), frame...), "\033[J"...)
			if prev == nil {
				frame = append([]byte("\033[2J"), frame...)
			}
		} else {
			frame = append(frame, '\n')
		}
		if _, err := w.Write(frame); err != nil {
			return err
		}
		prev = cur
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// topSample is what one refresh read from the API.
type topSample struct {
	at        time.Time
	fes       []*splitplanev1.FE
	fesErr    error
	neighbors []*splitplanev1.Neighbor
	bgpErr    error
	routes    *routeCount // nil until counted
	routesAt  time.Time
	routesErr error
}

// failed returns an error if the sample read nothing at all (the API could
// not be reached): the FE listing's.
func (s *topSample) failed() error {
	if s.fesErr != nil && s.bgpErr != nil && (s.routes == nil || s.routesErr != nil) {
		return s.fesErr
	}
	return nil
}

// routeCount is the size of the FIB, the RIB's routes by origin, and the
// unresolved ones by reason.
type routeCount struct {
	fib4, fib6 int
	byOrigin   map[string]int
	unresolved map[string]int // by reason; nil: none
}

// takeSample reads the FEs, the neighbours and, if prev's count is older
// than routesEvery, the routes.
func takeSample(ctx context.Context, c *apiConn, prev *topSample) *topSample {
	s := &topSample{at: time.Now()}
	s.fesErr = c.call(ctx, "FEs.List", func(ctx context.Context) error {
		r, err := c.fes.List(ctx, &splitplanev1.ListFEsRequest{})
		s.fes = r.GetFes()
		return err
	})
	s.bgpErr = c.call(ctx, "BGP.Neighbors", func(ctx context.Context) error {
		r, err := c.bgp.Neighbors(ctx, &splitplanev1.ListNeighborsRequest{})
		s.neighbors = r.GetNeighbors()
		return err
	})
	if prev != nil && prev.routes != nil && s.at.Sub(prev.routesAt) < routesEvery {
		s.routes, s.routesAt = prev.routes, prev.routesAt
		return s
	}
	n := &routeCount{byOrigin: map[string]int{}}
	s.routesErr = c.call(ctx, "Routes.List", func(ctx context.Context) error {
		st, err := c.routes.List(ctx, &splitplanev1.ListRoutesRequest{})
		if err != nil {
			return err
		}
		for {
			r, err := st.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			n.byOrigin[originName(r.GetOrigin())]++
			if why := r.GetUnresolvedReason(); why != "" {
				if n.unresolved == nil {
					n.unresolved = map[string]int{}
				}
				n.unresolved[why]++
			}
			if r.GetInstalled() {
				if strings.Contains(r.GetPrefix(), ":") {
					n.fib6++
				} else {
					n.fib4++
				}
			}
		}
	})
	if s.routesErr == nil {
		s.routes, s.routesAt = n, s.at
	} else if prev != nil {
		s.routes, s.routesAt = prev.routes, prev.routesAt // keep showing the last count
	}
	return s
}

// counterSet flattens the counters of a sample, keyed by what they count, so
// that two samples can be subtracted.
type counterSet map[string]uint64

func (s *topSample) counters() counterSet {
	m := counterSet{}
	if s == nil {
		return m
	}
	add := func(key string, c *splitplanev1.Counters) {
		if c == nil {
			return
		}
		m[key+"|rx"], m[key+"|fwd"], m[key+"|pass"], m[key+"|drop"] = c.GetRxPackets(), c.GetForwardedPackets(), c.GetPassedPackets(), c.GetDroppedPackets()
	}
	for _, fe := range s.fes {
		add(fe.GetId(), fe.GetCounters())
		for _, cpu := range fe.GetCounters().GetCpus() {
			k := fmt.Sprintf("%s|cpu%d", fe.GetId(), cpu.GetCpu())
			m[k+"|rx"], m[k+"|fwd"], m[k+"|pass"], m[k+"|drop"] = cpu.GetRxPackets(), cpu.GetForwardedPackets(), cpu.GetPassedPackets(), cpu.GetDroppedPackets()
		}
		for r, n := range fe.GetCounters().GetByReason() {
			m[fe.GetId()+"|reason|"+r] = n
		}
		for _, p := range fe.GetPorts() {
			add(fmt.Sprintf("%s|port%d", fe.GetId(), p.GetId()), p.GetCounters())
		}
	}
	return m
}

// rates computes per-second rates between two samples.
type rates struct {
	prev, cur counterSet
	dt        float64 // seconds; 0: no previous sample
}

// rate is the rate of a counter as a cell: "-" without a previous sample or
// after a reset (the counter went down).
func (r rates) rate(key string) string {
	c, ok := r.cur[key]
	if !ok {
		return "-"
	}
	p, ok := r.prev[key]
	if !ok || r.dt <= 0 || c < p {
		return "-"
	}
	return si(float64(c-p) / r.dt)
}

// four is the rx, fwd, pass and drop rates of a key as cells.
func (r rates) four(key string) string {
	return fmt.Sprintf("%7s\t%7s\t%7s\t%7s", r.rate(key+"|rx"), r.rate(key+"|fwd"), r.rate(key+"|pass"), r.rate(key+"|drop"))
}

// fourHeader heads the columns of four.
const fourHeader = "   RX/s\t  FWD/s\t PASS/s\t DROP/s"

// si shows a rate with an SI suffix: 950, 12.3k, 1.25M, 2.00G.
func si(v float64) string {
	switch {
	case v < 1e3:
		return fmt.Sprintf("%.0f", v)
	case v < 1e6:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 1e9:
		return fmt.Sprintf("%.2fM", v/1e6)
	}
	return fmt.Sprintf("%.2fG", v/1e9)
}

// renderTop draws a frame of cur, with the rates since prev (nil: none).
func renderTop(prev, cur *topSample, addr string, interval time.Duration) []byte {
	var b bytes.Buffer
	r := rates{prev: prev.counters(), cur: cur.counters()}
	if prev != nil {
		r.dt = cur.at.Sub(prev.at).Seconds()
	}
	fmt.Fprintf(&b, "splitplane top  %s  %s  every %v  (Ctrl-C quits)\n\n", addr, cur.at.Format(time.TimeOnly), interval)

	switch {
	case cur.routes != nil:
		rc := cur.routes
		var origins []string
		for _, o := range []string{"api", "static", "bgp", "unknown"} {
			if n := rc.byOrigin[o]; n > 0 || o != "unknown" {
				origins = append(origins, fmt.Sprintf("%s %d", o, n))
			}
		}
		fmt.Fprintf(&b, "FIB  %d prefixes (ipv4 %d, ipv6 %d)   routes by origin: %s   (counted %s)\n",
			rc.fib4+rc.fib6, rc.fib4, rc.fib6, strings.Join(origins, ", "), cur.routesAt.Format(time.TimeOnly))
		if len(rc.unresolved) > 0 {
			total, reasons := 0, []string{}
			for _, r := range reasonOrder(rc.unresolved) {
				total += rc.unresolved[r]
				reasons = append(reasons, fmt.Sprintf("%s %d", r, rc.unresolved[r]))
			}
			fmt.Fprintf(&b, "     %d routes unresolved, not installed: %s   (splitplane route list --unresolved)\n", total, strings.Join(reasons, ", "))
		}
	case cur.routesErr != nil:
		fmt.Fprintf(&b, "FIB  %v\n", cur.routesErr)
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if cur.fesErr != nil {
		fmt.Fprintf(&b, "FEs: %v\n\n", cur.fesErr)
	} else if len(cur.fes) == 0 {
		b.WriteString("no FE associated\n\n")
	} else {
		fmt.Fprintf(tw, "FE\tNAME\tSYNCED\t%s\tHB RTT P99\n", fourHeader)
		for _, fe := range cur.fes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fms\n", fe.GetId(), dash(fe.GetName()), yesNo(fe.GetSynced()), r.four(fe.GetId()), fe.GetHeartbeatRttP99Ms())
		}
		fmt.Fprintln(tw)

		fmt.Fprintf(tw, "CORE\t\t%s\tQUEUES\n", fourHeader)
		for _, fe := range cur.fes {
			cpus := map[int32]bool{}
			queues := map[int32][]string{}
			for _, l := range fe.GetLanes() {
				cpus[l.GetCpu()] = true
				queues[l.GetCpu()] = append(queues[l.GetCpu()], fmt.Sprintf("%s:%d", l.GetPort(), l.GetQueue()))
			}
			for _, c := range fe.GetCounters().GetCpus() {
				cpus[c.GetCpu()] = true
			}
			ids := make([]int32, 0, len(cpus))
			for c := range cpus {
				ids = append(ids, c)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			for _, c := range ids {
				name := fmt.Sprintf("cpu%d", c)
				if c < 0 {
					name = "sender" // queues served in softirq on the sending CPU (veth)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fe.GetId(), name, r.four(fmt.Sprintf("%s|cpu%d", fe.GetId(), c)), dash(strings.Join(queues[c], " ")))
			}
		}
		fmt.Fprintln(tw)

		fmt.Fprintf(tw, "PORT\t\tUP\t%s\tADDRESSES\n", fourHeader)
		for _, fe := range cur.fes {
			for _, p := range fe.GetPorts() {
				up := "down"
				if p.GetUp() {
					up = "up"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", fe.GetId(), dash(p.GetName()), up,
					r.four(fmt.Sprintf("%s|port%d", fe.GetId(), p.GetId())), dash(strings.Join(p.GetAddresses(), " ")))
			}
		}
		fmt.Fprintln(tw)

		fmt.Fprintln(tw, "EXCEPTION\t\tPACKETS/s\tTOTAL")
		for _, fe := range cur.fes {
			byReason := fe.GetCounters().GetByReason()
			reasons := make([]string, 0, len(byReason))
			for reason := range byReason {
				reasons = append(reasons, reason)
			}
			sort.Strings(reasons)
			for _, reason := range reasons {
				fmt.Fprintf(tw, "%s\t%s\t%9s\t%d\n", fe.GetId(), reason, r.rate(fe.GetId()+"|reason|"+reason), byReason[reason])
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	if cur.bgpErr != nil {
		fmt.Fprintf(&b, "BGP: %v\n", cur.bgpErr)
	} else if len(cur.neighbors) == 0 {
		b.WriteString("no BGP neighbour\n")
	} else {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NEIGHBOR\tASN\tSTATE\tFOR\tBFD\tRECEIVED\tACCEPTED")
		ns := make([]neighborJSON, 0, len(cur.neighbors))
		for _, n := range cur.neighbors {
			ns = append(ns, neighborView(n))
		}
		writeNeighbors(tw, ns)
		tw.Flush()
	}
	return b.Bytes()
}
