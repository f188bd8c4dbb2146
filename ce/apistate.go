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
)

// The API's routes live in the RIB, in memory. With api_routes_file the CE
// also keeps them on disk: the loop marks them changed after API
// operations, and at most once per persistInterval (less often for big
// tables) hands a copy to a writer that replaces the file atomically (a
// temporary file, fsync, rename); a CE starting with the file puts its
// routes back before any FE is synced, so a restart loses nothing, a crash
// the changes since the last save, and an FE never sees the routes go.
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

// loadAPIRoutes reads an api_routes_file; a file that does not exist (yet)
// holds no routes, but its directory must exist.
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
			return fmt.Errorf("%w: api_routes_file %q line %d %q: %s (fix or remove the line, or the file)", ErrConfig, path, n, strings.TrimSpace(line), why)
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
		return nil, fmt.Errorf("%w: api_routes_file %q: %w", ErrConfig, path, err)
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
	return os.Rename(tmp.Name(), path)
}

// apiPersister writes snapshots of the API's routes in the background; a
// newer snapshot replaces one not yet written.
type apiPersister struct {
	path string
	log  *slog.Logger
	next chan []RouteOp
	done chan struct{}
	// lastWrite is how long the last write took, in nanoseconds.
	lastWrite atomic.Int64
}

func startAPIPersister(path string, log *slog.Logger) *apiPersister {
	p := &apiPersister{path: path, log: log, next: make(chan []RouteOp, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for routes := range p.next {
			start := time.Now()
			err := writeAPIRoutes(p.path, routes)
			p.lastWrite.Store(int64(time.Since(start)))
			if err != nil {
				p.log.Error("api: could not save the API's routes; a restart would lose the changes since the last save", "api_routes_file", p.path, "err", err)
				continue
			}
			p.log.Debug("api: routes saved", "api_routes_file", p.path, "routes", len(routes), "took", time.Since(start))
		}
	}()
	return p
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

// close writes what is queued and stops.
func (p *apiPersister) close() {
	close(p.next)
	<-p.done
}
