package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

func routeCmd() *cobra.Command {
	var f apiFlags
	cmd := groupCmd("route", "Add, delete, list and watch routes through the CE's API")
	cmd.Long = "Add, delete, list, look up and watch routes through the CE's API.\n" +
		"The API's routes coexist with static and BGP routes; the RIB installs, per prefix,\n" +
		"the one with the lowest administrative distance (the API's default: 5).\n" + exitCodesHelp
	f.register(cmd)
	cmd.AddCommand(routeAddCmd(&f), routeDelCmd(&f), routeListCmd(&f), routeSummaryCmd(&f), routeWatchCmd(&f), routeGetCmd(&f))
	return cmd
}

func routeAddCmd(f *apiFlags) *cobra.Command {
	var (
		distance uint32
		replace  bool
	)
	cmd := &cobra.Command{
		Use:   "add PREFIX via NEXTHOP [NEXTHOP...]",
		Short: "Add an API route (two or more next hops: ECMP)",
		Long: "Add an API route for PREFIX forwarding to the next hops (two or more: ECMP, at most 16);\n" +
			"they are resolved recursively to directly connected ones. Without --replace an existing\n" +
			"API route for the prefix is an error (exit code 4); with it, it is replaced.\n" + exitCodesHelp,
		Example: "  splitplane route add 198.51.100.0/24 via 192.0.2.1\n" +
			"  splitplane route add 2001:db8::/32 via 2001:db8:ffff::1 2001:db8:ffff::2 --distance 20 --replace",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || args[1] != "via" {
				return errors.New("want PREFIX via NEXTHOP [NEXTHOP...]")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := &splitplanev1.Route{Prefix: args[0], NextHops: args[2:], Distance: distance}
			op := "route add " + args[0]
			return withAPI(cmd, f, func(c *apiConn) error {
				return c.call(cmd.Context(), op, func(ctx context.Context) error {
					var err error
					if replace {
						_, err = c.routes.Replace(ctx, &splitplanev1.ReplaceRouteRequest{Route: r})
					} else {
						_, err = c.routes.Add(ctx, &splitplanev1.AddRouteRequest{Route: r})
					}
					return err
				})
			})
		},
	}
	cmd.Flags().Uint32Var(&distance, "distance", 0, "administrative distance (0: the API's default, 5)")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace the API's route for the prefix if there is one")
	return cmd
}

func routeDelCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "del PREFIX",
		Aliases: []string{"delete"},
		Short:   "Delete the API's route for a prefix",
		Long: "Delete the API's route for PREFIX (routes of other origins are not touched);\n" +
			"no API route for it is exit code 3.\n" + exitCodesHelp,
		Example: "  splitplane route del 198.51.100.0/24",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAPI(cmd, f, func(c *apiConn) error {
				return c.call(cmd.Context(), "route del "+args[0], func(ctx context.Context) error {
					_, err := c.routes.Delete(ctx, &splitplanev1.DeleteRouteRequest{Prefix: args[0]})
					return err
				})
			})
		},
	}
}

// originName is how the CLI names a route's origin (--origin, -o json).
func originName(o splitplanev1.Origin) string {
	switch o {
	case splitplanev1.Origin_ORIGIN_API:
		return "api"
	case splitplanev1.Origin_ORIGIN_STATIC:
		return "static"
	case splitplanev1.Origin_ORIGIN_BGP:
		return "bgp"
	}
	return "unknown"
}

// parseOrigin reads --origin: a name originName gives, or "" for any.
func parseOrigin(cmd *cobra.Command, s string) (splitplanev1.Origin, error) {
	switch s {
	case "":
		return splitplanev1.Origin_ORIGIN_UNSPECIFIED, nil
	case "api":
		return splitplanev1.Origin_ORIGIN_API, nil
	case "static":
		return splitplanev1.Origin_ORIGIN_STATIC, nil
	case "bgp":
		return splitplanev1.Origin_ORIGIN_BGP, nil
	}
	return 0, usageError(cmd, fmt.Errorf("--origin %q: want api, static or bgp", s))
}

func parseTable(cmd *cobra.Command, s string) (splitplanev1.Table, error) {
	switch s {
	case "all":
		return splitplanev1.Table_TABLE_ALL, nil
	case "ipv4":
		return splitplanev1.Table_TABLE_IPV4, nil
	case "ipv6":
		return splitplanev1.Table_TABLE_IPV6, nil
	}
	return 0, usageError(cmd, fmt.Errorf("--table %q: want ipv4, ipv6 or all", s))
}

// routeJSON is a route as -o json prints it.
type routeJSON struct {
	Prefix           string   `json:"prefix"`
	NextHops         []string `json:"next_hops"`
	Distance         uint32   `json:"distance"`
	Origin           string   `json:"origin"`
	Installed        bool     `json:"installed"`
	ResolvedNextHops []string `json:"resolved_next_hops"`
	// UnresolvedReason is why the next hops resolve to nothing ("no_route",
	// "loop", "depth", "work"); "" when they resolve.
	UnresolvedReason string `json:"unresolved_reason"`
}

func routeView(r *splitplanev1.Route) routeJSON {
	return routeJSON{Prefix: r.GetPrefix(), NextHops: strs(r.GetNextHops()), Distance: r.GetDistance(),
		Origin: originName(r.GetOrigin()), Installed: r.GetInstalled(), ResolvedNextHops: strs(r.GetResolvedNextHops()),
		UnresolvedReason: r.GetUnresolvedReason()}
}

// strs makes a nil slice an empty one, so JSON says [] rather than null.
func strs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func routeListCmd(f *apiFlags) *cobra.Command {
	var (
		longer, unresolved bool
		table, origin      string
		out                string
	)
	cmd := &cobra.Command{
		Use:     "list [PREFIX]",
		Aliases: []string{"ls"},
		Short:   "List the routes of every origin, each saying whether it is installed in the FIB",
		Long: "List the routes of every origin (api, static, bgp) matching the filter; FIB says which\n" +
			"one of a prefix's routes is installed, RESOLVED the directly connected next hops it\n" +
			"forwards to, or, for a route whose next hops resolve to none (not installed), why:\n" +
			"\"unresolved: REASON\", REASON being no_route (nothing covers a next hop: a port down,\n" +
			"a typo), loop (only static routes leading back to themselves cover it), depth (more\n" +
			"than 8 static routes deep) or work (a resolution over 4096 steps). With PREFIX only\n" +
			"that prefix (--longer: and every more specific one); --unresolved: only unresolved\n" +
			"routes. -o json prints one JSON array (unresolved_reason: \"\" when resolved).\n" + exitCodesHelp,
		Example: "  splitplane route list\n" +
			"  splitplane route list --unresolved\n" +
			"  splitplane route list 10.0.0.0/8 --longer --origin bgp -o json",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			req := &splitplanev1.ListRoutesRequest{Longer: longer, Unresolved: unresolved}
			if len(args) == 1 {
				req.Prefix = args[0]
			} else if longer {
				return usageError(cmd, errors.New("--longer needs a PREFIX"))
			}
			var err error
			if req.Table, err = parseTable(cmd, table); err != nil {
				return err
			}
			if req.Origin, err = parseOrigin(cmd, origin); err != nil {
				return err
			}
			var routes []routeJSON
			err = withAPI(cmd, f, func(c *apiConn) error {
				return c.call(cmd.Context(), "route list", func(ctx context.Context) error {
					s, err := c.routes.List(ctx, req)
					if err != nil {
						return err
					}
					for {
						r, err := s.Recv()
						if err == io.EOF {
							return nil
						}
						if err != nil {
							return err
						}
						routes = append(routes, routeView(r))
					}
				})
			})
			if err != nil {
				return err
			}
			return printRoutes(cmd.OutOrStdout(), routes, out)
		},
	}
	cmd.Flags().BoolVar(&longer, "longer", false, "also the prefixes more specific than PREFIX")
	cmd.Flags().StringVar(&table, "table", "all", "address family: ipv4, ipv6 or all")
	cmd.Flags().StringVar(&origin, "origin", "", "only routes of this origin: api, static or bgp")
	cmd.Flags().BoolVar(&unresolved, "unresolved", false, "only routes whose next hops resolve to no directly connected one")
	outputFlag(cmd, &out)
	return cmd
}

func printRoutes(w io.Writer, routes []routeJSON, out string) error {
	if out == "json" {
		return printJSON(w, routes)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tORIGIN\tDISTANCE\tFIB\tNEXT HOPS\tRESOLVED")
	for _, r := range routes {
		fib := ""
		if r.Installed {
			fib = "*"
		}
		resolved := strings.Join(r.ResolvedNextHops, ",")
		if r.UnresolvedReason != "" {
			resolved = "unresolved: " + r.UnresolvedReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Prefix, r.Origin, r.Distance, fib,
			dash(strings.Join(r.NextHops, ",")), dash(resolved))
	}
	return tw.Flush()
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printJSON prints v as one indented JSON document; a nil slice prints [].
func printJSON[T any](w io.Writer, v []T) error {
	if v == nil {
		v = []T{}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// routeEventJSON is a FIB change as route watch -o json prints it.
type routeEventJSON struct {
	Kind     string   `json:"kind"`
	Prefix   string   `json:"prefix,omitempty"`
	NextHops []string `json:"next_hops"`
}

func eventKind(k splitplanev1.RouteEvent_Kind) string {
	switch k {
	case splitplanev1.RouteEvent_KIND_INSTALLED:
		return "installed"
	case splitplanev1.RouteEvent_KIND_REMOVED:
		return "removed"
	case splitplanev1.RouteEvent_KIND_SYNCED:
		return "synced"
	}
	return "unknown"
}

func routeWatchCmd(f *apiFlags) *cobra.Command {
	var (
		current bool
		table   string
		out     string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print the FIB's changes as they happen, until interrupted",
		Long: "Print the changes of the FIB (what the FEs forward with), one per line, until\n" +
			"interrupted (Ctrl-C: exit code 0) or the CE ends the stream. With --current the whole\n" +
			"FIB comes first, as installed events, then a synced event. -o json prints one JSON\n" +
			"object per line: {\"kind\":\"installed|removed|synced\",\"prefix\":...,\"next_hops\":[...]}.\n" +
			exitCodesHelp,
		Example: "  splitplane route watch --current -o json | jq -r .prefix",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			t, err := parseTable(cmd, table)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return withAPI(cmd, f, func(c *apiConn) error {
				s, err := c.routes.Watch(ctx, &splitplanev1.WatchRoutesRequest{Current: current, Table: t})
				if err == nil {
					err = printEvents(cmd.OutOrStdout(), s, out)
				}
				if err != nil && ctx.Err() != nil {
					return nil // interrupted
				}
				return callError("route watch", c.addr, err)
			})
		},
	}
	cmd.Flags().BoolVar(&current, "current", false, "print the current FIB first")
	cmd.Flags().StringVar(&table, "table", "all", "address family: ipv4, ipv6 or all")
	outputFlag(cmd, &out)
	return cmd
}

// printEvents prints the events of a watch until it ends; the end of the
// stream (io.EOF) is no error.
func printEvents(w io.Writer, s interface {
	Recv() (*splitplanev1.RouteEvent, error)
}, out string) error {
	enc := json.NewEncoder(w)
	for {
		e, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		v := routeEventJSON{Kind: eventKind(e.GetKind()), Prefix: e.GetPrefix(), NextHops: strs(e.GetNextHops())}
		if out == "json" {
			err = enc.Encode(v)
		} else {
			switch e.GetKind() {
			case splitplanev1.RouteEvent_KIND_INSTALLED:
				_, err = fmt.Fprintf(w, "%-9s  %-18s  via %s\n", v.Kind, v.Prefix, strings.Join(v.NextHops, ","))
			case splitplanev1.RouteEvent_KIND_SYNCED:
				_, err = fmt.Fprintf(w, "%-9s  (the current FIB has been sent)\n", v.Kind)
			default:
				_, err = fmt.Fprintf(w, "%-9s  %s\n", v.Kind, v.Prefix)
			}
		}
		if err != nil {
			return err // the reader went away
		}
	}
}
