package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/internal/status"
)

// meshFE is one FE of fe mesh: its inter-FE links and how many nexthops it
// is the egress of, as the CE's status has them.
type meshFE struct {
	ID       string      `json:"id"`
	Name     string      `json:"name"`
	EgressOf int         `json:"egress_of_nexthops"`
	Links    []ce.FELink `json:"inter_fe_links"`
}

func feMeshCmd() *cobra.Command {
	var socket, out string
	cmd := &cobra.Command{
		Use:   "mesh",
		Short: "Show the FEs' inter-FE links and how many nexthops each FE is the egress of (from the CE's status socket)",
		Long: "Show the mesh of FEs that share one port space: each FE's inter-FE links (its port, the\n" +
			"FE at the other end, whether the port is up and the peer associated) and how many of the\n" +
			"CE's nexthops are behind the FE's ports (the FE is their egress). Read from the CE's\n" +
			"status socket (status_socket in the CE's configuration).",
		Example: "  splitplane fe mesh --status-socket /run/splitplane/ce.sock",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			if socket == "" {
				return usageError(cmd, fmt.Errorf("--status-socket: the CE's status socket is needed"))
			}
			var st ce.Status
			if err := status.Get(socket, "/", &st); err != nil {
				return fmt.Errorf("CE status: %w", err)
			}
			fes := meshOf(st)
			if out == "json" {
				return printJSON(cmd.OutOrStdout(), fes)
			}
			return printMesh(cmd.OutOrStdout(), fes)
		},
	}
	cmd.Flags().StringVar(&socket, "status-socket", "", "the CE's status socket")
	outputFlag(cmd, &out)
	return cmd
}

func meshOf(st ce.Status) []meshFE {
	var out []meshFE
	for _, f := range st.FEs {
		m := meshFE{ID: f.ID, Name: f.Name, EgressOf: f.EgressOf, Links: f.InterFELinks}
		if m.Links == nil {
			m.Links = []ce.FELink{}
		}
		out = append(out, m)
	}
	return out
}

// printMesh prints one line per inter-FE link (an FE without links gets
// one line of its own).
func printMesh(w io.Writer, fes []meshFE) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FE\tNAME\tEGRESS OF\tLINK PORT\tPEER FE\tSTATE")
	for _, f := range fes {
		if len(f.Links) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t-\n", f.ID, dash(f.Name), f.EgressOf)
		}
		for _, l := range f.Links {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s(%d)\tFE(%d)\t%s\n", f.ID, dash(f.Name), f.EgressOf, dash(l.PortName), l.Port, l.PeerFE, l.State())
		}
	}
	return tw.Flush()
}
