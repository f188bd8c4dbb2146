package fe

import (
	"testing"
	"time"

	"github.com/splitplane/splitplane/forces"
)

// Tests of what a hostile (or broken) CE can send the FE: every message gets
// an answer or a teardown, never a crash, a stall or a 49-day wait.

func setProto(comp, ms uint32) forces.TableOp {
	return forces.TableOp{Op: forces.OpSet, ClassID: forces.ClassFEProtocol, InstanceID: 1, Path: []uint32{comp},
		FullData: forces.Uint32FullData(ms)}
}

// TestHeartbeatPolicyClamped: the CE's dead interval and the FE's heartbeat
// interval are honoured only within a fixed range; beyond it they are
// clamped, not refused, and the FE waits no longer than the range allows.
func TestHeartbeatPolicyClamped(t *testing.T) {
	for _, tc := range []struct {
		cehdi, fehi         uint32
		wantCEHDI, wantFEHI uint32
	}{
		{0xFFFFFFFF, 0xFFFFFFFF, 60_000, 30_000},
		{60_001, 30_001, 60_000, 30_000},
		{10, 10, 100, 10},
		{1500, 500, 1500, 500},
	} {
		a, _ := testAgent(t, Config{HeartbeatInterval: time.Second})
		resp, failed := a.applyConfig(configMsg(t, setProto(forces.FEProtoCEHDI, tc.cehdi), setProto(forces.FEProtoFEHI, tc.fehi)))
		if failed {
			t.Fatalf("CEHDI %d FEHI %d: refused: %v", tc.cehdi, tc.fehi, results(t, resp))
		}
		p := a.policy()
		if p.CEHDI != tc.wantCEHDI || p.FEHI != tc.wantFEHI {
			t.Errorf("CEHDI %d FEHI %d: policy now CEHDI %d FEHI %d, want %d and %d", tc.cehdi, tc.fehi, p.CEHDI, p.FEHI, tc.wantCEHDI, tc.wantFEHI)
		}
		send, dead := a.intervals()
		if dead != time.Duration(tc.wantCEHDI)*time.Millisecond || send != time.Duration(tc.wantFEHI)*time.Millisecond {
			t.Errorf("CEHDI %d FEHI %d: the association would send every %s and wait %s", tc.cehdi, tc.fehi, send, dead)
		}
	}
}
