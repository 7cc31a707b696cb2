// Package report is what a ServiceRegistry reconcile tells people and dashboards: an Event
// per endpoint registered or deregistered (within an operator-wide budget of Events), an Event
// per condition that changed status or reason, the registration and deregistration lag
// histograms, each registry's window of recent deregistration lags (which the drain advice
// reads), and the per-state endpoint gauges (registrar_endpoints).
package report

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
)

// Reporter records Events and lags. Safe for concurrent reconciles of different registries.
type Reporter struct {
	recorder recorder.EventRecorder
	clock    clock.PassiveClock
	// budget is the operator-wide budget of the per-endpoint Registered and Deregistered
	// Events (one API write each): those beyond it are skipped and counted in
	// registrar_endpoint_events_skipped_total. Nil emits every one.
	budget *rate.Limiter
	lags   lagWindows
}

// New returns a Reporter emitting through rec, timed by clk, within budget (nil: no budget).
func New(rec recorder.EventRecorder, clk clock.PassiveClock, budget *rate.Limiter) *Reporter {
	return &Reporter{recorder: rec, clock: clk, budget: budget}
}

// Pods are a reconcile's selected pods with their verdicts, by name.
type Pods interface {
	// Selected is the selected pod of this name and its verdict, if any.
	Selected(name string) (*corev1.Pod, eligibility.Verdict, bool)
	// All yields every selected pod with its verdict.
	All(yield func(*corev1.Pod, eligibility.Verdict) bool)
}

// endpointEvent reports whether the per-endpoint Event with this reason fits the budget at
// now, counting it as skipped when it does not.
func (rp *Reporter) endpointEvent(now time.Time, reason string) bool {
	if rp.budget == nil || rp.budget.AllowN(now, 1) {
		return true
	}
	metrics.EndpointEventsSkipped.WithLabelValues(reason).Inc()
	return false
}

// Changes emits an Event per registered and deregistered endpoint of reg in service and
// measures the deregistration lag of pods whose trigger time Kubernetes recorded.
func (rp *Reporter) Changes(reg *v1beta1.ServiceRegistry, service string, changes store.Changes, pods Pods) {
	now := rp.clock.Now()
	for _, ep := range changes.Create {
		if pod, _, ok := pods.Selected(ep.Pod); ok {
			if rp.endpointEvent(now, v1beta1.EventRegistered) {
				rp.recorder.Eventf(pod, reg, corev1.EventTypeNormal, v1beta1.EventRegistered, "Register",
					"registered %s in service %s", ep.Address, service)
			}
			if at, ok := readySince(pod); ok {
				metrics.RegistrationLag.Observe(now.Sub(at).Seconds())
			}
		}
	}
	for _, rec := range changes.Delete {
		pod, verdict, ok := pods.Selected(rec.Pod)
		if !ok {
			if rp.endpointEvent(now, v1beta1.EventDeregistered) {
				rp.recorder.Eventf(reg, nil, corev1.EventTypeNormal, v1beta1.EventDeregistered, "Deregister",
					"deregistered pod %s (%s): %s", rec.Pod, rec.Address, v1beta1.ReasonPodDeleted)
			}
			continue
		}
		if rp.endpointEvent(now, v1beta1.EventDeregistered) {
			rp.recorder.Eventf(pod, reg, corev1.EventTypeNormal, v1beta1.EventDeregistered, "Deregister",
				"deregistered %s from service %s: %s", rec.Address, service, verdict.Reason)
		}
		if lag, ok := eligibility.DeregistrationLag(pod, verdict, now); ok {
			rp.lags.add(reg.UID, lag)
			metrics.DeregistrationLag.Observe(lag.Seconds())
		}
	}
}

// MaxLag is the slowest of the registry's recent deregistration lags.
func (rp *Reporter) MaxLag(registry types.UID) time.Duration { return rp.lags.max(registry) }

// ForgetLags drops the lags of a registry that is gone.
func (rp *Reporter) ForgetLags(registry types.UID) { rp.lags.forget(registry) }

// readySince is the last transition of the pod's ContainersReady condition.
func readySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.ContainersReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// ConditionEvents records an Event for every condition of reg's status whose status or
// reason changed from original.
func (rp *Reporter) ConditionEvents(reg *v1beta1.ServiceRegistry, original v1beta1.ServiceRegistryStatus) {
	for _, c := range reg.Status.Conditions {
		var was *metav1.Condition
		for i := range original.Conditions {
			if original.Conditions[i].Type == c.Type {
				was = &original.Conditions[i]
			}
		}
		if (was != nil && was.Status == c.Status && was.Reason == c.Reason) || c.Type == v1beta1.ConditionReconciling {
			continue // Reconciling comes and goes with every rollout: no Event
		}
		typ := corev1.EventTypeNormal
		if c.Status != metav1.ConditionTrue || c.Type == v1beta1.ConditionStalled || c.Type == v1beta1.ConditionDeregistrationHeld {
			typ = corev1.EventTypeWarning
		}
		rp.recorder.Eventf(reg, nil, typ, c.Reason, "Reconcile", "%s: %s", c.Type, c.Message)
	}
}

// EndpointStates sets the registry's registrar_endpoints gauges: each selected pod by
// its state, an eligible pod counting as Registered only when the store holds it. Nothing
// is set while the store could not be read.
func EndpointStates(reg *v1beta1.ServiceRegistry, pods Pods, stored map[string]store.Record) {
	if stored == nil {
		return
	}
	var counts [len(endpointStates)]int
	pods.All(func(pod *corev1.Pod, v eligibility.Verdict) bool {
		st := v.State
		if rec, ok := stored[pod.Name]; v.Eligible() && (!ok || rec.UID != string(pod.UID)) {
			st = v1beta1.EndpointPending
		}
		if i := slices.Index(endpointStates[:], st); i >= 0 {
			counts[i]++
		}
		return true
	})
	for i, g := range endpointGaugesOf(types.NamespacedName{Namespace: reg.Namespace, Name: reg.Name}) {
		g.Set(float64(counts[i]))
	}
}

// endpointStates are the states registrar_endpoints counts, in the order of endpointGauges.
var endpointStates = [...]v1beta1.EndpointState{v1beta1.EndpointPending, v1beta1.EndpointWarmingUp,
	v1beta1.EndpointRegistered, v1beta1.EndpointUnready, v1beta1.EndpointDraining}

// endpointGauges holds each registry's registrar_endpoints gauges, one per endpointStates,
// so that a reconcile sets them without hashing their labels again. A registry is
// reconciled by one worker at a time, and forgotten by its own reconcile.
var endpointGauges sync.Map // types.NamespacedName → *[len(endpointStates)]prometheus.Gauge

func endpointGaugesOf(name types.NamespacedName) *[len(endpointStates)]prometheus.Gauge {
	if g, ok := endpointGauges.Load(name); ok {
		return g.(*[len(endpointStates)]prometheus.Gauge)
	}
	var g [len(endpointStates)]prometheus.Gauge
	for i, st := range endpointStates {
		g[i] = metrics.Endpoints.WithLabelValues(name.Namespace, name.Name, string(st))
	}
	endpointGauges.Store(name, &g)
	return &g
}

// ForgetEndpointStates drops the gauges of a registry that is gone.
func ForgetEndpointStates(name types.NamespacedName) {
	endpointGauges.Delete(name)
	metrics.Endpoints.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
	metrics.Unmutated.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
}
