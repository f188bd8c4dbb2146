package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackage builds the Debian package with `make package` (nfpm), unpacks
// it into a throwaway root as dpkg would install it, and checks what it
// holds: the binaries (which run), the systemd units (pointing at the
// packaged binary), the sysusers file, man pages, completion and the example
// configurations under /usr/share/doc, which `splitplane ce|fe --check`
// accept (with their certificates made by the packaged make-certs.sh).
func TestPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: skipped with -short")
	}
	for _, tool := range []string{"dpkg-deb", "make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	cmd := exec.Command("make", "-C", "..", "package")
	cmd.Env = append(os.Environ(), "SPLITPLANE_VERSION=0.0.0+test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	deb := "../build/splitplane_0.0.0+test_amd64.deb"
	t.Cleanup(func() { os.Remove(deb) })
	info, err := exec.Command("dpkg-deb", "--info", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
	}
	for _, want := range []string{"Package: splitplane", "Version: 0.0.0+test", "Architecture: amd64", "postinst"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("control lacks %q:\n%s", want, info)
		}
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	for _, f := range []string{
		"usr/bin/splitplane", "usr/bin/splitplane-lab",
		"usr/lib/systemd/system/splitplane-ce.service", "usr/lib/systemd/system/splitplane-fe.service", "usr/lib/systemd/system/splitplane.target",
		"usr/lib/sysusers.d/splitplane.conf",
		"usr/share/doc/splitplane/examples/ce.yaml", "usr/share/doc/splitplane/examples/fe.yaml",
		"usr/share/doc/splitplane/monitoring/splitplane-rules.yaml", "usr/share/doc/splitplane/monitoring/splitplane-dashboard.json",
		"usr/share/doc/splitplane/pki/make-certs.sh", "usr/share/doc/splitplane/copyright",
		"usr/share/man/man1/splitplane.1.gz", "usr/share/man/man1/splitplane-route-list.1.gz",
		"usr/share/bash-completion/completions/splitplane",
	} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the package lacks /%s: %v", f, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/splitplane")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("/etc/splitplane: %v %v, want a directory of mode 0750", fi, err)
	}
	bin := filepath.Join(root, "usr/bin/splitplane")
	for _, u := range []string{"splitplane-ce.service", "splitplane-fe.service"} {
		b, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", u))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/bin/splitplane ") || strings.Contains(string(b), "/usr/local/bin") {
			t.Errorf("%s does not start the packaged /usr/bin/splitplane:\n%s", u, b)
		}
	}
	// The packaged examples pass the packaged binary's --check.
	pki := deployPKI(t)
	for _, d := range []string{"ce", "fe"} {
		b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/splitplane/examples", d+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, bin, d, d+".yaml", string(b), pki, "/etc/splitplane/")
	}
}
