// Package logtest records log/slog records for tests that assert what a
// daemon logged.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record as one line: its level,
// its message and its attributes ("INFO msg key=value ..."). It is safe for
// concurrent use. Attributes added with WithAttrs or groups are not kept.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *Recorder) WithGroup(string) slog.Handler            { return r }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

// Has reports whether some record's line contains every one of substrs.
func (r *Recorder) Has(substrs ...string) bool { return r.Count(substrs...) > 0 }

// Count returns how many records' lines contain every one of substrs (all
// the records, with none).
func (r *Recorder) Count(substrs ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		all := true
		for _, s := range substrs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// String returns the records' lines, one a line, for a test's failure
// message.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}
