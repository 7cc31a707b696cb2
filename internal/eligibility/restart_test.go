package eligibility

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// TestGatedRestart: a container that restarted after the gate recorded warm-up (True, or
// WarmedUp) is a new process and warms up again; a restart before it, a fresh container and
// a registry without warm-up do not.
func TestGatedRestart(t *testing.T) {
	gateAt := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	gate := func(status corev1.ConditionStatus, reason string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1beta1.ReadinessGate,
				Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(gateAt)})
		}
	}
	started := func(restarts int32, at time.Time) podOpt {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
		}
	}
	after, before := gateAt.Add(time.Second), gateAt.Add(-time.Minute)
	registered := Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady}
	rewarm := Verdict{v1beta1.EndpointWarmingUp, v1beta1.ReasonContainerRestarted}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		warmup bool
		want   Verdict
	}{
		{"registered, no container status yet", readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered)), true, registered},
		{"registered, first container", readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(0, before)), true, registered},
		{"registered, restarted before the registration", readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(1, before)), true, registered},
		{"registered, restarted after it", readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(1, after)), true, rewarm},
		{"restarted in the second of the registration (pod times are whole seconds)",
			readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(1, gateAt)), true, registered},
		{"fresh container started after the gate (kubelet clock ahead)",
			readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(0, after)), true, registered},
		{"warmed up, waiting for the store, then restarted", readyPod(gate(corev1.ConditionFalse, v1beta1.GateWarmedUp), started(2, after)), true, rewarm},
		{"warming up already", readyPod(gate(corev1.ConditionFalse, v1beta1.GateWarmingUp), started(1, after)), true,
			Verdict{v1beta1.EndpointWarmingUp, v1beta1.ReasonWarmingUp}},
		{"no warm-up: nothing to do again", readyPod(gate(corev1.ConditionTrue, v1beta1.GateRegistered), started(1, after)), false, registered},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.pod, tc.warmup); got != tc.want {
				t.Errorf("Classify() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
