// Package ce is the control element: it runs BGP through an embedded GoBGP,
// keeps the FIB, and programs every associated FE over ForCES.
package ce

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/splitplane/splitplane/api/status"
	"github.com/splitplane/splitplane/ce/bgp"
	"github.com/splitplane/splitplane/forces"
)

// CE is a running control element. Its FIB and FE table are owned by the Run
// goroutine; everything else talks to it through channels.
type CE struct {
	cfg Config
	log *slog.Logger
	id  forces.ID

	updates chan []bgp.Update
	joins   chan *session
	leaves  chan *session
	queries chan chan Status

	speaker  *bgp.Speaker
	listener net.Listener
}

// Status is a snapshot of the CE for operators.
type Status struct {
	ID        string               `json:"id"`
	Routes    int                  `json:"routes"`
	Neighbors []bgp.NeighborStatus `json:"neighbors"`
	FEs       []FEStatus           `json:"fes"`
}

// FEStatus describes one associated FE.
type FEStatus struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	LFBs          []string   `json:"lfbs"`
	Ports         []FEPort   `json:"ports"`
	Remote        string     `json:"remote"`
	AssociatedAt  time.Time  `json:"associated_at"`
	Synced        bool       `json:"synced"`
	Pending       int        `json:"pending_changes"`
	Acked         uint64     `json:"acked_changes"`
	Failed        uint64     `json:"failed_changes"`
	LastHeartbeat time.Time  `json:"last_heartbeat"`
	HeartbeatRTT  RTTSummary `json:"heartbeat_rtt"`
}

// FEPort is a port an FE reported.
type FEPort struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	MAC  string `json:"mac"`
	Up   bool   `json:"up"`
}

// New validates cfg and prepares a CE; Run starts it.
func New(cfg Config, log *slog.Logger) (*CE, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &CE{
		cfg: cfg, log: log, id: forces.CEID(cfg.ID),
		updates: make(chan []bgp.Update, 1024),
		joins:   make(chan *session),
		leaves:  make(chan *session),
		queries: make(chan chan Status),
	}, nil
}

// Run listens for FEs, starts BGP and serves until ctx is cancelled.
func (c *CE) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	l, err := net.Listen("tcp", c.cfg.ForCESListen)
	if err != nil {
		return fmt.Errorf("forces_listen %s: %w", c.cfg.ForCESListen, err)
	}
	c.listener = l
	defer l.Close()
	c.log.Info("forces: listening for FEs", "address", l.Addr().String())

	bc, _ := c.cfg.bgpConfig() // validated in New
	bc.Logger = c.log
	sp, err := bgp.Start(ctx, bc, func(u []bgp.Update) {
		select {
		case c.updates <- u:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return err
	}
	c.speaker = sp
	defer sp.Stop()
	c.log.Info("bgp: started", "asn", c.cfg.ASN, "router_id", c.cfg.RouterID, "neighbors", len(c.cfg.Neighbors))

	if c.cfg.StatusSocket != "" {
		stop, err := status.Serve(c.cfg.StatusSocket, func() any { return c.Status(ctx) }, nil)
		if err != nil {
			return err
		}
		defer stop()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.accept(ctx, &wg)
	}()
	return c.loop(ctx)
}

// Status returns a snapshot of the CE, or an empty one when the CE has stopped.
func (c *CE) Status(ctx context.Context) Status {
	ch := make(chan Status, 1)
	select {
	case c.queries <- ch:
		select {
		case s := <-ch:
			return s
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	return Status{}
}

// Addr is the ForCES listening address (valid once Run has started listening).
func (c *CE) Addr() net.Addr {
	if c.listener == nil {
		return nil
	}
	return c.listener.Addr()
}

func (c *CE) accept(ctx context.Context, wg *sync.WaitGroup) {
	go func() {
		<-ctx.Done()
		c.listener.Close()
	}()
	for {
		conn, err := c.listener.Accept()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("forces: accept", "err", err)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.serveFE(ctx, conn)
		}()
	}
}

// loop owns the FIB and the set of associated FEs.
func (c *CE) loop(ctx context.Context) error {
	fib := NewFIB()
	fes := map[forces.ID]*session{}
	var changes []Change
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-c.updates:
			changes = c.apply(fib, u, changes[:0])
			// Coalesce a burst: take whatever else is already queued.
			for more := true; more; {
				select {
				case u := <-c.updates:
					changes = c.apply(fib, u, changes)
				default:
					more = false
				}
			}
			if len(changes) > 0 {
				for _, s := range fes {
					s.enqueue(changes)
				}
			}
		case s := <-c.joins:
			if old, dup := fes[s.fe]; dup {
				s.reject(fmt.Errorf("FE %s is already associated from %s", s.fe, old.remote))
				continue
			}
			fes[s.fe] = s
			s.accept(fib.Snapshot())
			c.log.Info("forces: FE associated, full sync queued", "fe", s.fe, "remote", s.remote, "routes", fib.Len())
		case s := <-c.leaves:
			if fes[s.fe] == s {
				delete(fes, s.fe)
				c.log.Warn("forces: FE association ended", "fe", s.fe, "reason", s.reason())
			}
		case q := <-c.queries:
			st := Status{ID: c.id.String(), Routes: fib.Len(), Neighbors: c.speaker.Neighbors()}
			for _, s := range fes {
				st.FEs = append(st.FEs, s.status())
			}
			sort.Slice(st.FEs, func(i, j int) bool { return st.FEs[i].ID < st.FEs[j].ID })
			q <- st
		}
	}
}

func (c *CE) apply(fib *FIB, us []bgp.Update, out []Change) []Change {
	for _, u := range us {
		if u.Withdraw {
			out = fib.Delete(u.Prefix, out)
			continue
		}
		if !u.Prefix.Addr().Is4() || !u.NextHop.Is4() {
			continue // IPv6 forwarding comes with the full FE datapath
		}
		var ok bool
		if out, ok = fib.Set(u.Prefix, u.NextHop, out); !ok {
			c.log.Error("fib: nexthop table full, route not installed", "prefix", u.Prefix, "nexthop", u.NextHop)
		}
	}
	return out
}
