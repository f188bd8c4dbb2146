package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/integration/lab"
)

// labAttackCmd is `splitplane lab attack`: the hostile-input suite (issue
// 21). It shares the lab's --dir; its lab is "spatk" unless --name is given.
func labAttackCmd(lo *lab.Options, noBinary *error) *cobra.Command {
	var (
		o      lab.AttackOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "attack",
		Short: "Play a fake FE, a fake CE and hostile API clients against a lab; one line per attack, held or not",
		Long: `Brings up a lab of its own (needs root; taken down at the end) and plays
against it, one at a time: a fake FE (no TLS, a foreign CA, a certificate
that is not its ID, ID 0, an ID not on the CE's list, a hijacked
low-priority channel, a stolen ID, port addresses that are the BGP peer's,
messages built to cost memory, 100,000 wrong-ID messages, a reader that
stalls, silence after connecting, a connection flood, the CE out of file
descriptors); a fake CE against a victim FE of its own (operations no CE
sends, a setup answered from an FE ID, a 49-day dead interval, a costly
message); and hostile API clients (4 MiB requests without the token, a wrong
token, a token on plaintext TCP, floods of Watch and List streams, martian
prefixes, a corrupt routes file). An attack holds when the router refused or
survived it and, after it, forwarding, the BGP session and every route are as
before, with the same CE and FE processes. The trust model: docs/security.md.
With --json, one object per attack:
  {"metric":"attack_fe_config_get_table","value":1,"unit":"held","what":"..."}
The exit status is 1 when any attack was not held.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *noBinary != nil {
				return *noBinary
			}
			if f := cmd.Flag("name"); f != nil && f.Changed {
				o.Name = lo.Name
			}
			o.Dir, o.Binary = lo.Dir, lo.Binary
			o.Out = os.Stderr
			signal.Ignore(syscall.SIGPIPE)
			ctx, stop := signalContext()
			defer stop()
			rs, err := lab.Attack(ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				err = lab.WriteAttackJSON(os.Stdout, rs)
			} else {
				err = lab.PrintAttack(os.Stdout, rs)
			}
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range rs {
				if !r.Held {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d attacks not held", failed, len(rs))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Only, "only", "", "run only the attacks whose names match this regular expression")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per attack")
	return cmd
}
