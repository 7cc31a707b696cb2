package controller

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/internal/controller/gates"
	"github.com/registrar-dev/registrar/internal/controller/storesync"
	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/slowstart"
	"github.com/registrar-dev/registrar/internal/store"
)

// reconcilePhase is one step of a ServiceRegistry reconcile over its scope (as in
// cluster-api's doReconcile(phases, scope)): gather and decide, then apply. A phase reads
// what earlier phases put in the scope and adds its own findings.
type reconcilePhase func(ctx context.Context, s *reconcileScope) (ctrl.Result, error)

// doReconcile runs the phases in order. Each depends on the ones before it (no gate turns
// True before the store acknowledged its endpoint), so the first error ends the reconcile
// and is returned; the requeue is the soonest any phase asked for. The status is not a
// phase: Reconcile submits it from the scope when it returns (patchStatus).
func doReconcile(ctx context.Context, s *reconcileScope, phases []reconcilePhase) (ctrl.Result, error) {
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if err != nil {
			return res, err
		}
		s.result = soonest(s.result, res)
	}
	return s.result, nil
}

// soonest is the result that requeues first; a zero result asks for nothing.
func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.RequeueAfter > 0 && (a.RequeueAfter <= 0 || b.RequeueAfter < a.RequeueAfter):
		return b
	}
	return a
}

// reconcilePods gathers the registry's pods from the cache and decides the verdict on each,
// after deciding whether the registry may publish under its service name at all (tenancy.go:
// a refused registry's pods are all Pending, so its records leave the stores).
// A registry whose selector cannot be used is judged on the pods of its own records instead
// (selectRegisteredPods); failing to read those is reported as a store error.
func (r *ServiceRegistryReconciler) reconcilePods(ctx context.Context, s *reconcileScope) (ctrl.Result, error) {
	if err := r.decideTenancy(ctx, s); err != nil {
		return ctrl.Result{}, err // nothing observed: leave status as it is
	}
	if err := r.selectPods(ctx, s); err != nil {
		return ctrl.Result{}, err // nothing observed: leave status as it is
	}
	s.observed = true
	if s.selErr != nil {
		// Reported in status. The registry still never keeps an ineligible pod's endpoint.
		if err := r.selectRegisteredPods(ctx, s); err != nil {
			s.storeErr = err
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// reconcilePublish hands the verdicts to the Publisher (the xDS server) as soon as they are
// decided, before the store write, when nothing it publishes depends on that write: the
// verdicts are the ones the store plan is computed from, and a removal then reaches the
// proxies without waiting for the store's round trip (deregistration first, as the store
// itself is written before the gates). A registry with slow start publishes after the
// store write (reconcileGates), because its endpoints' weights are the ones the store
// records (xdsWeight).
func (r *ServiceRegistryReconciler) reconcilePublish(_ context.Context, s *reconcileScope) (ctrl.Result, error) {
	if !slowstart.RampOf(s.reg).Enabled() {
		r.publish(s)
	}
	return ctrl.Result{}, nil
}

// reconcileWarmups starts and cancels the background warm-ups (warmup.go).
func (r *ServiceRegistryReconciler) reconcileWarmups(_ context.Context, s *reconcileScope) (ctrl.Result, error) {
	r.syncWarmups(s)
	return ctrl.Result{}, nil
}

// reconcileStore writes the difference between the eligible pods and the registry's records
// to each of its stores (storesync), and retires records left under an old service name
// without holding back the sync. It asks to come back for a node Lease that may lapse and
// for a key conflict to re-check.
func (r *ServiceRegistryReconciler) reconcileStore(ctx context.Context, s *reconcileScope) (ctrl.Result, error) {
	retireErr := r.syncer.RetireOld(ctx, s.reg, s.target)
	if s.storeErr = errors.Join(r.syncStores(ctx, s), retireErr); s.storeErr != nil {
		r.gates.Acks.Forget(s.reg.UID) // unknown: no other registry's gate flip counts on this one
		return ctrl.Result{}, s.storeErr
	}
	return conflictRequeue(s, soonest(r.leaseRequeue(s), r.rampRequeue(s))), nil
}

// reconcileGates sets the readiness gates (gates.Writer.Flip). A failed flip keeps the requeue the
// earlier phases asked for (gateFlipFailed).
func (r *ServiceRegistryReconciler) reconcileGates(ctx context.Context, s *reconcileScope) (ctrl.Result, error) {
	r.publish(s) // unless reconcilePublish did: a gate waiting for xDS ACKs waits for this reconcile's push
	xdsWait, err := r.gates.Flip(ctx, gates.Flip{Registry: s.reg, Service: s.target.Service, Pods: s, Stored: s.stored,
		XDSWait: func(pod string) (bool, int) { return r.xdsGateWait(s, pod) }})
	s.xdsGateWait = xdsWait
	if err != nil {
		return gateFlipFailed(ctx, s.result, err)
	}
	if s.xdsGateWait {
		return ctrl.Result{RequeueAfter: XDSGatePoll}, nil
	}
	return ctrl.Result{}, nil
}

// XDSGatePoll is how often a reconcile whose gate waits for xDS ACKs looks again (at most
// --xds-gate-ack-timeout / XDSGatePoll reconciles per pod start).
const XDSGatePoll = 200 * time.Millisecond

// patchStatus is Reconcile's deferred last step: once the pods were observed, the verdicts
// are published (publish: unless a phase did already, e.g. a reconcile that ended early) and
// the status is computed from the scope and submitted (submitStatus, status.go), except by a
// deposed leader, which leaves the registry's status to the new one.
func (r *ServiceRegistryReconciler) patchStatus(s *reconcileScope) {
	if !s.observed || errors.Is(s.storeErr, store.ErrFenced) {
		return
	}
	in := r.statusInput(s)
	r.publish(s)
	in.Published = publishedInput(s)
	r.submitStatus(s, in)
}

// syncStores has the Syncer write the registry's desired endpoints to each of its stores and
// keeps what they hold in the scope (s.stores, s.plan, s.stored); the changes made are
// recorded (Events, lags).
func (r *ServiceRegistryReconciler) syncStores(ctx context.Context, s *reconcileScope) error {
	res, err := r.syncer.Sync(ctx, storesync.Request{Registry: s.reg, Target: s.target, Desired: s.desired,
		Weigher: func(now time.Time) plan.Weigher { return slowstart.RampOf(s.reg).Weigher(now) }})
	s.stores, s.plan, s.stored = res.Stores, res.Plan, res.Stored
	if s.plan.Changes.Len() > 0 {
		r.report.Changes(s.reg, s.target.Service, s.plan.Changes, s)
	}
	return err
}
