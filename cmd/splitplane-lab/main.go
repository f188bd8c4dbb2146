// Command splitplane-lab is splitplane's proving ground: the lab (lab
// up|status|down|restart|dos), the benchmark suite (bench) and the BGP
// speaker the lab and the tests peer with (peer). It runs the router's
// daemons by executing the splitplane binary, which it looks for beside
// itself and then on $PATH (--binary overrides); `splitplane lab|bench|peer`
// hands its command line here, so both spellings work.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	var binary string
	root := &cobra.Command{
		Use:           "splitplane-lab",
		Short:         "The lab, the benchmarks and the test BGP peer of splitplane",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&binary, "binary", "", "the splitplane router binary the lab and the benchmarks run (default: beside splitplane-lab, then $PATH)")
	root.AddCommand(peerCmd(), labCmd(&binary), benchCmd(&binary))
	usageErrors(root)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "splitplane:", err)
		os.Exit(exitCode(err))
	}
}

// routerProgram is the router binary's name.
const routerProgram = "splitplane"

// binaryEnv is set by splitplane when it hands a command here: the router
// binary that was called.
const binaryEnv = "SPLITPLANE_BINARY"

// errNoRouter is returned when no splitplane binary is found.
var errNoRouter = errors.New("the splitplane binary not found: it runs the CE and the FE (make build builds it beside splitplane-lab; or --binary PATH)")

// routerBinary returns the splitplane binary to run the daemons with: flag
// (--binary) if given; else the one that handed this command over
// ($SPLITPLANE_BINARY); else the one beside this executable; else the one on
// $PATH.
func routerBinary(flag string) (string, error) {
	for _, p := range []string{flag, os.Getenv(binaryEnv)} {
		if p != "" {
			return filepath.Abs(p)
		}
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), routerProgram)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(routerProgram); err == nil {
		return filepath.Abs(p)
	}
	return "", errNoRouter
}

// errUsage marks errors in how the command was called (exit code 2).
var errUsage = errors.New("usage")

// usageErrors makes cobra's own errors in how a command was called (an
// unknown flag or subcommand, wrong arguments) usage errors (exit code 2),
// on every command of the tree.
func usageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				if errors.Is(err, errUsage) {
					return err
				}
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return nil
		}
	}
	// A command that only groups others (lab, bench) refuses an unknown
	// subcommand instead of printing its help with success.
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.RunE = func(cmd *cobra.Command, a []string) error {
			return fmt.Errorf("%w: %s needs a subcommand (see --help)", errUsage, cmd.CommandPath())
		}
		c.Args = func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 {
				return fmt.Errorf("%w: unknown command %q for %q", errUsage, a[0], cmd.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageErrors(sub)
	}
}

func exitCode(err error) int {
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
