package report

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
)

// TestRecordChangesEndpointEventBudget checks that the per-endpoint Events follow the
// operator-wide token bucket (--endpoint-events-qps/-burst) on the reconciler's clock, that
// the skipped ones are counted, and that nothing else is affected.
func TestRecordChangesEndpointEventBudget(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	reg := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reg"}}
	changes := store.Changes{ // one Registered and two Deregistered Events
		Create: []store.Endpoint{{Pod: "p", Address: "10.0.0.1"}},
		Delete: []store.Record{{Endpoint: store.Endpoint{Pod: "gone", Address: "10.0.0.2"}},
			{Endpoint: store.Endpoint{Pod: "gone-too", Address: "10.0.0.3"}}},
	}
	start := time.Unix(100, 0)
	for _, tt := range []struct {
		name   string
		budget *rate.Limiter
		// after is how long after start each batch of changes is recorded.
		after       []time.Duration
		want, skips int
	}{
		{name: "no budget: every Event", budget: nil, after: []time.Duration{0, 0}, want: 6},
		{name: "disabled", budget: rate.NewLimiter(0, 0), after: []time.Duration{0, time.Hour}, want: 0, skips: 6},
		{name: "burst, then skipped", budget: rate.NewLimiter(1, 4), after: []time.Duration{0, 0}, want: 4, skips: 2},
		{name: "refilled at human rates", budget: rate.NewLimiter(1, 3), after: []time.Duration{0, 3 * time.Second, 6 * time.Second}, want: 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			if tt.budget != nil {
				tt.budget.SetBurstAt(start, tt.budget.Burst()) // a full bucket at the fake start
			}
			rec := events.NewFakeRecorder(20)
			r := New(rec, clk, tt.budget)
			pods := onePod{pod: pod, verdict: eligibility.Verdict{State: v1beta1.EndpointRegistered}}
			skipped := func() float64 {
				return testutil.ToFloat64(metrics.EndpointEventsSkipped.WithLabelValues(v1beta1.EventRegistered)) +
					testutil.ToFloat64(metrics.EndpointEventsSkipped.WithLabelValues(v1beta1.EventDeregistered))
			}
			before := skipped()
			for _, d := range tt.after {
				clk.SetTime(start.Add(d))
				r.Changes(reg, "svc", changes, pods)
			}
			if got := len(rec.Events); got != tt.want {
				t.Errorf("%d Events, want %d", got, tt.want)
			}
			if got := skipped() - before; got != float64(tt.skips) {
				t.Errorf("%v skipped Events counted, want %d", got, tt.skips)
			}
		})
	}
}

// onePod is a reconcile that selected one pod.
type onePod struct {
	pod     *corev1.Pod
	verdict eligibility.Verdict
}

func (o onePod) Selected(name string) (*corev1.Pod, eligibility.Verdict, bool) {
	if name != o.pod.Name {
		return nil, eligibility.Verdict{}, false
	}
	return o.pod, o.verdict, true
}

func (o onePod) All(yield func(*corev1.Pod, eligibility.Verdict) bool) { yield(o.pod, o.verdict) }
