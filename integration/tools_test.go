package integration_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/integration/lab"
)

// buildTools builds the standard tools go.mod pins (GoBGP's gobgp CLI and
// grpcurl) and returns the directory holding them.
func buildTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/osrg/gobgp/v4/cmd/gobgp", "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build gobgp grpcurl: %v\n%s", err, out)
	}
	return dir
}

// checkStandardTools runs the tools operators reach for against the running
// lab o (BIRD peer up): GoBGP's own CLI against bgp_api_listen in the
// router's namespace (its default port), and grpcurl against the API
// through server reflection.
func checkStandardTools(t *testing.T, o lab.Options) {
	t.Helper()
	tools := buildTools(t)
	inRtr := func(name string, args ...string) string {
		t.Helper()
		a := append([]string{"--net=/run/netns/" + o.Namespace("rtr"), filepath.Join(tools, name)}, args...)
		out, err := exec.Command("nsenter", a...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := inRtr("gobgp", "neighbor"); !strings.Contains(out, "10.10.3.2") || !strings.Contains(out, "Establ") {
		t.Errorf("gobgp neighbor: want the BIRD peer 10.10.3.2 established:\n%s", out)
	}
	if out := inRtr("gobgp", "global", "rib", "summary"); !strings.Contains(out, "Destination") {
		t.Errorf("gobgp global rib summary:\n%s", out)
	}
	if out := inRtr("gobgp", "global", "rib"); strings.Count(out, "\n") < 10 {
		t.Errorf("gobgp global rib: want the peer's routes:\n%s", out)
	}
	sock := o.Socket("api")
	out, err := exec.Command(filepath.Join(tools, "grpcurl"), "-plaintext", "unix://"+sock, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, svc := range []string{"splitplane.v1.Routes", "splitplane.v1.FEs", "splitplane.v1.BGP", "splitplane.v1.Classifier"} {
		if !strings.Contains(string(out), svc) {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, out)
		}
	}
	out, err = exec.Command(filepath.Join(tools, "grpcurl"), "-plaintext", "-d", "{}", "unix://"+sock, "splitplane.v1.FEs/List").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "associated") {
		t.Errorf("grpcurl splitplane.v1.FEs/List: %v\n%s", err, out)
	}
}
