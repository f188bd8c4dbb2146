//go:build linux

package datapath

import (
	"strings"
	"testing"
)

// LoadSized makes the FIB's group pools the size asked for, and refuses
// sizes out of bounds, naming the setting.
func TestLoadSized(t *testing.T) {
	needRoot(t)
	d, err := LoadSized(Sizes{FIBGroups: 2048, FIB6Groups: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.objs.FibTbl8.MaxEntries(); got != 2048 {
		t.Errorf("fib_tbl8: %d groups, want 2048", got)
	}
	if got := d.objs.Fib6Tbl8.MaxEntries(); got != 4096 {
		t.Errorf("fib6_tbl8: %d groups, want 4096", got)
	}
	if got := len(d.fib6.tbl8) / fibGroupEntries; got != 4096 {
		t.Errorf("the IPv6 table uses %d groups, want 4096", got)
	}
	for _, c := range []struct {
		s    Sizes
		want string
	}{
		{Sizes{FIBGroups: 10}, "fib_groups 10: want 1024 to 4194304"},
		{Sizes{FIB6Groups: MaxPoolGroups + 1}, "ipv6_fib_groups 4194305: want 1024 to 4194304"},
	} {
		if _, err := LoadSized(c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadSized(%+v) = %v, want %q", c.s, err, c.want)
		}
	}
}
