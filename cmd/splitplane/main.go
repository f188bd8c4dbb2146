// Command splitplane is the router in one binary: the control element (ce),
// the forwarding element (fe) and the operator's commands on their API (route,
// bgp, fe, classifier, top, ...). The lab, the benchmarks and the test BGP peer
// are splitplane-lab's (cmd/splitplane-lab); `splitplane lab|bench|peer` hands
// them to it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/internal/cli"
)

func main() {
	root := &cobra.Command{
		Use:           "splitplane",
		Short:         "A software router with the control plane and the XDP forwarding plane split the ForCES way",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(ceCmd(), feCmd())
	root.AddCommand(externalCmds()...)
	addAPICommands(root)
	root.AddCommand(manCmd(root))
	cli.UsageErrors(root)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "splitplane:", err)
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	var api *apiError
	if errors.As(err, &api) {
		return api.exitCode()
	}
	var d *errDiffers
	if errors.As(err, &d) {
		return 5
	}
	if errors.Is(err, cli.ErrUsage) {
		return 2
	}
	return 1
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// loadYAML decodes a config file strictly: unknown fields are errors, and
// so is a file with no document or with more than one (the decoder would
// read only the first, so a key in a later document, typo or not, would
// never be checked nor applied).
func loadYAML(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("config %s: the file holds no configuration", path)
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	for {
		var more yaml.Node
		switch err := dec.Decode(&more); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("config %s: %w", path, err)
		case emptyDocument(&more):
			// A trailing "---" (or one followed by comments) holds nothing.
		default:
			line := more.Line
			if len(more.Content) > 0 {
				line = more.Content[0].Line
			}
			return fmt.Errorf("config %s: line %d: a second YAML document: a config file holds one", path, line)
		}
	}
}

// emptyDocument reports whether a decoded document holds no value.
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == "")
}
