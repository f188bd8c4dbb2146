// Package host reads settings of the machine that change how splitplane
// performs, so daemons can report them at start and benchmarks with their
// figures.
package host

import (
	"fmt"
	"os"
	"strings"
)

// THPEnabled is the kernel's transparent huge page setting.
const THPEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// TransparentHugePages returns the selected mode of the transparent huge
// page setting in file (THPEnabled outside tests): "always", "madvise" or
// "never", the word the kernel shows in brackets.
//
// It matters to the CE: the Go runtime does not ask for huge pages, so
// under "madvise" its heap is faulted in 4 KiB at a time, and a full table
// is over a gigabyte of heap (docs/operations.md, "Transparent huge pages").
func TransparentHugePages(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for _, w := range strings.Fields(string(b)) {
		if len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']' {
			return w[1 : len(w)-1], nil
		}
	}
	return "", fmt.Errorf("%s: no mode in brackets in %q", file, strings.TrimSpace(string(b)))
}
