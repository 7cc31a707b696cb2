package controlplane

import (
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/test/support/metrics"
)

func TestTrackerMatchesTransitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	tests := []struct {
		name   string
		run    func(tr *Tracker)
		want   SystemResult
		regP50 float64
		drgP50 float64
	}{{
		name: "each transition observed once",
		run: func(tr *Tracker) {
			tr.Expect("ns/a", CauseReady, t0)
			tr.Expect("ns/b", CauseUnready, t0)
			tr.Write()
			tr.Observe("ns/a", Register, t0.Add(10*ms))
			tr.Write()
			tr.Observe("ns/b", Deregister, t0.Add(20*ms))
		},
		want:   SystemResult{Transitions: 2, Observed: 2, Writes: 2, WritesPerTransition: 1},
		regP50: 10, drgP50: 20,
	}, {
		name: "a second write for the same transition is unexpected",
		run: func(tr *Tracker) {
			tr.Expect("ns/a", CauseReady, t0)
			tr.Write()
			tr.Observe("ns/a", Register, t0.Add(ms))
			tr.Write()
			tr.Observe("ns/a", Register, t0.Add(2*ms))
		},
		want:   SystemResult{Transitions: 1, Observed: 1, Unexpected: 1, Writes: 2, WritesPerTransition: 2},
		regP50: 1,
	}, {
		name: "the wrong kind does not match",
		run: func(tr *Tracker) {
			tr.Expect("ns/a", CauseDelete, t0)
			tr.Observe("ns/a", Register, t0.Add(ms))
		},
		want: SystemResult{Transitions: 1, Unexpected: 1, Lost: 1},
	}, {
		name: "a transition overtaken by the next one is lost",
		run: func(tr *Tracker) {
			tr.Expect("ns/a", CauseReady, t0)
			tr.Expect("ns/a", CauseUnready, t0.Add(ms))
			tr.Observe("ns/a", Deregister, t0.Add(3*ms))
		},
		want:   SystemResult{Transitions: 2, Observed: 1, Lost: 1},
		drgP50: 2,
	}, {
		name: "a cancelled transition is not counted",
		run: func(tr *Tracker) {
			tr.Expect("ns/a", CauseReady, t0)
			tr.Cancel("ns/a")
		},
		want: SystemResult{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			tt.run(tr)
			tr.EndRound()
			got := tr.Result("x")
			if got.Transitions != tt.want.Transitions || got.Observed != tt.want.Observed || got.Lost != tt.want.Lost ||
				got.Unexpected != tt.want.Unexpected || got.Writes != tt.want.Writes || got.WritesPerTransition != tt.want.WritesPerTransition {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.Registration.P50 != tt.regP50 || got.Deregistration.P50 != tt.drgP50 {
				t.Errorf("p50 reg %v dereg %v, want %v %v", got.Registration.P50, got.Deregistration.P50, tt.regP50, tt.drgP50)
			}
		})
	}
}

func TestTrackerSustainedRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := NewTracker()
	for i := range 10 {
		pod := string(rune('a' + i))
		tr.Expect(pod, CauseReady, t0.Add(time.Duration(i)*100*time.Millisecond))
		tr.Observe(pod, Register, t0.Add(time.Duration(i+1)*100*time.Millisecond))
	}
	tr.EndRound()
	if got := tr.Result("x").Sustained; got != 10 {
		t.Errorf("sustained = %v/s, want 10/s (10 transitions over 1 s)", got)
	}
}

func TestSummarise(t *testing.T) {
	var lags []time.Duration
	for i := 100; i >= 1; i-- {
		lags = append(lags, time.Duration(i)*time.Millisecond)
	}
	got := Summarise(lags)
	want := LagStats{N: 100, P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Errorf("Summarise = %+v, want %+v", got, want)
	}
	if got := Summarise(nil); got != (LagStats{}) {
		t.Errorf("Summarise(nil) = %+v", got)
	}
	if got := Summarise([]time.Duration{1500 * time.Microsecond}); got.P99 != 1.5 || got.Max != 1.5 {
		t.Errorf("one lag: %+v", got)
	}
}

func TestPodOfKey(t *testing.T) {
	for key, want := range map[string]string{
		"/registrar/services/svc-1/bench-0/svc-1-3": "bench-0/svc-1-3",
		"/ttl-registry/services/svc/ns/pod":         "ns/pod",
		"/x":                                        "",
	} {
		got, ok := podOfKey(key)
		if got != want || ok != (want != "") {
			t.Errorf("podOfKey(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}

func slice(name string, ready map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	for _, pod := range slices.Sorted(func(yield func(string) bool) {
		for p := range ready {
			if !yield(p) {
				return
			}
		}
	}) {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready[pod])},
		})
	}
	return s
}

func TestSliceEvents(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := NewTracker()
	view := newSliceView()
	tr.Expect("ns/a", CauseReady, t0)
	tr.Expect("ns/b", CauseReady, t0)
	sliceEvent(view, watch.Event{Type: watch.Modified, Object: slice("s1", map[string]bool{"a": true, "b": false})}, tr, t0.Add(time.Millisecond))
	if tr.Pending() != 1 {
		t.Fatalf("after a ready and a not-ready endpoint: %d pending, want 1 (b)", tr.Pending())
	}
	// b shows ready in a second slice, then a moves there: a stays registered throughout.
	sliceEvent(view, watch.Event{Type: watch.Added, Object: slice("s2", map[string]bool{"b": true, "a": true})}, tr, t0.Add(2*time.Millisecond))
	sliceEvent(view, watch.Event{Type: watch.Modified, Object: slice("s1", map[string]bool{})}, tr, t0.Add(3*time.Millisecond))
	tr.Expect("ns/a", CauseDelete, t0.Add(4*time.Millisecond))
	sliceEvent(view, watch.Event{Type: watch.Deleted, Object: slice("s2", map[string]bool{"b": true, "a": true})}, tr, t0.Add(5*time.Millisecond))
	tr.EndRound()
	got := tr.Result("x")
	// b's removal with the deleted slice matches no transition: unexpected.
	if got.Observed != 3 || got.Unexpected != 1 || got.Lost != 0 || got.Writes != 4 {
		t.Errorf("got %+v", got)
	}
}

func TestParseCPUSeconds(t *testing.T) {
	stat := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 10 0 100 0 0"
	got, err := parseCPUSeconds(stat)
	if err != nil || got != 3 {
		t.Errorf("parseCPUSeconds = %v, %v; want 3 (250+50 ticks)", got, err)
	}
	if _, err := parseCPUSeconds("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}

func TestLayoutSpreadsPods(t *testing.T) {
	c := Config{Pods: 25, Registries: 5, Namespaces: 2, Nodes: 3}
	l := newLayout(&c)
	perService := map[string]int{}
	ips := map[string]bool{}
	for _, p := range l.pods {
		perService[p.Namespace+"/"+p.Service]++
		if ips[p.IP] {
			t.Errorf("IP %s used twice", p.IP)
		}
		ips[p.IP] = true
	}
	if len(perService) != 5 {
		t.Fatalf("services: %v", perService)
	}
	for s, n := range perService {
		if n != 5 {
			t.Errorf("%s has %d pods, want 5", s, n)
		}
	}
}

func TestFlippedPods(t *testing.T) {
	for _, tt := range []struct {
		name           string
		pods, perRound int
		wantN          int
		wantEveryPod   bool
	}{
		{"no cap: every pod", 10, 0, 10, true},
		{"a cap above the pods: every pod", 10, 50, 10, true},
		{"a cap equal to the pods: every pod", 10, 10, 10, true},
		{"capped", 20000, 5000, 5000, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := flippedPods(tt.pods, tt.perRound, 1)
			if len(got) != tt.wantN || !slices.IsSorted(got) {
				t.Fatalf("%d pods flipped (sorted %v), want %d sorted", len(got), slices.IsSorted(got), tt.wantN)
			}
			seen := map[int]bool{}
			for _, k := range got {
				if k < 0 || k >= tt.pods || seen[k] {
					t.Fatalf("index %d out of range or twice", k)
				}
				seen[k] = true
			}
			if tt.wantEveryPod && got[len(got)-1] != tt.pods-1 {
				t.Errorf("not every pod: %v", got)
			}
			if again := flippedPods(tt.pods, tt.perRound, 1); !slices.Equal(again, got) {
				t.Error("the same seed chose other pods")
			}
		})
	}
	if slices.Equal(flippedPods(100, 10, 1), flippedPods(100, 10, 2)) {
		t.Error("two seeds chose the same 10 of 100 pods")
	}
	c := Config{Pods: 100, TransitionsPerRound: 10, TTLSample: 6, Operator: "x", WorkDir: "w"}
	if err := c.Validate(); err == nil {
		t.Error("two TTL samples of 6 among 10 flipped pods were accepted")
	}
}

func TestOperatorStatsFromMetrics(t *testing.T) {
	before := sumMetrics(mustParse(strings.NewReader(`# HELP x
workqueue_queue_duration_seconds_sum{controller="serviceregistry",name="serviceregistry"} 1
workqueue_queue_duration_seconds_count{controller="serviceregistry",name="serviceregistry"} 10
workqueue_work_duration_seconds_sum{controller="serviceregistry",name="serviceregistry"} 0.5
workqueue_work_duration_seconds_count{controller="serviceregistry",name="serviceregistry"} 10
workqueue_work_duration_seconds_count{controller="deployment",name="deployment"} 99
rest_client_requests_total{code="200",host="h",method="PATCH"} 5
rest_client_requests_total{code="201",host="h",method="POST"} 2
rest_client_requests_total{code="200",host="h",method="GET"} 7
registrar_reconciles_total{trigger="pod"} 4
`)))
	after := sumMetrics(mustParse(strings.NewReader(`workqueue_queue_duration_seconds_sum{controller="serviceregistry",name="serviceregistry"} 3
workqueue_queue_duration_seconds_count{controller="serviceregistry",name="serviceregistry"} 20
workqueue_work_duration_seconds_sum{controller="serviceregistry",name="serviceregistry"} 1.5
workqueue_work_duration_seconds_count{controller="serviceregistry",name="serviceregistry"} 20
rest_client_requests_total{code="200",host="h",method="PATCH"} 15
rest_client_requests_total{code="409",host="h",method="PATCH"} 1
rest_client_requests_total{code="201",host="h",method="POST"} 7
rest_client_requests_total{code="200",host="h",method="GET"} 70
registrar_reconciles_total{trigger="pod"} 12
registrar_reconciles_total{trigger="registry"} 3
`)))
	got := operatorStats(before, after)
	want := OperatorStats{Reconciles: 10, QueueWaitMs: 200, ReconcileMs: 100, APIWrites: 16, StatusPatches: 11, Posts: 5,
		ReconcilesByTrigger: map[string]int{"pod": 8, "registry": 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operatorStats = %+v, want %+v", got, want)
	}
}

func mustParse(r io.Reader) metrics.Samples {
	ss, err := metrics.Parse(r)
	if err != nil {
		panic(err)
	}
	return ss
}
