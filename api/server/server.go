// Package server serves the splitplane gRPC API (api/splitplane/v1) for a
// CE: a thin adapter that converts protobuf at the edge, calls the CE's Go
// API (ce.CE.ApplyRoutes, Transaction, ListRoutes, WatchFIB, Status) and maps
// its errors onto gRPC status codes. It listens on a unix socket or, with
// mutual TLS or a bearer token, on TCP; server reflection is on.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/splitplane/splitplane/internal/status"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"

	spv1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// Backend is what the server needs of the CE; *ce.CE implements it.
type Backend interface {
	ApplyRoutes(ctx context.Context, ops []ce.RouteOp) (fibChanges int, err error)
	Transaction(ctx context.Context, ops []ce.RouteOp) (fibChanges, fes int, err error)
	ListRoutes(ctx context.Context, f ce.RouteFilter) ([]ce.RouteInfo, error)
	WatchFIB(ctx context.Context, current bool) (*ce.Watcher, error)
	Unwatch(w *ce.Watcher)
	Status(ctx context.Context) (ce.Status, error)
	FEDetails(ctx context.Context, fe forces.ID) (json.RawMessage, error)
}

// Config says where and how the API is served.
type Config struct {
	// Listen is "unix:PATH" or "tcp:HOST:PORT" (ce.Config.APIListen).
	Listen string
	// TLS, if set, requires mutual TLS: client certificates must chain to
	// its CA.
	TLS *forces.TLSConfig
	// Token, if set, is the bearer token every call must carry in its
	// "authorization" metadata ("Bearer TOKEN").
	Token string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// FromCE takes the API's settings from a validated CE configuration
// (reading the token file); ok is false when api_listen is "off".
func FromCE(cfg ce.Config, log *slog.Logger) (c Config, ok bool, err error) {
	if cfg.APIListen == "off" {
		return Config{}, false, nil
	}
	c = Config{Listen: cfg.APIListen, TLS: cfg.APITLS, Logger: log}
	if c.Listen == "" {
		c.Listen = ce.DefaultAPIListen
	}
	if cfg.APITokenFile != "" {
		if c.Token, err = ce.ReadAPIToken(cfg.APITokenFile); err != nil {
			return Config{}, false, fmt.Errorf("api_token_file %q: %w", cfg.APITokenFile, err)
		}
	}
	return c, true, nil
}

// ErrConfig is wrapped by the errors of a Config that cannot be served.
var ErrConfig = errors.New("api server config")

// socketMode is the unix socket's mode: the owner and its group may program
// routes, nobody else.
const socketMode = 0o660

// stopGrace bounds how long Stop waits for calls in progress (a Watch never
// ends by itself) before cutting them off.
const stopGrace = 2 * time.Second

// Server is a running API server.
type Server struct {
	grpc  *grpc.Server
	l     net.Listener
	stats *Stats
	done  chan struct{} // closed when Serve returned
}

// Start listens as cfg says and serves b's API until Stop.
func Start(b Backend, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	network, addr, _ := strings.Cut(cfg.Listen, ":")
	if network == "tcp" && cfg.TLS == nil && cfg.Token == "" {
		return nil, fmt.Errorf("%w: listen %q: TCP needs mutual TLS or a bearer token", ErrConfig, cfg.Listen)
	}
	opts := []grpc.ServerOption{}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.ServerTLS()
		if err != nil {
			return nil, fmt.Errorf("%w: tls: %w", ErrConfig, err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	var l net.Listener
	var err error
	switch network {
	case "unix":
		l, err = status.ListenUnix("api socket", addr, socketMode)
	case "tcp":
		l, err = net.Listen("tcp", addr)
	default:
		err = fmt.Errorf("%w: listen %q: want unix:PATH or tcp:HOST:PORT", ErrConfig, cfg.Listen)
	}
	if err != nil {
		return nil, err
	}
	s := &Server{l: l, stats: newStats(), done: make(chan struct{})}
	unary := []grpc.UnaryServerInterceptor{s.stats.unary}
	stream := []grpc.StreamServerInterceptor{s.stats.stream}
	if cfg.Token != "" {
		a := newTokenAuth(cfg.Token)
		unary = append(unary, a.unary)
		stream = append(stream, a.stream)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	s.grpc = grpc.NewServer(opts...)
	spv1.RegisterRoutesServer(s.grpc, &routes{b: b})
	spv1.RegisterFEsServer(s.grpc, &fes{b: b})
	spv1.RegisterBGPServer(s.grpc, &bgpService{b: b})
	spv1.RegisterClassifierServer(s.grpc, classifier{b: b})
	reflection.Register(s.grpc)
	go func() {
		defer close(s.done)
		if err := s.grpc.Serve(l); err != nil {
			log.Error("api: serve", "listen", cfg.Listen, "err", err)
		}
	}()
	log.Info("api: serving", "listen", cfg.Listen, "tls", cfg.TLS != nil, "token", cfg.Token != "")
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Stats are the server's request counts and latencies.
func (s *Server) Stats() *Stats { return s.stats }

// Stop stops serving: calls in progress get a moment to finish, then are
// cut off; a unix socket is removed.
func (s *Server) Stop() {
	t := time.AfterFunc(stopGrace, s.grpc.Stop)
	s.grpc.GracefulStop()
	t.Stop()
	<-s.done
}
