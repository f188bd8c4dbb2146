package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
)

// The listings of the FEs, the BGP neighbours and the classifier's rules.

// feJSON is an FE as fe list -o json prints it.
type feJSON struct {
	ID                string        `json:"id"`
	Name              string        `json:"name"`
	Remote            string        `json:"remote"`
	Synced            bool          `json:"synced"`
	AssociatedUnixMs  int64         `json:"associated_unix_ms"`
	Ports             []portJSON    `json:"ports"`
	Lanes             []laneJSON    `json:"lanes"`
	Counters          *countersJSON `json:"counters"`
	RowsAcked         uint64        `json:"rows_acked"`
	RowsFailed        uint64        `json:"rows_failed"`
	HeartbeatRTTP99Ms float64       `json:"heartbeat_rtt_p99_ms"`
}

type portJSON struct {
	ID        uint32        `json:"id"`
	Name      string        `json:"name"`
	MAC       string        `json:"mac"`
	Up        bool          `json:"up"`
	Addresses []string      `json:"addresses"`
	Counters  *countersJSON `json:"counters"`
}

type laneJSON struct {
	Port  string `json:"port"`
	Queue uint32 `json:"queue"`
	CPU   int32  `json:"cpu"`
}

type countersJSON struct {
	RxPackets        uint64            `json:"rx_packets"`
	ForwardedPackets uint64            `json:"forwarded_packets"`
	PassedPackets    uint64            `json:"passed_packets"`
	DroppedPackets   uint64            `json:"dropped_packets"`
	ByReason         map[string]uint64 `json:"by_reason"`
	CPUs             []cpuJSON         `json:"cpus"`
}

type cpuJSON struct {
	CPU              int32  `json:"cpu"`
	RxPackets        uint64 `json:"rx_packets"`
	ForwardedPackets uint64 `json:"forwarded_packets"`
	PassedPackets    uint64 `json:"passed_packets"`
	DroppedPackets   uint64 `json:"dropped_packets"`
}

func countersView(c *splitplanev1.Counters) *countersJSON {
	if c == nil {
		return nil
	}
	v := &countersJSON{RxPackets: c.GetRxPackets(), ForwardedPackets: c.GetForwardedPackets(),
		PassedPackets: c.GetPassedPackets(), DroppedPackets: c.GetDroppedPackets(),
		ByReason: c.GetByReason(), CPUs: []cpuJSON{}}
	if v.ByReason == nil {
		v.ByReason = map[string]uint64{}
	}
	for _, p := range c.GetCpus() {
		v.CPUs = append(v.CPUs, cpuJSON{CPU: p.GetCpu(), RxPackets: p.GetRxPackets(), ForwardedPackets: p.GetForwardedPackets(),
			PassedPackets: p.GetPassedPackets(), DroppedPackets: p.GetDroppedPackets()})
	}
	return v
}

func feView(f *splitplanev1.FE) feJSON {
	v := feJSON{ID: f.GetId(), Name: f.GetName(), Remote: f.GetRemote(), Synced: f.GetSynced(),
		AssociatedUnixMs: f.GetAssociatedUnixMs(), Ports: []portJSON{}, Lanes: []laneJSON{},
		Counters: countersView(f.GetCounters()), RowsAcked: f.GetRowsAcked(), RowsFailed: f.GetRowsFailed(),
		HeartbeatRTTP99Ms: f.GetHeartbeatRttP99Ms()}
	for _, p := range f.GetPorts() {
		v.Ports = append(v.Ports, portJSON{ID: p.GetId(), Name: p.GetName(), MAC: p.GetMac(), Up: p.GetUp(),
			Addresses: strs(p.GetAddresses()), Counters: countersView(p.GetCounters())})
	}
	for _, l := range f.GetLanes() {
		v.Lanes = append(v.Lanes, laneJSON{Port: l.GetPort(), Queue: l.GetQueue(), CPU: l.GetCpu()})
	}
	return v
}

func feListCmd() *cobra.Command {
	var (
		f   apiFlags
		out string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the FEs associated with the CE (through the CE's API)",
		Long: "List the forwarding elements associated with the CE: whether their full sync is\n" +
			"committed, ports, lanes (receive queues and their CPUs), fast-path packet counters and\n" +
			"the ForCES rows acknowledged. -o json prints one JSON array with every detail.\n" + exitCodesHelp,
		Example: "  splitplane fe list\n  splitplane fe list -o json | jq '.[].ports[].name'",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			var fes []feJSON
			err := withAPI(cmd, &f, func(c *apiConn) error {
				return c.call(cmd.Context(), "fe list", func(ctx context.Context) error {
					r, err := c.fes.List(ctx, &splitplanev1.ListFEsRequest{})
					for _, fe := range r.GetFes() {
						fes = append(fes, feView(fe))
					}
					return err
				})
			})
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(cmd.OutOrStdout(), fes)
			}
			return printFEs(cmd.OutOrStdout(), fes)
		},
	}
	f.register(cmd)
	outputFlag(cmd, &out)
	return cmd
}

func printFEs(w io.Writer, fes []feJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tREMOTE\tSYNCED\tASSOCIATED\tPORTS\tLANES\tRX\tFORWARDED\tPASSED\tDROPPED\tROWS ACKED\tFAILED\tHB RTT P99")
	for _, fe := range fes {
		var ports []string
		for _, p := range fe.Ports {
			s := p.Name
			if !p.Up {
				s += "(down)"
			}
			ports = append(ports, s)
		}
		rx, fwd, pass, drop := "-", "-", "-", "-"
		if c := fe.Counters; c != nil {
			rx, fwd, pass, drop = fmt.Sprint(c.RxPackets), fmt.Sprint(c.ForwardedPackets), fmt.Sprint(c.PassedPackets), fmt.Sprint(c.DroppedPackets)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%.2fms\n",
			fe.ID, dash(fe.Name), dash(fe.Remote), yesNo(fe.Synced), sinceMs(fe.AssociatedUnixMs),
			dash(strings.Join(ports, ",")), len(fe.Lanes), rx, fwd, pass, drop, fe.RowsAcked, fe.RowsFailed, fe.HeartbeatRTTP99Ms)
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// sinceMs shows a Unix time in milliseconds as the time elapsed since, to
// the second ("1h2m3s ago"); 0 is "-".
func sinceMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	d := time.Since(time.UnixMilli(ms)).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

func bgpCmd() *cobra.Command {
	var f apiFlags
	cmd := groupCmd("bgp", "The BGP neighbours of the CE's embedded speaker (through the CE's API)")
	cmd.Long = "The BGP neighbours of the CE's embedded speaker, through the CE's API.\n" + exitCodesHelp
	f.register(cmd)
	var out string
	nb := &cobra.Command{
		Use:     "neighbors",
		Aliases: []string{"neighbours", "neighbor", "summary"},
		Short:   "List the BGP neighbours: state, for how long, BFD, prefixes received and accepted",
		Long: "List the BGP neighbours: session state and for how long it has been in it, the BFD\n" +
			"session's state if BFD is on, and the prefixes received and accepted (after import\n" +
			"policy). -o json prints one JSON array.\n" + exitCodesHelp,
		Example: "  splitplane bgp neighbors\n" +
			"  splitplane bgp neighbors -o json | jq -r '.[] | select(.state != \"established\") | .address'",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			var ns []neighborJSON
			err := withAPI(cmd, &f, func(c *apiConn) error {
				return c.call(cmd.Context(), "bgp neighbors", func(ctx context.Context) error {
					r, err := c.bgp.Neighbors(ctx, &splitplanev1.ListNeighborsRequest{})
					for _, n := range r.GetNeighbors() {
						ns = append(ns, neighborView(n))
					}
					return err
				})
			})
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(cmd.OutOrStdout(), ns)
			}
			return printNeighbors(cmd.OutOrStdout(), ns)
		},
	}
	outputFlag(nb, &out)
	cmd.AddCommand(nb)
	cmd.AddCommand(&cobra.Command{
		Use:   "reset NEIGHBOR",
		Short: "Bring back a neighbour stopped by max_prefixes, or reset a neighbour's session",
		Long: "Bring back a neighbour that max_prefixes (action stop) took down: its session starts\n" +
			"again (and stops again if the neighbour still announces too many prefixes). Any other\n" +
			"neighbour's session is reset: a Cease NOTIFICATION, then a new session.\n" + exitCodesHelp,
		Example: "  splitplane bgp reset 192.0.2.2",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withAPI(cmd, &f, func(c *apiConn) error {
				return c.call(cmd.Context(), "bgp reset", func(ctx context.Context) error {
					_, err := c.bgp.ResetNeighbor(ctx, &splitplanev1.ResetNeighborRequest{Address: args[0]})
					return err
				})
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "neighbour %s reset\n", args[0])
			return nil
		},
	})
	return cmd
}

// neighborJSON is a BGP neighbour as bgp neighbors -o json prints it.
type neighborJSON struct {
	Address          string `json:"address"`
	ASN              uint32 `json:"asn"`
	State            string `json:"state"`
	SinceUnixMs      int64  `json:"since_unix_ms"`
	BFD              string `json:"bfd"`
	PrefixesReceived uint64 `json:"prefixes_received"`
	PrefixesAccepted uint64 `json:"prefixes_accepted"`
	Warning          string `json:"warning,omitempty"`
}

func neighborView(n *splitplanev1.Neighbor) neighborJSON {
	return neighborJSON{Address: n.GetAddress(), ASN: n.GetAsn(), State: n.GetState(), SinceUnixMs: n.GetSinceUnixMs(),
		BFD: n.GetBfd(), PrefixesReceived: n.GetPrefixesReceived(), PrefixesAccepted: n.GetPrefixesAccepted(), Warning: n.GetWarning()}
}

func printNeighbors(w io.Writer, ns []neighborJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NEIGHBOR\tASN\tSTATE\tFOR\tBFD\tRECEIVED\tACCEPTED")
	writeNeighbors(tw, ns)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Warnings below the table: they are sentences, too long for a column.
	for _, n := range ns {
		if n.Warning != "" {
			fmt.Fprintf(w, "warning: %s: %s\n", n.Address, n.Warning)
		}
	}
	return nil
}

func writeNeighbors(tw io.Writer, ns []neighborJSON) {
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\n", n.Address, n.ASN, dash(n.State), sinceMs(n.SinceUnixMs),
			dash(n.BFD), n.PrefixesReceived, n.PrefixesAccepted)
	}
}

func classifierCmd() *cobra.Command {
	var f apiFlags
	cmd := groupCmd("classifier", "The steering of the router's own control flows (through the CE's API)")
	cmd.Long = "The steering of the router's own control flows, through the CE's API.\n" + exitCodesHelp
	f.register(cmd)
	var out string
	rules := &cobra.Command{
		Use:   "rules",
		Short: "List the steering rules and their policer counters",
		Long: "List the rules that steer the return traffic of the router's own control flows (BGP,\n" +
			"ForCES, ...) to the control cores, with packets matched and dropped by the policer, and\n" +
			"the packets of each flow passed unsteered because their TCP checksum did not verify\n" +
			"(BAD CSUM; a sender that offloads checksums, such as a veth: docs/troubleshooting.md).\n" +
			"-o json prints one JSON array.\n" + exitCodesHelp,
		Example: "  splitplane classifier rules -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			var rs []ruleJSON
			err := withAPI(cmd, &f, func(c *apiConn) error {
				return c.call(cmd.Context(), "classifier rules", func(ctx context.Context) error {
					r, err := c.classifier.ListRules(ctx, &splitplanev1.ListRulesRequest{})
					for _, x := range r.GetRules() {
						rs = append(rs, ruleJSON{Flow: x.GetFlow(), Port: x.GetPort(), Steering: x.GetSteering(),
							Packets: x.GetPackets(), PolicedDrops: x.GetPolicedDrops(), PassSteerBadCsum: x.GetPassSteerBadCsum()})
					}
					return err
				})
			})
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(cmd.OutOrStdout(), rs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FLOW\tPORT\tSTEERING\tPACKETS\tBAD CSUM\tPOLICED DROPS")
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", r.Flow, dash(r.Port), dash(r.Steering), r.Packets, r.PassSteerBadCsum, r.PolicedDrops)
			}
			return tw.Flush()
		},
	}
	outputFlag(rules, &out)
	cmd.AddCommand(rules)
	return cmd
}

// ruleJSON is a steering rule as classifier rules -o json prints it.
type ruleJSON struct {
	Flow         string `json:"flow"`
	Port         string `json:"port"`
	Steering     string `json:"steering"`
	Packets      uint64 `json:"packets"`
	PolicedDrops uint64 `json:"policed_drops"`
	// PassSteerBadCsum counts the flow's packets passed unsteered because
	// their TCP checksum did not verify.
	PassSteerBadCsum uint64 `json:"pass_steer_bad_csum"`
}
