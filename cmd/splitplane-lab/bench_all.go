package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/integration/bench"
	"github.com/splitplane/splitplane/internal/cli"
	"github.com/splitplane/splitplane/internal/host"
)

func benchAllCmd(mem *host.Memory, binary *string) *cobra.Command {
	var (
		o      bench.AllOptions
		out    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "all",
		Short: "The whole benchmark suite against its baselines: a report with tables, plots and raw JSON",
		Long: `Needs root and BIRD 2 (apt-get install bird2; make bench installs what it
needs). Runs every benchmark on the lab topology (network namespaces, deleted at
the end), each figure beside its baseline, taking turns within each round, the
median over --rounds reported:
  forward      forwarding rate of 64-byte frames at 1k and 1M routes: splitplane
               XDP, the kernel, a bare XDP redirect (the machine's limit)
  payload      packets/s and payload Mbps against UDP payload, 0 to 1400 bytes
  overhead     per-packet cost percentiles (10/25/50/75/90) against payload, from
               single BPF_PROG_TEST_RUN runs, against a bare redirect program
  latency      end-to-end latency percentiles of timestamped probes through the
               router: splitplane, the kernel, a bare redirect
  lookup       cost against table size (1k to 1M routes, random destinations):
               splitplane's FIB, the LPM_TRIE map, the kernel FIB (bpf_fib_lookup)
  scaling      forwarding rate against forwarding cores (machines of more than
               two CPUs; skipped on two)
  cluster      three FEs in a full mesh: cross-FE against local forwarding rate,
               VLB share per FE, reordering and loss across a link failure
  programming  FIB install, ForCES transfer, gRPC bulk API, BGP convergence of
               1M routes against BIRD installing them into the kernel
It writes report.md, results.json and PNG plots into --out (default
results/DATE-TIME) and prints every figure (--json: one JSON object per line).
--quick takes small tables and short measurements (about half a minute): a check
that the suite works, not figures to quote.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Rounds < 0 {
				return fmt.Errorf("%w: --rounds %d: need at least 1", cli.ErrUsage, o.Rounds)
			}
			for _, s := range o.Only {
				if !slices.Contains(bench.Sections(), s) {
					return fmt.Errorf("%w: --only %s: sections are %s", cli.ErrUsage, s, strings.Join(bench.Sections(), ", "))
				}
			}
			if os.Geteuid() != 0 {
				return errors.New("bench all needs root: it creates network namespaces and loads XDP programs")
			}
			var err error
			if o.Binary, err = routerBinary(*binary); err != nil {
				return err
			}
			started := time.Now()
			if out == "" {
				out = filepath.Join("results", started.Format("2006-01-02-150405"))
			}
			ctx, stop := signalContext()
			defer stop()
			o.Progress = os.Stderr
			o.Memory = *mem
			rep, err := bench.All(ctx, o)
			if rep == nil {
				return err
			}
			rep.Command = "splitplane " + strings.Join(os.Args[1:], " ")
			werr := bench.WriteReport(out, rep)
			fmt.Fprintf(os.Stderr, "bench all: %.0f s; report in %s\n", rep.Elapsed, filepath.Join(out, bench.ReportMarkdown))
			perr := printResults(os.Stdout, rep.Metrics, asJSON)
			return errors.Join(err, werr, perr)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per figure and line")
	cmd.Flags().StringVar(&out, "out", "", "directory of the report (default results/DATE-TIME)")
	cmd.Flags().BoolVar(&o.Quick, "quick", false, "small tables and short measurements: check the suite, do not quote the figures")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 0, "rounds; each figure is the median (default 3, with --quick 1)")
	cmd.Flags().StringSliceVar(&o.Only, "only", nil, "run only these sections (comma-separated: "+strings.Join(bench.Sections(), ", ")+")")
	cmd.Flags().BoolVar(&o.Scaling, "scaling", false, "measure scaling with cores even on a machine of two CPUs")
	return cmd
}
