package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ServeControl serves the control API over HTTP on l (typically a unix
// socket) until ctx is done, then shuts the server down and returns nil.
//
//	GET  /status                 the Status as JSON
//	POST /withdraw?prefix=P[&prefix=Q...]  withdraw prefixes, answer the new Status
//	POST /announce?prefix=P[&prefix=Q...]  announce prefixes, answer the new Status
//
// A missing or malformed prefix is answered 400 with a message naming the
// value; a stopped peer 503.
func (p *Peer) ServeControl(ctx context.Context, l net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, p.Status())
	})
	mux.HandleFunc("POST /withdraw", p.prefixHandler(p.Withdraw))
	mux.HandleFunc("POST /announce", p.prefixHandler(p.Announce))

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("control server on %v: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		p.log.Warn("control server shutdown", "err", err)
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("control server on %v: %w", l.Addr(), err)
	}
	return nil
}

func (p *Peer) prefixHandler(op func(...netip.Prefix) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		values := r.URL.Query()["prefix"]
		if len(values) == 0 {
			http.Error(w, "missing query parameter prefix", http.StatusBadRequest)
			return
		}
		prefixes := make([]netip.Prefix, 0, len(values))
		for _, v := range values {
			q, err := netip.ParsePrefix(v)
			if err == nil {
				err = checkPrefix(q)
			}
			if err != nil {
				http.Error(w, fmt.Sprintf("invalid prefix %q: %v", v, err), http.StatusBadRequest)
				return
			}
			prefixes = append(prefixes, q)
		}
		switch err := op(prefixes...); {
		case err == nil:
			writeJSON(w, p.Status())
		case errors.Is(err, ErrInvalidPrefix):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case errors.Is(err, ErrStopped):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}
