package storesync

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/store"
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
// into the reconciler's queue at low priority (AntiEntropyConfig.Enqueue), so that the pod events that
// arrive meanwhile are never queued behind them. A change seen on a store watch is a repair
// of a known key and keeps the normal priority.

// Repair kinds (the kind label of registrar_store_repairs_total).
const (
	RepairDeleted   = "deleted"   // an owned key was missing: written again
	RepairRewritten = "rewritten" // an owned key held another value: rewritten
	RepairExtra     = "extra"     // a key of this owner that should not exist: deleted
)

// AntiEntropyConfig is how anti-entropy finds and enqueues the registries concerned.
type AntiEntropyConfig struct {
	// Interval is the period (jittered by ±20%) of the full re-read.
	Interval time.Duration
	// Registries are the registries of a service in a namespace.
	Registries func(ctx context.Context, namespace, service string) ([]types.NamespacedName, error)
	// Enqueue asks for a reconcile of one registry: a repair seen on a store watch, or a
	// periodic re-read (resync: the caller queues those at low priority). It may block until
	// the queue takes it, but must return once ctx is done.
	Enqueue func(ctx context.Context, name types.NamespacedName, resync bool)
}

// AntiEntropy returns the manager Runnable (leader only) that watches the Syncer's stores
// and re-reads them periodically (see above).
func (y *Syncer) AntiEntropy(cfg AntiEntropyConfig) *AntiEntropy {
	return &AntiEntropy{y: y, cfg: cfg}
}

// AntiEntropy is the manager Runnable that keeps a Syncer's known records true.
type AntiEntropy struct {
	y   *Syncer
	cfg AntiEntropyConfig
	// rechecks are store changes of keys that were being written, looked at again once
	// their writes ended (one entry per registry, store and key: bounded by the writes in
	// flight).
	rechecks workqueue.TypedInterface[echoCheck]
}

func (a *AntiEntropy) Start(ctx context.Context) error {
	a.rechecks = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[echoCheck]{})
	defer a.rechecks.ShutDown()
	go func() {
		for a.recheck(ctx) {
		}
	}()
	for _, t := range a.y.allStores() {
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
		jittered := time.Duration(float64(a.cfg.Interval) * (0.8 + 0.4*rand.Float64()))
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
func (a *AntiEntropy) changed(ctx context.Context, storeName string, c store.Change) {
	// The registries of the change's service only (the cache's service-name index): the
	// work per store change does not grow with the namespace's registries.
	names, err := a.cfg.Registries(ctx, c.Namespace, c.Service)
	if err != nil {
		return // the periodic re-read catches up
	}
	key := echo.Key{Store: storeName, Service: c.Service, Namespace: c.Namespace, Pod: c.Pod}
	for _, name := range names {
		if !a.y.known.note(name, storeName, c) {
			continue
		}
		if a.recheckAfterWrite(echoCheck{name: name, store: storeName, key: key}) {
			continue
		}
		// Not in flight: no write of the key began, or one ended since note. A write records
		// its outcome before it ends, so asking the records again tells the two apart.
		if a.y.known.unexplained(name, storeName) {
			a.cfg.Enqueue(ctx, name, false)
		}
	}
}

// recheckAfterWrite queues c for recheck once no write of its key is in flight, and reports
// whether any was (false: nothing queued, look at the change now). The queueing runs on the
// goroutine that ends the write, so it must not block: the queue is unbounded in length but
// holds one entry per registry, store and key.
func (a *AntiEntropy) recheckAfterWrite(c echoCheck) bool {
	return a.y.writes.AfterEnd(c.key, func() { a.rechecks.Add(c) })
}

// recheck looks again at one change of a key that was being written: being written again,
// it waits for that write too; else the registry is enqueued only if its records still do
// not explain every change reported (somebody else's write, not the echo). False once shut
// down.
func (a *AntiEntropy) recheck(ctx context.Context) bool {
	c, shutdown := a.rechecks.Get()
	if shutdown {
		return false
	}
	defer a.rechecks.Done(c)
	if !a.recheckAfterWrite(c) && a.y.known.unexplained(c.name, c.store) {
		a.cfg.Enqueue(ctx, c.name, false)
	}
	return true
}

// resync marks every known scope of storeName (every store when every) for a re-read and
// enqueues the registries.
func (a *AntiEntropy) resync(ctx context.Context, storeName string, every bool) {
	seen := map[types.NamespacedName]bool{}
	for _, name := range a.y.known.verifyAll(storeName, every) {
		if !seen[name] {
			seen[name] = true
			a.cfg.Enqueue(ctx, name, true)
		}
	}
}
