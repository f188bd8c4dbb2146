package ce

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/splitplane/splitplane/forces"
)

// Verify compares every associated FE's datapath with the CE's FIB, as
// SONiC's route_check does: addresses from the FIB (every route, or a
// sample) are looked up on the CE and, with FIB lookup Queries, in each FE's
// fast-path tables. An address that differs is checked again after
// verifyRecheck, so that a change still on its way to an FE is not
// reported; what still differs then is.

// verifyRecheck is how long Verify waits before it looks again at the
// addresses that differed.
const verifyRecheck = time.Second

// MaxVerifyListed is the most differences a Verify report lists per FE
// (Differences counts them all).
const MaxVerifyListed = 100

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Routes    int // FIB routes when the check began
	Addresses int // addresses checked on each FE
	Sampled   bool
	FEs       []FEVerify
	Took      time.Duration
}

// FEVerify is one FE's part of a VerifyReport.
type FEVerify struct {
	FE          forces.ID
	Name        string
	Checked     int
	Differences int          // addresses that still differed when checked again
	Listed      []Difference // the first MaxVerifyListed of them
	Err         error        // the FE could not be checked (Checked: how far it got)
}

// Difference is an address an FE forwards otherwise than the CE's FIB says.
type Difference struct {
	Address netip.Addr
	Why     string // as FEView.Differs
}

// Differs reports whether any FE differs or could not be checked.
func (r VerifyReport) Differs() bool {
	for _, f := range r.FEs {
		if f.Differences > 0 || f.Err != nil {
			return true
		}
	}
	return false
}

// apiVerifyAddrs asks the loop for the addresses to check.
type apiVerifyAddrs struct {
	samples int
	seed    uint64
	reply   chan verifyAddrs
}

type verifyAddrs struct {
	routes int
	addrs  []netip.Addr
}

// verifyAddrsOnLoop picks, on the loop, the first and last address of every
// FIB route, or with samples a random address in each of samples random
// routes (reservoir sampling).
func verifyAddrsOnLoop(fib fibs, m apiVerifyAddrs) {
	out := verifyAddrs{routes: fib.Len()}
	if m.samples <= 0 {
		out.addrs = make([]netip.Addr, 0, 2*out.routes)
		for _, f := range []*FIB{fib.v4, fib.v6} {
			for p := range f.routes.all() {
				out.addrs = append(out.addrs, p.Addr())
				if last := lastAddr(p); last != p.Addr() {
					out.addrs = append(out.addrs, last)
				}
			}
		}
		m.reply <- out
		return
	}
	rng := rand.New(rand.NewPCG(m.seed, 0x5e1ec7))
	picked := make([]netip.Prefix, 0, m.samples)
	n := 0
	for _, f := range []*FIB{fib.v4, fib.v6} {
		for p := range f.routes.all() {
			n++
			if len(picked) < m.samples {
				picked = append(picked, p)
			} else if j := rng.IntN(n); j < m.samples {
				picked[j] = p
			}
		}
	}
	for _, p := range picked {
		out.addrs = append(out.addrs, randomAddr(rng, p))
	}
	m.reply <- out
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// randomAddr is a random address inside p.
func randomAddr(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Verify checks every associated FE against the FIB: every route (samples
// 0) or samples random addresses of random routes. It fails only when the
// CE cannot be asked; an FE that cannot answer has Err set in its part.
func (c *CE) Verify(ctx context.Context, samples int) (VerifyReport, error) {
	if samples < 0 {
		return VerifyReport{}, fmt.Errorf("%w: samples %d: must be 0 (every route) or more", ErrInvalidRoute, samples)
	}
	start := time.Now()
	if err := c.listPace.wait(ctx); err != nil {
		return VerifyReport{}, err
	}
	reply := make(chan verifyAddrs, 1)
	if err := c.toLoop(ctx, apiVerifyAddrs{samples: samples, seed: uint64(start.UnixNano()), reply: reply}); err != nil {
		return VerifyReport{}, err
	}
	var va verifyAddrs
	select {
	case va = <-reply:
		c.listPace.cost.Store(int64(time.Since(start)))
	case <-ctx.Done():
		return VerifyReport{}, ctx.Err()
	}
	rep := VerifyReport{Routes: va.routes, Addresses: len(va.addrs), Sampled: samples > 0}
	byFE := map[forces.ID]*FEVerify{}
	suspects := map[forces.ID][]netip.Addr{}
	var order []forces.ID
	for chunk := range slices.Chunk(va.addrs, lookupBatch) {
		r, err := c.lookupCE(ctx, chunk, false)
		if err != nil {
			return VerifyReport{}, err
		}
		for _, s := range r.fes {
			f := byFE[s.fe]
			if f == nil {
				name, _ := s.names()
				f = &FEVerify{FE: s.fe, Name: name}
				byFE[s.fe] = f
				order = append(order, s.fe)
			}
			if f.Err != nil {
				continue
			}
			diffs, err := compareFE(ctx, s, r.ce)
			if err != nil {
				f.Err = err
				continue
			}
			f.Checked += len(chunk)
			for _, d := range diffs {
				suspects[s.fe] = append(suspects[s.fe], d.Address)
			}
		}
	}
	if len(suspects) > 0 {
		t := time.NewTimer(verifyRecheck)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return VerifyReport{}, ctx.Err()
		}
	}
	for fe, addrs := range suspects {
		f := byFE[fe]
		diffs, err := c.recheck(ctx, fe, addrs)
		if err != nil {
			f.Err = err
			continue
		}
		f.Differences = len(diffs)
		f.Listed = diffs[:min(len(diffs), MaxVerifyListed)]
	}
	slices.Sort(order)
	for _, fe := range order {
		rep.FEs = append(rep.FEs, *byFE[fe])
	}
	rep.Took = time.Since(start)
	c.verifyLast.record(rep)
	return rep, nil
}

// compareFE asks s for the lookups of the addresses of ce and returns those
// that differ.
func compareFE(ctx context.Context, s *session, ce []RouteLookup) ([]Difference, error) {
	addrs := make([]netip.Addr, len(ce))
	for i, l := range ce {
		addrs[i] = l.Address
	}
	ls, err := s.queryLookups(ctx, addrs)
	if err != nil {
		return nil, err
	}
	var out []Difference
	for i, l := range ls {
		why := ""
		if l.err != nil {
			why = l.err.Error()
		} else {
			why = differs(ce[i], s.fe, l.l)
		}
		if why != "" {
			out = append(out, Difference{Address: ce[i].Address, Why: why})
		}
	}
	return out, nil
}

// recheck looks at addrs again on the CE and FE fe.
func (c *CE) recheck(ctx context.Context, fe forces.ID, addrs []netip.Addr) ([]Difference, error) {
	var out []Difference
	for chunk := range slices.Chunk(addrs, lookupBatch) {
		r, err := c.lookupCE(ctx, chunk, false)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(r.fes, func(s *session) bool { return s.fe == fe })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s left during the check", ErrNoFE, fe)
		}
		diffs, err := compareFE(ctx, r.fes[i], r.ce)
		if err != nil {
			return nil, err
		}
		out = append(out, diffs...)
	}
	return out, nil
}

// verifyStats is the last Verify's outcome, for the metrics.
type verifyStats struct {
	mu   sync.Mutex
	last *VerifyReport
	at   time.Time
}

func (v *verifyStats) record(r VerifyReport) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last, v.at = &r, time.Now()
}

var (
	verifyDiffsDesc = prometheus.NewDesc("splitplane_ce_fe_verify_differences",
		"Addresses the FE's datapath forwarded otherwise than the CE's FIB in the last check (splitplane fe verify); -1 if the FE could not be checked.", []string{"fe"}, nil)
	verifyCheckedDesc = prometheus.NewDesc("splitplane_ce_fe_verify_checked_addresses",
		"Addresses the last check looked up on the FE.", []string{"fe"}, nil)
	verifyLastDesc = prometheus.NewDesc("splitplane_ce_fe_verify_last_timestamp_seconds",
		"When the last check of the FEs against the FIB ended (Unix time); absent before the first.", nil, nil)
)

// verifyCollector exports CE.verifyLast.
type verifyCollector struct{ v *verifyStats }

// Describe implements prometheus.Collector.
func (vc verifyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- verifyDiffsDesc
	ch <- verifyCheckedDesc
	ch <- verifyLastDesc
}

// Collect implements prometheus.Collector.
func (vc verifyCollector) Collect(ch chan<- prometheus.Metric) {
	vc.v.mu.Lock()
	defer vc.v.mu.Unlock()
	if vc.v.last == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(verifyLastDesc, prometheus.GaugeValue, float64(vc.v.at.UnixNano())/1e9)
	for _, f := range vc.v.last.FEs {
		d := float64(f.Differences)
		if f.Err != nil {
			d = -1
		}
		ch <- prometheus.MustNewConstMetric(verifyDiffsDesc, prometheus.GaugeValue, d, f.FE.String())
		ch <- prometheus.MustNewConstMetric(verifyCheckedDesc, prometheus.GaugeValue, float64(f.Checked), f.FE.String())
	}
}
