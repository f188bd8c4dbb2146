package logtest

import (
	"log/slog"
	"testing"
)

func TestRecorder(t *testing.T) {
	r := &Recorder{}
	log := slog.New(r)
	log.Warn("link down", "port", "eth0")
	log.Info("link up", "port", "eth1")
	for _, c := range []struct {
		substrs []string
		want    bool
	}{
		{[]string{"WARN link down", "port=eth0"}, true},
		{[]string{"INFO link up"}, true},
		{[]string{"WARN link up"}, false},
		{[]string{"link down", "port=eth1"}, false},
	} {
		if got := r.Has(c.substrs...); got != c.want {
			t.Errorf("Has(%q) = %v, want %v", c.substrs, got, c.want)
		}
	}
}
