package classifier

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestQueueIRQs(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	set := func(irqs ...int) map[int]bool {
		m := make(map[int]bool)
		for _, i := range irqs {
			m[i] = true
		}
		return m
	}
	for _, c := range []struct {
		file, ifname string
		device       map[int]bool
		want         map[uint32][]int
	}{
		{"interrupts-ixgbe.txt", "eth2", nil, map[uint32][]int{0: {98}, 1: {99}, 2: {100}, 3: {101}}},
		{"interrupts-ixgbe.txt", "eth2", set(98, 99, 100, 101, 102), map[uint32][]int{0: {98}, 1: {99}, 2: {100}, 3: {101}}},
		{"interrupts-ixgbe.txt", "eth20", nil, map[uint32][]int{0: {104}}},
		{"interrupts-mlx5.txt", "enp3s0f0", set(60, 61, 62, 63, 64), map[uint32][]int{0: {61}, 1: {62}, 2: {63}, 3: {64}}},
		{"interrupts-mlx5.txt", "enp3s0f0", nil, nil}, // names without the interface: unknown, not guessed
		{"interrupts-split.txt", "enp1s0", nil, map[uint32][]int{0: {45}, 1: {46}}},
		{"interrupts-virtio.txt", "eth0", set(37, 38, 39, 40, 41), map[uint32][]int{0: {38}, 1: {40}}},
		{"interrupts-i40e.txt", "ens1f0", nil, map[uint32][]int{0: {81}, 1: {82}, 2: {83}, 3: {84}}},
		{"interrupts-i40e.txt", "ens1f1", nil, map[uint32][]int{0: {86}}},
		{"interrupts-i40e.txt", "ens1f0", set(80, 81, 82), map[uint32][]int{0: {81}, 1: {82}}}, // misc is no queue
		{"interrupts-veth.txt", "veth0", nil, nil},                                             // virtual: no interrupts of its own
		{"interrupts-veth.txt", "eth0", nil, nil},                                              // virtio names do not hold the interface
	} {
		got := QueueIRQs(c.ifname, read(c.file), c.device)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s (device %v): %v, want %v", c.file, c.ifname, c.device != nil, got, c.want)
		}
	}
}

func TestProcIRQ(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "irq/42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "irq/42/smp_affinity_list"), []byte("0-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := ProcIRQ{Root: root}
	if got, err := p.Affinity(42); err != nil || got != "0-3" {
		t.Fatalf("Affinity = %q, %v", got, err)
	}
	if err := p.SetAffinity(42, "1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Affinity(42); got != "1" {
		t.Errorf("after SetAffinity: %q", got)
	}
	if _, err := p.Affinity(43); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing irq: %v", err)
	}
}
