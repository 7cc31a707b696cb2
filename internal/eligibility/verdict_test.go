package eligibility

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// TestDecide walks the one verdict chain: older claim, containers, ports, node Lease,
// warm-up gate — the first link that decides, decides.
func TestDecide(t *testing.T) {
	now := time.Unix(10_000, 0)
	ready := func(mut ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}}}
		for _, m := range mut {
			m(p)
		}
		return p
	}
	gatedPod := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
			if reason != "" {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1beta1.ReadinessGate,
					Status: corev1.ConditionFalse, Reason: reason})
			}
		}
	}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = ptr(metav1.NewTime(now)) }
	fresh := &NodeLease{RenewTime: now.Add(-5 * time.Second), DurationSecs: 40}
	lapsed := &NodeLease{RenewTime: now.Add(-time.Minute), DurationSecs: 40}
	portErr := errors.New("no port named http")
	for _, tt := range []struct {
		name    string
		f       Facts
		state   v1beta1.EndpointState
		reason  string
		recheck time.Time
	}{
		{name: "ready", f: Facts{Pod: ready()}, state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady},
		{name: "service name refused first, before an older claim", f: Facts{Pod: ready(terminating), NameRefused: true, OlderClaim: "old"},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonServiceNameOwnedElsewhere},
		{name: "older claim first, even terminating", f: Facts{Pod: ready(terminating), OlderClaim: "old"},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonSelectorOverlap},
		{name: "terminating", f: Facts{Pod: ready(terminating)}, state: v1beta1.EndpointDraining, reason: v1beta1.ReasonPodTerminating},
		{name: "terminating before port missing", f: Facts{Pod: ready(terminating), PortErr: portErr},
			state: v1beta1.EndpointDraining, reason: v1beta1.ReasonPodTerminating},
		{name: "port missing", f: Facts{Pod: ready(), PortErr: portErr}, state: v1beta1.EndpointPending, reason: v1beta1.ReasonNamedPortMissing},
		{name: "port missing before lapsed lease", f: Facts{Pod: ready(), PortErr: portErr, NodeLease: lapsed, LeaseMaxAge: 20 * time.Second},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonNamedPortMissing},
		{name: "lease fresh: registered, re-checked when it would lapse",
			f:     Facts{Pod: ready(), NodeLease: fresh, LeaseMaxAge: 20 * time.Second, Now: now},
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady, recheck: now.Add(15 * time.Second)},
		{name: "lease lapsed: unready, re-checked", f: Facts{Pod: ready(), NodeLease: lapsed, LeaseMaxAge: 20 * time.Second, Now: now},
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonNodeLeaseExpired, recheck: now.Add(LapsedLeaseRecheck)},
		{name: "lapsed lease before warm-up", f: Facts{Pod: ready(gatedPod("")), WarmupRequired: true, NodeLease: lapsed, LeaseMaxAge: 20 * time.Second, Now: now},
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonNodeLeaseExpired, recheck: now.Add(LapsedLeaseRecheck)},
		{name: "gated, warming up", f: Facts{Pod: ready(gatedPod("")), WarmupRequired: true}, state: v1beta1.EndpointWarmingUp, reason: v1beta1.ReasonWarmingUp},
		{name: "gated, warmed up", f: Facts{Pod: ready(gatedPod(v1beta1.GateWarmedUp)), WarmupRequired: true},
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonWarmedUp},
		{name: "gated, warm-up failed", f: Facts{Pod: ready(gatedPod(v1beta1.GateWarmupFailed)), WarmupRequired: true},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonWarmupFailed},
		{name: "gated, no warm-up asked", f: Facts{Pod: ready(gatedPod(""))}, state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady},
		{name: "lease lapsed, removal held by the guard: registered, still re-checked",
			f:     Facts{Pod: ready(), NodeLease: lapsed, LeaseMaxAge: 20 * time.Second, Now: now, DeregistrationHeld: true},
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonDeregistrationHeld, recheck: now.Add(LapsedLeaseRecheck)},
		{name: "a hold does not register a pod the node Lease did not remove",
			f:     Facts{Pod: ready(), PortErr: portErr, NodeLease: lapsed, LeaseMaxAge: 20 * time.Second, Now: now, DeregistrationHeld: true},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonNamedPortMissing},
		{name: "a hold on a live node changes nothing",
			f:     Facts{Pod: ready(gatedPod("")), WarmupRequired: true, NodeLease: fresh, LeaseMaxAge: 20 * time.Second, Now: now, DeregistrationHeld: true},
			state: v1beta1.EndpointWarmingUp, reason: v1beta1.ReasonWarmingUp, recheck: now.Add(15 * time.Second)},
		{name: "selector unusable: a pod that would warm up is not registered",
			f:     Facts{Pod: ready(gatedPod("")), WarmupRequired: true, SelectorUnusable: true},
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonInvalidSelector},
		{name: "selector unusable: a warmed-up pod stays registered",
			f:     Facts{Pod: ready(gatedPod(v1beta1.GateWarmedUp)), WarmupRequired: true, SelectorUnusable: true},
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonWarmedUp},
		{name: "selector unusable: a ready pod stays registered", f: Facts{Pod: ready(), SelectorUnusable: true},
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.f)
			if d.State != tt.state || d.Reason != tt.reason || !d.RecheckAt.Equal(tt.recheck) {
				t.Errorf("Decide = %s/%s recheck %v; want %s/%s recheck %v", d.State, d.Reason, d.RecheckAt, tt.state, tt.reason, tt.recheck)
			}
		})
	}
}
