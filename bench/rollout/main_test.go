package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"

	"github.com/registrar-dev/registrar/test/support/proc"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(watchersEnv); spec != "" { // the watchers' process of TestSmoke
		if err := serveWatchers(spec); err != nil {
			fmt.Fprintln(os.Stderr, "rollout watchers:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestDiffSorted(t *testing.T) {
	var added, removed []string
	diffSorted([]string{"a", "c", "d", "f"}, []string{"b", "c", "e", "f", "g"},
		func(s string) { added = append(added, s) }, func(s string) { removed = append(removed, s) })
	if !slices.Equal(added, []string{"b", "e", "g"}) || !slices.Equal(removed, []string{"a", "d"}) {
		t.Fatalf("added %v removed %v", added, removed)
	}
	added, removed = nil, nil
	diffSorted(nil, []string{"x"}, func(s string) { added = append(added, s) }, func(s string) { removed = append(removed, s) })
	diffSorted([]string{"y"}, nil, func(s string) { added = append(added, s) }, func(s string) { removed = append(removed, s) })
	if !slices.Equal(added, []string{"x"}) || !slices.Equal(removed, []string{"y"}) {
		t.Fatalf("added %v removed %v", added, removed)
	}
}

func TestPlan(t *testing.T) {
	if got := surgeOf(2000, 25); got != 500 {
		t.Fatalf("surge of 2000 at 25%% = %d", got)
	}
	if got := surgeOf(10, 25); got != 3 { // rounded up, as the Deployment controller does
		t.Fatalf("surge of 10 at 25%% = %d", got)
	}
	p := newPlan(10, 3)
	if len(p.old) != 10 || len(p.new) != 10 || !slices.Equal(p.steps, [][2]int{{0, 3}, {3, 6}, {6, 9}, {9, 10}}) {
		t.Fatalf("plan %+v", p)
	}
	if p.old[0] == p.new[0] || podIP(1, 0) == podIP(2, 0) || podIP(1, 255) == podIP(1, 256) {
		t.Fatal("pods of the two revisions must differ in name and address")
	}
}

// TestTracker: a transition is done in a group when its last observer has it; the tails take
// the latest of the groups asked for; an observation of a pod with no transition (the initial
// sync) counts for nothing; a group without observers does not hold a transition back.
func TestTracker(t *testing.T) {
	tr := newTracker([groups]int{groupFloor: 1, groupSotw: 2, groupDelta: 1, groupWatchers: 0})
	t0 := time.Now()
	a := tr.issue("a", ready)
	tr.wrote(a, t0)
	tr.observe(groupSotw, "z", ready, t0) // no such transition
	tr.observe(groupFloor, "a", ready, t0.Add(10*time.Millisecond))
	tr.observe(groupSotw, "a", ready, t0.Add(20*time.Millisecond))
	if tr.complete(groupSotw, ready, []string{"a"}) {
		t.Fatal("one of two SotW clients has it: not complete")
	}
	tr.observe(groupSotw, "a", ready, t0.Add(40*time.Millisecond))
	tr.observe(groupSotw, "a", ready, t0.Add(90*time.Millisecond)) // beyond the group's size: ignored
	tr.observe(groupDelta, "a", ready, t0.Add(30*time.Millisecond))
	if !tr.complete(groupSotw, ready, []string{"a"}) || !tr.complete(groupWatchers, ready, []string{"a"}) {
		t.Fatal("every SotW client has it; no watcher to wait for")
	}
	b := tr.issue("b", terminating)
	tr.wrote(b, t0)
	if got := tr.pending(); got != 1 {
		t.Fatalf("pending %d, want 1", got)
	}
	x := tr.tails(ready, groupSotw, groupDelta)
	if x.N != 1 || x.Max != 40 || x.Missing != 0 {
		t.Fatalf("ready → every xDS client %+v, want 40 ms", x)
	}
	if f := tr.tails(ready, groupFloor); f.Max != 10 {
		t.Fatalf("floor %+v", f)
	}
	if m := tr.tails(terminating, groupSotw); m.Missing != 1 || m.N != 0 {
		t.Fatalf("terminating %+v: want one missing", m)
	}
}

func TestFigures(t *testing.T) {
	r := &Run{Config: Config{Pods: 4, XDSClients: 3, DeltaClients: 1, Watchers: 2}, Transitions: 8, Ready: 4, Terminating: 4,
		SotwBytes:       ModeBytes{Clients: 2, Bytes: 16 * 1024, EDSBytes: 12 * 1024, EDSResponses: 6},
		DeltaBytes:      ModeBytes{Clients: 1, Bytes: 8 * 1024, EDSBytes: 8 * 1024, EDSResponses: 2},
		AssignmentBytes: 1024, WatchBytes: 1600, OperatorCPUSeconds: 0.4}
	check := func(name string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	check("SotW KiB/transition", r.SotwBytes.KiBPerTransition(r), 2)
	check("SotW KiB/client/transition", r.SotwBytes.KiBPerClientTransition(r), 1)
	check("delta KiB/transition", r.DeltaBytes.KiBPerTransition(r), 1)
	check("SotW pushes/client", r.SotwBytes.PushesPerClient(), 3)
	check("delta KiB/push", r.DeltaBytes.KiBPerPush(), 4)
	check("uncoalesced MiB", r.UncoalescedMiB(), 8*1024*3.0/(1<<20))
	check("watch bytes/watcher/transition", r.WatchBytesPerWatcherTransition(), 100)
	check("CPU ms/transition", r.CPUMsPerTransition(), 50)
	if m := r.missing(); len(m) == 0 {
		t.Fatal("a run without tails reports nothing missing")
	}
	tb := table([]*Run{r, r, r})
	if tb.ID != "bench-rollout" || len(tb.Rows) == 0 {
		t.Fatalf("table %+v", tb)
	}
	if _, err := json.Marshal(envelope([]*Run{r}, "make bench-rollout")); err != nil {
		t.Fatal(err)
	}
}

// A run in which some watcher never caught up has no transition that reached every watcher:
// its tail is unmeasured, not 0 ms, and the table says how many transitions missed.
func TestTailCellSkipsUnmeasuredRuns(t *testing.T) {
	measured := func(p50 float64) *Run {
		return &Run{Watchers: KindTails{Ready: Tails{LagStats: controlplane.LagStats{N: 10, P50: p50, P99: 2 * p50, Max: 3 * p50}}}}
	}
	unmeasured := &Run{Watchers: KindTails{Ready: Tails{Missing: 10}}}
	get := func(r *Run) Tails { return r.Watchers.Ready }
	got := tailCell([]*Run{measured(100), unmeasured, measured(300)}, get)
	if want := "200 (100–300) / 400 (200–600) / 600 (300–900), 2 of 3 runs"; !strings.HasPrefix(got, want) {
		t.Errorf("tailCell = %q, want it to start with %q", got, want)
	}
	if got := tailCell([]*Run{unmeasured}, get); !strings.HasPrefix(got, "–") {
		t.Errorf("tailCell of unmeasured runs only = %q, want –", got)
	}
}

// TestSmoke is the benchmark's guard in make test: a 100-pod service rolls with 5 xDS clients
// (2 delta) and 10 discovery watchers on a real control plane; every figure is there, every
// transition reached every observer, and every client and watcher ends with exactly the new
// pods.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the operator")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run with `make test`, which builds the assets")
	}
	dir := t.TempDir()
	operator, err := proc.BuildRegistrar(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := runOne(ctx, Config{Pods: 100, XDSClients: 5, DeltaClients: 2, Watchers: 10, Rate: 200, Grace: 500 * time.Millisecond,
		Operator: operator, WorkDir: filepath.Join(dir, "run"), StepTimeout: time.Minute, Drain: time.Minute, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.line())
	t.Logf("took %s", time.Since(start).Round(time.Second))
	if m := r.missing(); len(m) > 0 {
		t.Errorf("figures missing: %v", m)
	}
	if r.Transitions != 200 || r.WriteErrors != 0 || r.StreamErrors != 0 || r.Pending != 0 {
		t.Errorf("transitions %d (want 200), write errors %d, stream errors %d (%s), pending %d",
			r.Transitions, r.WriteErrors, r.StreamErrors, r.StreamError, r.Pending)
	}
	if r.XDSConverged != 5 || r.WatchersConverged != 10 {
		t.Errorf("converged: %d of 5 xDS clients, %d of 10 watchers", r.XDSConverged, r.WatchersConverged)
	}
	if r.SotwBytes.EDSResponses == 0 || r.DeltaBytes.EDSResponses == 0 {
		t.Errorf("pushes: SotW %d, delta %d", r.SotwBytes.EDSResponses, r.DeltaBytes.EDSResponses)
	}
	tb := table([]*Run{r})
	if len(tb.Rows) < 20 {
		t.Errorf("table has %d rows", len(tb.Rows))
	}
}
