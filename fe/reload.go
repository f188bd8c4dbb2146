package fe

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
)

// ErrNotRunning is returned by Reload before Run has loaded the datapath.
var ErrNotRunning = errors.New("fe not running")

// Reloaded says what a Reload did: the settings (by their YAML keys) it
// applied at run time, and those that changed but take effect only when the
// FE restarts.
type Reloaded struct {
	Applied []string
	Restart []string
}

// Reload applies a new configuration to the running FE as far as it can
// without restarting: the classifier's policer (police_pps, police_burst,
// police) and its GTSM peers. Every other changed setting is listed in Restart and
// left as it was. An invalid cfg is an ErrConfig error and changes nothing.
func (a *Agent) Reload(cfg Config) (Reloaded, error) {
	if err := cfg.Validate(); err != nil {
		return Reloaded{}, err
	}
	var r Reloaded
	var err error
	a.do(func() { r, err = a.reload(cfg) })
	return r, err
}

// reload is Reload's work, done by the owner of the agent's state: one
// reload at a time, and its few datapath writes among the loop's own.
func (a *Agent) reload(cfg Config) (Reloaded, error) {
	dp := a.prog.dp
	if dp == nil {
		return Reloaded{}, ErrNotRunning
	}
	old := a.live
	var r Reloaded
	r.Restart = changedFields("", reflect.ValueOf(old), reflect.ValueOf(cfg), "classifier")
	oc, nc := old.Classifier, cfg.Classifier
	switch {
	case (oc == nil) != (nc == nil):
		r.Restart = append(r.Restart, "classifier")
	case oc != nil:
		r.Restart = append(r.Restart, changedFields("classifier.", reflect.ValueOf(*oc), reflect.ValueOf(*nc), policeKeys...)...)
		cdp, ok := dp.(classifierDatapath)
		if !ok {
			break // a datapath without a classifier: nothing to program
		}
		if changed := changedPolice(oc, nc); len(changed) > 0 {
			// Every class's rate is written, so a changed police_pps
			// reaches the classes that take it as their default.
			if err := cdp.SetPolicers(nc.policeRates()); err != nil {
				return r, fmt.Errorf("classifier.police: %w", err)
			}
			r.Applied = append(r.Applied, changed...)
		}
		if !slices.Equal(oc.GTSMPeers, nc.GTSMPeers) {
			if err := setGTSMPeers(cdp, oc.GTSMPeers, nc.GTSMPeers); err != nil {
				return r, err
			}
			r.Applied = append(r.Applied, "classifier.gtsm_peers")
		}
		st := &a.classifier
		st.status.PolicePPS, st.status.GTSMPeers = nc.PolicePPS, slices.Clone(nc.GTSMPeers)
		st.status.Police = policeStatus(nc.policeRates())
	}
	// What was applied becomes the baseline of the next reload; what needs
	// a restart stays as it runs.
	if oc != nil && nc != nil {
		live := *oc
		live.PolicePPS, live.PoliceBurst, live.GTSMPeers = nc.PolicePPS, nc.PoliceBurst, slices.Clone(nc.GTSMPeers)
		live.Police = nc.Police.clone()
		a.live.Classifier = &live
	}
	return r, nil
}

// policeKeys are the classifier's keys that Reload applies to the policer.
var policeKeys = []string{"police_pps", "police_burst", "police", "gtsm_peers"}

// changedPolice lists the policer's keys that differ between old and new
// ("classifier.police_pps", "classifier.police_burst", and each class as
// "classifier.police.arp_nd" ...).
func changedPolice(old, new *ClassifierConfig) []string {
	var out []string
	if old.PolicePPS != new.PolicePPS {
		out = append(out, "classifier.police_pps")
	}
	if old.PoliceBurst != new.PoliceBurst {
		out = append(out, "classifier.police_burst")
	}
	return append(out, changedFields("classifier.police.", reflect.ValueOf(old.Police), reflect.ValueOf(new.Police))...)
}

// setGTSMPeers turns GTSM off for the peers in old but not in new, then on
// for those in new but not in old (both validated addresses).
func setGTSMPeers(cdp classifierDatapath, old, new []string) error {
	for _, p := range old {
		if !slices.Contains(new, p) {
			if err := cdp.SetGTSM(netip.MustParseAddr(p), false); err != nil {
				return fmt.Errorf("classifier.gtsm_peers: remove %s: %w", p, err)
			}
		}
	}
	for _, p := range new {
		if !slices.Contains(old, p) {
			if err := cdp.SetGTSM(netip.MustParseAddr(p), true); err != nil {
				return fmt.Errorf("classifier.gtsm_peers: add %s: %w", p, err)
			}
		}
	}
	return nil
}

// changedFields lists, by YAML key with prefix, the fields of the structs a
// and b that differ, leaving out those named in skip.
func changedFields(prefix string, a, b reflect.Value, skip ...string) []string {
	var out []string
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		if slices.Contains(skip, key) || reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			continue
		}
		out = append(out, prefix+key)
	}
	return out
}
