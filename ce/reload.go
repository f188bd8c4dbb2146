package ce

import (
	"context"
	"fmt"
	"reflect"
	"slices"
)

// Reload applies a new configuration to the running CE, changing only what
// differs: static routes (added, changed, removed), BGP neighbours (added,
// changed or removed, the others untouched), the control cores. Settings
// that only a restart can change (IDs, addresses, TLS, timers of the ForCES
// associations, BGP's own identity) are reported and left as they were.
// An invalid configuration changes nothing.
func (c *CE) Reload(ctx context.Context, cfg Config) (ReloadReport, error) {
	var rep ReloadReport
	if err := cfg.Validate(); err != nil {
		return rep, err
	}
	select {
	case <-c.neighborsUp: // a reload changes the neighbours as added
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	done := make(chan ReloadReport, 1)
	select {
	case c.reloads <- reload{cfg: cfg, done: done}:
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	select {
	case rep = <-done:
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	if rep.Err != nil {
		return rep, rep.Err
	}
	return rep, nil
}

// ReloadReport says what a reload changed.
type ReloadReport struct {
	Statics   int      // static routes added, changed or removed
	Neighbors []string // neighbours added, changed or removed ("+192.0.2.2", "~...", "-...")
	Networks  []string // bgp_networks announced or withdrawn ("+192.0.2.0/24", "-...")
	Pinned    string   // the new pinning, if control_cores changed
	// NeedRestart lists the changed settings a reload cannot apply.
	NeedRestart []string
	Err         error `json:"-"`
}

type reload struct {
	cfg  Config
	done chan ReloadReport
}

// restartOnly are the settings a reload cannot change, by YAML name.
var restartOnly = [...]string{
	"id", "asn", "router_id", "bgp_listen_port", "bgp_listen_addresses", "bgp_multipath",
	"forces_listen", "forces_listen_low", "heartbeat_interval", "heartbeat_miss_limit",
	"sync_hold", "fe_hold_time", "cluster_fe_hold_time", "graceful_restart_fe_wait", "tls", "forces_allowed_fes", "forces_accept_unauthenticated_fes", "forces_pcap", "status_socket", "distances",
	"api_listen", "api_tls", "api_token_file", "api_routes_file", "bgp_api_listen", "metrics_listen",
	"api_max_message_bytes", "api_max_streams", "api_max_watches", "api_max_snapshots", "api_allow_martians",
}

// restartFields returns the restart-only settings that differ between a and b.
func restartFields(a, b Config) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("yaml")
		if slices.Contains(restartOnly[:], name) && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}

// applyReload runs on the loop: it owns the RIB.
func (c *CE) applyReload(ctx context.Context, rib *RIB, r reload, out []Change) ([]Change, ReloadReport) {
	rep := ReloadReport{NeedRestart: restartFields(c.cfg, r.cfg)}
	before := len(out)
	out = c.setStatics(rib, r.cfg.StaticRoutes, out)
	rep.Statics = countStaticChanges(c.cfg.StaticRoutes, r.cfg.StaticRoutes)
	c.cfg.StaticRoutes = r.cfg.StaticRoutes

	if !slices.Equal(c.cfg.ControlCores, r.cfg.ControlCores) {
		if len(r.cfg.ControlCores) == 0 {
			rep.NeedRestart = append(rep.NeedRestart, "control_cores (unpinning)")
		} else if p, err := Pin(r.cfg.ControlCores); err != nil {
			rep.Err = fmt.Errorf("control_cores %v: %w", r.cfg.ControlCores, err)
			return out, rep
		} else {
			rep.Pinned = p.String()
			c.cfg.ControlCores = r.cfg.ControlCores
		}
	}

	nbs, err := c.reloadNeighbors(ctx, r.cfg)
	rep.Neighbors = nbs
	if err != nil {
		rep.Err = err
	} else {
		c.cfg.Neighbors = r.cfg.Neighbors
		// After the neighbours, so that their export policies are in place.
		if rep.Networks, err = c.reloadNetworks(r.cfg); err != nil {
			rep.Err = err
		} else {
			c.cfg.BGPNetworks = r.cfg.BGPNetworks
		}
	}
	c.setProtected() // the neighbours and static next hops FEs may not claim
	c.log.Info("ce: configuration reloaded", "static_route_changes", rep.Statics, "fib_changes", len(out)-before,
		"neighbors", rep.Neighbors, "networks", rep.Networks, "pinned", rep.Pinned, "need_restart", rep.NeedRestart, "err", rep.Err)
	return out, rep
}

// countStaticChanges counts the static routes added, changed or removed.
func countStaticChanges(old, cur []StaticRoute) int {
	key := func(r StaticRoute) string { return r.Prefix }
	was := map[string]StaticRoute{}
	for _, r := range old {
		was[key(r)] = r
	}
	n := 0
	for _, r := range cur {
		if o, ok := was[key(r)]; !ok || !reflect.DeepEqual(o, r) {
			n++
		}
		delete(was, key(r))
	}
	return n + len(was)
}

// reloadNeighbors brings the BGP neighbours in line with cfg's. The speaker
// compares them as they end up (a password_file read again included) and
// leaves the unchanged ones alone.
func (c *CE) reloadNeighbors(ctx context.Context, cfg Config) ([]string, error) {
	bc, err := cfg.bgpConfig()
	if err != nil {
		return nil, err
	}
	return c.speaker.SetNeighbors(ctx, bc.Neighbors)
}

// reloadNetworks brings the originated prefixes in line with cfg's and
// names the ones announced ("+P") and withdrawn ("-P").
func (c *CE) reloadNetworks(cfg Config) ([]string, error) {
	bc, err := cfg.bgpConfig()
	if err != nil {
		return nil, err
	}
	was := c.speaker.Networks()
	if _, _, err := c.speaker.SetNetworks(bc.Networks); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range bc.Networks {
		if !slices.Contains(was, p) {
			out = append(out, "+"+p.String())
		}
	}
	for _, p := range was {
		if !slices.Contains(bc.Networks, p) {
			out = append(out, "-"+p.String())
		}
	}
	return out, nil
}
