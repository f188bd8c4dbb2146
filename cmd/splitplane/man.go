package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCmd writes a man page for every command (splitplane(1),
// splitplane-route-list(1), ...) from the commands themselves, so the
// pages say what --help says. `make package` installs them.
func manCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write the man pages of every command into DIR (section 1)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("man: %w", err)
			}
			root.DisableAutoGenTag = true // the same pages from the same source, whatever the day
			hdr := &doc.GenManHeader{Title: "SPLITPLANE", Section: "1", Source: "splitplane", Manual: "splitplane manual"}
			if err := doc.GenManTree(root, hdr, dir); err != nil {
				return fmt.Errorf("man %s: %w", dir, err)
			}
			return nil
		},
	}
}
