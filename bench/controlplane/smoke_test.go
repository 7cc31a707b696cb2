package controlplane_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

// TestSmoke is the benchmark's regression guard in `make test`: 100 pods through every round
// with the operator as a real process and the systems timed from a separate watcher process
// (the bench command). It checks correctness, not timing: every transition shows in the store
// exactly once, nothing is lost, nothing is written twice; and the TTL peer's two kinds of
// client behave as modelled: a graceful one's key goes well before its lease would expire, a
// crashed one's only when it expires.
func TestSmoke(t *testing.T) {
	dir, operator, watcher := benchBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := controlplane.Run(ctx, controlplane.Config{
		Pods: 100, Registries: 10, Namespaces: 2, Rate: 100, Writers: 16,
		RoundTimeout: 2 * time.Minute, Operator: operator, WorkDir: filepath.Join(dir, "run"),
		WatcherExe: watcher, TTLSample: 5, TTL: 6 * time.Second,
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("run: %v (logs in %s)", err, dir)
	}
	reg, ok := res.System(controlplane.SystemRegistrar)
	if !ok {
		t.Fatal("no registrar result")
	}
	want := 100 * len(controlplane.Rounds)
	if res.WriteErrors != 0 {
		t.Fatalf("%d API writes failed", res.WriteErrors)
	}
	if reg.Transitions != want || reg.Observed != want || reg.Lost != 0 {
		t.Errorf("transitions: written %d, observed %d, lost %d; want %d, %d, 0", reg.Transitions, reg.Observed, reg.Lost, want, want)
	}
	if reg.Writes != want || reg.Unexpected != 0 {
		t.Errorf("store writes: %d (unexpected %d) for %d transitions; want exactly one per transition", reg.Writes, reg.Unexpected, want)
	}
	for _, name := range []string{controlplane.SystemAPIWatch, controlplane.SystemAPIWatchShared, controlplane.SystemTTLGraceful, controlplane.SystemTTLCrash} {
		s, ok := res.System(name)
		if !ok || s.Lost != 0 || s.Observed != s.Transitions || s.Transitions == 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	graceful, _ := res.System(controlplane.SystemTTLGraceful)
	crash, _ := res.System(controlplane.SystemTTLCrash)
	// A 6 s lease kept alive every 2 s expires 4 s after the last keepalive at the earliest.
	if graceful.Deregistration.Max >= 4000 {
		t.Errorf("graceful TTL clients deregistered after up to %.0f ms: they should revoke, not wait for the 6 s lease", graceful.Deregistration.Max)
	}
	if crash.Deregistration.P50 < 3000 {
		t.Errorf("crashed TTL clients deregistered after %.0f ms (p50): only the 6 s lease's expiry should remove them", crash.Deregistration.P50)
	}
	if !res.Harness.WatcherProcess || res.Workers[controlplane.SystemRegistrar] != 8 {
		t.Errorf("harness %+v, workers %v", res.Harness, res.Workers)
	}
	checkStoreCommit(t, res)
}

// checkStoreCommit reads the run's JSON as a publication has it: the store etcd's commit over
// the measured phase is there, and the run wrote, so its etcd fsynced its WAL and committed its
// backend: every count and p99 is positive; registrar's part (a difference) is there.
func checkStoreCommit(t *testing.T, res *controlplane.Results) {
	t.Helper()
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		StoreCommit map[string]float64 `json:"storeCommit"`
	}
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	t.Logf("store commit of the measured phase: %v", run.StoreCommit)
	if run.StoreCommit == nil {
		t.Fatal("the run's JSON has no storeCommit: the store etcd's /metrics were not read")
	}
	for _, k := range []string{"walFsyncs", "backendCommits", "walFsyncP99Ms", "backendCommitP99Ms", "p99Ms"} {
		if v, ok := run.StoreCommit[k]; !ok || !(v > 0) {
			t.Errorf("storeCommit.%s = %v (present %v), want > 0", k, v, ok)
		}
	}
	if _, ok := run.StoreCommit["registrarPartMs"]; !ok {
		t.Error("storeCommit.registrarPartMs is missing")
	}
}

// buildOperator builds pkg into dir/name, with the race detector when this test has it (the
// race-instrumented packages are then already in the build cache).
// benchBinaries skips under -short, requires the envtest assets, and builds the operator and
// the bench command (the watcher process) into a temporary directory it returns with them.
func benchBinaries(t *testing.T) (dir, operator, watcher string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane and the operator")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run with `make test`, which builds the assets")
	}
	dir = t.TempDir()
	operator = buildOperator(t, dir, "github.com/registrar-dev/registrar/cmd", "registrar")
	watcher = buildOperator(t, dir, "github.com/registrar-dev/registrar/bench/controlplane/cmd", "bench")
	return dir, operator, watcher
}

func buildOperator(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	// -race needs cgo; without it the operator builds as make build does (CGO_ENABLED=0).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if raceEnabled() {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
