package integration_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// The example configurations in deploy/examples are valid for the binary
// (--check: every key exists, every value passes validation), with the
// certificates they name made for the test.
func TestDeployExamples(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	if _, err := forces.WritePKI(dir, time.Hour, "ce", "fe"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ daemon, file string }{{"ce", "ce.yaml"}, {"fe", "fe.yaml"}} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", c.file))
		if err != nil {
			t.Fatal(err)
		}
		body := strings.ReplaceAll(string(b), "/etc/splitplane/", dir+"/")
		path := filepath.Join(dir, c.file)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := splitplane(t, bin, c.daemon, "--check", "--config", path)
		if err != nil || !strings.Contains(out, "config ok") {
			t.Errorf("%s --check %s: %v\n%s", c.daemon, c.file, err, out)
		}
	}
}
