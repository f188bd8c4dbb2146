package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/api/server"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/integration/peer"
)

// daemon is a configured CE or FE, ready to run.
type daemon interface {
	Run(ctx context.Context) error
}

// reloader is a daemon that can apply a new configuration while it runs
// (SIGHUP).
type reloader interface {
	reload(ctx context.Context, path string) error
}

// daemonCmd is the command of a daemon configured by a YAML file: it loads and
// validates the file, and runs the daemon until SIGINT or SIGTERM unless
// --check asks only for validation.
func daemonCmd(name, short string, load func(path, pcap string) (daemon, error)) *cobra.Command {
	var path, pcap string
	var check bool
	cmd := &cobra.Command{
		Use:   name + " --config FILE",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := load(path, pcap)
			if err != nil {
				return err
			}
			if check {
				fmt.Println("config ok")
				return nil
			}
			ctx, stop := signalContext()
			defer stop()
			if r, ok := d.(reloader); ok {
				go reloadOnHUP(ctx, r, path)
			}
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (YAML)")
	cmd.Flags().BoolVar(&check, "check", false, "validate the configuration and exit")
	cmd.Flags().StringVar(&pcap, "forces-pcap", "", "record every ForCES message in this pcap file (tshark -d udp.port==6700,forces)")
	cmd.MarkFlagRequired("config")
	return cmd
}

func ceCmd() *cobra.Command {
	cmd := daemonCmd("ce", "Run the control element: BGP, the FIB, and ForCES towards the FEs", func(path, pcap string) (daemon, error) {
		var cfg ce.Config
		if err := loadYAML(path, &cfg); err != nil {
			return nil, err
		}
		if pcap != "" {
			cfg.ForCESPcap = pcap
		}
		log := newLogger()
		c, err := ce.New(cfg, log)
		if err != nil {
			return nil, err
		}
		api, serve, err := server.FromCE(cfg, log)
		if err != nil {
			return nil, err
		}
		d := &ceDaemon{CE: c, pcap: pcap}
		if serve {
			d.api = &api
		}
		return d, nil
	})
	cmd.Long = "Run the control element: BGP, the FIB, and ForCES towards the FEs.\n\n" +
		"SIGHUP reads the configuration file again and applies what changed (static routes, BGP\n" +
		"neighbours, control cores) without touching the rest; settings only a restart can change are\n" +
		"logged and kept. An invalid file changes nothing."
	return cmd
}

// ceDaemon is a CE that serves the gRPC API and reloads its configuration
// file.
type ceDaemon struct {
	*ce.CE
	pcap string
	api  *server.Config // nil: api_listen off
}

// Run serves the API while the CE runs; the API stops after the CE, so its
// watches end with the CE's.
func (d *ceDaemon) Run(ctx context.Context) error {
	if d.api != nil {
		s, err := server.Start(d.CE, *d.api)
		if err != nil {
			return err
		}
		defer s.Stop()
		// The API's request counts and latencies join the CE's metrics.
		err = d.CE.RegisterMetrics(ce.APIStatsCollector(server.LatencyBounds(), func() []ce.APIMethodStats {
			var out []ce.APIMethodStats
			for _, m := range s.Stats().Snapshot() {
				out = append(out, ce.APIMethodStats(m))
			}
			return out
		}))
		if err != nil {
			return err
		}
	}
	return d.CE.Run(ctx)
}

func (d *ceDaemon) reload(ctx context.Context, path string) error {
	var cfg ce.Config
	if err := loadYAML(path, &cfg); err != nil {
		return err
	}
	if d.pcap != "" {
		cfg.ForCESPcap = d.pcap
	}
	_, err := d.Reload(ctx, cfg)
	return err
}

// reloadOnHUP reloads the daemon's configuration on every SIGHUP until ctx
// ends; a failed reload is logged and changes nothing.
func reloadOnHUP(ctx context.Context, r reloader, path string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log := newLogger()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := r.reload(ctx, path); err != nil {
				log.Error("reload: configuration not applied", "config", path, "err", err)
			}
		}
	}
}

func feCmd() *cobra.Command {
	return daemonCmd("fe", "Run a forwarding element: the XDP fast path, programmed by the CE over ForCES", func(path, pcap string) (daemon, error) {
		var cfg fe.Config
		if err := loadYAML(path, &cfg); err != nil {
			return nil, err
		}
		if pcap != "" {
			cfg.ForCESPcap = pcap
		}
		return fe.New(cfg, newLogger())
	})
}

func peerCmd() *cobra.Command {
	var (
		asn, neighborASN            uint32
		routerID, neighbor, nh, nh6 string
		extra                       []string
		routes                      int
		seed                        int64
		listenPort                  int32
		control                     string
		gracefulRestart             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "peer",
		Short: "Run a BGP speaker that announces a generated Internet-like table (the lab's upstream)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := peer.Config{ASN: asn, NeighborASN: neighborASN, Routes: routes, Seed: seed, ListenPort: listenPort, Logger: newLogger(),
				GracefulRestart: gracefulRestart}
			var err error
			if cfg.RouterID, err = netip.ParseAddr(routerID); err != nil {
				return fmt.Errorf("%w: --router-id %q: %v", errUsage, routerID, err)
			}
			if cfg.Neighbor, err = netip.ParseAddr(neighbor); err != nil {
				return fmt.Errorf("%w: --neighbor %q: %v", errUsage, neighbor, err)
			}
			if cfg.NextHop, err = netip.ParseAddr(nh); err != nil {
				return fmt.Errorf("%w: --next-hop %q: %v", errUsage, nh, err)
			}
			if nh6 != "" {
				if cfg.NextHop6, err = netip.ParseAddr(nh6); err != nil {
					return fmt.Errorf("%w: --next-hop6 %q: %v", errUsage, nh6, err)
				}
			}
			for _, e := range extra {
				p, err := netip.ParsePrefix(strings.TrimSpace(e))
				if err != nil {
					return fmt.Errorf("%w: --extra %q: %v", errUsage, e, err)
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
