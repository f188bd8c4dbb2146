package main

import (
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/internal/cli"
)

// Bad flags of `bench all` are usage errors (exit 2), refused before
// anything is measured: these run without root.
func TestBenchAllUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "all", "--only", "forward,bogus"},
		{"bench", "all", "--rounds", "-1"},
		{"bench", "all", "--rounds", "many"},
		{"bench", "all", "--bogus"},
		{"bench", "all", "extra"},
	} {
		root := &cobra.Command{Use: "splitplane", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(benchCmd(new(string)))
		cli.UsageErrors(root)
		root.SetArgs(args)
		err := root.Execute()
		if !errors.Is(err, cli.ErrUsage) || exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}
