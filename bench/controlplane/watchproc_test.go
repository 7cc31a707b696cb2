package controlplane

import (
	"bufio"
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// The watcher's lines, read back by the harness, give the tracker what a direct call would.
func TestWatcherLinesRoundTrip(t *testing.T) {
	t0 := time.Now()
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := &lineWriter{out: bw}
	reg := sink{w, SystemRegistrar}
	reg.Write()
	reg.Observe("ns/a", Register, t0.Add(5*time.Millisecond))
	reg.Write()
	reg.Observe("ns/b", Deregister, t0.Add(7*time.Millisecond))
	api := sink{w, SystemAPIWatch}
	api.ObserveIfPending("ns/b", Deregister, t0.Add(3*time.Millisecond))
	api.ObserveIfPending("ns/b", Deregister, t0.Add(4*time.Millisecond)) // the pod's second delete event
	api.Unexpected()
	sink{w, "not-timed"}.Observe("ns/a", Register, t0)
	w.control("READY")
	w.control(`STATS {"schedLag":{"n":3,"p50Ms":1,"p90Ms":2,"p99Ms":3,"maxMs":4},"cpuSeconds":1.5}`)

	trackers := map[string]*Tracker{SystemRegistrar: NewTracker(), SystemAPIWatch: NewTracker()}
	trackers[SystemRegistrar].Expect("ns/a", CauseReady, t0)
	trackers[SystemRegistrar].Expect("ns/b", CauseUnready, t0)
	trackers[SystemAPIWatch].Expect("ns/b", CauseDelete, t0)
	h := &watcherHandle{trackers: trackers, ready: make(chan struct{})}
	if err := h.read(strings.NewReader(buf.String())); err != nil {
		t.Fatalf("read: %v\n%s", err, buf.String())
	}
	select {
	case <-h.ready:
	default:
		t.Error("READY not seen")
	}
	if h.stats.CPUSeconds != 1.5 || h.stats.SchedLag.P99 != 3 {
		t.Errorf("stats = %+v", h.stats)
	}
	for _, tr := range trackers {
		tr.EndRound()
	}
	r := trackers[SystemRegistrar].Result(SystemRegistrar)
	if r.Observed != 2 || r.Writes != 2 || r.Lost != 0 || r.Unexpected != 0 || r.Registration.P50 != 5 || r.Deregistration.P50 != 7 {
		t.Errorf("registrar: %+v", r)
	}
	a := trackers[SystemAPIWatch].Result(SystemAPIWatch)
	if a.Observed != 1 || a.Unexpected != 1 || a.Deregistration.P50 != 3 {
		t.Errorf("apiwatch: %+v", a)
	}
	if err := applyLine("registrar 12 X ns/a", trackers); err == nil {
		t.Error("an unknown op was accepted")
	}
	if err := applyLine("registrar x R ns/a", trackers); err == nil {
		t.Error("a malformed time was accepted")
	}
}

func TestWatcherSpecArgsParse(t *testing.T) {
	spec := watcherSpec{Kubeconfig: "/k", StoreEndpoint: "http://e", StoreRevision: 42, Pods: true, Slices: true,
		Prefixes: map[string]string{SystemRegistrar: StorePrefix, SystemTTLCrash: TTLCrashPrefix}}
	args := spec.args()
	if args[0] != WatcherArg {
		t.Fatalf("args %v", args)
	}
	got := prefixFlag{}
	for _, a := range args[1:] {
		if v, ok := strings.CutPrefix(a, "-prefix="); ok {
			if err := got.Set(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 2 || got[SystemTTLCrash] != TTLCrashPrefix {
		t.Errorf("prefixes %v", got)
	}
}

func TestSpreadAndNoise(t *testing.T) {
	s := spreadOf([]float64{30, 10, math.NaN(), 20})
	if s.Median != 20 || s.Min != 10 || s.Max != 30 || s.N != 3 {
		t.Errorf("spread %+v", s)
	}
	if got := spreadOf([]float64{1, 4}).Median; got != 2.5 {
		t.Errorf("even median %v", got)
	}
	if got := s.cell("%.0f"); got != "20 (10–30)" {
		t.Errorf("cell %q", got)
	}
	if !s.Overlaps(spreadOf([]float64{28, 40})) || s.Overlaps(spreadOf([]float64{31, 40})) {
		t.Error("overlap")
	}
	if spreadOf(nil).cell("%.0f") != "-" {
		t.Error("empty cell")
	}
}

func TestPublishTablesAndNoise(t *testing.T) {
	run := func(reg, eps, floor float64) *Results {
		sys := func(name string, p99 float64) SystemResult {
			return SystemResult{Name: name, Transitions: 10, Observed: 10,
				Deregistration: LagStats{P50: p99 / 2, P99: p99}, Registration: LagStats{P50: p99 / 2, P99: p99}}
		}
		return &Results{Pods: 10, Registries: 1, OfferedRate: 100, WriteRate: 100,
			Workers:  map[string]int{SystemRegistrar: 8, SystemEndpointSlice: 8},
			Machine:  benchfmt.Machine{Cores: 2, LoadBefore: [3]float64{1, 1, 1}, LoadAfter: [3]float64{2, 2, 2}},
			Systems:  []SystemResult{sys(SystemRegistrar, reg), sys(SystemEndpointSlice, eps), sys(SystemAPIWatch, floor), sys(SystemAPIWatchShared, 9999)},
			Warnings: []string{"w"},
		}
	}
	p := Publish("bench", "bench-x", "make bench", "abc", []*Results{run(100, 300, 90), run(120, 310, 130), run(110, 290, 95)})
	if len(p.Tables) != 3 || p.Tables[0].ID != "bench-x" || p.Tables[1].ID != "bench-x-ratios" || p.Tables[2].ID != "bench-x-harness" {
		t.Fatalf("tables %+v", p.Tables)
	}
	if got := strings.Join(p.Tables[0].Columns, ","); got != ",registrar,endpointslice,apiwatch" {
		t.Errorf("columns %q (the shared-connection diagnostic is not a column)", got)
	}
	if got := p.Tables[0].Rows[1]; got[1] != "110 (100–120)" || got[2] != "300 (290–310)" {
		t.Errorf("dereg p99 row %v", got)
	}
	ratios := p.Tables[1].Rows
	if len(ratios[1]) != 9 || ratios[1][4] != "2.7×" || !strings.Contains(ratios[2][4], "within noise") {
		t.Errorf("ratio rows %v", ratios)
	}
	if len(p.Noise) != 4 || !strings.HasPrefix(p.Noise[0], "apiwatch deregistration p50") {
		t.Errorf("noise %v", p.Noise)
	}
	if got := p.Tables[2].Rows[0]; len(got) != len(p.Tables[2].Columns) || got[3] != "9999 / 9999" || got[2] != "-" {
		t.Errorf("harness row %v", got)
	}
	if p.Machine.LoadBefore[0] != 1 || p.Machine.LoadAfter[0] != 2 {
		t.Errorf("machine %+v", p.Machine)
	}
}

func TestWarnings(t *testing.T) {
	c := &Config{Rate: 100, MinRateFraction: 0.9}
	quiet := &Results{WriteRate: 95, Machine: benchfmt.Machine{Cores: 2},
		Harness: HarnessStats{MeasuredSeconds: 60, OtherCPUSeconds: 20, SchedLag: LagStats{P99: 20}, WatcherSchedLag: LagStats{P99: 20}}}
	if w := warnings(c, quiet); len(w) != 0 {
		t.Errorf("a run at 95/s of 100 with little other load: %v", w)
	}
	loaded := &Results{WriteRate: 80, Machine: benchfmt.Machine{Cores: 2},
		Harness: HarnessStats{MeasuredSeconds: 60, OtherCPUSeconds: 60, SchedLag: LagStats{P99: 20}, WatcherSchedLag: LagStats{P99: 80}}}
	w := strings.Join(warnings(c, loaded), "\n")
	for _, want := range []string{"offered rate not achieved: 80/s", "watcher process was starved", "other processes used 1.0 of 2 cores"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "the harness was starved") {
		t.Errorf("the harness was not starved:\n%s", w)
	}
}
