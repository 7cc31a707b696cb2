package eligibility

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestDeregistrationLag(t *testing.T) {
	rec := time.Unix(1000, 0) // as the API records it: whole seconds
	notReady := func(at time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr(metav1.NewTime(rec.Add(30 * time.Second))),
		DeletionGracePeriodSeconds: ptr[int64](30)}}
	readyLongAgo := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(rec.Add(-time.Hour))}}}}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		v    Verdict
		now  time.Time
		want time.Duration
		ok   bool
	}{
		{name: "deleted, 940ms after the recorded second: within the truncation", pod: deleted,
			v: Verdict{v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating}, now: rec.Add(940 * time.Millisecond), want: 0, ok: true},
		{name: "deleted, 2.5 s after", pod: deleted, v: Verdict{v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating},
			now: rec.Add(2500 * time.Millisecond), want: 1500 * time.Millisecond, ok: true},
		{name: "containers not ready", pod: notReady(rec), v: Verdict{v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady},
			now: rec.Add(1200 * time.Millisecond), want: 200 * time.Millisecond, ok: true},
		{name: "node Lease lapsed: no recorded trigger", pod: readyLongAgo,
			v: Verdict{v1beta1.EndpointUnready, v1beta1.ReasonNodeLeaseExpired}, now: rec},
		{name: "selector overlap: not measured", pod: readyLongAgo, v: Verdict{v1beta1.EndpointPending, "SelectorOverlap"}, now: rec},
		{name: "named port missing: not measured", pod: readyLongAgo, v: Verdict{v1beta1.EndpointPending, v1beta1.ReasonNamedPortMissing}, now: rec},
		{name: "not-ready verdict but condition True (stale)", pod: readyLongAgo,
			v: Verdict{v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady}, now: rec},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DeregistrationLag(tt.pod, tt.v, tt.now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("DeregistrationLag = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
