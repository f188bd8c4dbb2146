package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// labAPIGlob finds the API sockets of running labs ('splitplane lab up'
// puts each lab's under /run/splitplane/lab-NAME).
var labAPIGlob = "/run/splitplane/lab-*/api.sock"

// resolveAPI picks the API address when the operator named none (no --api,
// no $SPLITPLANE_API): the default socket if it exists, else the socket of
// the one running lab, which it says on w. With several labs and no
// default it names them all; the default then stays, so the error says
// where it looked.
func resolveAPI(cmd *cobra.Command, addr string, w io.Writer) (string, error) {
	if f := cmd.Flag("api"); (f != nil && f.Changed) || os.Getenv("SPLITPLANE_API") != "" || addr != defaultAPI {
		return addr, nil
	}
	if isSocket(strings.TrimPrefix(defaultAPI, "unix:")) {
		return addr, nil
	}
	found, _ := filepath.Glob(labAPIGlob)
	var labs []string
	for _, p := range found {
		if isSocket(p) {
			labs = append(labs, p)
		}
	}
	sort.Strings(labs)
	switch len(labs) {
	case 0:
		return addr, nil
	case 1:
		fmt.Fprintf(w, "splitplane: no CE API at %s; using the lab's at %s (--api or $SPLITPLANE_API to choose)\n",
			strings.TrimPrefix(defaultAPI, "unix:"), labs[0])
		return "unix:" + labs[0], nil
	}
	return "", usageError(cmd, fmt.Errorf("no CE API at %s and %d labs running (%s): choose one with --api unix:PATH",
		strings.TrimPrefix(defaultAPI, "unix:"), len(labs), strings.Join(labs, ", ")))
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
