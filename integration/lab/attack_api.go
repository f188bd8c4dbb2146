package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/integration/harness"
	"github.com/splitplane/splitplane/internal/nsthread"
)

// Hostile API clients. The attack lab's API is its unix socket with a
// bearer token (Options.Attackable): a local client without the token is a
// stranger.

// bearer sends the token on any connection (the unix socket is not TLS).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// apiToken is the attack lab's API token.
func (o *Options) apiToken() string { return filepath.Join(o.Dir, "api-token") }

// apiClient dials the lab's API, with the token or without.
func (r *attackRun) apiClient(withToken bool) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(16 << 20)),
	}
	if withToken {
		b, err := os.ReadFile(r.o.apiToken())
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(strings.TrimSpace(string(b)))))
	}
	return grpc.NewClient("unix:"+r.o.Socket("api"), opts...)
}

// apiClients opens n connections to the API, with the token.
func (r *attackRun) apiClients(n int) ([]splitplanev1.RoutesClient, func(), error) {
	var ccs []*grpc.ClientConn
	closeAll := func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}
	var rcs []splitplanev1.RoutesClient
	for range n {
		cc, err := r.apiClient(true)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ccs = append(ccs, cc)
		rcs = append(rcs, splitplanev1.NewRoutesClient(cc))
	}
	return rcs, closeAll, nil
}

// calls runs n calls at once and counts their status codes.
func calls(n int, call func() error) map[codes.Code]int {
	var mu sync.Mutex
	got := map[codes.Code]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c := status.Code(call())
			mu.Lock()
			got[c]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func codeCounts(m map[codes.Code]int) string {
	var parts []string
	for c, n := range m {
		parts = append(parts, fmt.Sprintf("%d %s", n, c))
	}
	return strings.Join(parts, ", ")
}

func apiAttacks() []attack {
	return []attack{
		{"attack_api_unauthenticated_large", func(ctx context.Context, r *attackRun) (string, error) {
			// 64 strangers at once, each with a 4 MiB request: refused
			// before the CE reads and decodes them.
			cc, err := r.apiClient(false)
			if err != nil {
				return "", err
			}
			defer cc.Close()
			rc := splitplanev1.NewRoutesClient(cc)
			big := &splitplanev1.Route{Prefix: "192.0.2.0/24", NextHops: []string{strings.Repeat("1", 4<<20)}}
			var got map[codes.Code]int
			what, err := r.bounded("ce", r.cePid, func() error {
				got = calls(64, func() error {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					_, err := rc.Add(cctx, &splitplanev1.AddRouteRequest{Route: big})
					return err
				})
				return nil
			})
			what = "64 unauthenticated 4 MiB Adds: " + codeCounts(got) + "; " + what
			if err == nil && got[codes.Unauthenticated]+got[codes.ResourceExhausted] != 64 {
				err = errors.New("not every call was refused")
			}
			return what, err
		}},
		{"attack_api_wrong_token", func(ctx context.Context, r *attackRun) (string, error) {
			cc, err := grpc.NewClient("unix:"+r.o.Socket("api"),
				grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("guess")))
			if err != nil {
				return "", err
			}
			defer cc.Close()
			_, err = splitplanev1.NewRoutesClient(cc).Add(ctx, &splitplanev1.AddRouteRequest{Route: &splitplanev1.Route{Prefix: "192.0.2.0/24", NextHops: []string{"10.10.1.2"}}})
			if status.Code(err) != codes.Unauthenticated {
				return "", fmt.Errorf("a wrong token got %v", err)
			}
			return "a wrong token: " + status.Code(err).String(), nil
		}},
		{"attack_api_token_on_plaintext_tcp", func(ctx context.Context, r *attackRun) (string, error) {
			// The operator's mistake: a token on a TCP listener without
			// TLS, where anyone on the path reads it. The CE must refuse
			// the configuration.
			b, err := os.ReadFile(filepath.Join(r.o.Dir, "ce.yaml"))
			if err != nil {
				return "", err
			}
			cfg := strings.Replace(string(b), "api_listen: unix:", "api_listen: tcp:127.0.0.1:6710 # was unix:", 1)
			path := filepath.Join(r.o.Dir, "ce-plaintext-token.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				return "", err
			}
			out, err := exec.CommandContext(ctx, r.o.Binary, "ce", "--check", "--config", path).CombinedOutput()
			msg := strings.TrimSpace(string(out))
			if err == nil {
				return "", fmt.Errorf("ce --check accepted it: %s", msg)
			}
			if !strings.Contains(msg, "api_") {
				return "", fmt.Errorf("ce --check failed without naming the key: %s", msg)
			}
			return "ce --check: " + msg, nil
		}},
		{"attack_api_watch_flood", func(ctx context.Context, r *attackRun) (string, error) {
			// 2,000 Watch(current) streams held open at once, over 40
			// connections.
			rcs, closeAll, err := r.apiClients(40)
			if err != nil {
				return "", err
			}
			defer closeAll()
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var mu sync.Mutex
			got := map[codes.Code]int{}
			var wg sync.WaitGroup
			for i := range 2000 {
				rc := rcs[i%len(rcs)]
				wg.Go(func() {
					s, err := rc.Watch(wctx, &splitplanev1.WatchRoutesRequest{Current: true})
					if err == nil {
						_, err = s.Recv()
					}
					mu.Lock()
					got[status.Code(err)]++
					mu.Unlock()
				})
			}
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := got[codes.ResourceExhausted] + got[codes.OK]
				mu.Unlock()
				if n == 2000 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			what := "2,000 Watch(current) streams: " + codeCounts(got)
			refused := got[codes.ResourceExhausted]
			mu.Unlock()
			cancel()
			wg.Wait()
			if refused == 0 {
				return what, errors.New("no bound on watchers")
			}
			return what, nil
		}},
		{"attack_api_list_flood", func(ctx context.Context, r *attackRun) (string, error) {
			// 1,000 Lists of the whole table at once, over 20 connections.
			rcs, closeAll, err := r.apiClients(20)
			if err != nil {
				return "", err
			}
			defer closeAll()
			var next atomic.Int64
			got := calls(1000, func() error {
				rc := rcs[next.Add(1)%int64(len(rcs))]
				s, err := rc.List(ctx, &splitplanev1.ListRoutesRequest{})
				if err != nil {
					return err
				}
				for {
					if _, err := s.Recv(); err != nil {
						if errors.Is(err, io.EOF) {
							return nil
						}
						return err
					}
				}
			})
			what := "1,000 concurrent Lists of the table: " + codeCounts(got)
			if got[codes.ResourceExhausted] == 0 {
				return what, errors.New("no bound on List")
			}
			return what, nil
		}},
		{"attack_api_martian_prefixes", func(ctx context.Context, r *attackRun) (string, error) {
			cc, err := r.apiClient(true)
			if err != nil {
				return "", err
			}
			defer cc.Close()
			rc := splitplanev1.NewRoutesClient(cc)
			var parts []string
			for _, p := range []struct{ prefix, nh string }{
				{"127.0.0.0/8", "10.10.1.2"}, {"0.0.0.0/8", "10.10.1.2"}, {"224.0.0.0/4", "10.10.1.2"},
				{"169.254.0.0/16", "10.10.1.2"}, {"240.0.0.0/4", "10.10.1.2"},
				{"::1/128", "fd00:10:1::2"}, {"fe80::/10", "fd00:10:1::2"}, {"ff00::/8", "fd00:10:1::2"},
			} {
				_, err := rc.Add(ctx, &splitplanev1.AddRouteRequest{Route: &splitplanev1.Route{Prefix: p.prefix, NextHops: []string{p.nh}}})
				if err == nil {
					_, _ = rc.Delete(ctx, &splitplanev1.DeleteRouteRequest{Prefix: p.prefix})
				}
				if status.Code(err) != codes.InvalidArgument {
					return "", fmt.Errorf("route add %s: %v, want InvalidArgument", p.prefix, err)
				}
				parts = append(parts, p.prefix)
			}
			return "InvalidArgument for " + strings.Join(parts, ", "), nil
		}},
		{"attack_api_routes_file_corrupt", func(ctx context.Context, r *attackRun) (string, error) {
			// The API routes file corrupted while the CE is down: it must
			// start, say so, and keep the bad file for the operator.
			if err := Stop(r.o, "ce", false); err != nil {
				return "", err
			}
			file := filepath.Join(r.o.Dir, "api-routes")
			if err := os.WriteFile(file, []byte("this is not a route\n\x00\xff\n"), 0o644); err != nil {
				return "", err
			}
			if err := Start(r.o, "ce"); err != nil {
				return "", err
			}
			time.Sleep(3 * time.Second)
			pid, err := Pid(r.o, "ce")
			if err != nil {
				// Put the lab back for what follows.
				err = fmt.Errorf("the CE did not start: %w; %s", err, harness.Tail(filepath.Join(r.o.Dir, "ce.log"), 3))
				os.Remove(file)
				if serr := Start(r.o, "ce"); serr == nil {
					time.Sleep(time.Second)
					r.cePid, _ = Pid(r.o, "ce")
				}
				return "", err
			}
			r.cePid = pid
			aside, _ := filepath.Glob(file + ".*")
			if len(aside) == 0 {
				return "", errors.New("the corrupt file was not kept aside")
			}
			// The restarted CE writes a new log.
			b, _ := os.ReadFile(filepath.Join(r.o.Dir, "ce.log"))
			if !strings.Contains(string(b), "NOT restored") || !strings.Contains(string(b), filepath.Base(aside[0])) {
				return "", errors.New("the log does not say the routes were not restored, or where the file went")
			}
			m, err := scrape(r.o.Namespace("rtr"), "127.0.0.1:9101")
			if err != nil {
				return "", err
			}
			if !strings.Contains(m, "splitplane_api_routes_restore_failed 1") {
				return "", errors.New("splitplane_api_routes_restore_failed is not 1")
			}
			return fmt.Sprintf("the CE started, moved the corrupt file to %s, said so in its log and in splitplane_api_routes_restore_failed", filepath.Base(aside[0])), nil
		}},
	}
}

// scrape reads a Prometheus endpoint in namespace ns.
func scrape(ns, addr string) (string, error) {
	var nc net.Conn
	if err := nsthread.Run(ns, func() error {
		var err error
		nc, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return nc, nil },
	}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}
