package controller

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// NodeLeaseNamespace holds the kubelets' node Leases.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// podNodeNameField indexes pods by spec.nodeName, to find the pods of a node.
const podNodeNameField = "spec.nodeName"

// checkNodeLease takes out of the store a registered or warming pod whose node stopped
// renewing its Lease: the kubelet cannot report the pod's containers any more, and the node
// controller would take 40 s or more to mark the pod. It also notes when the next Lease of a
// registered pod lapses, so the reconcile comes back then.
func (r *ServiceRegistryReconciler) checkNodeLease(ctx context.Context, s *reconcileScope, p *selectedPod) {
	if r.NodeLeaseTimeout <= 0 || p.pod.Spec.NodeName == "" ||
		(p.verdict.State != v1alpha1.EndpointRegistered && p.verdict.State != v1alpha1.EndpointWarmingUp) {
		return
	}
	expiry, ok := r.leaseExpiry(ctx, p.pod.Spec.NodeName)
	if !ok {
		return
	}
	if !r.Clock.Now().Before(expiry) {
		p.verdict = eligibility.Verdict{State: v1alpha1.EndpointUnready, Reason: eligibility.ReasonNodeLeaseExpired}
		return
	}
	if s.leaseCheck.IsZero() || expiry.Before(s.leaseCheck) {
		s.leaseCheck = expiry
	}
}

func (r *ServiceRegistryReconciler) leaseExpiry(ctx context.Context, node string) (time.Time, bool) {
	var lease coordinationv1.Lease
	err := r.Get(ctx, types.NamespacedName{Namespace: NodeLeaseNamespace, Name: node}, &lease)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "read node Lease", "node", node)
		}
		return time.Time{}, false
	}
	return eligibility.LeaseExpiry(nodeLease(&lease), r.NodeLeaseTimeout)
}

func nodeLease(l *coordinationv1.Lease) eligibility.NodeLease {
	var nl eligibility.NodeLease
	if l.Spec.RenewTime != nil {
		nl.RenewTime = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		nl.DurationSecs = *l.Spec.LeaseDurationSeconds
	}
	return nl
}

// leaseRequeue brings the reconcile back just after the earliest Lease of its pods lapses.
func (r *ServiceRegistryReconciler) leaseRequeue(s *reconcileScope) ctrl.Result {
	if s.leaseCheck.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: s.leaseCheck.Sub(r.Clock.Now()) + 50*time.Millisecond}
}

// registriesForLease maps a node Lease to the registries selecting pods on that node.
func (r *ServiceRegistryReconciler) registriesForLease(ctx context.Context, lease client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.MatchingFields{podNodeNameField: lease.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list pods of node", "node", lease.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var reqs []reconcile.Request
	for i := range pods.Items {
		for _, req := range r.registriesForPod(ctx, &pods.Items[i]) {
			if !seen[req] {
				seen[req] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// leaseRenewedAfterLapse passes node Lease events that bring a lost node back: a Lease
// created, or renewed after it had lapsed. Routine renewals of healthy nodes (every 10 s
// per node) are dropped; lapses are caught by leaseRequeue, since no event marks them.
func (r *ServiceRegistryReconciler) leaseRenewedAfterLapse() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*coordinationv1.Lease)
			cur, okNew := e.ObjectNew.(*coordinationv1.Lease)
			if !okOld || !okNew || old.Namespace != NodeLeaseNamespace {
				return false
			}
			expiry, ok := eligibility.LeaseExpiry(nodeLease(old), r.NodeLeaseTimeout)
			renewed := cur.Spec.RenewTime != nil
			return ok && renewed && !cur.Spec.RenewTime.Time.Before(expiry)
		},
	}
}
