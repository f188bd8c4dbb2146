//go:build linux

package datapath

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

// LoadSpec loads another object built from the same pipeline; here xdp.c's
// own spec. extra gets its own handle of a map the Datapath also holds, and
// a spec without the Datapath's maps is refused.
func TestLoadSpec(t *testing.T) {
	needRoot(t)
	spec, err := loadXdp()
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		TxPorts *ebpf.Map `ebpf:"tx_ports"`
	}
	d, err := LoadSpec(spec, Sizes{FIBGroups: MinPoolGroups}, &extra)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer extra.TxPorts.Close()
	if extra.TxPorts == d.objs.TxPorts {
		t.Fatal("extra got the Datapath's own handle of tx_ports")
	}
	if err := extra.TxPorts.Put(uint32(1), uint32(1)); err != nil {
		t.Fatal(err)
	}
	var v uint32
	if err := d.objs.TxPorts.Lookup(uint32(1), &v); err != nil || v != 1 {
		t.Errorf("tx_ports[1] through the Datapath: %d, %v; want 1", v, err)
	}
	if got := d.objs.FibTbl8.MaxEntries(); got != MinPoolGroups {
		t.Errorf("fib_tbl8 has %d groups, want %d", got, MinPoolGroups)
	}

	spec, err = loadXdp()
	if err != nil {
		t.Fatal(err)
	}
	delete(spec.Maps, xdpMapFibTbl8)
	if d, err := LoadSpec(spec, Sizes{}, nil); !errors.Is(err, ErrInvalid) {
		if d != nil {
			d.Close()
		}
		t.Errorf("LoadSpec without fib_tbl8: %v, want ErrInvalid", err)
	}
	if _, err := LoadSpec(spec, Sizes{FIBGroups: 1}, nil); err == nil {
		t.Error("LoadSpec with 1 FIB group: no error")
	}
}
