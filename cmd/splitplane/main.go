// Command splitplane is the whole router in one binary: the control element
// (ce), the forwarding element (fe), a BGP peer for labs and tests (peer), and
// the lab itself (lab up|status|down).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func main() {
	root := &cobra.Command{
		Use:           "splitplane",
		Short:         "A software router with the control plane and the XDP forwarding plane split the ForCES way",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(ceCmd(), feCmd(), peerCmd(), labCmd(), benchCmd())
	addAPICommands(root)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "splitplane:", err)
		os.Exit(exitCode(err))
	}
}

// errUsage marks errors in how the command was called (exit code 2).
var errUsage = errors.New("usage")

func exitCode(err error) int {
	var api *apiError
	if errors.As(err, &api) {
		return api.exitCode()
	}
	if errors.Is(err, errUsage) {
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

// loadYAML decodes a config file strictly: unknown fields are errors.
func loadYAML(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}
