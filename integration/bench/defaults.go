package bench

import (
	"fmt"
	"os"
	"time"

	"github.com/splitplane/splitplane/ce"
)

// orDefault sets *v to d if *v is the zero value (an option left unset).
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// defaultBinary sets *bin, if empty, to this program's path: the
// benchmarks run their daemons from the splitplane binary that runs them.
func defaultBinary(bin *string, bench string) error {
	if *bin != "" {
		return nil
	}
	b, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench %s: the splitplane binary: %w", bench, err)
	}
	*bin = b
	return nil
}

// checkFE returns an error wrapping ErrIncomplete if the CE's one FE
// association is no longer the one made at assoc, or the FE failed rows:
// a transfer's figures count only if it went to one FE, whole.
func checkFE(st ce.Status, assoc time.Time) error {
	switch {
	case len(st.FEs) != 1 || !st.FEs[0].AssociatedAt.Equal(assoc):
		return fmt.Errorf("%w: the FE's association ended or restarted during the transfer", ErrIncomplete)
	case st.FEs[0].Failed != 0:
		return fmt.Errorf("%w: the FE failed %d rows", ErrIncomplete, st.FEs[0].Failed)
	}
	return nil
}
