package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/integration/lab"
	"github.com/splitplane/splitplane/internal/cli"
)

// labDosCmd is `splitplane lab dos`: the DoS-resilience test (issue 8). It
// shares the lab's --name and --dir; its lab is "spdos" unless --name is given.
// noBinary is set (by lab's PersistentPreRunE) when there is no router
// binary to run.
func labDosCmd(lo *lab.Options, noBinary *error) *cobra.Command {
	var (
		o      lab.DoSOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "dos",
		Short: "Flood the router (forwarded traffic and attacks on its address) with and without protection; BGP, update delay, rates",
		Long: `Brings up a lab of its own (needs root and two CPUs; taken down at the end), once
with the FE's classifier (protection on) and once without (off), and for
--duration in each mode floods the router's upstream port from the peer's side
at the generator's full rate (XDP live frames, on CPU 1): UDP to be forwarded
to host B and the attack: TCP SYNs and spoofed "established" ACKs to the BGP
port, UDP to closed ports of the router (all from spoofed sources), UDP whose
TTL expires at the router, ARP requests for its address. With --each, every
attack kind then runs alone beside the forwarded flood, --duration each, in
the same lab. Meanwhile the peer announces and withdraws 203.0.113.0/24
every --update-interval and each change is timed until the FE's XDP program
forwards to it (or stops). The two modes are printed side by side; with --json
one object per line:
  dos_bgp_session_drops    times the BGP session (hold time 9s) left Established
  dos_update_delay_p99_ms  peer's announcement or withdrawal until the FE's datapath has it
  dos_forward_pps          forwarded packets per second received at host B
  dos_attack_pps           attack packets per second offered (SYN + UDP + TTL + ACK + ARP)
and with --each, for every attack kind alone (syn, udp, ttl, ack, arp):
  dos_bgp_session_drops_KIND, dos_update_delay_p99_ms_KIND
each with protection on, its baseline the same with protection off.
Where each flow is processed, and why: docs/architecture.md, "The DoS test".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration < 5*time.Second {
				return fmt.Errorf("%w: --duration %s: need at least 5s", cli.ErrUsage, o.Duration)
			}
			if o.UpdateInterval < 100*time.Millisecond || o.UpdateInterval > o.Duration/2 {
				return fmt.Errorf("%w: --update-interval %s: need 100ms to half the duration", cli.ErrUsage, o.UpdateInterval)
			}
			if o.Routes < 1 {
				return fmt.Errorf("%w: --routes %d: need at least 1", cli.ErrUsage, o.Routes)
			}
			switch o.Protection {
			case "on", "off", "both":
			default:
				return fmt.Errorf("%w: --protection %q: on, off or both", cli.ErrUsage, o.Protection)
			}
			if *noBinary != nil {
				return *noBinary
			}
			if f := cmd.Flag("name"); f != nil && f.Changed {
				o.Name = lo.Name
			}
			o.Dir, o.Binary = lo.Dir, lo.Binary
			o.Out = os.Stderr
			signal.Ignore(syscall.SIGPIPE) // a closed pipe must not stop the cleanup halfway
			ctx, stop := signalContext()
			defer stop()
			rs, err := lab.DoS(ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				for _, m := range lab.DoSMetrics(rs) {
					if err := enc.Encode(m); err != nil {
						return err
					}
				}
				return nil
			}
			return lab.PrintDoS(os.Stdout, rs)
		},
	}
	cmd.Flags().DurationVar(&o.Duration, "duration", 120*time.Second, "how long the floods run in each mode")
	cmd.Flags().DurationVar(&o.UpdateInterval, "update-interval", 2*time.Second, "how often the peer announces or withdraws the probe prefix")
	cmd.Flags().IntVar(&o.Routes, "routes", 10000, "prefixes the peer announces; the floods go to hosts inside them")
	cmd.Flags().StringVar(&o.Protection, "protection", "both", "which modes to run: on, off or both")
	cmd.Flags().BoolVar(&o.Each, "each", false, "then run each attack kind alone (with the forwarded flood), --duration each")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}
