package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/internal/cli"
	"github.com/splitplane/splitplane/internal/peer"
)

// peerCmd is `splitplane-lab peer` (and `splitplane peer`, which hands it
// here): the lab's and the tests' BGP speaker, no part of the router.
func peerCmd() *cobra.Command {
	var (
		asn, neighborASN            uint32
		routerID, neighbor, nh, nh6 string
		extra                       []string
		routes                      int
		seed                        int64
		listenPort                  int32
		control                     string
		gracefulRestart, holdTime   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "peer",
		Short: "Run a BGP speaker that announces a generated Internet-like table (the lab's upstream)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := peer.Config{ASN: asn, NeighborASN: neighborASN, Routes: routes, Seed: seed, ListenPort: listenPort, Logger: newLogger(),
				GracefulRestart: gracefulRestart, HoldTime: holdTime}
			var err error
			if cfg.RouterID, err = netip.ParseAddr(routerID); err != nil {
				return fmt.Errorf("%w: --router-id %q: %v", cli.ErrUsage, routerID, err)
			}
			if cfg.Neighbor, err = netip.ParseAddr(neighbor); err != nil {
				return fmt.Errorf("%w: --neighbor %q: %v", cli.ErrUsage, neighbor, err)
			}
			if cfg.NextHop, err = netip.ParseAddr(nh); err != nil {
				return fmt.Errorf("%w: --next-hop %q: %v", cli.ErrUsage, nh, err)
			}
			if nh6 != "" {
				if cfg.NextHop6, err = netip.ParseAddr(nh6); err != nil {
					return fmt.Errorf("%w: --next-hop6 %q: %v", cli.ErrUsage, nh6, err)
				}
			}
			for _, e := range extra {
				p, err := netip.ParsePrefix(strings.TrimSpace(e))
				if err != nil {
					return fmt.Errorf("%w: --extra %q: %v", cli.ErrUsage, e, err)
				}
				cfg.Extra = append(cfg.Extra, p)
			}
			ctx, stop := signalContext()
			defer stop()
			p, err := peer.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer p.Stop()
			if control != "" {
				_ = os.Remove(control)
				l, err := net.Listen("unix", control)
				if err != nil {
					return fmt.Errorf("--control %s: %w", control, err)
				}
				defer os.Remove(control)
				go p.ServeControl(ctx, l)
			}
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&asn, "asn", 65002, "local AS number")
	f.DurationVar(&gracefulRestart, "graceful-restart", 0, "graceful restart (RFC 4724) with this restart time; 0: off")
	f.DurationVar(&holdTime, "hold-time", peer.DefaultHoldTime, "hold time (whole seconds, at least 3s); keepalives every third of it")
	f.StringVar(&routerID, "router-id", "", "BGP identifier (IPv4)")
	f.StringVar(&neighbor, "neighbor", "", "neighbour address")
	f.Uint32Var(&neighborASN, "neighbor-asn", 65001, "neighbour AS number")
	f.StringVar(&nh, "next-hop", "", "NEXT_HOP of every announced IPv4 route")
	f.StringVar(&nh6, "next-hop6", "", "next hop of announced IPv6 routes (--extra may then hold IPv6 prefixes)")
	f.IntVar(&routes, "routes", 10000, "number of generated prefixes to announce")
	f.Int64Var(&seed, "seed", 1, "seed of the prefix generator")
	f.StringSliceVar(&extra, "extra", nil, "extra prefixes to announce (comma separated)")
	f.Int32Var(&listenPort, "listen-port", 179, "BGP listen port (-1: do not listen)")
	f.StringVar(&control, "control", "", "unix socket for status and announce/withdraw")
	return cmd
}
