package ce

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// api_listen, api_tls, api_token_file and bgp_api_listen: defaults, and
// errors naming the field and value; a TCP API needs TLS, and a token is
// refused over plaintext TCP.
func TestConfigValidateAPI(t *testing.T) {
	dir := t.TempDir()
	pki, err := forces.WritePKI(dir, time.Hour, "ce")
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := pki["ce"]
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	base := func() Config { return Config{ASN: 65001, RouterID: "192.0.2.1"} }

	cfg := base()
	if err := cfg.Validate(); err != nil || cfg.APIListen != DefaultAPIListen {
		t.Fatalf("default: %v, api_listen %q", err, cfg.APIListen)
	}
	if cfg.APIMaxMessage != DefaultAPIMaxMessage || cfg.APIMaxStreams != DefaultAPIMaxStreams ||
		cfg.APIMaxWatches != DefaultAPIMaxWatches || cfg.APIMaxSnapshots != DefaultAPIMaxSnapshots || cfg.APIAllowMartians {
		t.Fatalf("default limits: %d %d %d %d, martians %v", cfg.APIMaxMessage, cfg.APIMaxStreams, cfg.APIMaxWatches, cfg.APIMaxSnapshots, cfg.APIAllowMartians)
	}
	for _, ok := range []func(*Config){
		func(c *Config) { c.APIListen = "off" },
		func(c *Config) { c.APIListen = "unix:/tmp/x.sock"; c.APITokenFile = token },
		func(c *Config) { c.APIListen = "tcp:127.0.0.1:50051"; c.APITLS = &tlsCfg; c.APITokenFile = token },
		func(c *Config) { c.APIMaxMessage, c.APIMaxStreams, c.APIMaxWatches, c.APIMaxSnapshots = 4<<20, 8, 2, 1 },
		func(c *Config) { c.APIAllowMartians = true },
		func(c *Config) { c.APIListen = "tcp:[::1]:50051"; c.APITLS = &tlsCfg },
		func(c *Config) { c.APIListen = "tcp::50051"; c.APITLS = &tlsCfg; c.APITokenFile = token },
		func(c *Config) { c.BGPAPIListen = "127.0.0.1:50052" },
	} {
		cfg := base()
		ok(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.APIListen = "tcp:127.0.0.1:50051" }, `api_listen "tcp:127.0.0.1:50051": a TCP API needs api_tls`},
		{func(c *Config) { c.APIListen = "tcp:127.0.0.1:50051"; c.APITokenFile = token },
			`api_listen "tcp:127.0.0.1:50051" with api_token_file "` + token + `": a bearer token over plaintext TCP is refused; set api_tls`},
		{func(c *Config) { c.APIMaxMessage = -1 }, "api_max_message_bytes -1: want 1 to"},
		{func(c *Config) { c.APIMaxStreams = 1 << 20 }, "api_max_streams 1048576: want 1 to 65536"},
		{func(c *Config) { c.APIMaxWatches = -5 }, "api_max_watches -5"},
		{func(c *Config) { c.APIMaxSnapshots = 5000 }, "api_max_snapshots 5000"},
		{func(c *Config) { c.APIListen = "127.0.0.1:50051" }, `api_listen "127.0.0.1:50051": want unix:PATH, tcp:HOST:PORT or off`},
		{func(c *Config) { c.APIListen = "unix:" }, `api_listen "unix:"`},
		{func(c *Config) { c.APIListen = "tcp:127.0.0.1"; c.APITLS = &tlsCfg }, `api_listen "tcp:127.0.0.1"`},
		{func(c *Config) { c.APIListen = "tcp:127.0.0.1:0"; c.APITLS = &tlsCfg }, `api_listen "tcp:127.0.0.1:0": port "0"`},
		{func(c *Config) { c.APIListen = "tcp:127.0.0.1:70000"; c.APITLS = &tlsCfg }, `port "70000"`},
		{func(c *Config) { c.APITokenFile = filepath.Join(dir, "none") }, `api_token_file "` + filepath.Join(dir, "none")},
		{func(c *Config) { c.APITokenFile = empty }, `api_token_file "` + empty + `": the file holds no token`},
		{func(c *Config) { c.APITLS = &forces.TLSConfig{Cert: tlsCfg.Cert} }, "api_tls"},
		{func(c *Config) { c.BGPAPIListen = "127.0.0.1" }, `bgp_api_listen "127.0.0.1"`},
		{func(c *Config) { c.BGPAPIListen = "a,b:50052" }, `bgp_api_listen "a,b:50052"`},
	} {
		cfg := base()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want an ErrConfig naming %q", err, tc.want)
		}
	}
	if tok, err := ReadAPIToken(token); err != nil || tok != "s3cret" {
		t.Fatalf("ReadAPIToken: %q, %v", tok, err)
	}
}
