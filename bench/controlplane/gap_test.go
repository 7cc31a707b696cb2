package controlplane

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// A change found by a relist resolves its pending transition as unmeasured: shown, no lag.
func TestTrackerGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := NewTracker()
	tr.Expect("ns/a", CauseReady, t0)
	tr.Expect("ns/b", CauseUnready, t0)
	tr.Expect("ns/c", CauseDelete, t0)
	tr.Gap("ns/a", Register)
	tr.Gap("ns/b", Register) // the wrong kind: no transition called for it
	tr.Observe("ns/c", Deregister, t0.Add(5*time.Millisecond))
	tr.Gap("ns/z", Deregister) // no transition at all
	tr.Resumed()
	tr.Relisted()
	tr.Relisted()
	tr.EndRound()
	got := tr.Result("x")
	if got.Transitions != 3 || got.Observed != 1 || got.Unmeasured != 1 || got.Lost != 1 || got.Unexpected != 2 {
		t.Errorf("got %+v; want 3 written, 1 observed, 1 unmeasured, 1 lost (b), 2 unexpected", got)
	}
	if got.WatchResumed != 1 || got.WatchRelisted != 2 {
		t.Errorf("resumed %d, relisted %d; want 1, 2", got.WatchResumed, got.WatchRelisted)
	}
	if got.Registration.N != 0 || got.Deregistration.N != 1 || got.Deregistration.P50 != 5 {
		t.Errorf("lags: reg %+v dereg %+v; the unmeasured one has none", got.Registration, got.Deregistration)
	}
}

// The watcher process's gap, resume and relist lines reach the tracker.
func TestWatcherGapLines(t *testing.T) {
	tr := NewTracker()
	t0 := time.Now()
	tr.Expect("ns/a", CauseReady, t0)
	tr.Expect("ns/b", CauseDelete, t0)
	for _, line := range []string{"registrar 1 g ns/a", "registrar 2 G ns/b", "registrar 3 C -", "registrar 4 L -", "registrar 5 L -"} {
		if err := applyLine(line, map[string]*Tracker{SystemRegistrar: tr}); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	tr.EndRound()
	if got := tr.Result("x"); got.Unmeasured != 2 || got.Lost != 0 || got.WatchResumed != 1 || got.WatchRelisted != 2 {
		t.Errorf("got %+v", got)
	}
}

// gapRecorder is an observer that records what it is told.
type gapRecorder struct{ events []string }

func (g *gapRecorder) Observe(pod string, k Kind, _ time.Time) { g.add("observe", pod, k) }
func (g *gapRecorder) ObserveIfPending(pod string, k Kind, _ time.Time) {
	g.add("observe-if-pending", pod, k)
}
func (g *gapRecorder) Unexpected()            { g.events = append(g.events, "unexpected") }
func (g *gapRecorder) Write()                 {}
func (g *gapRecorder) Gap(pod string, k Kind) { g.add("gap", pod, k) }
func (g *gapRecorder) Resumed()               {}
func (g *gapRecorder) Relisted()              {}
func (g *gapRecorder) add(what, pod string, k Kind) {
	g.events = append(g.events, what+" "+k.String()+" "+pod)
}

// A relist of the EndpointSlices reports the net change of each pod over the gap: a slice gone,
// a pod gone unready, a pod moved from one slice to another (no change), a new slice.
func TestSliceViewResync(t *testing.T) {
	view := newSliceView()
	rec := &gapRecorder{}
	t0 := time.Unix(1000, 0)
	for _, s := range []struct {
		name  string
		ready map[string]bool
	}{
		{"s1", map[string]bool{"a": true, "b": true}},
		{"s2", map[string]bool{"c": true}},
		{"gone", map[string]bool{"d": true}},
	} {
		sliceEvent(view, watch.Event{Type: watch.Added, Object: slice(s.name, s.ready)}, rec, t0)
	}
	rec.events = nil
	fresh := newSliceView()
	fresh.apply("ns/s1", readyPods(slice("s1", map[string]bool{"a": true, "b": false})))
	fresh.apply("ns/s2", readyPods(slice("s2", map[string]bool{})))
	fresh.apply("ns/s3", readyPods(slice("s3", map[string]bool{"c": true, "e": true})))
	view.resync(fresh, rec)
	want := "gap deregister ns/b, gap deregister ns/d, gap register ns/e"
	if got := strings.Join(rec.events, ", "); got != want {
		t.Errorf("resync reported %q, want %q (c moved from s2 to s3: no change)", got, want)
	}
	rec.events = nil
	view.resync(fresh, rec)
	if len(rec.events) != 0 {
		t.Errorf("a second resync with nothing changed reported %v", rec.events)
	}
}

// A run whose store watch relisted checks one write per transition over the transitions seen.
func TestTargetsWithUnmeasured(t *testing.T) {
	res := &Results{Pods: 1000, Systems: []SystemResult{{Name: SystemRegistrar, Transitions: 4000, Observed: 3788, Unmeasured: 212, Writes: 3788}}}
	for _, tg := range targets(res) {
		if strings.HasPrefix(tg.Name, "exactly one store write") {
			if !tg.Met || tg.Value != "3788 writes / 3788 transitions seen of 4000 (unmeasured 212, lost 0, unexpected 0)" {
				t.Errorf("%s: met %v, %q", tg.Name, tg.Met, tg.Value)
			}
			return
		}
	}
	t.Error("no one-write target")
}
