// Package metrics serves a daemon's Prometheus metrics: a private registry
// (Go runtime, process, and the daemon's own collector, read at scrape
// time) and an HTTP server for GET /metrics on metrics_listen. The CE and
// the FE each have one.
package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one daemon's metrics.
type Registry struct {
	reg  *prometheus.Registry
	log  *slog.Logger
	addr atomic.Value // net.Addr of the listener, once serving
}

// New returns a registry with the Go runtime's and the process's
// collectors and own.
func New(log *slog.Logger, own prometheus.Collector) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), own)
	return &Registry{reg: reg, log: log}
}

// Register adds col; it fails if col's series collide with others.
func (r *Registry) Register(col prometheus.Collector) error { return r.reg.Register(col) }

// Handler serves the metrics in the Prometheus exposition formats; a
// collector that fails is logged and the rest are still served.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{r.log}, ErrorHandling: promhttp.ContinueOnError})
}

// Addr is the address metrics are served on, nil until Serve listens.
func (r *Registry) Addr() net.Addr {
	a, _ := r.addr.Load().(net.Addr)
	return a
}

// Serve serves GET /metrics on addr (metrics_listen) until stop.
func (r *Registry) Serve(addr string) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.addr.Store(l.Addr())
	r.log.Info("metrics: serving Prometheus metrics", "url", "http://"+l.Addr().String()+"/metrics")
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("metrics: server", "address", l.Addr().String(), "err", err)
		}
	}()
	return func() { srv.Close() }, nil
}

// CheckListen checks a metrics_listen value: a TCP HOST:PORT, with an empty
// host for every address and port 0 for any free port.
func CheckListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want a TCP HOST:PORT such as 127.0.0.1:9101: %v", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want 0 to 65535", port)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("host %q: want an IP address or a host name", host)
		}
	}
	return nil
}

// slogPrinter logs promhttp's errors (a scrape that could not collect
// everything) through the daemon's logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }
