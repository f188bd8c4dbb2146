// Package server serves the splitplane gRPC API (api/splitplane/v1) for a
// CE: a thin adapter that converts protobuf at the edge, calls the CE's Go
// API (ce.CE.ApplyRoutes, Transaction, ListRoutes, WatchFIB, Status) and maps
// its errors onto gRPC status codes. It listens on a unix socket or, with
// mutual TLS, on TCP; a bearer token, if configured, is checked from a
// call's headers before any of its messages is read. Server reflection is
// on.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	istatus "github.com/splitplane/splitplane/internal/status"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

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
	// ResetNeighbor brings back a BGP neighbour stopped by max_prefixes,
	// or resets another's session.
	ResetNeighbor(ctx context.Context, addr netip.Addr) error
	// GetRoute looks an address up on the CE and every FE; Verify checks
	// every FE's datapath against the FIB (samples 0: every route).
	GetRoute(ctx context.Context, addr netip.Addr) (ce.RouteGet, error)
	Verify(ctx context.Context, samples int) (ce.VerifyReport, error)
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
	// Limits bound what clients may make the server and the CE do; zero
	// fields take the defaults (DefaultLimits).
	Limits Limits

	// extra are more server options, for tests.
	extra []grpc.ServerOption
}

// Limits bound the API's clients (ce.Config's api_max_* keys).
type Limits struct {
	// MaxMessage is the largest request message, in bytes (a batch of
	// 10,000 IPv4 routes is about 0.4 MiB, packed about 0.13 MiB); larger
	// ones are refused with ResourceExhausted before they are decoded.
	MaxMessage int
	// MaxStreams is how many calls one connection may have in progress
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
	MaxStreams int
	// MaxWatches is how many Watch streams may be open at once.
	MaxWatches int
	// MaxSnapshots is how many List calls and Watch(current) snapshots may
	// be copied and sent at once: each copies (part of) the RIB or FIB.
	MaxSnapshots int
}

// DefaultLimits are the limits of a Config that sets none.
var DefaultLimits = Limits{MaxMessage: ce.DefaultAPIMaxMessage, MaxStreams: ce.DefaultAPIMaxStreams,
	MaxWatches: ce.DefaultAPIMaxWatches, MaxSnapshots: ce.DefaultAPIMaxSnapshots}

func (l Limits) orDefault() Limits {
	for _, f := range []struct {
		v *int
		d int
	}{
		{&l.MaxMessage, DefaultLimits.MaxMessage}, {&l.MaxStreams, DefaultLimits.MaxStreams},
		{&l.MaxWatches, DefaultLimits.MaxWatches}, {&l.MaxSnapshots, DefaultLimits.MaxSnapshots},
	} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	return l
}

// FromCE takes the API's settings from a validated CE configuration
// (reading the token file); ok is false when api_listen is "off".
func FromCE(cfg ce.Config, log *slog.Logger) (c Config, ok bool, err error) {
	if cfg.APIListen == "off" {
		return Config{}, false, nil
	}
	c = Config{Listen: cfg.APIListen, TLS: cfg.APITLS, Logger: log, Limits: Limits{
		MaxMessage: cfg.APIMaxMessage, MaxStreams: cfg.APIMaxStreams, MaxWatches: cfg.APIMaxWatches, MaxSnapshots: cfg.APIMaxSnapshots}}
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

// maxHeaderList bounds a call's headers (the API's are a few hundred
// bytes: the path, content type, deadline and the token).
const maxHeaderList = 16 << 10

// stopGrace bounds how long Stop waits for calls in progress (a Watch never
// ends by itself) before cutting them off.
const stopGrace = 2 * time.Second

// Server is a running API server.
type Server struct {
	grpc    *grpc.Server
	l       net.Listener
	stats   *Stats
	gate    *gate
	methods map[string]bool // the served methods, for counting refused calls
	// watches and snapshots hold a token per Watch stream, and per List or
	// Watch(current) snapshot, in progress.
	watches, snapshots chan struct{}
	done               chan struct{} // closed when Serve returned
}

// tap admits or refuses a call from its headers (the gate), counting the
// refused ones in Stats under their method (if it is one the server has;
// a client chooses the name, so others share one entry).
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	ctx, err := s.gate.tap(ctx, info)
	if err != nil {
		m := info.FullMethodName
		if !s.methods[m] {
			m = "unknown"
		}
		s.stats.record(m, err, 0)
	}
	return ctx, err
}

// acquire takes a token of sem (s.watches or s.snapshots) or, with none
// left, refuses the call with ResourceExhausted naming the limit.
func acquire(sem chan struct{}, what, key string) (release func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "%d %s in progress, the most %s allows: try again later", cap(sem), what, key)
	}
}

// Start listens as cfg says and serves b's API until Stop.
func Start(b Backend, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	network, addr, _ := strings.Cut(cfg.Listen, ":")
	if network == "tcp" && cfg.TLS == nil {
		// A token over plaintext TCP is anyone's who can watch the wire.
		return nil, fmt.Errorf("%w: listen %q: TCP needs mutual TLS (a bearer token is sent in the clear without it)", ErrConfig, cfg.Listen)
	}
	lim := cfg.Limits.orDefault()
	s := &Server{stats: newStats(), done: make(chan struct{}), gate: newGate(cfg.Token),
		watches: make(chan struct{}, lim.MaxWatches), snapshots: make(chan struct{}, lim.MaxSnapshots)}
	opts := []grpc.ServerOption{
		grpc.InTapHandle(s.tap),
		grpc.MaxRecvMsgSize(lim.MaxMessage),
		grpc.MaxConcurrentStreams(uint32(lim.MaxStreams)),
		// What is read (and HPACK-decoded) before the tap sees a call:
		// grpc's default is still 16 MiB.
		grpc.MaxHeaderListSize(maxHeaderList),
	}
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
		l, err = istatus.ListenUnix("api socket", addr, socketMode)
	case "tcp":
		l, err = net.Listen("tcp", addr)
	default:
		err = fmt.Errorf("%w: listen %q: want unix:PATH or tcp:HOST:PORT", ErrConfig, cfg.Listen)
	}
	if err != nil {
		return nil, err
	}
	s.l = l
	opts = append(opts, grpc.ChainUnaryInterceptor(s.stats.unary), grpc.ChainStreamInterceptor(s.stats.stream))
	opts = append(opts, cfg.extra...)
	s.grpc = grpc.NewServer(opts...)
	spv1.RegisterRoutesServer(s.grpc, &routes{b: b, s: s})
	spv1.RegisterFEsServer(s.grpc, &fes{b: b})
	spv1.RegisterBGPServer(s.grpc, &bgpService{b: b})
	spv1.RegisterClassifierServer(s.grpc, classifier{b: b})
	reflection.Register(s.grpc)
	s.methods = map[string]bool{}
	for name, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			s.methods["/"+name+"/"+m.Name] = true
		}
	}
	go func() {
		defer close(s.done)
		if err := s.grpc.Serve(l); err != nil {
			log.Error("api: serve", "listen", cfg.Listen, "err", err)
		}
	}()
	log.Info("api: serving", "listen", cfg.Listen, "tls", cfg.TLS != nil, "token", cfg.Token != "",
		"max_message", lim.MaxMessage, "max_streams", lim.MaxStreams, "max_watches", lim.MaxWatches, "max_snapshots", lim.MaxSnapshots)
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
