package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/integration/bench"
	"github.com/splitplane/splitplane/internal/cli"
	"github.com/splitplane/splitplane/internal/host"
)

// benchCmd is `bench`; binary is the --binary flag (routerBinary), for the
// benchmarks that run the router's daemons.
func benchCmd(binary *string) *cobra.Command {
	// Measured once for the command; bench all's report states the same.
	var mem host.Memory
	cmd := &cobra.Command{
		Use:   "bench NAME",
		Short: "Run a benchmark and print its figures (a table, or JSON lines with --json)",
		// The memory-heavy figures (ForCES, API, convergence) depend on it:
		// said on stderr, so the figures on stdout stay as they are.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			mem = host.MeasureMemory()
			m := mem
			if m.THP != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: transparent huge pages: %s (docs/operations.md)\n", m.THP)
			}
			if m.FirstTouch > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: a first touch of a 4 KiB page costs %.2f µs (docs/performance.md)\n", float64(m.FirstTouch)/float64(time.Microsecond))
			}
		},
	}
	cmd.AddCommand(benchAllCmd(&mem, binary), benchForcesCmd(), benchFIBCmd(), benchForwardCmd(), benchClusterCmd(), benchConvergeCmd(binary), benchAPICmd(binary))
	return cmd
}

func benchFIBCmd() *cobra.Command {
	var (
		rounds int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "fib",
		Short: "FIB lookup cost at 1k, 100k and 1M routes (against the kernel's LPM trie) and install rate",
		Long: `Loads the XDP program (needs root) and measures, median over --rounds:
  fib_lookup_ns_1k, fib_lookup_ns_100k, fib_lookup_ns_1m   ns per packet, random destinations,
                                                           BPF_PROG_TEST_RUN (1m against lpm_trie)
  lpm_trie_lookup_ns_1m                                    the kernel's LPM trie, same routes
  fib_install_routes_per_s                                 1M routes into an empty FIB
  fib6_lookup_ns_1k, fib6_lookup_ns_100k                   the same for IPv6 (range table;
                                                           100k against lpm_trie6)
  lpm_trie6_lookup_ns_100k                                 the kernel's IPv6 LPM trie, same routes
  fib6_lookup_ns_full, fib6_lookup_ns_full_zipf            220k routes shaped as the full IPv6 table,
                                                           uniform or Zipf destinations (against
                                                           lpm_trie6_lookup_ns_full, _full_zipf)
  fib6_bytes_full                                          the bytes its lookups read (range table),
                                                           against fib6_stride_bytes_full (stride table
                                                           alone, fib6_groups_full groups)
  fib6_stride_chunks_full                                  its /16s and /24s left to the stride table
  fib6_install_routes_per_s_full                           its install rate into the emptied FIB
  fib_lookup_ns_1m_edge, fib_lookup_ns_1m_edge_zipf        the edge-shaped table (same prefixes over 4
                                                           upstreams) in the range table, uniform or Zipf
                                                           (against dir24_8_lookup_ns_1m_edge, _edge_zipf)
  fib_bytes_1m_edge                                        its lookup working set (against
                                                           dir24_8_bytes_1m_edge)
  fib_install_routes_per_s_1m_edge                         its install rate, range table included`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, rounds)
			}
			ctx, stop := signalContext()
			defer stop()
			results, err := bench.FIB(ctx, bench.FIBSizes(), bench.FIB6Sizes(), rounds)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().IntVar(&rounds, "rounds", 3, "rounds; each figure is the median")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}

func benchForwardCmd() *cobra.Command {
	var (
		o       bench.ForwardOptions
		seconds float64
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "forward",
		Short: "Forwarding rate of the XDP datapath through veth, against the kernel and a bare XDP redirect",
		Long: `Builds gen -- router -- sink in network namespaces (needs root; deleted at the
end), loads --routes routes, sends 60-byte UDP frames from an XDP live-frames
generator for --seconds per measurement and counts them at the sink. The modes
take turns in every round; each figure is the median over --rounds:
  forward_pps_1m            the splitplane XDP datapath, against kernel_forward_pps_1m
  kernel_forward_pps_1m     the kernel forwarding, same routes, no XDP on the router
  redirect_limit_pps        a bare XDP redirect port to port: no lookup, no rewrite
  forward_pps_1m_vs_limit   forward_pps_1m / redirect_limit_pps
  lookup_redirect_pps_1m    the bare redirect with one FIB lookup before it (and
                            _vs_limit, its share); router_vs_lookup_1m is the
                            router against it
  forward_pps_1m_edge       the edge-shaped table (same prefixes over 4 upstreams,
                            the range table), destinations uniform over the
                            prefixes; _edge_zipf with Zipf destinations
  forward6_pps_full         IPv6: a full-shaped table of 220k routes, 80-byte
                            IPv6/UDP frames uniform over its prefixes, against
                            redirect6_limit_pps, the bare redirect of those frames
(the size in the names follows --routes: forward_pps_10k for 10000; the IPv6
table is always the full shape)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Routes < 1 {
				return fmt.Errorf("%w: --routes %d: need at least 1", cli.ErrUsage, o.Routes)
			}
			if seconds < 1 {
				return fmt.Errorf("%w: --seconds %g: need at least 1", cli.ErrUsage, seconds)
			}
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			o.Duration = time.Duration(seconds * float64(time.Second))
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			results, err := bench.Forward(ctx, o)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().IntVar(&o.Routes, "routes", 1_000_000, "routes in the table")
	cmd.Flags().Float64Var(&seconds, "seconds", 4, "seconds the generator runs per measurement (rate over the middle half)")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 3, "rounds; each figure is the median")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}

func benchConvergeCmd(binary *string) *cobra.Command {
	var (
		o      bench.ConvergeOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "converge",
		Short: "Full-table BGP convergence into the FE's XDP datapath, against BIRD and FRR into the kernel and GoBGP alone; CE memory",
		Long: `Needs root, BIRD 2 and FRR (apt-get install bird2 frr). A BIRD sender announces
--routes generated prefixes over eBGP, in turn to a splitplane CE (splitplane's
'ce', with an FE, 'fe', on a veth port with XDP, associated before the session
starts), to a BIRD exporting them into the Linux kernel, to GoBGP alone and to
FRR (bgpd and zebra, run by hand, zebra installing into the kernel), each in its
own network namespace (cvg-*, deleted at the end). Median over --rounds:
  converge_1m_s   from Established (as the sender records it) until the FE has
                  every route in its datapath; against bird_kernel_1m_s, from
                  Established until the kernel's table holds every route
  converge_1m_vs_frr_s
                  the same, against frr_kernel_1m_s: FRR's time from
                  Established until zebra has every route in the kernel's table
  ce_rss_mb_1m    VmRSS of the CE process, 5s after it has the whole table
                  (MB of 10^6 bytes); against bird_rss_mb_1m, the receiving BIRD's
  ce_rss_vs_frr_mb_1m
                  the same, against frr_rss_mb_1m: bgpd's and zebra's, summed
  gobgp_alone_1m_s, gobgp_alone_rss_mb_1m
                  GoBGP (as the CE embeds it) receiving the table with nothing
                  else to do: its time and memory, against BIRD's
  ce_rss_over_gobgp_mb_1m
                  ce_rss_mb_1m less gobgp_alone_rss_mb_1m (the baseline): what
                  the CE keeps beyond the GoBGP it embeds
With --two-providers, also the edge appliance's case (deploy/examples/ce.yaml): a
second BIRD sender, in another AS on a second FE port, announces the same table,
and the CE runs with bgp_multipath:
  converge_2x1m_s from the first session Established until the CE has both tables
                  (2M paths) and the FE every route, as ECMP over both, with
                  nothing pending; against converge_1m_s
  ce_rss_mb_2x1m  the CE's VmRSS 5s later; against ce_rss_mb_1m
(the size in the names follows --routes: converge_20k_s for 20000). The CE
inherits the environment: GOGC and GOMEMLIMIT set here apply to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Routes < 1 {
				return fmt.Errorf("%w: --routes %d: need at least 1", cli.ErrUsage, o.Routes)
			}
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			var err error
			if o.Binary, err = routerBinary(*binary); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			results, err := bench.Converge(ctx, o)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().IntVar(&o.Routes, "routes", 1_000_000, "routes the sender announces")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 1, "rounds (splitplane, BIRD, GoBGP and FRR take turns); each figure is the median")
	cmd.Flags().Int64Var(&o.Seed, "seed", 1, "seed of the route generator")
	cmd.Flags().BoolVar(&o.TwoProviders, "two-providers", false, "also two senders with the full table each into a multipath CE (converge_2x1m_s, ce_rss_mb_2x1m)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}

func benchAPICmd(binary *string) *cobra.Command {
	var (
		o      bench.APIOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Routes through the gRPC API end to end into the XDP datapath: bulk rate, and single add until it forwards",
		Long: `Needs root. Runs splitplane's 'ce' (serving the API on a unix socket) and 'fe'
(the XDP datapath natively on both router ports) in a namespace between a
generator and a sink (bapi-*, deleted at the end); each round starts them afresh,
loads the table, deletes it and loads it again. Median over --rounds:
  api_bulk_routes_per_s      --routes routegen prefixes through Routes.Bulk (batches
                             of 10,000 in packed_ops, 8 in flight), from the first
                             batch until the FE's datapath holds them all, into
                             daemons that held the table before (their memory
                             reused); against fib_install_routes_per_s, the same
                             routes into an empty datapath in one call (the
                             datapath alone, the ceiling)
  api_bulk_cold_routes_per_s the same into the fresh daemons (the first load: every
                             page of their heaps faulted in, the host's fault cost)
  api_bulk_page_faults       the CE's and FE's page faults during the second load,
                             against api_bulk_cold_page_faults, the first load's
  api_bulk_text_routes_per_s the same as api_bulk_routes_per_s with RouteOp
                             messages (strings), in a round of its own
  api_add_to_forward_p50_ms  then --adds single Routes.Add calls, each a new /32 the
  api_add_to_forward_p99_ms  generator already sends to (a frame every 100us): from
                             the call until its first frame reaches the sink`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Routes < 1 {
				return fmt.Errorf("%w: --routes %d: need at least 1", cli.ErrUsage, o.Routes)
			}
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			if o.Adds < 1 || o.Adds > 1<<16 {
				return fmt.Errorf("%w: --adds %d: must be 1 to 65536", cli.ErrUsage, o.Adds)
			}
			var err error
			if o.Binary, err = routerBinary(*binary); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			results, err := bench.API(ctx, o)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().IntVar(&o.Routes, "routes", 1_000_000, "routes sent through Routes.Bulk")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 3, "rounds; each figure is the median")
	cmd.Flags().IntVar(&o.Adds, "adds", 200, "single adds timed until they forward")
	cmd.Flags().Int64Var(&o.Seed, "seed", 1, "seed of the route generator")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}

func benchForcesCmd() *cobra.Command {
	var (
		o      bench.ForcesOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "forces",
		Short: "ForCES codec cost, CE to FE transfer rate over loopback TCP, and heartbeat delay under load",
		Long: `Runs a CE and an FE in this process, connected over loopback TCP, with an
in-memory datapath in the FE, and measures (median over --rounds):
  forces_codec_ns_per_entry           encode + decode of a route SET, against copying the encoded bytes
  forces_transfer_entries_per_s       full sync of --routes routes until the FE holds them all
  forces_update_entries_per_s         a tenth of the routes moved to new next hops, until acknowledged
  forces_heartbeat_p99_ms_under_load  heartbeat round-trip p99 during the full sync, against an idle association`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Routes < 10 {
				return fmt.Errorf("%w: --routes %d: need at least 10", cli.ErrUsage, o.Routes)
			}
			if o.Rounds < 1 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			results, err := bench.Forces(ctx, o)
			if err != nil {
				return err
			}
			return printResults(os.Stdout, results, asJSON)
		},
	}
	cmd.Flags().IntVar(&o.Routes, "routes", 1_000_000, "routes in the table")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 3, "rounds; each figure is the median")
	cmd.Flags().Int64Var(&o.Seed, "seed", 1, "seed of the route generator")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	return cmd
}

// printResults prints benchmark figures as a table, or with asJSON as one JSON
// object per line (DESIGN.md, benchmark output convention).
func printResults(w io.Writer, results []bench.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE\tUNIT\tBASELINE\tBASELINE VALUE")
	for _, r := range results {
		base, bval := "", ""
		if r.Baseline != "" {
			base, bval = r.Baseline, bench.FormatFigure(r.BaselineValue)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Metric, bench.FormatFigure(r.Value), r.Unit, base, bval)
	}
	return tw.Flush()
}
