package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

// unresolvedReasons are the reasons a route does not resolve, in the order
// the CLI prints them; a reason the CE adds later follows them.
var unresolvedReasons = []string{"no_route", "loop", "depth", "work"}

// routeSummaryJSON is the RIB at a glance as route summary -o json prints it.
type routeSummaryJSON struct {
	FIBRoutes       uint64            `json:"fib_routes"`
	UnresolvedTotal uint64            `json:"unresolved_total"`
	Unresolved      map[string]uint64 `json:"unresolved"`
}

func routeSummaryCmd(f *apiFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Count the FIB's routes and the unresolved routes by reason",
		Long: "Count the routes in the FIB and the routes of every origin that are not installed\n" +
			"because their next hops resolve to no directly connected one, by reason: no_route\n" +
			"(nothing covers a next hop), loop (only static routes leading back to themselves),\n" +
			"depth (more than 8 static routes deep), work (a resolution over 4096 steps).\n" +
			"'splitplane route list --unresolved' lists them. -o json prints one JSON object.\n" + exitCodesHelp,
		Example: "  splitplane route summary\n  splitplane route summary -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			var s *splitplanev1.RouteSummary
			err := withAPI(cmd, f, func(c *apiConn) error {
				return c.call(cmd.Context(), "route summary", func(ctx context.Context) error {
					var err error
					s, err = c.routes.Summary(ctx, &splitplanev1.RouteSummaryRequest{})
					return err
				})
			})
			if err != nil {
				return err
			}
			return printRouteSummary(cmd.OutOrStdout(), summaryView(s), out)
		},
	}
	outputFlag(cmd, &out)
	return cmd
}

func summaryView(s *splitplanev1.RouteSummary) routeSummaryJSON {
	v := routeSummaryJSON{FIBRoutes: s.GetFibRoutes(), Unresolved: map[string]uint64{}}
	for reason, n := range s.GetUnresolved() {
		v.Unresolved[reason] = n
		v.UnresolvedTotal += n
	}
	return v
}

// reasonOrder is the reasons of m in unresolvedReasons' order, then any
// other sorted.
func reasonOrder[N uint64 | int](m map[string]N) []string {
	var out, rest []string
	for _, r := range unresolvedReasons {
		if _, ok := m[r]; ok {
			out = append(out, r)
		}
	}
	for r := range m {
		if !slices.Contains(unresolvedReasons, r) {
			rest = append(rest, r)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func printRouteSummary(w io.Writer, s routeSummaryJSON, out string) error {
	if out == "json" {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "FIB routes\t%d\n", s.FIBRoutes)
	fmt.Fprintf(tw, "unresolved routes\t%d\n", s.UnresolvedTotal)
	for _, r := range reasonOrder(s.Unresolved) {
		fmt.Fprintf(tw, "  %s\t%d\n", r, s.Unresolved[r])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.UnresolvedTotal > 0 {
		_, err := fmt.Fprintln(w, "'splitplane route list --unresolved' lists the unresolved routes")
		return err
	}
	return nil
}
