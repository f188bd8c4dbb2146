package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/forces"
)

// checkPrivileges names every capability a daemon lacks, with what it is
// for, accepts any one of the alternatives, and suggests granting only what
// is missing.
func TestCheckPrivileges(t *testing.T) {
	need := feDaemon{}.privileges()
	bit := func(cs ...capability) uint64 {
		var m uint64
		for _, c := range cs {
			m |= 1 << uint(c)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		eff  uint64
		want []string // in the error; none: no error
		not  []string
	}{
		{"root", ^uint64(0), nil, nil},
		{"bpf and perfmon", bit(capNetAdmin, capNetRaw, capBPF, capPerfmon), nil, nil},
		{"sys_admin instead", bit(capNetAdmin, capNetRaw, capSysAdmin), nil, nil},
		{"nothing", 0, []string{"fe: missing privileges", "CAP_NET_ADMIN (to attach XDP", "CAP_NET_RAW (for the packet sockets", "CAP_BPF and CAP_PERFMON or CAP_SYS_ADMIN (to load",
			"AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW CAP_BPF CAP_PERFMON"}, nil},
		{"no perfmon", bit(capNetAdmin, capNetRaw, capBPF), []string{"CAP_BPF and CAP_PERFMON", "AmbientCapabilities=CAP_PERFMON"}, []string{"CAP_NET_ADMIN (", "CAP_NET_RAW ("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPrivileges("fe", need, tc.eff)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, errPrivileges) {
				t.Fatalf("error %v, want one wrapping errPrivileges", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%q says %q", err, w)
				}
			}
		})
	}
}

// The CE needs CAP_NET_BIND_SERVICE only for ports below the kernel's
// unprivileged range, BGP's 179 by default, and names the settings.
func TestCEPrivileges(t *testing.T) {
	if unprivilegedPortStart() <= 179 {
		t.Skip("this namespace lets anyone bind port 179 (net.ipv4.ip_unprivileged_port_start)")
	}
	base := ce.Config{ASN: 65001, RouterID: "192.0.2.1"}
	token := filepath.Join(t.TempDir(), "token")
	pki, err := forces.WritePKI(t.TempDir(), time.Hour, "ce")
	if err != nil {
		t.Fatal(err)
	}
	apiTLS := pki["ce"] // a TCP API needs mutual TLS
	if err := os.WriteFile(token, []byte("a-token-long-enough-to-be-accepted-by-the-ce\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*ce.Config)
		want string // "": nothing needed
	}{
		{"default bgp port", func(*ce.Config) {}, "bgp_listen_port 179"},
		{"no bgp listener", func(c *ce.Config) { c.BGPListenPort = -1 }, ""},
		{"high ports", func(c *ce.Config) { c.BGPListenPort = 1179; c.MetricsListen = "127.0.0.1:9101" }, ""},
		{"low metrics port", func(c *ce.Config) { c.BGPListenPort = -1; c.MetricsListen = "127.0.0.1:91" }, "metrics_listen 91"},
		{"low api port", func(c *ce.Config) {
			c.BGPListenPort = -1
			c.APIListen = "tcp:127.0.0.1:443"
			c.APITLS = &apiTLS
			c.APITokenFile = token
		}, "api_listen 443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			err := checkPrivileges("ce", (&ceDaemon{cfg: cfg}).privileges(), 0)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "CAP_NET_BIND_SERVICE")):
				t.Fatalf("error %v, want CAP_NET_BIND_SERVICE for %s", err, tc.want)
			}
		})
	}
}
