// Package nodeliveness owns what registrar knows of node liveness: the kubelets' node Leases
// (as the Lease watch delivered them, and when the operator saw each renewal on its own clock),
// the Nodes seen deleted (tombstones, while their pods remain), the watch predicates that turn
// a renewal after a lapse or a Node's deletion into a reconcile, and the node Lease guard's
// state across registries (how many endpoints sit on lapsed nodes, in each registry and in
// the cluster; which nodes were released at the secondary rate). What a lapsed Lease means for
// a pod is decided by eligibility.Decide, whether to hold deregistrations by leaseguard; the
// ServiceRegistry reconciler reads the facts here and applies both.
package nodeliveness

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
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/leaseguard"
)

// LeaseNamespace holds the kubelets' node Leases.
const LeaseNamespace = corev1.NamespaceNodeLease

// PodNodeNameField indexes pods by spec.nodeName, to find the pods of a node.
const PodNodeNameField = "spec.nodeName"

// Config is what a Tracker reads through and judges with.
type Config struct {
	// Client reads node Leases, Nodes (metadata) and the pods of a node from the cache.
	Client client.Client
	// Clock stamps when renewals are seen.
	Clock clock.PassiveClock
	// Timeout is --node-lease-timeout: how long after its node's last renewal a pod stays
	// registered at most.
	Timeout time.Duration
	// Guard is the node Lease guard's configuration (leaseguard); the zero Config never holds.
	Guard leaseguard.Config
}

// Tracker holds the node liveness facts (see the package comment). Safe for concurrent use.
type Tracker struct {
	client      client.Client
	clock       clock.PassiveClock
	timeout     time.Duration
	guardConfig leaseguard.Config
	// leases are the node Leases as the Lease watch delivered them (Watching); nil reads them
	// through the client.
	leases *leaseMemo
	// seen records when node Lease renewals were seen (see leaseObservations).
	seen *leaseObservations
	// the node Lease guard's state, created on first use
	guardOnce  sync.Once
	guardState *guardState
}

// New returns a Tracker that reads node Leases through the client until Watching is called.
func New(cfg Config) *Tracker {
	return &Tracker{client: cfg.Client, clock: cfg.Clock, timeout: cfg.Timeout, guardConfig: cfg.Guard, seen: newLeaseObservations()}
}

// Watching makes the Tracker keep the node Leases its predicates see (LeaseRenewedAfterLapse,
// NodeEvents, PodDeletedFromNode) and read them from there: call it before the watches start.
func (t *Tracker) Watching() { t.leases = newLeaseMemo() }

// Restart records the node's renewal renew as seen at now, whenever it was seen before: its
// bound starts again (when a guard's hold ends).
func (t *Tracker) Restart(node string, renew, now time.Time) { t.seen.restart(node, renew, now) }

// Lease reads the node's Lease from the cache, with when the operator saw its renewal
// (see leaseObservations); false when there is none. The verdict chain decides from it
// (eligibility.Decide): a registered or warming pod whose node stopped renewing leaves the
// store, as the kubelet cannot report its containers any more and the node controller would
// take 40 s or more to mark the pod.
func (t *Tracker) Lease(ctx context.Context, node string) (eligibility.NodeLease, bool) {
	if t.leases != nil {
		l, ok := t.leases.get(node)
		if !ok {
			if !t.nodeMissing(ctx, node) {
				return eligibility.NodeLease{}, false
			}
			// No Node of that name after the Node informer synced (the workers start only then):
			// deleted before this operator started, or while its watch was away. The pod
			// garbage collector calls such pods orphaned; they are gone with their node. The
			// tombstone goes with the node's last pod, or when a Node of that name appears
			// (NodeEvents: its pods are judged again).
			t.leases.nodeDeleted(node, true)
			return eligibility.NodeLease{NodeDeleted: true}, true
		}
		return t.seen.withObservation(l, node), true
	}
	var lease coordinationv1.Lease
	// Read only (nodeLease copies what it needs): no copy of the cached Lease.
	err := t.client.Get(ctx, types.NamespacedName{Namespace: LeaseNamespace, Name: node}, &lease, client.UnsafeDisableDeepCopy)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "read node Lease", "node", node)
		}
		return eligibility.NodeLease{}, false
	}
	return t.seen.withObservation(nodeLease(&lease), node), true
}

// nodeMissing reports whether the cache holds no Node of that name (metadata, watchNodes);
// false when it cannot tell.
func (t *Tracker) nodeMissing(ctx context.Context, node string) bool {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := t.client.Get(ctx, types.NamespacedName{Name: node}, n, client.UnsafeDisableDeepCopy)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "read Node", "node", node)
	}
	return apierrors.IsNotFound(err)
}

// LeaseRenewedAfterLapse passes node Lease events that bring a lost node back: a Lease
// created, or renewed when it had lapsed or was about to (eligibility.RenewalRevives), on the
// operator's clock. It also records when each renewal was seen (leaseObservations). Routine
// renewals of healthy nodes (every 10 s per node) are dropped; lapses are caught by
// the reconciler's lease requeue, since no event marks them.
func (t *Tracker) LeaseRenewedAfterLapse() predicate.Predicate {
	return predicate.Funcs{
		// A Lease seen for the first time (also every Lease at an operator start) is judged
		// by its RenewTime: when it was renewed is unknown. Only a renewal seen to change is
		// stamped with the operator's clock.
		CreateFunc: func(e event.CreateEvent) bool {
			t.leases.record(e.Object)
			return true
		},
		// A deleted Lease renews no more: its last state is kept (leaseMemo) while the node
		// has pods, so that they stay out once it lapsed, rather than look like pods of a
		// node never seen. Nothing changes at once: no reconcile.
		DeleteFunc: func(e event.DeleteEvent) bool {
			if e.Object.GetNamespace() != LeaseNamespace {
				return false
			}
			node := e.Object.GetName()
			if t.leases != nil {
				last, _ := t.leases.get(node)
				if l, ok := e.Object.(*coordinationv1.Lease); ok {
					last = nodeLease(l)
				}
				t.leases.leaseDeleted(node, t.seen.withObservation(last, node), t.nodeHasPods(node))
			}
			t.seen.forget(node)
			// a released node stays released until renewed: one whose Lease is gone renews
			// no more, and a new Lease starts it over
			t.guard().releaser.Forget(node)
			return false
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*coordinationv1.Lease)
			cur, okNew := e.ObjectNew.(*coordinationv1.Lease)
			if !okOld || !okNew || old.Namespace != LeaseNamespace {
				return false
			}
			t.leases.record(cur)
			now := t.clock.Now()
			before := t.seen.withObservation(nodeLease(old), old.Name)
			revives := eligibility.RenewalRevives(before, nodeLease(cur), now, t.timeout, RenewalMargin)
			t.seen.observe(cur.Name, nodeLease(cur).RenewTime, now)
			if revives {
				t.guard().releaser.Forget(cur.Name) // renewed: a later lapse waits for its turn again
			}
			return revives
		},
	}
}

// NodeEvents passes the Node events that change the verdict on the node's pods, after noting
// them (leaseMemo): a Node deleted (its pods are gone with it: they leave the store at once,
// whatever its Lease says, and stay out), and a Node created under the name of one seen
// deleted or found missing (Lease; its pods are judged by its Lease again). Every other
// Node event is dropped; any other Node seen for the first time (every Node at an operator
// start) changes nothing.
func (t *Tracker) NodeEvents() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return t.leases.nodeCreated(e.Object.GetName())
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			node := e.Object.GetName()
			t.leases.nodeDeleted(node, t.nodeHasPods(node))
			t.guard().releaser.Forget(node)
			return true
		},
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// PodDeletedFromNode drops the node's tombstones (leaseMemo) once its last pod is deleted.
func (t *Tracker) PodDeletedFromNode() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" || !t.leases.tombstoned(pod.Spec.NodeName) {
				return
			}
			if !t.nodeHasPods(pod.Spec.NodeName) {
				t.leases.dropTombstones(pod.Spec.NodeName)
			}
		},
	}
}

// nodeHasPods reports whether the cache holds a pod on the node; true when it cannot tell: a
// tombstone wrongly kept costs a map entry (until the node's Node or Lease is created again),
// one wrongly dropped would register dead pods. The List of a synced cache does not fail; a
// List while the pod informer syncs may time out.
func (t *Tracker) nodeHasPods(node string) bool {
	if t.client == nil {
		return false
	}
	var pods corev1.PodList
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.client.List(ctx, &pods, client.MatchingFields{PodNodeNameField: node}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list pods of node", "node", node)
		return true
	}
	return len(pods.Items) > 0
}
