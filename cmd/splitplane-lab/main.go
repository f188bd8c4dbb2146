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

	"github.com/splitplane/splitplane/internal/cli"
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
	cli.UsageErrors(root)
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

func exitCode(err error) int {
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
