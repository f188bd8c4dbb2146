package main

import (
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/splitplane/splitplane/internal/cli"
)

// Bad flags of `lab dos` are usage errors (exit 2), refused before anything
// is built: these run without root.
func TestLabDosUsage(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "dos", "--duration", "1s"},
		{"lab", "dos", "--duration", "soon"},
		{"lab", "dos", "--update-interval", "10ms"},
		{"lab", "dos", "--duration", "10s", "--update-interval", "6s"},
		{"lab", "dos", "--routes", "0"},
		{"lab", "dos", "--protection", "maybe"},
		{"lab", "dos", "--bogus"},
		{"lab", "dos", "extra"},
	} {
		root := &cobra.Command{Use: "splitplane", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(labCmd(new(string)))
		cli.UsageErrors(root)
		root.SetArgs(args)
		err := root.Execute()
		if !errors.Is(err, cli.ErrUsage) || exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}
