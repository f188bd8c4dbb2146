package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/cli"
	"github.com/splitplane/splitplane/internal/status"
)

// labCmd is `lab`; binary is the --binary flag (routerBinary).
func labCmd(binary *string) *cobra.Command {
	var (
		o lab.Options
		// noBinary is why there is no router binary to run: an error for
		// the commands that start daemons (up, restart, dos), after their
		// flags are checked.
		noBinary error
	)
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "A router, a BGP peer and two hosts in network namespaces, forwarding through XDP",
		// The lab runs the daemons of the router binary, and finds them
		// again (status, down) by its name on their command lines.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			b, err := routerBinary(*binary)
			if err != nil {
				b, noBinary = routerProgram, fmt.Errorf("lab %s: %w", cmd.Name(), err)
			}
			o.Binary = b
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&o.Name, "name", "sp", "lab name: prefix of its namespaces")
	cmd.PersistentFlags().StringVar(&o.Dir, "dir", "", "state directory (default /run/splitplane/lab-NAME)")

	up := &cobra.Command{
		Use:   "up",
		Short: "Build the lab and wait until the peer's routes are in the FE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("cluster") && cmd.Flags().Changed("fes") {
				return fmt.Errorf("%w: --cluster %d and --fes %d: one or the other (a cluster lab has --cluster FEs, linked by a mesh)", cli.ErrUsage, o.Cluster, o.FEs)
			}
			if cmd.Flags().Changed("cluster") && (o.Cluster < 2 || o.Cluster > lab.MaxFEs) {
				return fmt.Errorf("%w: --cluster %d: 2 to %d FEs", cli.ErrUsage, o.Cluster, lab.MaxFEs)
			}
			if noBinary != nil {
				return noBinary
			}
			signal.Ignore(syscall.SIGPIPE) // a failed up must still clean up
			o.Out = os.Stdout
			ctx, stop := signalContext()
			defer stop()
			if err := lab.Up(ctx, o); err != nil {
				return err
			}
			fmt.Println("lab is up; 'splitplane lab status' shows it, 'splitplane lab down' removes it")
			return nil
		},
	}
	up.Flags().IntVar(&o.Routes, "routes", 10000, "prefixes the peer announces")
	up.Flags().Int64Var(&o.Seed, "seed", 1, "seed of the prefix generator")
	up.Flags().StringVar(&o.XDPMode, "xdp-mode", "native", "XDP attach mode of the FE: native or generic")
	up.Flags().Uint64Var(&o.PolicePPS, "police-pps", 20000, "police traffic to the router that is not a control flow at this rate, per CPU")
	up.Flags().StringSliceVar(&o.GTSMPeers, "gtsm-peer", nil, "addresses whose BGP packets must arrive with TTL 255 (GTSM)")
	up.Flags().BoolVar(&o.Traffic, "traffic", false, "keep pinging host B from host A")
	up.Flags().StringVar(&o.Peer, "peer", "splitplane", "the BGP peer: splitplane (GoBGP), bird (BIRD 2) or frr (FRR bgpd)")
	up.Flags().StringVar(&o.Peer2, "peer2", "", "a second BGP peer, bird or frr, announcing the anycast prefixes as --peer bird|frr does: ECMP")
	up.Flags().BoolVar(&o.NoGracefulRestart, "no-graceful-restart", false, "graceful restart off on the CE's neighbours and the peers")
	up.Flags().BoolVar(&o.PersistAPIRoutes, "persist-api-routes", false, "the CE keeps the API's routes in DIR/api-routes (api_routes_file): they survive a CE restart")
	up.Flags().BoolVar(&o.BFD, "bfd", false, "BFD on the sessions with BIRD peers (300ms x 3)")
	up.Flags().BoolVar(&o.HostChecksumOffload, "host-checksum-offload", false, "leave TCP/UDP checksum offload on at the hosts' and peers' veth ends (partial checksums, as a default veth sends)")
	up.Flags().IntVar(&o.FEs, "fes", 1, fmt.Sprintf("forwarding elements, 1 to %d: FE n >= 2 in its own namespace with its own hosts, associated with the CE over a management LAN", lab.MaxFEs))
	up.Flags().IntVar(&o.MeshCapacityMbps, "mesh-capacity-mbps", 0, "with --cluster: the capacity each FE declares for its inter-FE links, in Mbit/s (low, it makes modest traffic spill through intermediate FEs); 0: the veths' speed")
	up.Flags().IntVar(&o.Cluster, "cluster", 0, fmt.Sprintf("one router across N FEs, 2 to %d: FE n in its own namespace with its own host, the FEs linked by a full mesh of inter-FE links (not with --fes)", lab.MaxFEs))
	up.Flags().DurationVar(&o.PeerRestartTime, "peer-restart-time", 120*time.Second, "the restart time the peers announce: how long the CE keeps a vanished peer's routes")

	var asJSON, watch bool
	st := &cobra.Command{
		Use:   "status",
		Short: "Show the BGP session, the routes in the FE and the XDP packet counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Watching only makes sense on a terminal; elsewhere print once.
			watch = watch && term.IsTerminal(int(os.Stdout.Fd()))
			for {
				s, err := lab.GetStatus(o)
				if err != nil {
					return fmt.Errorf("lab %q: %w (is it up?)", o.Name, err)
				}
				if asJSON {
					b, _ := json.MarshalIndent(s, "", "  ")
					fmt.Println(string(b))
				} else {
					if watch {
						fmt.Print("\033[H\033[2J")
						fmt.Printf("splitplane lab %q  %s  (Ctrl-C to stop watching; the lab stays up)\n\n", o.Name, time.Now().Format(time.TimeOnly))
					}
					s.Print(os.Stdout)
				}
				if !watch {
					return nil
				}
				time.Sleep(time.Second)
			}
		},
	}
	st.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	st.Flags().BoolVarP(&watch, "watch", "w", false, "refresh every second (on a terminal)")

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every lab process by pid and delete the namespaces and links",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Finish the cleanup even if whoever reads the progress lines
			// goes away (| head): a broken pipe must not stop it halfway.
			signal.Ignore(syscall.SIGPIPE)
			o.Out = os.Stdout
			return lab.Down(o)
		},
	}

	peerCtl := func(verb string) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " PREFIX",
			Short: "Make the lab's BGP peer " + verb + " a prefix",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return status.Post(o.Socket("peer"), "/"+verb, url.Values{"prefix": {args[0]}})
			},
		}
	}
	var kill bool
	restart := &cobra.Command{
		Use:       "restart ce|fe|fe2...|peer|peer2",
		Example:   "  splitplane lab restart fe3 --kill   # FE 3 of a --fes or --cluster lab, crashed and started again",
		Short:     "Stop one of the lab's daemons (SIGTERM, or SIGKILL with --kill) and start it again",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"ce", "fe", "fe2", "fe3", "fe4", "peer", "peer2"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if noBinary != nil {
				return noBinary
			}
			o.Out = os.Stdout
			return lab.Restart(o, args[0], kill)
		},
	}
	restart.Flags().BoolVar(&kill, "kill", false, "kill it (SIGKILL), as a crash would")

	link := &cobra.Command{
		Use:   "link ife-I-J down|up",
		Short: "Take the mesh link between FE I and FE J of a cluster lab down (FE I's end) or up again",
		Example: "  splitplane lab link ife-1-3 down\n" +
			"  splitplane lab link ife-1-3 up",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			i, j, err := lab.ParseMeshLink(args[0])
			if err != nil {
				return fmt.Errorf("%w: %v", cli.ErrUsage, err)
			}
			if args[1] != "down" && args[1] != "up" {
				return fmt.Errorf("%w: link state %q: down or up", cli.ErrUsage, args[1])
			}
			o.Out = os.Stdout
			return lab.SetMeshLink(o, i, j, args[1] == "up")
		},
	}

	pc := &cobra.Command{Use: "peer", Short: "Control the lab's BGP peer"}
	pc.AddCommand(peerCtl("withdraw"), peerCtl("announce"))

	cmd.AddCommand(up, st, down, restart, link, pc)
	cmd.AddCommand(labDosCmd(&o, &noBinary))    // splitplane lab dos: lab_dos.go
	cmd.AddCommand(labAttackCmd(&o, &noBinary)) // splitplane lab attack: lab_attack.go
	return cmd
}
