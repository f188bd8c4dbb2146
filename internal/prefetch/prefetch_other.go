//go:build !amd64

package prefetch

import "unsafe"

// line does nothing where no assembly for it is written.
func line(unsafe.Pointer) {}
