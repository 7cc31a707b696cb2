package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
)

// What a reconcile records for people and dashboards: Events for endpoint and condition
// changes (endpoint Events within an operator-wide budget), the lag histograms and the
// per-state endpoint gauges.

// endpointEvent reports whether the per-endpoint Event with this reason fits the budget at
// now, counting it as skipped when it does not.
func (r *ServiceRegistryReconciler) endpointEvent(now time.Time, reason string) bool {
	if r.EndpointEvents == nil || r.EndpointEvents.AllowN(now, 1) {
		return true
	}
	metrics.EndpointEventsSkipped.WithLabelValues(reason).Inc()
	return false
}

// recordChanges emits an Event per registered and deregistered endpoint and measures the
// deregistration lag of pods whose trigger time Kubernetes recorded.
func (r *ServiceRegistryReconciler) recordChanges(s *reconcileScope, changes store.Changes) {
	now := r.Clock.Now()
	for _, ep := range changes.Create {
		if p, ok := s.selectedPod(ep.Pod); ok {
			if r.endpointEvent(now, v1beta1.EventRegistered) {
				r.Recorder.Eventf(p.pod, s.reg, corev1.EventTypeNormal, v1beta1.EventRegistered, "Register",
					"registered %s in service %s", ep.Address, s.target.Service)
			}
			if at, ok := readySince(p.pod); ok {
				metrics.RegistrationLag.Observe(now.Sub(at).Seconds())
			}
		}
	}
	for _, rec := range changes.Delete {
		p, ok := s.selectedPod(rec.Pod)
		if !ok {
			if r.endpointEvent(now, v1beta1.EventDeregistered) {
				r.Recorder.Eventf(s.reg, nil, corev1.EventTypeNormal, v1beta1.EventDeregistered, "Deregister",
					"deregistered pod %s (%s): %s", rec.Pod, rec.Address, v1beta1.ReasonPodDeleted)
			}
			continue
		}
		if r.endpointEvent(now, v1beta1.EventDeregistered) {
			r.Recorder.Eventf(p.pod, s.reg, corev1.EventTypeNormal, v1beta1.EventDeregistered, "Deregister",
				"deregistered %s from service %s: %s", rec.Address, s.target.Service, p.verdict.Reason)
		}
		if lag, ok := eligibility.DeregistrationLag(p.pod, p.verdict, now); ok {
			r.lags.add(s.reg.UID, lag)
			metrics.DeregistrationLag.Observe(lag.Seconds())
		}
	}
}

// selectedPod is the selected pod of this name, if any.
func (s *reconcileScope) selectedPod(name string) (selectedPod, bool) {
	i, ok := s.byName[name]
	if !ok {
		return selectedPod{}, false
	}
	return s.selected[i], true
}

// readySince is the last transition of the pod's ContainersReady condition.
func readySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.ContainersReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// emitConditionEvents records an Event for every condition whose status or reason changed.
func (r *ServiceRegistryReconciler) emitConditionEvents(s *reconcileScope) {
	for _, c := range s.reg.Status.Conditions {
		var was *metav1.Condition
		for i := range s.originalStatus.Conditions {
			if s.originalStatus.Conditions[i].Type == c.Type {
				was = &s.originalStatus.Conditions[i]
			}
		}
		if (was != nil && was.Status == c.Status && was.Reason == c.Reason) || c.Type == v1beta1.ConditionReconciling {
			continue // Reconciling comes and goes with every rollout: no Event
		}
		typ := corev1.EventTypeNormal
		if c.Status != metav1.ConditionTrue || c.Type == v1beta1.ConditionStalled || c.Type == v1beta1.ConditionDeregistrationHeld {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(s.reg, nil, typ, c.Reason, "Reconcile", "%s: %s", c.Type, c.Message)
	}
}

// recordEndpointStates sets the registry's registrar_endpoints gauges: each selected pod by
// its state, an eligible pod counting as Registered only when the store holds it. Nothing
// is set while the store could not be read.
func recordEndpointStates(reg *v1beta1.ServiceRegistry, pods []selectedPod, stored map[string]store.Record) {
	if stored == nil {
		return
	}
	var counts [len(endpointStates)]int
	for _, p := range pods {
		st := p.verdict.State
		if rec, ok := stored[p.pod.Name]; p.verdict.Eligible() && (!ok || rec.UID != string(p.pod.UID)) {
			st = v1beta1.EndpointPending
		}
		if i := slices.Index(endpointStates[:], st); i >= 0 {
			counts[i]++
		}
	}
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

// forgetEndpointStates drops the gauges of a registry that is gone.
func forgetEndpointStates(name types.NamespacedName) {
	endpointGauges.Delete(name)
	metrics.Endpoints.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
	metrics.Unmutated.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
}
