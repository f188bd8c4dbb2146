package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTransparentHugePages(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ content, want, err string }{
		{"always [madvise] never\n", "madvise", ""},
		{"[always] madvise never\n", "always", ""},
		{"always madvise [never]", "never", ""},
		{"always madvise never\n", "", "no mode in brackets"},
		{"", "", "no mode in brackets"},
	} {
		f := filepath.Join(dir, "enabled")
		if err := os.WriteFile(f, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := TransparentHugePages(f)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: got %q, %v; want %q, error containing %q", c.content, got, err, c.want, c.err)
		}
	}
	if _, err := TransparentHugePages(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}

// The running kernel's setting reads as one of the three modes.
func TestTransparentHugePagesHere(t *testing.T) {
	if _, err := os.Stat(THPEnabled); err != nil {
		t.Skipf("%s: %v (kernel without transparent huge pages)", THPEnabled, err)
	}
	got, err := TransparentHugePages(THPEnabled)
	if err != nil {
		t.Fatal(err)
	}
	if got != "always" && got != "madvise" && got != "never" {
		t.Fatalf("mode %q", got)
	}
}
