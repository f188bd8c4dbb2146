package host

import (
	"os"
	"testing"
)

func TestProcessMemory(t *testing.T) {
	rss, peak, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("rss %.1f MB, peak %.1f MB: want 0 < rss <= peak", rss, peak)
	}
	if _, _, err := ProcessMemory(-1); err == nil {
		t.Error("no error for pid -1")
	}
	if mb, err := KBToMB("  1000 kB"); err != nil || mb != 1.024 {
		t.Errorf("KBToMB: %v, %v; want 1.024", mb, err)
	}
}
