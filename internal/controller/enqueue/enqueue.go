// Package enqueue maps the events the ServiceRegistry controller watches to the registries
// they concern, so that one event costs work proportional to what it changes: a pod event to
// the registries that select the pod, before or after (the selector index, fed here); a
// registry's change to its peers (the same service name in its namespace: overlap; in other
// namespaces: tenancy); a node Lease renewed after a lapse, or a Node deleted, to the
// registries of the node's pods; a store change or a periodic re-read (anti-entropy) to the
// registry whose records it concerns, re-reads at low priority; a store that answers again to
// every registry. At start (a restart, a leader fail-over) the initial list enqueues every
// registry at low priority, for a check, and those with a change to make go first: a pod not
// ready or terminating in the list, any pod event once the operator runs, and a registered
// pod deleted while no operator ran (Startup). Each source notes its trigger
// (ctrlrt.Triggers) for registrar_reconciles_total.
package enqueue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/nodeliveness"
	"github.com/registrar-dev/registrar/internal/controller/regcache"
	"github.com/registrar-dev/registrar/internal/selindex"
	"github.com/registrar-dev/registrar/internal/tenancy"
)

// Mapper maps events to the registries they concern (see the package comment).
type Mapper struct {
	// Client lists registries and the pods of a node from the cache.
	Client client.Reader
	// Index maps pods to the registries selecting them and back; PodEvents feeds it.
	Index *selindex.Index
	// Cache reads the registries of a service name.
	Cache *regcache.Reader
	// Tenancy is --service-name-tenancy: under tenancy.ModeShared no registry of another
	// namespace is concerned by a registry's change.
	Tenancy tenancy.Mode
	// Forget drops what is known of a registry's records before a store that answers again
	// enqueues it (AllRegistries): the store may have changed behind the operator's back.
	Forget func(types.NamespacedName)
}

// PodEvents records each pod event in the selector index, then enqueues the registries
// that selected the pod before it or select it now (a pod whose labels change reaches both
// the registries it left and those it joined). The index is updated in the handler that
// enqueues, before it enqueues, so no reconcile reads an index older than its trigger; and
// the controller starts its workers only once this handler has seen every pod of the
// initial list. The work is the registries anchored under the pod's labels, not the
// namespace's (internal/selindex).
func (m *Mapper) PodEvents() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], ns string, regs []string) {
		for _, name := range regs {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			regs := m.Index.SetPod(e.Object.GetNamespace(), e.Object.GetName(), e.Object.GetLabels())
			if e.IsInInitialList && !steady(e.Object) {
				// The list's events come at low priority (handler.Funcs): a pod with a
				// change to make goes first, as a pod event once the operator runs does.
				for _, name := range regs {
					addAt(q, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: name}}, 0)
				}
				return
			}
			enqueue(q, e.Object.GetNamespace(), regs)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o := e.ObjectNew
			enqueue(q, o.GetNamespace(), m.Index.SetPod(o.GetNamespace(), o.GetName(), o.GetLabels()))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object.GetNamespace(), m.Index.DeletePod(e.Object.GetNamespace(), e.Object.GetName()))
		},
	}
}

// steady tells whether a pod of the initial list is ready and not terminating. After a
// restart or a fail-over the first reconcile of its registries is a check (it writes nothing
// when the store holds the pod), which the list's low priority lets wait; a pod not ready or
// terminating has a change to make and enqueues its registries at the default priority.
func steady(o client.Object) bool {
	p, ok := o.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// addAt adds req at priority when the queue has priorities (controller-runtime's priority
// queue, the default; a higher priority raises a queued request's), else as usual.
func addAt(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, priority int) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, req)
		return
	}
	q.Add(req)
}

// RegistriesForPod returns the ServiceRegistries that select a pod, as the selector index
// knows them.
func (m *Mapper) RegistriesForPod(pod client.Object) []reconcile.Request {
	regs := m.Index.RegistriesOf(pod.GetNamespace(), pod.GetName())
	reqs := make([]reconcile.Request, len(regs))
	for i, name := range regs {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: name}}
	}
	return reqs
}

// AllRegistries maps any event to every ServiceRegistry, forgetting the records it knew of
// them: the store may have changed behind the operator's back (an expired endpoint lease).
func (m *Mapper) AllRegistries(ctx context.Context, _ client.Object) []reconcile.Request {
	var regs v1beta1.ServiceRegistryList
	if err := m.Client.List(ctx, &regs); err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries")
		return nil
	}
	reqs := make([]reconcile.Request, len(regs.Items))
	for i := range regs.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&regs.Items[i])}
		m.Forget(reqs[i].NamespacedName)
	}
	return reqs
}

// RegistriesOfNode maps a node Lease (or a Node: they share their name) to the registries
// selecting pods on that node.
func (m *Mapper) RegistriesOfNode(ctx context.Context, lease client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := m.Client.List(ctx, &pods, client.MatchingFields{nodeliveness.PodNodeNameField: lease.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list pods of node", "node", lease.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var reqs []reconcile.Request
	for i := range pods.Items {
		for _, req := range m.RegistriesForPod(&pods.Items[i]) {
			if !seen[req] {
				seen[req] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// registriesOfService maps a ServiceRegistry event to the other registries of its namespace
// with the same service name (called with both the old and the new object of an update), so
// that a younger registry yields or takes over as soon as an older one changes, and an older
// one takes over the keys a younger one released.
func (m *Mapper) registriesOfService(ctx context.Context, obj client.Object) []reconcile.Request {
	changed, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	regs, err := m.Cache.SameService(ctx, changed.Namespace, changed.ResolvedServiceName())
	if err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries of a service", "namespace", changed.Namespace)
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range regs {
		if o.UID != changed.UID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// Peers maps a ServiceRegistry event to the registries its change may concern: those of
// its namespace with the same service name (registriesOfService), and those of other
// namespaces with the same name (registriesOfName: ownership of the name).
func (m *Mapper) Peers(ctx context.Context, obj client.Object) []reconcile.Request {
	return append(m.registriesOfService(ctx, obj), m.registriesOfName(ctx, obj)...)
}

// registriesOfName maps a ServiceRegistry event to the registries of other namespaces with
// the same service name (called with the old and the new object of an update), so that a
// refused registry is admitted as soon as the owner shares the name or goes, and an admitted
// one refused as soon as the share is withdrawn. Registries of the same namespace are
// registriesOfService's.
func (m *Mapper) registriesOfName(ctx context.Context, obj client.Object) []reconcile.Request {
	changed, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok || m.Tenancy == tenancy.ModeShared {
		return nil
	}
	regs, err := m.Cache.ClaimsOf(ctx, changed.ResolvedServiceName())
	if err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries of a service name", "service", changed.ResolvedServiceName())
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range regs {
		if o.Namespace != changed.Namespace {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}
