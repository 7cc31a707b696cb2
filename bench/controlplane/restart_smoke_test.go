package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

// TestRestartSmoke runs the restart benchmark end to end at 150 pods (make test runs it
// wherever it runs TestSmoke): registrar restarted and failing over (a short lease, so the
// standby takes over in seconds), and kube-controller-manager restarted when its binary is
// among the envtest assets (make bench-restart builds it; make test does not). Every figure
// is there, and a registrar kill with nothing changed writes no endpoint to the store.
func TestRestartSmoke(t *testing.T) {
	dir, operator, watcher := benchBinaries(t)
	kcm := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	c := controlplane.Config{Pods: 150, Registries: 15, Namespaces: 2, Operator: operator, WorkDir: filepath.Join(dir, "restart"),
		WatcherExe: watcher, RoundTimeout: time.Minute, Logf: t.Logf}
	rc := controlplane.RestartConfig{Dying: 10, DyingOver: 2 * time.Second, Tail: time.Second, SyncTimeout: time.Minute,
		Scenarios:    []string{controlplane.ScenarioRestart, controlplane.ScenarioFailover},
		FailoverArgs: []string{"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"}}
	if _, err := os.Stat(kcm); err == nil {
		c.EndpointSlice, c.ControllerManager = true, kcm
		rc.Scenarios = controlplane.RestartScenarios
	} else {
		t.Logf("no %s: the EndpointSlice controller's restart is not played (make bench-restart builds it)", kcm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	run, err := controlplane.RunRestart(ctx, c, rc)
	if err != nil {
		t.Fatalf("restart run: %v (logs in %s)", err, dir)
	}
	t.Logf("restart run took %s", time.Since(start).Round(time.Millisecond))
	if want := 2 * len(rc.Scenarios); len(run.Events) != want {
		t.Fatalf("%d events, want %d (a quiet kill and a dying one per scenario)", len(run.Events), want)
	}
	for _, ev := range run.Events {
		name := ev.Scenario
		if ev.Dying > 0 {
			name += " while pods died"
		}
		if ev.SyncedSeconds == nil || ev.UpSeconds == nil || *ev.SyncedSeconds < *ev.UpSeconds {
			t.Errorf("%s: up %v, synced %v: want both, synced after up", name, ev.UpSeconds, ev.SyncedSeconds)
		}
		if ev.Scenario == controlplane.ScenarioFailover && ev.LeaderSeconds == nil {
			t.Errorf("%s: the standby never reported leading", name)
		}
		if ev.APIRequests == 0 || ev.PeakRSSMiB <= 0 || ev.PeakRSSBeforeMiB <= 0 || ev.CPUSeconds <= 0 {
			t.Errorf("%s: API requests %d, peak RSS %.0f MiB (before %.0f), CPU %.2f s: want all positive",
				name, ev.APIRequests, ev.PeakRSSMiB, ev.PeakRSSBeforeMiB, ev.CPUSeconds)
		}
		if ev.System == controlplane.SystemRegistrar && ev.StoreEtcd == nil {
			t.Errorf("%s: no store etcd counters", name)
		}
		if ev.Dying > 0 {
			if ev.Dereg.N != ev.Dying || ev.Lost != 0 || ev.Floor.N != ev.Dying || ev.WriteErrors != 0 {
				t.Errorf("%s: %d of %d deaths timed (lost %d, floor %d, write errors %d)", name, ev.Dereg.N, ev.Dying, ev.Lost, ev.Floor.N, ev.WriteErrors)
			}
			if ev.System == controlplane.SystemRegistrar && ev.WritesForDeaths != ev.Dying {
				t.Errorf("%s: %d store writes showed a death, want one per death (%d)", name, ev.WritesForDeaths, ev.Dying)
			}
		}
		if ev.System == controlplane.SystemRegistrar && ev.WritesCaused != 0 {
			t.Errorf("%s: registrar wrote %d store endpoint keys no death called for (writes %d); want none", name, ev.WritesCaused, ev.Writes)
		}
	}
	pub := controlplane.PublishRestart(controlplane.KindRestart, controlplane.KindRestart, "test", "none", []*controlplane.RestartRun{run})
	out := filepath.Join(dir, "restart.json")
	if err := pub.WriteJSON(out); err != nil {
		t.Fatal(err)
	}
	pub.WriteSummary(testWriter{t})
}

// testWriter logs what is written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
