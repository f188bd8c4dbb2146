package integration_test

import (
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
	"github.com/splitplane/splitplane/forces"
)

// deployDir is the repository's deploy/ seen from this package.
const deployDir = "../deploy"

// deployPKI makes the certificates that the deploy configurations name,
// with deploy/pki/make-certs.sh as an operator would (ce.crt for the names
// the examples dial, fe.crt, ca.crt), or with forces.WritePKI where
// openssl is missing. It returns the directory.
func deployPKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Logf("no openssl (%v): certificates from forces.WritePKI instead of deploy/pki/make-certs.sh", err)
		if _, err := forces.WritePKICerts(dir, time.Hour, forces.PKICert{Name: "ce"},
			forces.PKICert{Name: "fe", DNS: []string{"fe-1.fe.splitplane", "fe-2.fe.splitplane"}}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	script := filepath.Join(deployDir, "pki", "make-certs.sh")
	for _, c := range [][]string{
		{"ce", "DNS:ce.splitplane,DNS:splitplane-ce.splitplane.svc.cluster.local,IP:127.0.0.1"},
		{"fe", "DNS:fe-1.fe.splitplane,DNS:fe-2.fe.splitplane"}, // the FE IDs of the examples (deploy/README.md)
	} {
		if out, err := exec.Command("sh", script, dir, c[0], c[1], "2").CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", script, c[0], err, out)
		}
	}
	return dir
}

// checkConfig runs `splitplane DAEMON --check` on a configuration, with
// every path under one of the prefixes moved into pki: the real loader,
// strict about keys, and the real validation.
func checkConfig(t *testing.T, bin, daemon, name, body, pki string, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		body = strings.ReplaceAll(body, p, pki+"/")
	}
	path := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := splitplane(t, bin, daemon, "--check", "--config", path)
	if err != nil || !strings.Contains(out, "config ok") {
		t.Errorf("%s --check %s: %v\n%s", daemon, name, err, out)
	}
}

// daemonOf tells which daemon a configuration file is for, by its name:
// ce.yaml, ce-*.yaml, fe.yaml, fe-*.yaml.
func daemonOf(name string) string {
	base := filepath.Base(name)
	for _, d := range []string{"ce", "fe"} {
		if base == d+".yaml" || strings.HasPrefix(base, d+"-") {
			return d
		}
	}
	return ""
}

// decodeYAML decodes a YAML document loosely (for cross-checks; the
// binary's --check is the strict reading).
func decodeYAML(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := yaml.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}

// The example configurations in deploy/examples are valid for the binary
// (--check: every key exists, every value passes validation), with the
// certificates they name made by deploy/pki/make-certs.sh; the CE's and
// the FE's agree with each other.
func TestDeployExamples(t *testing.T) {
	bin := buildBinary(t)
	pki := deployPKI(t)
	files, _ := filepath.Glob(filepath.Join(deployDir, "examples", "*.yaml"))
	if len(files) < 2 {
		t.Fatalf("examples: %v", files)
	}
	var ceCfg ce.Config
	var feCfg fe.Config
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := daemonOf(f)
		switch d {
		case "ce":
			decodeYAML(t, b, &ceCfg)
		case "fe":
			decodeYAML(t, b, &feCfg)
		default:
			t.Errorf("%s: name it ce*.yaml or fe*.yaml, so it is checked for its daemon", f)
			continue
		}
		checkConfig(t, bin, d, f, string(b), pki, "/etc/splitplane/")
	}

	// The FE associates to the CE, over TLS that the certificates satisfy.
	if feCfg.CEAddress != ceCfg.ForCESListen {
		t.Errorf("fe ce_address %q, ce forces_listen %q", feCfg.CEAddress, ceCfg.ForCESListen)
	}
	if (feCfg.TLS == nil) != (ceCfg.TLS == nil) {
		t.Error("TLS on one side of ForCES only")
	}
	if feCfg.TLS != nil {
		handshake(t, pki, feCfg.TLSServerName)
		// The CE admits the FE: its ID is allowed and its certificate
		// names it (fe-ID).
		b, err := os.ReadFile(filepath.Join(pki, "fe.crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !forces.CertBindsFE(cert, forces.FEID(feCfg.ID)) {
			t.Errorf("the FE certificate's names %q do not bind it to the FE's id %d (want %s)", cert.DNSNames, feCfg.ID, forces.FECertName(feCfg.ID))
		}
		if len(ceCfg.ForCESAllowedFEs) > 0 && !slices.Contains(ceCfg.ForCESAllowedFEs, strconv.Itoa(int(feCfg.ID))) {
			t.Errorf("ce forces_allowed_fes %v does not admit the FE's id %d", ceCfg.ForCESAllowedFEs, feCfg.ID)
		}
	}
	// GTSM: the CE's ttl_security neighbours are the FE's GTSM peers, and
	// the classifier steers to the CE's control core.
	var gtsm []string
	for _, n := range ceCfg.Neighbors {
		if n.TTLSecurity {
			gtsm = append(gtsm, n.Address)
		}
	}
	if feCfg.Classifier == nil || !slices.Equal(gtsm, feCfg.Classifier.GTSMPeers) {
		t.Errorf("CE neighbours with ttl_security %v, FE gtsm_peers %+v", gtsm, feCfg.Classifier)
	} else if !slices.Equal(ceCfg.ControlCores, []int{feCfg.Classifier.ControlCPU}) {
		t.Errorf("CE control_cores %v, FE classifier control_cpu %d", ceCfg.ControlCores, feCfg.Classifier.ControlCPU)
	}
}

// handshake checks that certificates in pki (ce.crt, fe.crt, ca.crt) make
// a ForCES TLS session: the FE verifies the CE for serverName, the CE the
// FE.
func handshake(t *testing.T, pki, serverName string) {
	t.Helper()
	tc := func(name string) forces.TLSConfig {
		return forces.TLSConfig{Cert: filepath.Join(pki, name+".crt"), Key: filepath.Join(pki, name+".key"), CA: filepath.Join(pki, "ca.crt")}
	}
	srv, err := tc("ce").ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if serverName == "" {
		serverName = "127.0.0.1"
	}
	cli, err := tc("fe").ClientTLS(serverName)
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() { errc <- tls.Server(a, srv).Handshake() }()
	if err := tls.Client(b, cli).Handshake(); err != nil {
		t.Errorf("TLS handshake FE -> CE (%s): %v", serverName, err)
		return
	}
	if err := <-errc; err != nil {
		t.Errorf("TLS handshake, the CE's side: %v", err)
	}
}

// The container recipe builds the static binary: its build command, run
// here, makes an executable with no dynamic loader, and the image runs
// what it copied.
func TestDeployContainerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build, from, entry string
	var stages int
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			stages++
		case strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build"):
			build = strings.TrimPrefix(line, "RUN ")
		case strings.HasPrefix(line, "COPY --from="):
			from = line
		case strings.HasPrefix(line, "ENTRYPOINT "):
			entry = line
		}
	}
	if stages != 2 || build == "" || from == "" || entry == "" {
		t.Fatalf("Containerfile: %d stages, build %q, copy %q, entrypoint %q: want a build stage and a runtime stage", stages, build, from, entry)
	}
	f := strings.Fields(from) // COPY --from=build SRC DST
	if len(f) != 4 || !strings.Contains(build, "-o "+f[2]+" ") || !strings.Contains(entry, `"`+f[3]+`"`) {
		t.Fatalf("Containerfile: builds %q, copies %q, runs %q", build, from, entry)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.HasSuffix(build, " ./cmd/splitplane") {
		t.Fatalf("Containerfile: %q: want CGO_ENABLED=0 go build ... ./cmd/splitplane", build)
	}
	if testing.Short() {
		t.Skip("builds the binary as the Containerfile does: skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "splitplane")
	cmd := exec.Command("sh", "-c", strings.Replace(build, "-o "+f[2]+" ", "-o "+out+" ", 1))
	cmd.Dir = ".."
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, o)
	}
	e, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s: not static (program header %v)", out, p.Type)
		}
	}
	if o, err := exec.Command(out, "--help").CombinedOutput(); err != nil || !strings.Contains(string(o), "splitplane") {
		t.Fatalf("the image's binary: %v\n%s", err, o)
	}
}
