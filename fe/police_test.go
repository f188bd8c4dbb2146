package fe

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/splitplane/splitplane/fe/datapath"
)

// classifierYAML decodes a classifier section as the FE's configuration
// file is read (unknown keys refused) and validates it.
func classifierYAML(t *testing.T, text string) (*ClassifierConfig, error) {
	t.Helper()
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader("ports: [eth0]\nclassifier:\n" + text))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return cfg.Classifier, cfg.Validate()
}

// Each class's rate: its own when given (burst a tenth of it by default),
// otherwise police_pps and police_burst, capped at 1000 and 100 for TTL /
// options and ARP / ND; with police_pps 0 only the given classes are
// policed.
func TestPoliceRates(t *testing.T) {
	r := func(pps, burst uint64) datapath.PoliceRate { return datapath.PoliceRate{PPS: pps, Burst: burst} }
	for _, tc := range []struct {
		name, yaml string
		want       datapath.PoliceRates
	}{
		{"off", "  control_cpu: -1\n", datapath.PoliceRates{}},
		{"police_pps alone", "  police_pps: 20000\n",
			datapath.PoliceRates{r(20000, 2000), r(1000, 100), r(1000, 100), r(20000, 2000)}},
		{"police_pps under the caps", "  police_pps: 500\n  police_burst: 20\n",
			datapath.PoliceRates{r(500, 20), r(500, 20), r(500, 20), r(500, 20)}},
		{"classes of their own", "  police_pps: 20000\n  police:\n    arp_nd: {pps: 200}\n    to_router: {pps: 50000, burst: 7}\n",
			datapath.PoliceRates{r(50000, 7), r(1000, 100), r(200, 20), r(20000, 2000)}},
		{"only a class", "  police: {ttl_options: {pps: 5, burst: 1}, other: {pps: 3000}}\n",
			datapath.PoliceRates{{}, r(5, 1), {}, r(3000, 300)}},
		{"a class above the caps", "  police_pps: 100\n  police: {arp_nd: {pps: 5000}}\n",
			datapath.PoliceRates{r(100, 10), r(100, 10), r(5000, 500), r(100, 10)}},
	} {
		c, err := classifierYAML(t, tc.yaml)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := c.policeRates(); got != tc.want {
			t.Errorf("%s: rates %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A bad rate or burst is refused naming the key and the value.
func TestPoliceConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"  police_pps: 1000000001\n", "classifier.police_pps 1000000001"},
		{"  police_pps: 10\n  police_burst: 1073741825\n", "classifier.police_burst 1073741825"},
		{"  police: {arp_nd: {burst: 10}}\n", "classifier.police.arp_nd.pps 0"},
		{"  police: {to_router: {pps: 2000000000}}\n", "classifier.police.to_router.pps 2000000000"},
		{"  police: {other: {pps: 10, burst: 2000000000}}\n", "classifier.police.other.burst 2000000000"},
		{"  police: {ttl_options: {}}\n", "classifier.police.ttl_options.pps 0"},
	} {
		_, err := classifierYAML(t, tc.yaml)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an ErrConfig naming %q", tc.yaml, err, tc.want)
		}
	}
	// An unknown class is a decoding error, as any unknown key.
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader("ports: [eth0]\nclassifier: {police: {arp: {pps: 1}}}\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err == nil || !strings.Contains(err.Error(), "arp") {
		t.Errorf("unknown class: %v", err)
	}
}

// The log line's and the status's view of the rates.
func TestPoliceReport(t *testing.T) {
	rates := datapath.PoliceRates{{PPS: 20000, Burst: 2000}, {PPS: 1000, Burst: 100}, {}, {PPS: 7, Burst: 1}}
	if got, want := policeString(rates), "to_router 20000/2000 ttl_options 1000/100 arp_nd off other 7/1"; got != want {
		t.Errorf("policeString: %q, want %q", got, want)
	}
	st := policeStatus(rates)
	if st.ToRouter.PPS != 20000 || st.TTLOptions.Burst != 100 || st.ARPND.PPS != 0 || st.Other.PPS != 7 {
		t.Errorf("policeStatus: %+v", st)
	}
}
