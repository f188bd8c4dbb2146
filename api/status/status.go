// Package status serves a daemon's status as JSON over a unix socket and reads
// it back. It is the lab's window into the CE, FE and peer until the gRPC API
// replaces it.
package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Handlers maps a path (e.g. "/" or "/withdraw") to a handler.
type Handlers map[string]http.HandlerFunc

// Serve serves fn's value as JSON on GET / of a unix socket at path, plus any
// extra handlers. stop closes the listener and removes the socket.
func Serve(path string, fn func() any, extra Handlers) (stop func(), err error) {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("status socket %s: %w", path, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		WriteJSON(w, http.StatusOK, fn())
	})
	for p, h := range extra {
		mux.HandleFunc(p, h)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("status socket", "path", path, "err", err)
		}
	}()
	return func() { srv.Close(); os.Remove(path) }, nil
}

// WriteJSON writes v as a JSON response with the given status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func client(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// Get fetches path from the daemon at socket and decodes the JSON into v.
func Get(socket, path string, v any) error {
	resp, err := client(socket).Get("http://unix" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s%s: %s: %s", socket, path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Post sends a POST with query parameters to path on the daemon at socket.
func Post(socket, path string, query url.Values) error {
	return PostBody(socket, path, query, nil)
}

// PostBody is Post with a request body.
func PostBody(socket, path string, query url.Values, body []byte) error {
	resp, err := client(socket).Post("http://unix"+path+"?"+query.Encode(), "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s: %s", socket, path, resp.Status, b)
	}
	return nil
}
