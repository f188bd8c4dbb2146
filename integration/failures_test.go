package integration_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/splitplane/splitplane/integration/lab"
)

// The FE killed (SIGKILL) and restarted: the CE sees the association end,
// the new FE gets a full resync, and forwarding is back in XDP (the kernel's
// forwarding counter stands still again). While the FE is gone, the kernel
// (the slow path, which holds the CE's routes) forwards.
func TestFEKilledAndRestarted(t *testing.T) {
	requireLab(t)
	bin := buildBinary(t)
	o := lab.Options{Name: "spk", Dir: filepath.Join(t.TempDir(), "lab"), Binary: bin}
	args := func(a ...string) []string { return append(a, "--name", o.Name, "--dir", o.Dir) }
	t.Cleanup(func() { splitplane(t, bin, args("lab", "down")...) })
	logsOnFailure(t, o)
	if out, err := splitplane(t, bin, args("lab", "up", "--routes", "500")...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "ping A -> B", func() error { return pingB(o, 1) })
	first, err := lab.GetStatus(o)
	if err != nil || len(first.CE.FEs) != 1 {
		t.Fatalf("status %v: %+v", err, first.CE.FEs)
	}
	since := first.CE.FEs[0].AssociatedAt

	if out, err := splitplane(t, bin, args("lab", "restart", "fe", "--kill")...); err != nil {
		t.Fatalf("restart fe: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "a new association, synced, with every route", func() error {
		st, err := lab.GetStatus(o)
		if err != nil {
			return err
		}
		if len(st.CE.FEs) != 1 || !st.CE.FEs[0].Synced || !st.CE.FEs[0].AssociatedAt.After(since) || st.FERoutes != st.CERoutes {
			return fmt.Errorf("CE FEs %+v, FE routes %d of %d", st.CE.FEs, st.FERoutes, st.CERoutes)
		}
		return nil
	})
	// XDP forwards again: pings get through and the kernel forwards none.
	eventually(t, 20*time.Second, "ping A -> B after the FE came back", func() error { return pingB(o, 1) })
	kernelBefore := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams")
	if err := pingB(o, 5); err != nil {
		t.Fatal(err)
	}
	if k := snmp(t, o.Namespace("rtr"), "Ip", "ForwDatagrams") - kernelBefore; k != 0 {
		t.Fatalf("the kernel forwarded %d packets after the FE came back; XDP should", k)
	}
}
