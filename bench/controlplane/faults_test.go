package controlplane_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

// TestWatchFaults runs the benchmark with its timing watches cut (closed, as an API server
// ending a watch or a lost connection does) and made to lose their position (as on 410 Gone,
// the watch window moved on) while pods change, on a real control plane, operator and store.
// A cut watch resumes from where it was and misses nothing; one that lost its position lists
// again and counts what it missed as unmeasured; either way the run completes, loses nothing
// and publishes. (The one 20,000-pod smoke lost its pod watch on an overloaded API server and
// published nothing.)
func TestWatchFaults(t *testing.T) {
	dir, operator, watcher := benchBinaries(t)
	timed := []string{controlplane.SystemRegistrar, controlplane.SystemAPIWatch}
	for _, tc := range []struct {
		name        string
		cut, relist time.Duration
	}{
		{name: "cut", cut: 400 * time.Millisecond},
		{name: "relist", relist: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			// 100 pods at 40/s: each round writes for 2.5 s, so faults land while pods change.
			res, err := controlplane.Run(ctx, controlplane.Config{
				Pods: 100, Registries: 10, Namespaces: 2, Rate: 40, Writers: 16,
				RoundTimeout: time.Minute, Operator: operator, WorkDir: filepath.Join(dir, tc.name),
				WatcherExe: watcher, FaultWatchCut: tc.cut, FaultWatchRelist: tc.relist,
				Logf: t.Logf,
			})
			if err != nil {
				t.Fatalf("run with watch faults failed: %v (logs in %s)", err, dir)
			}
			if res.WriteErrors != 0 {
				t.Fatalf("%d API writes failed", res.WriteErrors)
			}
			want := 100 * len(controlplane.Rounds)
			unmeasured := 0
			for _, name := range timed {
				s, ok := res.System(name)
				if !ok {
					t.Fatalf("no %s result", name)
				}
				t.Logf("%s: %d written, %d observed, %d unmeasured, %d lost, %d unexpected; watch resumed %d, relisted %d",
					name, s.Transitions, s.Observed, s.Unmeasured, s.Lost, s.Unexpected, s.WatchResumed, s.WatchRelisted)
				if s.Transitions != want || s.Lost != 0 || s.Unexpected != 0 || s.Observed+s.Unmeasured != want {
					t.Errorf("%s: written %d, observed %d + unmeasured %d, lost %d, unexpected %d; want %d shown (observed or unmeasured), none lost or unexpected",
						name, s.Transitions, s.Observed, s.Unmeasured, s.Lost, s.Unexpected, want)
				}
				switch {
				case tc.cut > 0 && (s.WatchResumed == 0 || s.Unmeasured != 0 || s.WatchRelisted != 0):
					t.Errorf("%s: cut watches resumed %d times, relisted %d, %d unmeasured; want resumed, never relisted, nothing unmeasured",
						name, s.WatchResumed, s.WatchRelisted, s.Unmeasured)
				case tc.relist > 0 && s.WatchRelisted == 0:
					t.Errorf("%s: the watch never relisted", name)
				}
				unmeasured += s.Unmeasured
			}
			if tc.relist > 0 && unmeasured == 0 {
				t.Errorf("relist faults every %s while pods changed left no transition unmeasured: the gaps were not counted", tc.relist)
			}
		})
	}
}
