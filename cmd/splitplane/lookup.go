package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

// errDiffers is fe verify's outcome when an FE differs from the CE's FIB
// (exit code 5).
type errDiffers struct{ n int }

func (e *errDiffers) Error() string {
	return fmt.Sprintf("%d FE(s) differ from the CE's FIB or could not be checked", e.n)
}

// verifyTimeout is fe verify's deadline when --timeout is not given: a
// full table takes a while.
const verifyTimeout = 10 * time.Minute

func routeGetCmd(f *apiFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "get ADDRESS",
		Short: "Show the route for an address on the CE and what every FE's datapath does with it",
		Long: "Look ADDRESS (IPv4 or IPv6) up as \"ip route get\" does: the CE's longest match (a FIB\n" +
			"route, a port subnet of an FE, or an address of the router), the RIB's routes for that\n" +
			"prefix (origin, distance, next hops, which one is installed), the port each next hop is\n" +
			"behind, and for every associated FE what its fast path does with a packet to the address,\n" +
			"read from its datapath tables: the entry its FIB returns, egress port, source and\n" +
			"destination MACs. An FE that disagrees with the CE is flagged, and the command then\n" +
			"exits with code 5. -o json prints the API's response.\n" + exitCodesHelp + verifyExitHelp,
		Example: "  splitplane route get 198.51.100.10\n  splitplane route get 2001:db8:b::10 -o json",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			if a, err := netip.ParseAddr(args[0]); err != nil || a.Zone() != "" {
				return usageError(cmd, fmt.Errorf("address %q: not an IPv4 or IPv6 address", args[0]))
			}
			var r *splitplanev1.GetRouteResponse
			err := withAPI(cmd, f, func(c *apiConn) error {
				return c.call(cmd.Context(), "route get "+args[0], func(ctx context.Context) error {
					var err error
					r, err = c.routes.Get(ctx, &splitplanev1.GetRouteRequest{Address: args[0]})
					return err
				})
			})
			if err != nil {
				return err
			}
			if out == "json" {
				err = printProto(cmd.OutOrStdout(), r)
			} else {
				err = printRouteGet(cmd.OutOrStdout(), r)
			}
			if err != nil {
				return err
			}
			n := 0
			for _, fe := range r.GetFes() {
				if fe.GetDiffers() != "" || fe.GetError() != "" {
					n++
				}
			}
			if n > 0 {
				return &errDiffers{n}
			}
			return nil
		},
	}
	outputFlag(cmd, &out)
	return cmd
}

const verifyExitHelp = "\n  5  an FE differs from the CE's FIB (or could not be checked)"

func printProto(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func printRouteGet(w io.Writer, r *splitplanev1.GetRouteResponse) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", r.GetAddress(), r.GetKind())
	if r.GetPrefix() != "" {
		fmt.Fprintf(&b, " %s", r.GetPrefix())
	}
	b.WriteString("\n")
	for _, rt := range r.GetRoutes() {
		mark := " "
		if rt.GetInstalled() {
			mark = "*"
		}
		fmt.Fprintf(&b, "  %s %-6s distance %-3d via %s", mark, originName(rt.GetOrigin()), rt.GetDistance(), strings.Join(rt.GetNextHops(), ", "))
		if res := rt.GetResolvedNextHops(); len(res) > 0 && strings.Join(res, ",") != strings.Join(rt.GetNextHops(), ",") {
			fmt.Fprintf(&b, " (resolved: %s)", strings.Join(res, ", "))
		}
		if why := rt.GetUnresolvedReason(); why != "" {
			fmt.Fprintf(&b, " (unresolved: %s)", why)
		}
		b.WriteString("\n")
	}
	for _, h := range r.GetHops() {
		gw := h.GetGateway()
		if gw == "" {
			gw = "connected"
		}
		where := "behind no FE's port (each FE asks its kernel)"
		if h.GetFe() != "" {
			where = fmt.Sprintf("%s port %s (%d)", h.GetFe(), dash(h.GetPortName()), h.GetPort())
		}
		fmt.Fprintf(&b, "  next hop %s: %s\n", gw, where)
	}
	for _, fe := range r.GetFes() {
		name := fe.GetFe()
		if fe.GetName() != "" {
			name += " " + fe.GetName()
		}
		if fe.GetError() != "" {
			fmt.Fprintf(&b, "%s: cannot tell: %s\n", name, fe.GetError())
			continue
		}
		fmt.Fprintf(&b, "%s: %s", name, fe.GetKind())
		if fe.GetKind() == "route" {
			fmt.Fprintf(&b, " entry %d", fe.GetEntry())
			if len(fe.GetHops()) == 0 {
				b.WriteString(", an empty nexthop slot (to the kernel)")
			}
		}
		if fe.GetDiffers() != "" {
			fmt.Fprintf(&b, "  DIFFERS: %s", fe.GetDiffers())
		} else {
			b.WriteString("  (agrees)")
		}
		b.WriteString("\n")
		for _, h := range fe.GetHops() {
			gw := h.GetGateway()
			if gw == "" {
				gw = "connected"
			}
			if h.GetRemoteFe() != 0 {
				fmt.Fprintf(&b, "  nexthop %d via %s: behind FE %d port %d (over an inter-FE link)\n", h.GetId(), gw, h.GetRemoteFe(), h.GetRemotePort())
				continue
			}
			dst := h.GetDstMac()
			if dst == "" {
				dst = "unresolved (to the kernel)"
			}
			fmt.Fprintf(&b, "  nexthop %d via %s: port %s (%d) %s -> %s\n", h.GetId(), gw, dash(h.GetPortName()), h.GetPort(), h.GetSrcMac(), dst)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func feVerifyCmd() *cobra.Command {
	var (
		f       apiFlags
		samples uint32
		out     string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every FE's datapath against the CE's FIB (as SONiC's route_check)",
		Long: "Check that every associated FE forwards as the CE's FIB says: the first and last address\n" +
			"of every route (or, with --samples N, N random addresses of random routes, for large\n" +
			"tables) are looked up on the CE and in each FE's fast-path tables. Addresses that differ\n" +
			"are checked again a second later, so a change on its way is not reported; those that\n" +
			"still differ are printed (the first 100 per FE) and the command exits with code 5.\n" +
			"The CE exports the last check's result as splitplane_ce_fe_verify_differences.\n" +
			"Without --timeout the deadline is 10 minutes.\n" + exitCodesHelp + verifyExitHelp,
		Example: "  splitplane fe verify\n  splitplane fe verify --samples 100000 -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			var r *splitplanev1.VerifyFEsResponse
			err := withAPI(cmd, &f, func(c *apiConn) error {
				if !cmd.Flags().Changed("timeout") {
					c.timeout = verifyTimeout
				}
				return c.call(cmd.Context(), "fe verify", func(ctx context.Context) error {
					var err error
					r, err = c.fes.Verify(ctx, &splitplanev1.VerifyFEsRequest{Samples: samples})
					return err
				})
			})
			if err != nil {
				return err
			}
			if out == "json" {
				err = printProto(cmd.OutOrStdout(), r)
			} else {
				err = printVerify(cmd.OutOrStdout(), r)
			}
			if err != nil {
				return err
			}
			n := 0
			for _, fe := range r.GetFes() {
				if fe.GetDifferences() > 0 || fe.GetError() != "" {
					n++
				}
			}
			if n > 0 {
				return &errDiffers{n}
			}
			return nil
		},
	}
	f.register(cmd)
	outputFlag(cmd, &out)
	cmd.Flags().Uint32Var(&samples, "samples", 0, "check this many random addresses instead of every route (0: every route)")
	return cmd
}

func printVerify(w io.Writer, r *splitplanev1.VerifyFEsResponse) error {
	var b strings.Builder
	what := "every route's first and last address"
	if r.GetSampled() {
		what = "random addresses of random routes"
	}
	fmt.Fprintf(&b, "%d routes in the FIB; %d addresses checked on each FE (%s) in %.1fs\n", r.GetRoutes(), r.GetAddresses(), what, r.GetSeconds())
	if len(r.GetFes()) == 0 {
		b.WriteString("no FE is associated\n")
	}
	for _, fe := range r.GetFes() {
		name := fe.GetFe()
		if fe.GetName() != "" {
			name += " " + fe.GetName()
		}
		switch {
		case fe.GetError() != "":
			fmt.Fprintf(&b, "%s: not checked (%d addresses done): %s\n", name, fe.GetChecked(), fe.GetError())
		case fe.GetDifferences() == 0:
			fmt.Fprintf(&b, "%s: %d addresses, all as the FIB says\n", name, fe.GetChecked())
		default:
			fmt.Fprintf(&b, "%s: %d addresses, %d DIFFER\n", name, fe.GetChecked(), fe.GetDifferences())
			for _, d := range fe.GetListed() {
				fmt.Fprintf(&b, "  %s: %s\n", d.GetAddress(), d.GetWhy())
			}
			if n := fe.GetDifferences() - uint64(len(fe.GetListed())); n > 0 {
				fmt.Fprintf(&b, "  ... and %d more\n", n)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
