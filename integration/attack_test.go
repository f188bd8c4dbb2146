package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The hostile-input suite through the real binary: `splitplane lab attack
// --json` plays a fake FE, a fake CE and hostile API clients against a lab
// of its own and prints one line per attack. Every attack must hold, and
// every attack of the suite must have run (a suite that lost one would pass
// otherwise).
func TestLabAttack(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "lab", "attack", "--json", "--name", "spatkt", "--dir", filepath.Join(t.TempDir(), "lab"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	held := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m struct {
			Metric string  `json:"metric"`
			Value  float64 `json:"value"`
			Unit   string  `json:"unit"`
			What   string  `json:"what"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		if m.Unit != "held" {
			t.Errorf("%s: unit %q, want held", m.Metric, m.Unit)
		}
		held[m.Metric] = m.Value == 1
		if m.Value != 1 {
			t.Errorf("%s not held: %s", m.Metric, m.What)
		} else {
			t.Logf("%s: %s", m.Metric, m.What)
		}
	}
	for _, name := range wantAttacks {
		if _, ok := held[name]; !ok {
			t.Errorf("%s did not run", name)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("lab attack: %v", runErr)
	}
	if t.Failed() {
		t.Logf("lab attack's progress:\n%s", stderr.String())
	}
}

// wantAttacks are the attacks issue 21 asks the suite to cover.
var wantAttacks = []string{
	"attack_fe_no_tls", "attack_fe_untrusted_cert", "attack_fe_id_not_its_certificate", "attack_fe_id_zero",
	"attack_fe_id_not_allowed", "attack_fe_low_channel_hijack", "attack_fe_duplicate_id",
	"attack_fe_port_address_poison", "attack_fe_discovery_item_paths", "attack_fe_event_item_paths",
	"attack_fe_stray_commit_response", "attack_fe_wrong_ids", "attack_fe_stalled_reader", "attack_fe_no_setup", "attack_fe_connection_flood",
	"attack_fe_accept_emfile",
	"attack_fe_config_get_table", "attack_fe_config_set_prop_table", "attack_fe_config_report_table",
	"attack_fe_config_commit_response", "attack_fe_config_unanswerable", "attack_fe_setup_response_not_ce", "attack_fe_dead_interval_max", "attack_fe_config_item_paths",
	"attack_api_unauthenticated_large", "attack_api_wrong_token", "attack_api_token_on_plaintext_tcp",
	"attack_api_watch_flood", "attack_api_list_flood", "attack_api_martian_prefixes",
	"attack_api_routes_file_corrupt",
}
