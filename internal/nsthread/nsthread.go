// Package nsthread runs code inside a named network namespace.
package nsthread

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs f on an OS thread in the network namespace ns (a name under
// /run/netns). The thread stays locked and ends with its goroutine, so
// nothing else ever runs in the namespace, or with the CPU affinity f may
// give the thread; sockets f opens belong to the namespace.
func Run(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			errc <- fmt.Errorf("namespace %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
