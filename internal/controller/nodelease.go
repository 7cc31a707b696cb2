package controller

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/eligibility"
)

// NodeLeaseNamespace holds the kubelets' node Leases.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// podNodeNameField indexes pods by spec.nodeName, to find the pods of a node.
const podNodeNameField = "spec.nodeName"

// nodeLeaseOf reads the node's Lease from the cache, with when the operator saw its renewal
// (see leaseObservations); false when there is none. The verdict chain decides from it
// (eligibility.Decide): a registered or warming pod whose node stopped renewing leaves the
// store, as the kubelet cannot report its containers any more and the node controller would
// take 40 s or more to mark the pod.
func (r *ServiceRegistryReconciler) nodeLeaseOf(ctx context.Context, node string) (eligibility.NodeLease, bool) {
	if r.leases != nil {
		l, ok := r.leases.get(node)
		if !ok {
			if !r.nodeMissing(ctx, node) {
				return eligibility.NodeLease{}, false
			}
			// No Node of that name after the Node informer synced (the workers start only then):
			// deleted before this operator started, or while its watch was away. The pod
			// garbage collector calls such pods orphaned; they are gone with their node. The
			// tombstone goes with the node's last pod, or when a Node of that name appears
			// (nodeEvents: its pods are judged again).
			r.leases.nodeDeleted(node, true)
			return eligibility.NodeLease{NodeDeleted: true}, true
		}
		return r.leasesSeen.withObservation(l, node), true
	}
	var lease coordinationv1.Lease
	// Read only (nodeLease copies what it needs): no copy of the cached Lease.
	err := r.Get(ctx, types.NamespacedName{Namespace: NodeLeaseNamespace, Name: node}, &lease, client.UnsafeDisableDeepCopy)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "read node Lease", "node", node)
		}
		return eligibility.NodeLease{}, false
	}
	return r.leasesSeen.withObservation(nodeLease(&lease), node), true
}

// nodeMissing reports whether the cache holds no Node of that name (metadata, watchNodes);
// false when it cannot tell.
func (r *ServiceRegistryReconciler) nodeMissing(ctx context.Context, node string) bool {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := r.Get(ctx, types.NamespacedName{Name: node}, n, client.UnsafeDisableDeepCopy)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "read Node", "node", node)
	}
	return apierrors.IsNotFound(err)
}

// scopeLeaseOf is nodeLeaseOf read once per node per reconcile (s.leases); nil when the
// node has no Lease.
func (r *ServiceRegistryReconciler) scopeLeaseOf(ctx context.Context, s *reconcileScope, node string) *eligibility.NodeLease {
	if l, ok := s.leases[node]; ok {
		return l
	}
	var lp *eligibility.NodeLease
	if l, ok := r.nodeLeaseOf(ctx, node); ok {
		lp = &l
	}
	if s.leases == nil {
		s.leases = map[string]*eligibility.NodeLease{}
	}
	s.leases[node] = lp
	return lp
}

// leaseMemo holds what the verdict reads of each node Lease (nodeLease), as the Lease watch
// last delivered it: the watch's predicate records every Lease event (leaseRenewedAfterLapse)
// before any handler enqueues for it, and the reconciler's workers start only once every
// Lease listed at start went through it. Reading it costs a map lookup, where a cache Get of
// a Lease (a namespace-restricted cache) looked up a REST mapping and allocated each time:
// 7 % of the operator's allocations at 5,000 pods (docs/performance.md).
//
// It also remembers what the API server said of nodes that are gone, as tombstones: the last
// state of a deleted Lease (Deleted), and the Nodes seen deleted (NodeDeleted). Without them
// a node whose Lease lapsed and was then deleted (with its Node) looked like a node never
// seen, and its dead pods were registered again until the pod garbage collector deleted
// them. Bounded: a tombstone is kept only for a node that still has pods in the cache when it
// is deleted, and dropped when its last pod is deleted or the Lease (or Node) is created
// again; so the tombstones never outnumber the nodes the cached pods name.
type leaseMemo struct {
	mu sync.RWMutex
	m  map[string]eligibility.NodeLease
	// nodesGone are the Nodes seen deleted that still have pods.
	nodesGone map[string]bool
}

func newLeaseMemo() *leaseMemo {
	return &leaseMemo{m: map[string]eligibility.NodeLease{}, nodesGone: map[string]bool{}}
}

// get returns what is known of the node: its Lease (or the last state of its deleted Lease),
// and whether the Node was seen deleted; false when nothing is.
func (m *leaseMemo) get(node string) (eligibility.NodeLease, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.m[node]
	if m.nodesGone[node] {
		l.NodeDeleted, ok = true, true
	}
	return l, ok
}

// record notes a node Lease event's object (a Lease of another namespace is ignored); a Lease
// created again replaces the tombstone of the deleted one.
func (m *leaseMemo) record(obj client.Object) {
	l, ok := obj.(*coordinationv1.Lease)
	if m == nil || !ok || l.Namespace != NodeLeaseNamespace {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[l.Name] = nodeLease(l)
}

// leaseDeleted notes that the node's Lease was deleted: last (its last state, with when its
// renewal was seen) is kept as a tombstone when keep (the node still has pods), else the
// node's Lease is forgotten.
func (m *leaseMemo) leaseDeleted(node string, last eligibility.NodeLease, keep bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !keep {
		delete(m.m, node)
		return
	}
	last.Deleted, last.NodeDeleted = true, false
	m.m[node] = last
}

// nodeDeleted notes that the Node was deleted; kept only when it still has pods (keep).
func (m *leaseMemo) nodeDeleted(node string, keep bool) {
	if m == nil || !keep {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodesGone[node] = true
}

// nodeCreated notes that a Node of that name exists (again): it is no longer gone. It
// reports whether it was.
func (m *leaseMemo) nodeCreated(node string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	gone := m.nodesGone[node]
	delete(m.nodesGone, node)
	return gone
}

// tombstoned reports whether the memo keeps a tombstone of the node (its Node or its Lease
// deleted).
func (m *leaseMemo) tombstoned(node string) bool {
	if m == nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.nodesGone[node] || m.m[node].Deleted
}

// dropTombstones forgets the node's tombstones: its last pod is gone.
func (m *leaseMemo) dropTombstones(node string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodesGone, node)
	if m.m[node].Deleted {
		delete(m.m, node)
	}
}

// size is how many nodes the memo holds anything of (tests).
func (m *leaseMemo) size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := len(m.m)
	for node := range m.nodesGone {
		if _, ok := m.m[node]; !ok {
			n++
		}
	}
	return n
}

// RenewalMargin: a renewal seen within this margin before the node's Lease lapses counts as
// a renewal after a lapse (it may reach the operator after the reconcile at the deadline).
const RenewalMargin = 2 * time.Second

// leaseObservations records, per node, when the operator saw each new Lease renewal, on its
// own clock: liveness is judged from when renewals are seen, so a kubelet whose clock is
// skewed from the operator's is neither dropped while it renews nor kept after it stopped.
type leaseObservations struct {
	mu   sync.Mutex
	seen map[string]leaseSeen
}

type leaseSeen struct {
	renew, at time.Time
}

func newLeaseObservations() *leaseObservations {
	return &leaseObservations{seen: map[string]leaseSeen{}}
}

// observe records that the node's Lease carried renew at now, unless that renewal was seen
// before.
func (o *leaseObservations) observe(node string, renew, now time.Time) {
	if o == nil || renew.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.seen[node]; ok && s.renew.Equal(renew) {
		return
	}
	o.seen[node] = leaseSeen{renew: renew, at: now}
}

// withObservation adds to l when the operator saw its renewal, if it did.
func (o *leaseObservations) withObservation(l eligibility.NodeLease, node string) eligibility.NodeLease {
	if o == nil {
		return l
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.seen[node]; ok && s.renew.Equal(l.RenewTime) {
		l.ObservedAt = s.at
	}
	return l
}

// restart records renew as seen at now, whenever it was seen before: the node's bound
// starts again (the node Lease guard, when a hold ends).
func (o *leaseObservations) restart(node string, renew, now time.Time) {
	if o == nil || renew.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[node] = leaseSeen{renew: renew, at: now}
}

func (o *leaseObservations) forget(node string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, node)
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

// registriesForLease maps a node Lease (or a Node: they share their name) to the registries
// selecting pods on that node.
func (r *ServiceRegistryReconciler) registriesForLease(ctx context.Context, lease client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.MatchingFields{podNodeNameField: lease.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list pods of node", "node", lease.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var reqs []reconcile.Request
	for i := range pods.Items {
		for _, req := range r.registriesForPod(&pods.Items[i]) {
			if !seen[req] {
				seen[req] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// leaseRenewedAfterLapse passes node Lease events that bring a lost node back: a Lease
// created, or renewed when it had lapsed or was about to (eligibility.RenewalRevives), on the
// operator's clock. It also records when each renewal was seen (leaseObservations). Routine
// renewals of healthy nodes (every 10 s per node) are dropped; lapses are caught by
// leaseRequeue, since no event marks them.
func (r *ServiceRegistryReconciler) leaseRenewedAfterLapse() predicate.Predicate {
	return predicate.Funcs{
		// A Lease seen for the first time (also every Lease at an operator start) is judged
		// by its RenewTime: when it was renewed is unknown. Only a renewal seen to change is
		// stamped with the operator's clock.
		CreateFunc: func(e event.CreateEvent) bool {
			r.leases.record(e.Object)
			return true
		},
		// A deleted Lease renews no more: its last state is kept (leaseMemo) while the node
		// has pods, so that they stay out once it lapsed, rather than look like pods of a
		// node never seen. Nothing changes at once: no reconcile.
		DeleteFunc: func(e event.DeleteEvent) bool {
			if e.Object.GetNamespace() != NodeLeaseNamespace {
				return false
			}
			node := e.Object.GetName()
			if r.leases != nil {
				last, _ := r.leases.get(node)
				if l, ok := e.Object.(*coordinationv1.Lease); ok {
					last = nodeLease(l)
				}
				r.leases.leaseDeleted(node, r.leasesSeen.withObservation(last, node), r.nodeHasPods(node))
			}
			r.leasesSeen.forget(node)
			// a released node stays released until renewed: one whose Lease is gone renews
			// no more, and a new Lease starts it over
			r.leaseGuard().releaser.Forget(node)
			return false
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*coordinationv1.Lease)
			cur, okNew := e.ObjectNew.(*coordinationv1.Lease)
			if !okOld || !okNew || old.Namespace != NodeLeaseNamespace {
				return false
			}
			r.leases.record(cur)
			now := r.Clock.Now()
			before := r.leasesSeen.withObservation(nodeLease(old), old.Name)
			revives := eligibility.RenewalRevives(before, nodeLease(cur), now, r.NodeLeaseTimeout, RenewalMargin)
			r.leasesSeen.observe(cur.Name, nodeLease(cur).RenewTime, now)
			if revives {
				r.leaseGuard().releaser.Forget(cur.Name) // renewed: a later lapse waits for its turn again
			}
			return revives
		},
	}
}

// nodeEvents passes the Node events that change the verdict on the node's pods, after noting
// them (leaseMemo): a Node deleted (its pods are gone with it: they leave the store at once,
// whatever its Lease says, and stay out), and a Node created under the name of one seen
// deleted or found missing (nodeLeaseOf; its pods are judged by its Lease again). Every other
// Node event is dropped; any other Node seen for the first time (every Node at an operator
// start) changes nothing.
func (r *ServiceRegistryReconciler) nodeEvents() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return r.leases.nodeCreated(e.Object.GetName())
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			node := e.Object.GetName()
			r.leases.nodeDeleted(node, r.nodeHasPods(node))
			r.leaseGuard().releaser.Forget(node)
			return true
		},
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// podDeletedFromNode drops the node's tombstones (leaseMemo) once its last pod is deleted.
func (r *ServiceRegistryReconciler) podDeletedFromNode() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" || !r.leases.tombstoned(pod.Spec.NodeName) {
				return
			}
			if !r.nodeHasPods(pod.Spec.NodeName) {
				r.leases.dropTombstones(pod.Spec.NodeName)
			}
		},
	}
}

// nodeHasPods reports whether the cache holds a pod on the node; true when it cannot tell: a
// tombstone wrongly kept costs a map entry (until the node's Node or Lease is created again),
// one wrongly dropped would register dead pods. The List of a synced cache does not fail; a
// List while the pod informer syncs may time out.
func (r *ServiceRegistryReconciler) nodeHasPods(node string) bool {
	if r.Client == nil {
		return false
	}
	var pods corev1.PodList
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.List(ctx, &pods, client.MatchingFields{podNodeNameField: node}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list pods of node", "node", node)
		return true
	}
	return len(pods.Items) > 0
}

// watchNodes adds the watches the node Lease rule needs: node Leases (a Lease renewed after a
// lapse brings its node's pods back), Nodes (a Node deleted takes its pods out; as metadata,
// the informer zoneOf reads), and pod deletions (a deleted node's tombstone goes with its last
// pod).
func (r *ServiceRegistryReconciler) watchNodes(b *builder.Builder) *builder.Builder {
	r.leases = newLeaseMemo()
	return b.
		Watches(&coordinationv1.Lease{}, r.triggers.handler(TriggerLease, handler.EnqueueRequestsFromMapFunc(r.registriesForLease)),
			builder.WithPredicates(r.leaseRenewedAfterLapse())).
		Watches(&corev1.Node{}, r.triggers.handler(TriggerLease, handler.EnqueueRequestsFromMapFunc(r.registriesForLease)),
			builder.OnlyMetadata, builder.WithPredicates(r.nodeEvents())).
		Watches(&corev1.Pod{}, r.podDeletedFromNode())
}
