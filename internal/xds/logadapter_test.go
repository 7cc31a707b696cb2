package xds

import (
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// formatCounter counts how often it is formatted: go-control-plane's LinearCache logs the
// subscribed names and known versions of every watch it opens (its Infof and Debugf), while
// it holds the cache's lock.
type formatCounter struct{ n *atomic.Int64 }

func (f formatCounter) String() string { f.n.Add(1); return "names" }

// TestLogAdapterFormatsOnlyEnabledLevels: go-control-plane's debug and info lines are
// formatted only when the logger would write them (V(2) and V(1)); at the default level
// (info, V(0), as cmd/ runs) nothing is formatted. Warnings and errors always are.
func TestLogAdapterFormatsOnlyEnabledLevels(t *testing.T) {
	for _, tc := range []struct {
		verbosity              int
		debug, info, warn, err int64 // times the argument is formatted
	}{
		{verbosity: 0, debug: 0, info: 0, warn: 1, err: 1},
		{verbosity: 1, debug: 0, info: 1, warn: 1, err: 1},
		{verbosity: 2, debug: 1, info: 1, warn: 1, err: 1},
	} {
		var written atomic.Int64
		l := logAdapter(funcr.New(func(_, _ string) { written.Add(1) }, funcr.Options{Verbosity: tc.verbosity}))
		for _, c := range []struct {
			name string
			log  func(string, ...any)
			want int64
		}{
			{"Debugf", l.Debugf, tc.debug},
			{"Infof", l.Infof, tc.info},
			{"Warnf", l.Warnf, tc.warn},
			{"Errorf", l.Errorf, tc.err},
		} {
			var n atomic.Int64
			before := written.Load()
			c.log("[linear cache] open watch for resources %v", formatCounter{&n})
			if got := n.Load(); got != c.want {
				t.Errorf("verbosity %d: %s formatted its arguments %d times, want %d", tc.verbosity, c.name, got, c.want)
			}
			if got := written.Load() - before; got != c.want {
				t.Errorf("verbosity %d: %s wrote %d lines, want %d", tc.verbosity, c.name, got, c.want)
			}
		}
	}
}
