package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

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
	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
)

// Anti-entropy keeps the reconciler's view of each store true, so that what it writes and
// what it reports as stored (status, readiness gates) never rests on a stale memory:
//
//   - every store that can watch (store.Watcher: etcd, one prefix watch) reports each change
//     of its keys; a change the registry's known records do not explain (a person, a tool,
//     an expired lease) marks them stale and enqueues the registry, whose next reconcile
//     re-reads the scope and rewrites only what differs;
//   - every ResyncInterval (jittered by ±20%), every known scope is re-read and diffed the
//     same way: the backstop for stores that cannot watch (ZooKeeper) and for missed
//     watch events.
//
// Repairs are counted in registrar_store_repairs_total{store,kind} and reported by an Event.
//
// A re-read of every scope enqueues every registry at once (2,000 at 20,000 pods): those go
// into the reconciler's queue at low priority (resyncPriority), so that the pod events that
// arrive meanwhile are never queued behind them. A change seen on a store watch is a repair
// of a known key and keeps the normal priority.

// Repair kinds (the kind label of registrar_store_repairs_total).
const (
	RepairDeleted   = "deleted"   // an owned key was missing: written again
	RepairRewritten = "rewritten" // an owned key held another value: rewritten
	RepairExtra     = "extra"     // a key of this owner that should not exist: deleted
)

// DefaultResyncInterval is the period of the full re-read when Options.ResyncInterval is zero.
const DefaultResyncInterval = 5 * time.Minute

// antiEntropy is the manager Runnable (leader only) that watches the stores and re-reads
// them periodically.
type antiEntropy struct {
	r        *ServiceRegistryReconciler
	interval time.Duration
	enqueue  chan event.GenericEvent
	// resyncs carries the re-reads (TriggerStoreResync), enqueued at low priority.
	resyncs chan event.GenericEvent
	// rechecks are store changes of keys that were being written, looked at again once
	// their writes ended (one entry per registry, store and key: bounded by the writes in
	// flight).
	rechecks workqueue.TypedInterface[echoCheck]
}

func (a *antiEntropy) Start(ctx context.Context) error {
	a.rechecks = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[echoCheck]{})
	defer a.rechecks.ShutDown()
	go func() {
		for a.recheck(ctx) {
		}
	}()
	for _, t := range a.r.allStores() {
		w, ok := t.Store.(store.Watcher)
		if !ok {
			continue
		}
		go func() {
			err := w.Watch(ctx, func(c store.Change) { a.changed(ctx, t.Name, c) }, func() { a.resync(ctx, t.Name, false) })
			if err != nil && !errors.Is(err, errors.ErrUnsupported) {
				log.FromContext(ctx).Error(err, "store watch ended", "store", t.Name)
			}
		}()
	}
	for {
		jittered := time.Duration(float64(a.interval) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(jittered):
			a.resync(ctx, "", true)
		}
	}
}

// echoCheck is a store change of a key that was being written, to look at again: whether
// the registry's records in that store explain it once the write is recorded.
type echoCheck struct {
	name  types.NamespacedName
	store string
	key   echo.Key
}

// changed maps a store change to the registries of its service and namespace. A change the
// known records do not explain enqueues the registry, unless its key is being written by
// this operator: then it is most likely that write's echo, arriving before the write's
// outcome was recorded, and it is rechecked (recheck) as soon as the write ends and its
// outcome is recorded: no timer, no polling.
func (a *antiEntropy) changed(ctx context.Context, storeName string, c store.Change) {
	// The registries of the change's service only (the cache's service-name index): the
	// work per store change does not grow with the namespace's registries.
	regs, err := a.r.sameService(ctx, c.Namespace, c.Service)
	if err != nil {
		return // the periodic re-read catches up
	}
	key := echo.Key{Store: storeName, Service: c.Service, Namespace: c.Namespace, Pod: c.Pod}
	for _, reg := range regs {
		name := client.ObjectKeyFromObject(reg)
		if !a.r.known.note(name, storeName, c) {
			continue
		}
		if a.recheckAfterWrite(echoCheck{name: name, store: storeName, key: key}) {
			continue
		}
		// Not in flight: no write of the key began, or one ended since note. A write records
		// its outcome before it ends, so asking the records again tells the two apart.
		if a.r.known.unexplained(name, storeName) {
			a.send(ctx, name, TriggerStoreWatch)
		}
	}
}

// recheckAfterWrite queues c for recheck once no write of its key is in flight, and reports
// whether any was (false: nothing queued, look at the change now). The queueing runs on the
// goroutine that ends the write, so it must not block: the queue is unbounded in length but
// holds one entry per registry, store and key.
func (a *antiEntropy) recheckAfterWrite(c echoCheck) bool {
	return a.r.writes.AfterEnd(c.key, func() { a.rechecks.Add(c) })
}

// recheck looks again at one change of a key that was being written: being written again,
// it waits for that write too; else the registry is enqueued only if its records still do
// not explain every change reported (somebody else's write, not the echo). False once shut
// down.
func (a *antiEntropy) recheck(ctx context.Context) bool {
	c, shutdown := a.rechecks.Get()
	if shutdown {
		return false
	}
	defer a.rechecks.Done(c)
	if !a.recheckAfterWrite(c) && a.r.known.unexplained(c.name, c.store) {
		a.send(ctx, c.name, TriggerStoreWatch)
	}
	return true
}

// resync marks every known scope of storeName (every store when every) for a re-read and
// enqueues the registries.
func (a *antiEntropy) resync(ctx context.Context, storeName string, every bool) {
	seen := map[types.NamespacedName]bool{}
	for _, name := range a.r.known.verifyAll(storeName, every) {
		if !seen[name] {
			seen[name] = true
			a.send(ctx, name, TriggerStoreResync)
		}
	}
}

// send enqueues one registry, noted under trigger; it waits (the queue drains fast) rather
// than drop a repair.
func (a *antiEntropy) send(ctx context.Context, name types.NamespacedName, trigger string) {
	a.r.triggers.note(reconcile.Request{NamespacedName: name}, trigger)
	obj := &v1beta1.ServiceRegistry{}
	obj.Namespace, obj.Name = name.Namespace, name.Name
	to := a.enqueue
	if trigger == TriggerStoreResync && a.resyncs != nil {
		to = a.resyncs
	}
	select {
	case to <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// resyncPriority is the queue priority of a re-read: below every event's (0).
const resyncPriority = handler.LowPriority

// enqueueAtLowPriority enqueues the registry of a generic event at resyncPriority when the
// queue has priorities (controller-runtime's priority queue, the default), else as usual.
func enqueueAtLowPriority() handler.EventHandler {
	return handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(resyncPriority)}, req)
			return
		}
		q.Add(req)
	}}
}

// allStores are every configured store (the single Store when Stores is nil).
func (r *ServiceRegistryReconciler) allStores() []multi.Named {
	if r.Stores == nil {
		return []multi.Named{{Store: r.Store}}
	}
	return r.Stores.All()
}

// countRepairs counts the applied changes of pods whose record drifted (changed by anything
// but this operator) as repairs, and reports them in an Event on the registry.
func (r *ServiceRegistryReconciler) countRepairs(s *reconcileScope, storeName string, c store.Changes, drift map[string]bool) {
	if len(drift) == 0 {
		return
	}
	counts := map[string]int{}
	for _, ep := range c.Create {
		if drift[ep.Pod] {
			counts[RepairDeleted]++
		}
	}
	for _, u := range c.Update {
		if drift[u.New.Pod] {
			counts[RepairRewritten]++
		}
	}
	for _, rec := range c.Delete {
		if drift[rec.Pod] {
			counts[RepairExtra]++
		}
	}
	if len(counts) == 0 {
		return
	}
	label := storeName
	if label == "" {
		label = "default"
	}
	for kind, n := range counts {
		metrics.StoreRepairs.WithLabelValues(label, kind).Add(float64(n))
	}
	r.Recorder.Eventf(s.reg, nil, corev1.EventTypeWarning, v1beta1.EventStoreRepaired, "Repair",
		"store %s: repaired endpoints of service %s changed outside registrar: %d missing rewritten, %d altered restored, %d unexpected removed",
		label, s.target.Service, counts[RepairDeleted], counts[RepairRewritten], counts[RepairExtra])
}
