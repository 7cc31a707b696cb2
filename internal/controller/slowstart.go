package controller

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/internal/slowstart"
)

// rampRequeue asks the reconcile to come back at the next slow-start step of a stored
// endpoint still ramping up (nothing else would trigger it): the step's weight is then
// written. A registry has at most slowstart.MaxSteps such re-publications per pod start.
func (r *ServiceRegistryReconciler) rampRequeue(s *reconcileScope) ctrl.Result {
	ramp := slowstart.RampOf(s.reg)
	if !ramp.Enabled() {
		return ctrl.Result{}
	}
	now := r.Clock.Now()
	var next time.Time
	for pod := range s.desired {
		rec, ok := s.stored[pod]
		if !ok {
			continue
		}
		if at, ok := ramp.NextChange(rec.RegisteredAt, now); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), 0) + 10*time.Millisecond}
}

// xdsWeight is the load_balancing_weight a registered pod is published with over xDS: its
// stored weight (the one decision, shared with the store); for a pod not (yet) in the store
// the ramp's weight from now; 0 without slow start.
func xdsWeight(s *reconcileScope, pod string, now time.Time) int32 {
	ramp := slowstart.RampOf(s.reg)
	if !ramp.Enabled() {
		return 0
	}
	if rec, ok := s.stored[pod]; ok && rec.Weight > 0 {
		return rec.Weight
	}
	return ramp.Weight(now, now)
}
