// Package cli holds what the project's two commands (the router, splitplane,
// and its proving ground, splitplane-lab) share in how they treat their
// command lines.
package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// ErrUsage marks errors in how a command was called: the commands exit with
// status 2 for them.
var ErrUsage = errors.New("usage")

// UsageErrors makes cobra's own errors in how a command was called (an
// unknown flag or subcommand, wrong arguments) usage errors (exit code 2),
// on every command of the tree.
func UsageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", ErrUsage, err) })
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				if errors.Is(err, ErrUsage) {
					return err
				}
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
			return nil
		}
	}
	// A command that only groups others (lab, bench) refuses an unknown
	// subcommand instead of printing its help with success.
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.RunE = func(cmd *cobra.Command, a []string) error {
			return fmt.Errorf("%w: %s needs a subcommand (see --help)", ErrUsage, cmd.CommandPath())
		}
		c.Args = func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 {
				return fmt.Errorf("%w: unknown command %q for %q", ErrUsage, a[0], cmd.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		UsageErrors(sub)
	}
}
