package eligibility

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func withGate(p *corev1.Pod) {
	p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate})
}

func gate(status corev1.ConditionStatus, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: v1beta1.ReadinessGate, Status: status, Reason: reason,
		})
	}
}

func TestClassifyGated(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		warmup  bool
		state   v1beta1.EndpointState
		reason  string
		eligble bool
	}{
		{"ungated pod needs no warm-up", readyPod(), true, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, true},
		{"gated, no gate condition yet: warming up", readyPod(withGate), true, v1beta1.EndpointWarmingUp, v1beta1.ReasonWarmingUp, false},
		{"gated, warming up", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmingUp)), true, v1beta1.EndpointWarmingUp, v1beta1.ReasonWarmingUp, false},
		{"gated, warm-up recorded on the pod", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmedUp)), true, v1beta1.EndpointRegistered, v1beta1.ReasonWarmedUp, true},
		{"gated, gate already True (operator restart): not warmed again", readyPod(withGate, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), true, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, true},
		{"gated, warm-up failed under Block", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmupFailed)), true, v1beta1.EndpointPending, v1beta1.ReasonWarmupFailed, false},
		{"gated, registry without warm-up", readyPod(withGate), false, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, true},
		{"gated, containers not ready: the container rule decides", readyPod(withGate, condition(corev1.ContainersReady, corev1.ConditionFalse)), true, v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady, false},
		{"gated, terminating", readyPod(withGate, deleting, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), true, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.pod, tc.warmup)
			if got.State != tc.state || got.Reason != tc.reason || got.Eligible() != tc.eligble {
				t.Errorf("Classify() = %+v (eligible %v), want %s/%s (eligible %v)", got, got.Eligible(), tc.state, tc.reason, tc.eligble)
			}
		})
	}
}

func TestGateFor(t *testing.T) {
	eligible := Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonWarmedUp}
	warming := Verdict{v1beta1.EndpointWarmingUp, v1beta1.ReasonWarmingUp}
	unready := Verdict{v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady}
	draining := Verdict{v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating}
	refused := Verdict{v1beta1.EndpointPending, v1beta1.ReasonServiceNameOwnedElsewhere}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		v      Verdict
		stored bool
		want   *GateWant
	}{
		{"ungated pod: never touched", readyPod(), eligible, true, nil},
		{"eligible and stored: True", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmedUp)), eligible, true,
			&GateWant{corev1.ConditionTrue, v1beta1.GateRegistered}},
		{"eligible but not in the store yet: unchanged", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmedUp)), eligible, false, nil},
		{"already True: no write", readyPod(withGate, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), eligible, true, nil},
		{"warming without condition: False/WarmingUp", readyPod(withGate), warming, false,
			&GateWant{corev1.ConditionFalse, v1beta1.GateWarmingUp}},
		{"warming, already reported: no write", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmingUp)), warming, false, nil},
		{"containers not ready after registration: False so the next start warms again",
			readyPod(withGate, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), unready, false,
			&GateWant{corev1.ConditionFalse, v1beta1.GateNotReady}},
		{"containers not ready after warm-up: False", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmedUp)), unready, false,
			&GateWant{corev1.ConditionFalse, v1beta1.GateNotReady}},
		{"containers not ready while warming: unchanged", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmingUp)), unready, false, nil},
		{"service name refused, gate unset: False saying so", readyPod(withGate), refused, false,
			&GateWant{corev1.ConditionFalse, v1beta1.GateServiceNameOwnedElsewhere}},
		{"service name refused, gate False: False saying so", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateWarmedUp)), refused, false,
			&GateWant{corev1.ConditionFalse, v1beta1.GateServiceNameOwnedElsewhere}},
		{"service name refused, already reported: no write", readyPod(withGate, gate(corev1.ConditionFalse, v1beta1.GateServiceNameOwnedElsewhere)), refused, false, nil},
		{"service name refused, gate True: left True", readyPod(withGate, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), refused, false, nil},
		{"terminating: unchanged", readyPod(withGate, gate(corev1.ConditionTrue, v1beta1.GateRegistered)), draining, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := GateFor(tc.pod, tc.v, tc.stored)
			switch {
			case tc.want == nil && ok:
				t.Errorf("GateFor() = %+v, want no change", got)
			case tc.want != nil && (!ok || got != *tc.want):
				t.Errorf("GateFor() = %+v, %v; want %+v", got, ok, *tc.want)
			}
		})
	}
}

func TestDrainUntil(t *testing.T) {
	deletedAt := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC) // deletion requested at 12:00:00 with 30 s grace
	grace := int64(30)
	terminating := readyPod(func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: deletedAt}
		p.DeletionGracePeriodSeconds = &grace
	})
	if got := DrainUntil(readyPod(), 15); got != nil {
		t.Errorf("DrainUntil(not terminating) = %v, want nil", got)
	}
	want := time.Date(2026, 1, 1, 12, 0, 15, 0, time.UTC)
	if got := DrainUntil(terminating, 15); got == nil || !got.Equal(want) {
		t.Errorf("DrainUntil(15s) = %v, want %v", got, want)
	}
}

func TestLeaseExpiry(t *testing.T) {
	renew := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		lease  NodeLease
		maxAge time.Duration
		want   time.Time
		ok     bool
	}{
		{"lease duration", NodeLease{RenewTime: renew, DurationSecs: 40}, 0, renew.Add(40 * time.Second), true},
		{"capped by maxAge", NodeLease{RenewTime: renew, DurationSecs: 40}, 20 * time.Second, renew.Add(20 * time.Second), true},
		{"maxAge longer than the lease", NodeLease{RenewTime: renew, DurationSecs: 10}, 20 * time.Second, renew.Add(10 * time.Second), true},
		{"no duration: maxAge", NodeLease{RenewTime: renew}, 20 * time.Second, renew.Add(20 * time.Second), true},
		{"never renewed", NodeLease{DurationSecs: 40}, 20 * time.Second, time.Time{}, false},
		{"no duration, no cap", NodeLease{RenewTime: renew}, 0, time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LeaseExpiry(tc.lease, tc.maxAge)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("LeaseExpiry() = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
