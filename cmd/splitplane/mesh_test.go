package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/internal/status"
)

// fe mesh prints each FE's inter-FE links, their state and the nexthops
// the FE is the egress of, from the CE's status socket.
func TestFEMesh(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "ce.sock")
	st := ce.Status{FEs: []ce.FEStatus{
		{ID: "FE(1)", Name: "fe1", EgressOf: 3, InterFELinks: []ce.FELink{{Port: 12, PortName: "ife2", PeerFE: 2, Up: true, PeerAssociated: true}}},
		{ID: "FE(2)", Name: "fe2", EgressOf: 1, InterFELinks: []ce.FELink{{Port: 22, PortName: "ife1", PeerFE: 1}}},
		{ID: "FE(3)", EgressOf: 0},
	}}
	stop, err := status.Serve(socket, func() any { return st }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stdout, stderr, code := run(t, "fe", "mesh", "--status-socket", socket)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{
		"FE     NAME  EGRESS OF  LINK PORT  PEER FE  STATE",
		"FE(1)  fe1   3          ife2(12)   FE(2)    up",
		"FE(2)  fe2   1          ife1(22)   FE(1)    down (peer not associated)",
		"FE(3)  -     0          -          -        -",
	}
	if got := strings.Split(strings.TrimSpace(stdout), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fe mesh:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
	stdout, _, code = run(t, "fe", "mesh", "--status-socket", socket, "-o", "json")
	var fes []meshFE
	if err := json.Unmarshal([]byte(stdout), &fes); code != 0 || err != nil || len(fes) != 3 || fes[0].Links[0].PeerFE != 2 || fes[2].Links == nil {
		t.Fatalf("fe mesh -o json: exit %d, %v: %s", code, err, stdout)
	}
	if _, stderr, code := run(t, "fe", "mesh"); code != 2 || !strings.Contains(stderr, "--status-socket") {
		t.Fatalf("without --status-socket: exit %d, %s", code, stderr)
	}
}
