package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/splitplane/splitplane/integration/bench/fibbench"
)

// Colours of the systems in every plot: splitplane, the kernel (the
// baseline), the bare redirect (the machine's limit) and a second baseline.
const (
	colSplitplane = 0x1f77b4
	colKernel     = 0xd62728
	colLimit      = 0x7f7f7f
	colTrie       = 0xff7f0e
	colOther      = 0x9467bd
)

// rgb is the opaque colour of a 0xRRGGBB constant.
func rgb(c uint32) color.RGBA {
	return color.RGBA{R: uint8(c >> 16), G: uint8(c >> 8), B: uint8(c), A: 0xff}
}

// Plot names: WritePlots writes those the report has figures for.
const (
	PlotForward     = "forward.png"
	PlotEdge        = "edge.png"
	PlotPayloadPPS  = "payload_pps.png"
	PlotPayloadMbps = "payload_mbps.png"
	PlotOverhead    = "overhead.png"
	PlotLatency     = "latency.png"
	PlotLookup      = "lookup.png"
	PlotProgramming = "programming.png"
	PlotScaling     = "scaling.png"
)

// series is one line of a plot: points, optionally with a band (error bars
// from lo to hi) around each.
type series struct {
	name   string
	col    color.Color
	dashed bool
	xs, ys []float64
	lo, hi []float64 // absolute values, or nil
}

// errXYs adapts a series to plotter.YErrorBars.
type errXYs struct {
	s      *series
	offset float64
}

func (e errXYs) Len() int { return len(e.s.xs) }
func (e errXYs) XY(i int) (float64, float64) {
	return e.s.xs[i] + e.offset, e.s.ys[i]
}
func (e errXYs) YError(i int) (float64, float64) {
	return e.s.ys[i] - e.s.lo[i], e.s.hi[i] - e.s.ys[i]
}

// linePlot draws series as lines with points; series with a band get
// error bars, shifted by xshift per series so they do not hide each other.
func linePlot(title, xlabel, ylabel string, logX bool, xshift float64, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks{}
	}
	ymax := 0.0
	for i, s := range ss {
		off := (float64(i) - float64(len(ss)-1)/2) * xshift
		xys := make(plotter.XYs, len(s.xs))
		for k := range s.xs {
			xys[k] = plotter.XY{X: s.xs[k] + off, Y: s.ys[k]}
			ymax = math.Max(ymax, s.ys[k])
			if s.hi != nil {
				ymax = math.Max(ymax, s.hi[k])
			}
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		l.Color, pts.Color = s.col, s.col
		l.Width = vg.Points(1.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
		if s.lo != nil {
			eb, err := plotter.NewYErrorBars(errXYs{s: &s, offset: off})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", title, err)
			}
			eb.Color = s.col
			p.Add(eb)
		}
	}
	p.Y.Min = 0
	p.Y.Max = ymax * 1.25 // room for the legend
	return p, nil
}

// sizeTicks marks a log axis at the powers of ten, named as sizes are in
// metric names (1k, 1m), with unlabelled ticks between them if minor.
type sizeTicks struct{ minor bool }

func (t sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Pow10(int(math.Floor(math.Log10(lo)))); v <= hi*1.0001; v *= 10 {
		if v >= lo*0.9999 {
			ticks = append(ticks, plot.Tick{Value: v, Label: fibbench.SizeLabel(int(v))})
		}
		for k := 2.0; t.minor && k < 10 && v*k <= hi; k++ {
			if v*k >= lo {
				ticks = append(ticks, plot.Tick{Value: v * k})
			}
		}
	}
	return ticks
}

// rateLabel writes a rate per second with three significant digits and a
// k or M suffix.
func rateLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M/s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k/s"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + "/s"
}

// bars is one set of bars of a grouped bar chart: a value per group.
type bars struct {
	name string
	col  color.Color
	vs   []float64
}

// barPlot draws grouped bars: one group per label, one bar of each set in
// every group.
func barPlot(title, ylabel string, groups []string, sets []bars) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	w := vg.Points(float64(120 / max(1, len(sets))))
	ymax := 0.0
	for i, s := range sets {
		b, err := plotter.NewBarChart(plotter.Values(s.vs), w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		b.Color = s.col
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(sets)-1)/2)
		p.Add(b)
		p.Legend.Add(s.name, b)
		for _, v := range s.vs {
			ymax = math.Max(ymax, v)
		}
	}
	p.NominalX(groups...)
	p.Y.Min = 0
	p.Y.Max = ymax * 1.3
	return p, nil
}

func pctSeries(name string, col color.Color, dashed bool, xs []float64, p []Pcts, scale float64) series {
	s := series{name: name + " (p50, bars p10-p90)", col: col, dashed: dashed, xs: xs}
	for _, v := range p {
		s.ys = append(s.ys, v[2]*scale)
		s.lo = append(s.lo, v[0]*scale)
		s.hi = append(s.hi, v[4]*scale)
	}
	return s
}

// WritePlots draws a PNG plot for every section the report has figures
// for into dir and returns their file names.
func WritePlots(dir string, rep *Report) ([]string, error) {
	var written []string
	save := func(name string, p *plot.Plot, err error) (serr error) {
		if err != nil {
			return err
		}
		// gonum/plot panics on data it cannot draw (a log axis over 0);
		// a plot that fails must not lose the report.
		defer func() {
			if r := recover(); r != nil {
				serr = fmt.Errorf("plot %s: %v", name, r)
			}
		}()
		if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		written = append(written, name)
		return nil
	}
	if len(rep.Forward) > 0 {
		var groups []string
		var sp, kern, lim []float64
		for _, r := range rep.Forward {
			groups = append(groups, fibbench.SizeLabel(r.Routes)+" routes")
			sp, kern, lim = append(sp, r.Splitplane/1e6), append(kern, r.Kernel/1e6), append(lim, r.Limit/1e6)
		}
		p, err := barPlot("Forwarding rate, 64-byte frames, one core", "Mpps (million packets/s)", groups, []bars{
			{"splitplane (XDP, range table)", rgb(colSplitplane), sp},
			{"Linux kernel forwarding (baseline)", rgb(colKernel), kern},
			{"bare XDP redirect, no lookup (limit)", rgb(colLimit), lim},
		})
		if err := save(PlotForward, p, err); err != nil {
			return written, err
		}
	}
	if e := rep.Edge; e != nil {
		groups := []string{"router", "lookup + redirect", "router, edge table", "router, edge, Zipf", "router, IPv6 full"}
		p, err := barPlot(fmt.Sprintf("One lookup per packet and real-shaped tables, %s routes", fibbench.SizeLabel(e.Routes)), "Mpps (million packets/s)", groups, []bars{
			{"splitplane and the lookup-only redirect", rgb(colSplitplane), []float64{e.Router / 1e6, e.Lookup / 1e6, e.Edge / 1e6, e.EdgeZipf / 1e6, e.IPv6 / 1e6}},
			{"bare XDP redirect, no lookup (limit)", rgb(colLimit), []float64{e.Limit / 1e6, e.Limit / 1e6, e.Limit / 1e6, e.Limit / 1e6, e.Limit6 / 1e6}},
		})
		if err := save(PlotEdge, p, err); err != nil {
			return written, err
		}
	}
	if len(rep.Payload) > 0 {
		var xs, sp, kern, lim, spM, kernM, limM []float64
		for _, r := range rep.Payload {
			xs = append(xs, float64(r.Payload))
			sp, kern, lim = append(sp, r.Splitplane/1e6), append(kern, r.Kernel/1e6), append(lim, r.Limit/1e6)
			spM, kernM, limM = append(spM, r.Mbps(r.Splitplane)), append(kernM, r.Mbps(r.Kernel)), append(limM, r.Mbps(r.Limit))
		}
		title := fmt.Sprintf("Throughput against payload size, %s routes, one core", fibbench.SizeLabel(rep.Settings.BigRoutes))
		p, err := linePlot(title, "UDP payload (bytes)", "Mpps (million packets/s)", false, 0, []series{
			{name: "splitplane", col: rgb(colSplitplane), xs: xs, ys: sp},
			{name: "Linux kernel (baseline)", col: rgb(colKernel), xs: xs, ys: kern},
			{name: "bare XDP redirect (limit)", col: rgb(colLimit), dashed: true, xs: xs, ys: lim},
		})
		if err := save(PlotPayloadPPS, p, err); err != nil {
			return written, err
		}
		p, err = linePlot(title, "UDP payload (bytes)", "payload Mbps (megabits/s of UDP payload)", false, 0, []series{
			{name: "splitplane", col: rgb(colSplitplane), xs: xs, ys: spM},
			{name: "Linux kernel (baseline)", col: rgb(colKernel), xs: xs, ys: kernM},
			{name: "bare XDP redirect (limit)", col: rgb(colLimit), dashed: true, xs: xs, ys: limM},
		})
		if err := save(PlotPayloadMbps, p, err); err != nil {
			return written, err
		}
	}
	if len(rep.Overhead) > 0 {
		var xs []float64
		var sp, bare, spb, bareb []Pcts
		for _, r := range rep.Overhead {
			xs = append(xs, float64(r.Payload))
			sp, bare = append(sp, r.Splitplane), append(bare, r.Bare)
			spb, bareb = append(spb, r.SplitplaneBatch), append(bareb, r.BareBatch)
		}
		p, err := linePlot("Per-packet cost of the XDP program (BPF_PROG_TEST_RUN)", "UDP payload (bytes)", "ns per packet (kernel-timed)", false, 20, []series{
			pctSeries("splitplane, single runs", rgb(colSplitplane), false, xs, sp, 1),
			pctSeries("bare redirect, single runs (harness floor)", rgb(colLimit), true, xs, bare, 1),
			pctSeries("splitplane, per run of batches of "+strconv.Itoa(overheadBatch), rgb(colTrie), false, xs, spb, 1),
			pctSeries("bare redirect, batches", rgb(colOther), true, xs, bareb, 1),
		})
		if err := save(PlotOverhead, p, err); err != nil {
			return written, err
		}
	}
	if len(rep.Latency) > 0 {
		var xs []float64
		var sp, kern, bare []Pcts
		for _, r := range rep.Latency {
			xs = append(xs, float64(r.Payload))
			sp, kern, bare = append(sp, r.Splitplane), append(kern, r.Kernel), append(bare, r.Bare)
		}
		p, err := linePlot("End-to-end latency of timestamped probes through the router", "UDP payload (bytes)", "latency (µs)", false, 20, []series{
			pctSeries("splitplane", rgb(colSplitplane), false, xs, sp, 1),
			pctSeries("Linux kernel (baseline)", rgb(colKernel), false, xs, kern, 1),
			pctSeries("bare XDP redirect (floor)", rgb(colLimit), true, xs, bare, 1),
		})
		if err := save(PlotLatency, p, err); err != nil {
			return written, err
		}
	}
	if len(rep.Lookup) > 0 {
		var xs, fib, trie, kern []float64
		for _, r := range rep.Lookup {
			xs = append(xs, float64(r.Routes))
			fib, trie, kern = append(fib, r.FIB), append(trie, r.Trie), append(kern, r.Kernel)
		}
		p, err := linePlot("Forwarding cost against table size, random destinations", "routes in the table (log scale)", "ns per packet (BPF_PROG_TEST_RUN)", true, 0, []series{
			{name: "splitplane DIR-24-8 FIB", col: rgb(colSplitplane), xs: xs, ys: fib},
			{name: "BPF LPM_TRIE map (baseline)", col: rgb(colTrie), xs: xs, ys: trie},
			{name: "kernel FIB via bpf_fib_lookup (baseline)", col: rgb(colKernel), xs: xs, ys: kern},
		})
		if err := save(PlotLookup, p, err); err != nil {
			return written, err
		}
	}
	if groups, vs, cols := programmingBars(rep); len(groups) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Route programming rates, tables of %s routes (higher is better)", fibbench.SizeLabel(rep.Settings.ProgrammingRoutes))
		p.Y.Label.Text = "routes/s (log scale)"
		p.Add(plotter.NewGrid())
		lo, hi := math.Inf(1), 0.0
		for _, v := range vs {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = sizeTicks{minor: true}
		p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.Y.Max = math.Pow10(int(math.Ceil(math.Log10(hi * 1.5))))
		p.X.Min, p.X.Max = -0.6, float64(len(vs))-0.4
		var labels plotter.XYLabels
		// Bars as polygons from the axis' minimum: a bar chart starts at
		// 0, which a log scale cannot draw.
		for i, v := range vs {
			x := float64(i)
			poly, err := plotter.NewPolygon(plotter.XYs{{X: x - 0.3, Y: p.Y.Min}, {X: x + 0.3, Y: p.Y.Min}, {X: x + 0.3, Y: v}, {X: x - 0.3, Y: v}})
			if err != nil {
				return written, err
			}
			poly.Color = cols[i]
			poly.LineStyle.Width = 0
			p.Add(poly)
			labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: v * 1.08})
			labels.Labels = append(labels.Labels, rateLabel(v))
		}
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return written, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = draw.XCenter
		}
		p.Add(l)
		p.NominalX(groups...)
		p.X.Tick.Label.Rotation = 0.35
		p.X.Tick.Label.XAlign = draw.XRight
		if err := save(PlotProgramming, p, nil); err != nil {
			return written, err
		}
	}
	if len(rep.Scaling) > 0 {
		var xs, sp, lim []float64
		for _, r := range rep.Scaling {
			xs = append(xs, float64(r.Cores))
			sp, lim = append(sp, r.Splitplane/1e6), append(lim, r.Limit/1e6)
		}
		p, err := linePlot("Forwarding rate against forwarding cores, 64-byte frames", "forwarding cores", "Mpps (million packets/s)", false, 0, []series{
			{name: "splitplane", col: rgb(colSplitplane), xs: xs, ys: sp},
			{name: "bare XDP redirect (limit)", col: rgb(colLimit), dashed: true, xs: xs, ys: lim},
		})
		if err == nil {
			p.X.Tick.Marker = intTicks{}
		}
		if err := save(PlotScaling, p, err); err != nil {
			return written, err
		}
	}
	return written, nil
}

// intTicks marks every whole number.
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := math.Ceil(lo); v <= hi; v++ {
		t = append(t, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return t
}

// programmingBars returns the route-programming rates the report has, as
// routes per second: splitplane's stages in its colour, BIRD into the
// kernel (the baseline of BGP convergence) in the kernel's.
func programmingBars(rep *Report) (groups []string, vs []float64, cols []color.Color) {
	add := func(label string, v float64, c color.Color) {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			groups, vs, cols = append(groups, label), append(vs, v), append(cols, c)
		}
	}
	if r, ok := rep.Result(fibbench.MetricFIBInstallPerSecond); ok {
		add("FIB install (datapath)", r.Value, rgb(colSplitplane))
	}
	if r, ok := rep.Result(MetricForcesTransfer); ok {
		add("ForCES full sync", r.Value, rgb(colSplitplane))
	}
	if r, ok := rep.Result(MetricAPIBulkRoutesPerSecond); ok {
		add("gRPC bulk API to XDP", r.Value, rgb(colSplitplane))
	}
	if r, ok := rep.Result(MetricAPIBulkColdRoutesPerSecond); ok {
		add("gRPC bulk API, fresh daemons", r.Value, rgb(colSplitplane))
	}
	if r, ok := rep.Result(MetricAPIBulkTextRoutesPerSecond); ok {
		add("gRPC bulk API, text ops", r.Value, rgb(colSplitplane))
	}
	n := float64(rep.Settings.ProgrammingRoutes)
	conv, _, _, _ := ConvergeMetrics(rep.Settings.ProgrammingRoutes)
	if r, ok := rep.Result(conv); ok && r.Value > 0 {
		add("BGP to XDP (splitplane)", n/r.Value, rgb(colSplitplane))
		if r.BaselineValue > 0 {
			add("BGP to kernel (BIRD, baseline)", n/r.BaselineValue, rgb(colKernel))
		}
	}
	vsFRR, _, _, _ := FRRMetrics(rep.Settings.ProgrammingRoutes)
	if r, ok := rep.Result(vsFRR); ok && r.BaselineValue > 0 {
		add("BGP to kernel (FRR, baseline)", n/r.BaselineValue, rgb(colKernel))
	}
	twoConv, _ := TwoProvidersMetrics(rep.Settings.ProgrammingRoutes)
	if r, ok := rep.Result(twoConv); ok && r.Value > 0 {
		add("BGP to XDP, two providers (prefixes/s)", n/r.Value, rgb(colSplitplane))
	}
	return groups, vs, cols
}
