package fe

import (
	"fmt"
	"strings"
	"testing"

	"github.com/splitplane/splitplane/forces"
)

// goldenStep is one config of a golden test: what it does, and its operations.
type goldenStep struct {
	title string
	ops   []forces.TableOp
}

// applySteps applies each step's config to a and writes, under the step's
// title, how many datapath writes it took and what dp then holds.
func applySteps(t *testing.T, a *Agent, dp *fakeDatapath, out *strings.Builder, steps []goldenStep) {
	t.Helper()
	for _, s := range steps {
		before := dp.Writes()
		resp, failed := a.applyConfig(configMsg(t, s.ops...))
		if failed {
			t.Fatalf("%s: %v", s.title, results(t, resp))
		}
		fmt.Fprintf(out, "## %s: %d writes\n%s", s.title, dp.Writes()-before, dp)
	}
}

// What the agent programs into the datapath across a sequence of the CE's
// configs, rendered by the recording datapath, against
// testdata/program.golden: nexthops, shared ECMP groups, IPv6, a row moved
// to another prefix, deletes; the same config applied twice writes nothing.
func TestProgramGolden(t *testing.T) {
	a, dp := testAgent(t, Config{})
	var out strings.Builder
	steps := []goldenStep{
		{"two nexthops and three routes", []forces.TableOp{setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"),
			setRoute(1, "198.51.100.0/24", 1), setRoute(2, "203.0.113.0/24", 1), setRoute(3, "0.0.0.0/0", 2)}},
		{"the same again", []forces.TableOp{setNH(1, "192.0.2.1"), setNH(2, "192.0.2.2"),
			setRoute(1, "198.51.100.0/24", 1), setRoute(2, "203.0.113.0/24", 1), setRoute(3, "0.0.0.0/0", 2)}},
		{"an ECMP group of both, twice under two CE IDs", []forces.TableOp{setGroup(10, 1, 2), setGroup(11, 2, 1),
			setECMPRoute(4, "192.0.2.128/25", 10), setECMPRoute(5, "10.1.0.0/16", 11)}},
		{"a nexthop moves: its routes follow", []forces.TableOp{setNH(1, "192.0.2.3")}},
		{"row 2 moves to another prefix", []forces.TableOp{setRoute(2, "203.0.113.128/25", 1)}},
		{"IPv6", []forces.TableOp{setNH6(20, "fe80::1"), setRoute6(6, "2001:db8::/32", 20)}},
		{"delete the ECMP routes and a route", []forces.TableOp{del(forces.ClassIPv4UcastLPM, 4), del(forces.ClassIPv4UcastLPM, 5),
			del(forces.ClassIPv4UcastLPM, 1)}},
	}
	applySteps(t, a, dp, &out, steps)
	checkGolden(t, "program.golden", out.String())
}
