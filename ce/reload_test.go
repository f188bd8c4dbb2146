package ce

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReload(t *testing.T) {
	cfg := Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		StaticRoutes: []StaticRoute{
			{Prefix: "10.0.0.0/24", Connected: true},
			{Prefix: "198.51.100.0/24", NextHops: []string{"10.0.0.2"}},
			{Prefix: "203.0.113.0/24", NextHops: []string{"10.0.0.3"}},
		}}
	c, _ := runCE(t, cfg)
	ctx := context.Background()
	waitFor(t, func() bool { return statusOf(t, c).Routes == 2 })

	// One route changed, one removed, one added, a connected prefix added.
	next := cfg
	next.StaticRoutes = []StaticRoute{
		{Prefix: "10.0.0.0/24", Connected: true},
		{Prefix: "10.9.0.0/16", Connected: true},
		{Prefix: "198.51.100.0/24", NextHops: []string{"10.0.0.2", "10.9.0.9"}},
		{Prefix: "192.0.2.0/25", NextHops: []string{"10.9.1.1"}},
		{Prefix: "192.0.2.128/25", NextHops: []string{"10.9.1.2"}},
	}
	rep, err := c.Reload(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Statics != 5 || len(rep.NeedRestart) != 0 || len(rep.Neighbors) != 0 {
		t.Fatalf("report %+v", rep)
	}
	waitFor(t, func() bool { return statusOf(t, c).Routes == 3 })
	st := statusOf(t, c)
	if !slices.ContainsFunc(st.Connected, func(p netip.Prefix) bool { return p.String() == "10.9.0.0/16" }) {
		t.Fatalf("connected %v", st.Connected)
	}

	// An invalid configuration changes nothing; restart-only settings are
	// reported and kept.
	bad := next
	bad.StaticRoutes = append(slices.Clone(next.StaticRoutes), StaticRoute{Prefix: "nonsense"})
	if _, err := c.Reload(ctx, bad); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad config: %v", err)
	}
	restart := next
	restart.HeartbeatInterval = 2 * time.Second
	restart.ASN = 65009
	rep, err = c.Reload(ctx, restart)
	if err != nil || !slices.Equal(rep.NeedRestart, []string{"asn", "heartbeat_interval"}) || rep.Statics != 0 {
		t.Fatalf("restart-only changes: %+v %v", rep, err)
	}
	if statusOf(t, c).Routes != 3 {
		t.Fatal("routes changed")
	}

	// bgp_networks: announced and withdrawn by name; a bad prefix is an
	// error naming it and changes nothing.
	nets := next
	nets.BGPNetworks = []string{"203.0.113.0/24", "2001:db8:f::/48"}
	rep, err = c.Reload(ctx, nets)
	if err != nil || !slices.Equal(rep.Networks, []string{"+203.0.113.0/24", "+2001:db8:f::/48"}) {
		t.Fatalf("networks added: %+v %v", rep, err)
	}
	nets.BGPNetworks = []string{"2001:db8:f::/48", "198.51.100.0/25"}
	rep, err = c.Reload(ctx, nets)
	if err != nil || !slices.Equal(rep.Networks, []string{"+198.51.100.0/25", "-203.0.113.0/24"}) {
		t.Fatalf("networks changed: %+v %v", rep, err)
	}
	badNets := nets
	badNets.BGPNetworks = []string{"198.51.100.0/25", "198.51.100.1/24"}
	if _, err := c.Reload(ctx, badNets); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `bgp_networks[1] 198.51.100.1/24: host bits set`) {
		t.Fatalf("bad bgp_networks: %v", err)
	}
	if got := c.speaker.Networks(); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("2001:db8:f::/48"), netip.MustParsePrefix("198.51.100.0/25")}) {
		t.Fatalf("networks after the bad reload: %v", got)
	}
	if statusOf(t, c).Routes != 3 {
		t.Fatal("bgp_networks changed the FIB")
	}
}

// password_file: the key is read at start and again at every reload, so a
// changed key (a rotated Secret) changes that neighbour alone; the file's
// problems are errors naming it, and change nothing.
func TestReloadPasswordFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "md5")
	if err := os.WriteFile(keyFile, []byte("  first-key \n# a comment line is ignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{ID: 7, ASN: 65001, RouterID: "192.0.2.1", BGPListenPort: -1, ForCESListen: "127.0.0.1:0",
		Neighbors: []NeighborConfig{
			{Address: "127.0.0.2", ASN: 65002, Passive: true, PasswordFile: keyFile},
			{Address: "127.0.0.3", ASN: 65003, Passive: true, Password: "other"},
		}}
	bc, err := cfg.bgpConfig()
	if err != nil || bc.Neighbors[0].Password != "first-key" {
		t.Fatalf("password from the file: %q, %v", bc.Neighbors[0].Password, err)
	}
	c, _ := runCE(t, cfg)
	ctx := context.Background()

	if rep, err := c.Reload(ctx, cfg); err != nil || len(rep.Neighbors) != 0 {
		t.Fatalf("reload, nothing changed: %+v %v", rep, err)
	}
	if err := os.WriteFile(keyFile, []byte("second-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Reload(ctx, cfg); err != nil || !slices.Equal(rep.Neighbors, []string{"~127.0.0.2"}) {
		t.Fatalf("reload after the key changed: %+v %v", rep, err)
	}

	for _, bad := range []struct {
		change func(*NeighborConfig)
		want   string
	}{
		{func(n *NeighborConfig) { n.Password = "both" }, `neighbors[0].password_file "` + keyFile + `": and password: set one of them`},
		{func(n *NeighborConfig) { n.PasswordFile = filepath.Join(dir, "none") }, `neighbors[0].password_file "` + filepath.Join(dir, "none") + `": open`},
		{func(n *NeighborConfig) { n.PasswordFile = filepath.Join(dir, "empty") }, `": the file holds no password`},
	} {
		if err := os.WriteFile(filepath.Join(dir, "empty"), []byte(" \n"), 0o600); err != nil {
			t.Fatal(err)
		}
		next := cfg
		next.Neighbors = slices.Clone(cfg.Neighbors)
		bad.change(&next.Neighbors[0])
		if _, err := c.Reload(ctx, next); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("reload: %v, want %q", err, bad.want)
		}
	}
}
