package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/integration/bench"
	"github.com/splitplane/splitplane/internal/cli"
)

func benchClusterCmd() *cobra.Command {
	var (
		o      bench.ClusterOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inter-FE forwarding: cross-FE against local rate, VLB share per FE, reordering across a link failure",
		Long: `Builds a generator, three FEs in a full mesh and a sink in network namespaces
(needs root; deleted at the end), each FE its own XDP datapath programmed through
the datapath API as the FE agent programs it. The generator is pinned to the
last CPU; XDP on veth runs in the sender's softirq, so every FE's program runs
there too (the sequenced flow's sender, and its packets' programs, on CPU 0).
Prints:
  cluster_cross_fe_pps            60-byte frames in at FE 1, out at FE 3 (over
                                  the inter-FE link), against cluster_local_pps
  cluster_local_pps               the same generator, FE 1 to its own port
  cluster_cross_fe_vs_local       the ratio (goal: at least 0.7)
  cluster_vlb_share_fe1, _fe2     with FE 1's spill to FE 3 set (--spill), the
                                  percent of the packets to FE 3 that FE 1 sent
                                  straight there and that FE 2 carried
  cluster_vlb_linkdown_share_fe1, _fe2  the same with the FE 1 - FE 3 link down
  cluster_reorder_pct             one sequenced flow FE 1 to FE 3 (--flow-rate):
  cluster_lost_packets            percent out of order, packets lost
  cluster_reorder_failover_pct    the same while the FE 1 - FE 3 link goes down a
  cluster_lost_failover_packets   third into the flow and up two thirds into it
  cluster_reorder_failover_loaded_pct   the failover again, the generator sending
  cluster_lost_failover_loaded_packets  to FE 3 at full rate on the other CPU
The rates take turns in every round; each is the median over --rounds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration < 500*time.Millisecond {
				return fmt.Errorf("%w: --duration %s: need at least 500ms", cli.ErrUsage, o.Duration)
			}
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			if o.SpillPermille < 1 || o.SpillPermille > 1000 {
				return fmt.Errorf("%w: --spill %d: must be 1 to 1000", cli.ErrUsage, o.SpillPermille)
			}
			if o.FlowRate < 1000 || o.FlowRate > 1_000_000 {
				return fmt.Errorf("%w: --flow-rate %d: must be 1000 to 1000000", cli.ErrUsage, o.FlowRate)
			}
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			results, err := bench.Cluster(ctx, o)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().DurationVar(&o.Duration, "duration", 2*time.Second, "how long the generator runs per rate measurement (rate over the middle half), and the sequenced flow lasts")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 3, "rounds of the rates; each is the median")
	cmd.Flags().IntVar(&o.SpillPermille, "spill", 500, "FE 1's spill to FE 3 for the VLB share, in thousandths of the flows")
	cmd.Flags().IntVar(&o.FlowRate, "flow-rate", 100_000, "packets per second of the sequenced flow")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}
