package controller

// The node Lease rule's side of the ServiceRegistry reconciler: node liveness itself (Leases,
// renewals seen, tombstones, the guard's counts) is nodeliveness's.

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/controller/enqueue"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// scopeLeaseOf is the node's Lease (nodeliveness.Tracker.Lease) read once per node per reconcile (s.leases); nil when the
// node has no Lease.
func (r *ServiceRegistryReconciler) scopeLeaseOf(ctx context.Context, s *reconcileScope, node string) *eligibility.NodeLease {
	if l, ok := s.leases[node]; ok {
		return l
	}
	var lp *eligibility.NodeLease
	if l, ok := r.nodes.Lease(ctx, node); ok {
		lp = &l
	}
	if s.leases == nil {
		s.leases = map[string]*eligibility.NodeLease{}
	}
	s.leases[node] = lp
	return lp
}

// leaseRequeue brings the reconcile back just after the earliest Lease of its pods lapses.
// That Lease was live when its pod's verdict was decided, but may have lapsed by now (a
// large registry's reconcile under load takes longer than the gap between two nodes'
// lapses): the requeue is then at once, never <= 0, which controller-runtime takes for no
// requeue at all (the registry would wait for an unrelated event to deregister the pods).
func (r *ServiceRegistryReconciler) leaseRequeue(s *reconcileScope) ctrl.Result {
	if s.leaseCheck.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(s.leaseCheck.Sub(r.Clock.Now()), 0) + 50*time.Millisecond}
}

// watchNodes adds the watches the node Lease rule needs: node Leases (a Lease renewed after a
// lapse brings its node's pods back), Nodes (a Node deleted takes its pods out; as metadata,
// the informer zoneOf reads), and pod deletions (a deleted node's tombstone goes with its last
// pod).
func (r *ServiceRegistryReconciler) watchNodes(b *builder.Builder, m *enqueue.Mapper) *builder.Builder {
	r.nodes.Watching()
	return b.
		Watches(&coordinationv1.Lease{}, r.triggers.Handler(ctrlrt.TriggerLease, handler.EnqueueRequestsFromMapFunc(m.RegistriesOfNode)),
			builder.WithPredicates(r.nodes.LeaseRenewedAfterLapse())).
		Watches(&corev1.Node{}, r.triggers.Handler(ctrlrt.TriggerLease, handler.EnqueueRequestsFromMapFunc(m.RegistriesOfNode)),
			builder.OnlyMetadata, builder.WithPredicates(r.nodes.NodeEvents())).
		Watches(&corev1.Pod{}, r.nodes.PodDeletedFromNode())
}
