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
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Handlers maps a path (e.g. "/" or "/withdraw") to a handler.
type Handlers map[string]http.HandlerFunc

// ListenUnix listens on a unix socket at path for what (e.g. "status
// socket"): its directory is created, a stale socket left by a process that
// died is removed, and the socket gets mode. A socket another process
// serves, or a file that is not a socket, is an error: neither is taken
// over or deleted.
func ListenUnix(what, path string, mode os.FileMode) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s %s: exists and is not a socket", what, path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s %s: in use by another process", what, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s %s: remove the stale socket: %w", what, path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return l, nil
}

// Serve serves fn's value as JSON on GET / of a unix socket at path (see
// ListenUnix), plus any extra handlers; a value that is an error is served
// as 503 Service Unavailable with its text, which Get returns as an error. stop closes the listener and
// removes the socket.
func Serve(path string, fn func() any, extra Handlers) (stop func(), err error) {
	l, err := ListenUnix("status socket", path, 0o660)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		v := fn()
		if err, ok := v.(error); ok {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		WriteJSON(w, http.StatusOK, v)
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
