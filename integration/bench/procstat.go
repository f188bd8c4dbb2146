package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/splitplane/splitplane/internal/host"
)

// procFaults returns the page faults a process has taken (minor and major,
// from /proc/PID/stat) and how much of its memory is in transparent huge
// pages (AnonHugePages of /proc/PID/smaps_rollup), in MB.
func procFaults(pid int) (faults uint64, hugeMB float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state, ppid, pgrp, session, tty_nr, tpgid, flags,
	// minflt, cminflt, majflt.
	var f []string
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 10 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q: too few fields", pid, b)
	}
	for _, k := range []int{7, 9} {
		n, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, k+3, err)
		}
		faults += n
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return faults, 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			if hugeMB, err = host.KBToMB(v); err != nil {
				return faults, 0, fmt.Errorf("/proc/%d/smaps_rollup: %s: %w", pid, strings.TrimSpace(line), err)
			}
		}
	}
	return faults, hugeMB, nil
}

// statusClient reads a daemon's status socket over one kept-alive
// connection, so that polling it many times a second costs the daemon no
// new connections.
type statusClient struct {
	c    *http.Client
	t    *http.Transport
	path string // of the status resource: "/" (CE, FE), "/status" (peer)
}

func newStatusClient(socket string) *statusClient {
	t := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &statusClient{c: &http.Client{Timeout: 5 * time.Second, Transport: t}, t: t, path: "/"}
}

func (s *statusClient) get(v any) error {
	resp, err := s.c.Get("http://unix" + s.path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status: %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (s *statusClient) close() { s.t.CloseIdleConnections() }
