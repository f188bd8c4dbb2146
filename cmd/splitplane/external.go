package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// labProgram is the command that holds the lab, the benchmarks and the test
// peer: kept out of the router binary so that the router links none of their
// code (traffic generators, plotting, BGP test peers, netns orchestration).
const labProgram = "splitplane-lab"

// binaryEnv names the router binary to splitplane-lab when splitplane hands
// it a command, so that the lab runs the daemons of the very binary that was
// called, wherever splitplane-lab was found.
const binaryEnv = "SPLITPLANE_BINARY"

// externalCmds are the stubs of the commands splitplane-lab implements:
// listed in --help like the others, they hand their whole command line to
// splitplane-lab, as git does with its external subcommands.
func externalCmds() []*cobra.Command {
	stub := func(name, short string) *cobra.Command {
		return &cobra.Command{
			Use:   name,
			Short: short + " (runs " + labProgram + ")",
			// Every argument, --help included, is splitplane-lab's to parse.
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return execLab(name, args)
			},
		}
	}
	return []*cobra.Command{
		stub("lab", "A router, a BGP peer and two hosts in network namespaces, forwarding through XDP"),
		stub("bench", "Run a benchmark and print its figures"),
		stub("peer", "Run a BGP speaker that announces a generated Internet-like table (the lab's upstream)"),
	}
}

// errNoLab is returned when splitplane-lab is neither beside splitplane nor
// on $PATH.
var errNoLab = errors.New(labProgram + " not found")

// findLab returns splitplane-lab: the one beside the running executable
// first (the pair make build puts in bin/), then the one on $PATH.
func findLab(self string) (string, error) {
	if self != "" {
		p := filepath.Join(filepath.Dir(self), labProgram)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(labProgram); err == nil {
		return p, nil
	}
	return "", errNoLab
}

// execLab replaces this process with `splitplane-lab NAME ARGS...`: the same
// pid, terminal, signals and exit code, so a lab daemon started as
// `splitplane peer` is the process the lab recorded.
func execLab(name string, args []string) error {
	self, err := os.Executable()
	if err != nil {
		self = ""
	}
	lab, err := findLab(self)
	if err != nil {
		return fmt.Errorf("%s: needs %s beside splitplane or on $PATH (make build builds both into bin/; go build ./cmd/%s)", name, labProgram, labProgram)
	}
	env := os.Environ()
	if self != "" && os.Getenv(binaryEnv) == "" {
		env = append(env, binaryEnv+"="+self)
	}
	argv := append([]string{lab, name}, args...)
	return fmt.Errorf("exec %s: %w", lab, syscall.Exec(lab, argv, env))
}
