package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/test/bench"
)

// TestSmoke is the benchmark's regression guard in `make test`: 100 pods through every round
// with the operator as a real process. It checks correctness, not timing: every transition
// shows in the store exactly once, nothing is lost, nothing is written twice.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the operator")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run with `make test`, which builds the assets")
	}
	dir := t.TempDir()
	operator := buildOperator(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		Pods: 100, Registries: 10, Namespaces: 2, Rate: 100, Writers: 16,
		RoundTimeout: 2 * time.Minute, Operator: operator, WorkDir: filepath.Join(dir, "run"),
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("run: %v (logs in %s)", err, dir)
	}
	reg, ok := res.System(bench.SystemRegistrar)
	if !ok {
		t.Fatal("no registrar result")
	}
	want := 100 * len(bench.Rounds)
	if res.WriteErrors != 0 {
		t.Fatalf("%d API writes failed", res.WriteErrors)
	}
	if reg.Transitions != want || reg.Observed != want || reg.Lost != 0 {
		t.Errorf("transitions: written %d, observed %d, lost %d; want %d, %d, 0", reg.Transitions, reg.Observed, reg.Lost, want, want)
	}
	if reg.Writes != want || reg.Unexpected != 0 {
		t.Errorf("store writes: %d (unexpected %d) for %d transitions; want exactly one per transition", reg.Writes, reg.Unexpected, want)
	}
}

// buildOperator builds ./cmd into dir, with the race detector when this test has it (the
// race-instrumented packages are then already in the build cache).
func buildOperator(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "registrar")
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/registrar-dev/registrar/cmd")...)
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
