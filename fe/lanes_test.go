package fe

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A fake sysfs/procfs: eth0 with two queues on IRQs 40/41, veth0 with one
// queue and threaded NAPI, veth1 plain (netlink reporting no queue count).
func TestLanes(t *testing.T) {
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	mk := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(sys, "class/net/veth0/threaded"), "1\n")
	mk(filepath.Join(proc, "interrupts"), `           CPU0       CPU1
 40:     100     0  PCI-MSI 1-edge      eth0-TxRx-0
 41:       0   200  PCI-MSI 2-edge      eth0-TxRx-1
 42:       0     0  PCI-MSI 3-edge      eth0
`)
	mk(filepath.Join(proc, "irq/40/smp_affinity_list"), "1\n")
	mk(filepath.Join(proc, "irq/41/smp_affinity_list"), "2-3\n")

	got := lanes(sys, filepath.Join(proc, "interrupts"), []portQueues{{"eth0", 2}, {"veth0", 1}, {"veth1", 0}})
	want := []Lane{
		{Port: "eth0", Queue: 0, CPUs: "1", Via: "irq 40"},
		{Port: "eth0", Queue: 1, CPUs: "2-3", Via: "irq 41"},
		{Port: "veth0", Queue: 0, CPUs: "any (pin the napi/veth0-* kthreads)", Via: "threaded napi"},
		{Port: "veth1", Queue: 0, CPUs: "sender", Via: "softirq"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lanes\n got %+v\nwant %+v", got, want)
	}
}
