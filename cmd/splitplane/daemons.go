package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/splitplane/splitplane/api/server"
	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
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
			if p, ok := d.(privileged); ok {
				if err := checkPrivileges(name, p.privileges(), effectiveCaps()); err != nil {
					return err
				}
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
	cmd.Flags().StringVar(&pcap, "forces-pcap", "", "record every ForCES message in this pcap file (tshark -d tcp.port==6700,forces)")
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
		d := &ceDaemon{CE: c, pcap: pcap, cfg: cfg}
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
	cfg  ce.Config
}

// privileges: binding a TCP port below the kernel's unprivileged range
// (BGP's 179) needs CAP_NET_BIND_SERVICE.
func (d *ceDaemon) privileges() []privilege {
	cfg := d.cfg
	if cfg.Validate() != nil { // fills in the defaults; ce.New accepted it
		return nil
	}
	type listen struct{ setting, addr string }
	var ls []listen
	switch cfg.BGPListenPort {
	case -1:
	case 0:
		ls = append(ls, listen{"bgp_listen_port", ":179"})
	default:
		ls = append(ls, listen{"bgp_listen_port", fmt.Sprintf(":%d", cfg.BGPListenPort)})
	}
	ls = append(ls, listen{"forces_listen", cfg.ForCESListen}, listen{"forces_listen_low", cfg.ForCESListenLow},
		listen{"bgp_api_listen", cfg.BGPAPIListen}, listen{"metrics_listen", cfg.MetricsListen})
	if a, ok := strings.CutPrefix(cfg.APIListen, "tcp:"); ok {
		ls = append(ls, listen{"api_listen", a})
	}
	start := unprivilegedPortStart()
	var low []string
	for _, l := range ls {
		_, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			continue
		}
		if p, err := strconv.Atoi(port); err == nil && p > 0 && p < start {
			low = append(low, fmt.Sprintf("%s %d", l.setting, p))
		}
	}
	if len(low) == 0 {
		return nil
	}
	return []privilege{{caps: [][]capability{{capNetBindService}},
		why: fmt.Sprintf("to listen on %s, below %d", strings.Join(low, ", "), start)}}
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
	cmd := daemonCmd("fe", "Run a forwarding element: the XDP fast path, programmed by the CE over ForCES", func(path, pcap string) (daemon, error) {
		var cfg fe.Config
		if err := loadYAML(path, &cfg); err != nil {
			return nil, err
		}
		if pcap != "" {
			cfg.ForCESPcap = pcap
		}
		log := newLogger()
		a, err := fe.New(cfg, log)
		if err != nil {
			return nil, err
		}
		return feDaemon{Agent: a, pcap: pcap, log: log}, nil
	})
	cmd.Long = "Run a forwarding element: the XDP fast path, programmed by the CE over ForCES.\n\n" +
		"SIGHUP reads the configuration file again and applies what can change at run time (the\n" +
		"classifier's policer and GTSM peers); other changed settings are logged as needing a restart\n" +
		"and kept. An invalid file changes nothing, and the FE keeps running."
	return cmd
}

// feDaemon is an FE run by the fe command.
type feDaemon struct {
	*fe.Agent
	pcap string // --forces-pcap, which overrides the file's forces_pcap
	log  *slog.Logger
}

// reload reads the FE's configuration file again and applies what can
// change at run time, logging what it applied and what needs a restart. A
// file that cannot be read or is not valid changes nothing.
func (d feDaemon) reload(_ context.Context, path string) error {
	var cfg fe.Config
	if err := loadYAML(path, &cfg); err != nil {
		return err
	}
	if d.pcap != "" {
		cfg.ForCESPcap = d.pcap
	}
	r, err := d.Reload(cfg)
	if err != nil {
		return err
	}
	d.log.Info("fe: configuration reloaded", "config", path, "applied", r.Applied, "needs_restart", r.Restart)
	return nil
}

// privileges: every FE loads BPF maps and the XDP program, attaches it,
// writes kernel routes and opens packet sockets on its ports.
func (feDaemon) privileges() []privilege {
	return []privilege{
		{caps: [][]capability{{capNetAdmin}}, why: "to attach XDP to the ports and program the kernel's routes"},
		{caps: [][]capability{{capNetRaw}}, why: "for the packet sockets of redirects"},
		{caps: [][]capability{{capBPF, capPerfmon}, {capSysAdmin}}, why: "to load the XDP program and its maps"},
	}
}

// A capability is a Linux capability (capabilities(7)) by number.
type capability int

const (
	capNetBindService capability = unix.CAP_NET_BIND_SERVICE
	capNetAdmin       capability = unix.CAP_NET_ADMIN
	capNetRaw         capability = unix.CAP_NET_RAW
	capSysAdmin       capability = unix.CAP_SYS_ADMIN
	capPerfmon        capability = unix.CAP_PERFMON
	capBPF            capability = unix.CAP_BPF
)

func (c capability) String() string {
	switch c {
	case capNetBindService:
		return "CAP_NET_BIND_SERVICE"
	case capNetAdmin:
		return "CAP_NET_ADMIN"
	case capNetRaw:
		return "CAP_NET_RAW"
	case capSysAdmin:
		return "CAP_SYS_ADMIN"
	case capPerfmon:
		return "CAP_PERFMON"
	case capBPF:
		return "CAP_BPF"
	}
	return fmt.Sprintf("capability %d", int(c))
}

// A privilege is what a daemon needs for one purpose: every capability of
// one of the alternative sets in caps.
type privilege struct {
	caps [][]capability
	why  string
}

// privileged is a daemon that knows, from its configuration, the
// capabilities it needs.
type privileged interface {
	privileges() []privilege
}

// errPrivileges is wrapped by the error of a daemon started without the
// capabilities it needs.
var errPrivileges = errors.New("missing privileges")

// checkPrivileges returns an error naming every capability of need that
// the effective set eff lacks, and what each is for, so that a daemon
// started without them stops at once, saying so, instead of failing
// half-way with a bare EPERM from the kernel.
func checkPrivileges(name string, need []privilege, eff uint64) error {
	has := func(c capability) bool { return eff&(1<<uint(c)) != 0 }
	var missing []string
	var grant []capability
	for _, p := range need {
		ok := false
		var alts []string
		for _, set := range p.caps {
			ok = ok || !slices.ContainsFunc(set, func(c capability) bool { return !has(c) })
			var names []string
			for _, c := range set {
				names = append(names, c.String())
			}
			alts = append(alts, strings.Join(names, " and "))
		}
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", strings.Join(alts, " or "), p.why))
			for _, c := range p.caps[0] {
				if !has(c) && !slices.Contains(grant, c) {
					grant = append(grant, c)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var names []string
	for _, c := range grant {
		names = append(names, c.String())
	}
	return fmt.Errorf("%s: %w: %s; run it as root or grant them (systemd: AmbientCapabilities=%s)",
		name, errPrivileges, strings.Join(missing, ", "), strings.Join(names, " "))
}

// effectiveCaps returns this process's effective capability set as a bit
// mask (bit N: capability N); none if the kernel does not say.
func effectiveCaps() uint64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32
}

// unprivilegedPortStart is the lowest port a process without
// CAP_NET_BIND_SERVICE may bind in this network namespace
// (net.ipv4.ip_unprivileged_port_start, 1024 by default).
func unprivilegedPortStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1024
	}
	return n
}
