package ce

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The API's routes live in the RIB, in memory. With api_routes_file the CE
// also keeps them on disk: the loop marks them changed after API
// operations, and at most once per persistInterval (less often for big
// tables) hands a copy to a writer that replaces the file atomically (a
// temporary file, fsync, rename, fsync of the directory) and, if that
// fails, tries again with backoff until it succeeds or a newer copy
// replaces it, and once more when the CE stops. A CE starting with the
// file puts its routes back before any FE is synced, so a restart loses
// nothing, a crash the changes since the last save, and an FE never sees
// the routes go. A file the CE cannot read back (corrupt, or routes that
// do not fit) is moved aside, named in the log, and the CE starts without
// the API's routes (splitplane_api_routes_restore_failed says so) rather
// than not at all.
//
// The file is text, one route a line, "PREFIX NEXTHOP[,NEXTHOP...]
// DISTANCE", with '#' comments: an operator can read it, and fix it when
// the CE refuses it, naming the line.

// persistInterval is how often the file is rewritten at most, and so how
// much a crash can lose, while saving is cheap; a big table (a million
// routes take ~0.2 s to copy on the loop and ~0.8 s to write) is saved at
// most every saveCostFactor times what the last save cost, so that saving
// takes at most a fifth of a core while the routes keep changing.
const (
	persistInterval = time.Second
	saveCostFactor  = 5
)

// apiRoutes returns the API's routes as operations that put them back.
// It runs on the loop.
func (r *RIB) apiRoutes() []RouteOp {
	t := r.tables[srcAPI]
	ops := make([]RouteOp, 0, t.len())
	add := func(p netip.Prefix, v srcRoute) {
		ops = append(ops, RouteOp{Kind: OpReplace, Prefix: p, NextHops: slices.Clone(r.sets[v.set()].hops), Distance: v.distance()})
	}
	for k, v := range t.v4.All() {
		add(k.Prefix(), v)
	}
	for p, v := range t.v6 {
		add(p, v)
	}
	return ops
}

// ErrAPIRoutesCorrupt is wrapped by the errors of an api_routes_file that
// cannot be read back as routes.
var ErrAPIRoutesCorrupt = errors.New("corrupt api_routes_file")

// loadAPIRoutes reads an api_routes_file; a file that does not exist (yet)
// holds no routes, but its directory must exist. A file that is not routes
// is an error wrapping ErrAPIRoutesCorrupt.
func loadAPIRoutes(path string) ([]RouteOp, error) {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: api_routes_file %q: its directory does not exist", ErrConfig, path)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: api_routes_file %q: %w", ErrConfig, path, err)
	}
	var ops []RouteOp
	seen := map[netip.Prefix]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("%w: %w: api_routes_file %q line %d %q: %s", ErrConfig, ErrAPIRoutesCorrupt, path, n, strings.TrimSpace(line), why)
		}
		if len(f) != 3 {
			return nil, bad("want PREFIX NEXTHOP[,NEXTHOP...] DISTANCE")
		}
		op := RouteOp{Kind: OpReplace}
		if op.Prefix, err = netip.ParsePrefix(f[0]); err != nil {
			return nil, bad("not a prefix")
		}
		for _, s := range strings.Split(f[1], ",") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, bad(fmt.Sprintf("next hop %q: not an IP address", s))
			}
			op.NextHops = append(op.NextHops, a)
		}
		d, err := strconv.ParseUint(f[2], 10, 8)
		if err != nil || d == 0 {
			return nil, bad(fmt.Sprintf("distance %q: want 1 to 255", f[2]))
		}
		op.Distance = uint8(d)
		if err := CheckRouteOp(len(ops), op); err != nil {
			return nil, bad(err.Error())
		}
		if first, dup := seen[op.Prefix]; dup {
			return nil, bad(fmt.Sprintf("%s again (line %d has it)", op.Prefix, first))
		}
		seen[op.Prefix] = n
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w: api_routes_file %q: %w", ErrConfig, ErrAPIRoutesCorrupt, path, err)
	}
	return ops, nil
}

// writeAPIRoutes replaces path with routes: a reader (or a CE starting
// after a crash) finds the old file or the new one, whole.
func writeAPIRoutes(path string, routes []RouteOp) error {
	slices.SortFunc(routes, func(a, b RouteOp) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	var b bytes.Buffer
	b.WriteString("# splitplane: the CE's API routes (api_routes_file), rewritten by the CE\n# PREFIX NEXTHOP[,NEXTHOP...] DISTANCE\n")
	for _, r := range routes {
		b.WriteString(r.Prefix.String())
		for i, nh := range r.NextHops {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(',')
			}
			b.WriteString(nh.String())
		}
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(int(r.Distance)))
		b.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing there
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is in the directory: until it is on disk too, a power
	// cut can bring back the old file (or none).
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// moveAside renames a file the CE cannot restore to PATH.corrupt-TIME, so
// that the next save does not overwrite what an operator may want back.
func moveAside(path string) (string, error) {
	aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}

// restoreFailed logs that the API's routes in path were not restored, and
// why, moves the file aside and marks the metric.
func (c *CE) restoreFailed(path string, why error) {
	c.apiFile.restoreFailed.Store(true)
	aside, err := moveAside(path)
	if err != nil {
		c.log.Error("api: the API's routes were NOT restored: api_routes_file cannot be read back, nor moved aside (the next save replaces it)",
			"api_routes_file", path, "err", why, "move_err", err)
		return
	}
	c.log.Error("api: the API's routes were NOT restored: api_routes_file cannot be read back; it was moved aside, the CE starts without them "+
		"(to restore them: stop the CE, fix the file moved aside, move it back)",
		"api_routes_file", path, "moved_to", aside, "err", why)
}

// persistStats are the API route file's figures (CE.apiFile), for
// metrics.
type persistStats struct {
	restoreFailed atomic.Bool   // the file at start was not restored
	saveErrors    atomic.Uint64 // failed writes
	saveFailing   atomic.Bool   // the last write failed: the file is behind
}

// apiPersister writes snapshots of the API's routes in the background; a
// newer snapshot replaces one not yet written. A failed write is tried
// again, after retryMin doubling up to retryMax, until it succeeds or a
// newer snapshot comes, and once more at close.
type apiPersister struct {
	path  string
	log   *slog.Logger
	next  chan []RouteOp
	done  chan struct{}
	stats *persistStats
	write func(path string, routes []RouteOp) error
	// lastWrite is how long the last write took, in nanoseconds.
	lastWrite atomic.Int64
}

// Bounds of the backoff between attempts to save after a failure.
const (
	saveRetryMin = 500 * time.Millisecond
	saveRetryMax = 30 * time.Second
)

func startAPIPersister(path string, log *slog.Logger, stats *persistStats) *apiPersister {
	return startPersister(path, log, stats, writeAPIRoutes, saveRetryMin, saveRetryMax)
}

func startPersister(path string, log *slog.Logger, stats *persistStats, write func(string, []RouteOp) error, retryMin, retryMax time.Duration) *apiPersister {
	p := &apiPersister{path: path, log: log, next: make(chan []RouteOp, 1), done: make(chan struct{}), stats: stats, write: write}
	go func() {
		defer close(p.done)
		for routes := range p.next {
			for retry := retryMin; !p.try(routes, retry); retry = min(2*retry, retryMax) {
				t := time.NewTimer(retry)
				select {
				case newer, ok := <-p.next:
					t.Stop()
					if !ok { // stopping: one last try
						p.try(routes, -1)
						return
					}
					routes = newer
				case <-t.C:
				}
			}
		}
	}()
	return p
}

// try writes routes once, logging a failure with when the next try is
// (retry; negative: none).
func (p *apiPersister) try(routes []RouteOp, retry time.Duration) bool {
	start := time.Now()
	err := p.write(p.path, routes)
	p.lastWrite.Store(int64(time.Since(start)))
	if err != nil {
		p.stats.saveErrors.Add(1)
		p.stats.saveFailing.Store(true)
		next := "the CE stops: the changes since the last save are lost"
		if retry >= 0 {
			next = "retrying in " + retry.String()
		}
		p.log.Error("api: could not save the API's routes; "+next, "api_routes_file", p.path, "err", err)
		return false
	}
	if p.stats.saveFailing.Swap(false) {
		p.log.Info("api: routes saved again", "api_routes_file", p.path, "routes", len(routes))
	}
	p.log.Debug("api: routes saved", "api_routes_file", p.path, "routes", len(routes), "took", time.Since(start))
	return true
}

// saveFrom snapshots the API's routes of rib (on the loop) and queues them
// if at least every has passed since the last save, returning when the
// next may be; zero times mean "now".
func (p *apiPersister) saveFrom(rib *RIB, last time.Time, every time.Duration) (time.Time, time.Duration) {
	if time.Since(last) < every {
		return last, every
	}
	start := time.Now()
	p.save(rib.apiRoutes())
	cost := time.Since(start) + time.Duration(p.lastWrite.Load())
	return start, max(persistInterval, saveCostFactor*cost)
}

// save queues a snapshot, replacing one still waiting.
func (p *apiPersister) save(routes []RouteOp) {
	for {
		select {
		case p.next <- routes:
			return
		default:
			select {
			case <-p.next:
			default:
			}
		}
	}
}

// close writes what is queued (or still failing) and stops.
func (p *apiPersister) close() {
	close(p.next)
	<-p.done
}

var (
	apiRestoreFailedDesc = prometheus.NewDesc("splitplane_api_routes_restore_failed",
		"1 if the API's routes in api_routes_file could not be restored at start (the file was moved aside), else 0.", nil, nil)
	apiSaveErrorsDesc = prometheus.NewDesc("splitplane_api_routes_save_errors_total",
		"Failed writes of api_routes_file (each is retried).", nil, nil)
	apiSaveFailingDesc = prometheus.NewDesc("splitplane_api_routes_save_failing",
		"1 while the last write of api_routes_file failed (the file is behind the API's routes), else 0.", nil, nil)
)

// apiFileCollector exports CE.apiFile.
type apiFileCollector struct{ s *persistStats }

// Describe implements prometheus.Collector.
func (a apiFileCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- apiRestoreFailedDesc
	ch <- apiSaveErrorsDesc
	ch <- apiSaveFailingDesc
}

// Collect implements prometheus.Collector.
func (a apiFileCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(apiRestoreFailedDesc, prometheus.GaugeValue, b2f(a.s.restoreFailed.Load()))
	ch <- prometheus.MustNewConstMetric(apiSaveErrorsDesc, prometheus.CounterValue, float64(a.s.saveErrors.Load()))
	ch <- prometheus.MustNewConstMetric(apiSaveFailingDesc, prometheus.GaugeValue, b2f(a.s.saveFailing.Load()))
}
