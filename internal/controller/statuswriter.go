package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/backoff"
	"github.com/registrar-dev/registrar/internal/echo"
)

// statusWriteTimeout bounds one status write.
const statusWriteTimeout = 10 * time.Second

// statusWriter writes ServiceRegistry statuses off the reconcile path. A reconcile submits
// the status it computed and returns; the writer's workers patch the newest submitted status
// of each registry through the status subresource, only when it differs from what the
// object holds. Submissions for a registry not yet written coalesce into one write (the
// queue dedupes keys), so the queue holds at most one entry per registry.
type statusWriter struct {
	client  client.Client
	workers int
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu sync.Mutex
	// latest is the newest status computed for each registry until the cache shows it,
	// written or not: the next reconcile builds on it.
	latest map[types.NamespacedName]statusEntry
	// written is the object as returned by this writer's last successful write, with the
	// resourceVersion it was written over: while the cache still shows that version, the
	// written object is the base of the next patch.
	written map[types.NamespacedName]writtenEntry
	// echoes remembers each status as it is written, so that its echo (the registry's update
	// event carrying it) does not enqueue the registry again (isEcho).
	echoes *echo.Statuses
}

type statusEntry struct {
	uid    types.UID
	status v1alpha1.ServiceRegistryStatus
}

type writtenEntry struct {
	from string
	obj  *v1alpha1.ServiceRegistry
}

func newStatusWriter(c client.Client, workers int, retryBase, retryMax time.Duration) *statusWriter {
	return &statusWriter{
		client:  c,
		workers: max(workers, 1),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			backoff.New[types.NamespacedName](retryBase, retryMax, 0.2),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "serviceregistry_status"}),
		latest:  map[types.NamespacedName]statusEntry{},
		written: map[types.NamespacedName]writtenEntry{},
		echoes:  echo.NewStatuses(),
	}
}

// base returns the newest status computed for the registry with this UID while the cached
// status does not show it yet; once it does, the writer forgets it and the cache is the base
// again (so that a status changed by anyone else is corrected by the next reconcile).
func (w *statusWriter) base(name types.NamespacedName, uid types.UID, cached v1alpha1.ServiceRegistryStatus) (v1alpha1.ServiceRegistryStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.latest[name]
	if !ok || e.uid != uid {
		return v1alpha1.ServiceRegistryStatus{}, false
	}
	if equality.Semantic.DeepEqual(e.status, cached) {
		delete(w.latest, name)
		delete(w.written, name)
		return v1alpha1.ServiceRegistryStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// submit records the newest status of a registry and queues its write.
func (w *statusWriter) submit(name types.NamespacedName, uid types.UID, st v1alpha1.ServiceRegistryStatus) {
	w.mu.Lock()
	w.latest[name] = statusEntry{uid: uid, status: *st.DeepCopy()}
	w.mu.Unlock()
	w.queue.Add(name)
}

// forget drops what the writer holds for a registry that is gone.
func (w *statusWriter) forget(name types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.latest, name)
	delete(w.written, name)
	w.echoes.Forget(name)
}

// isEcho reports whether a registry update is this writer's own status write coming back
// (echo.Statuses.IsEcho): nothing but the status changed, to the status last written.
func (w *statusWriter) isEcho(old, cur *v1alpha1.ServiceRegistry) bool {
	return w.echoes.IsEcho(old, cur)
}

// NeedLeaderElection makes the writer run on the leader only, like the reconciler.
func (w *statusWriter) NeedLeaderElection() bool { return true }

// Start runs the workers until ctx is done.
func (w *statusWriter) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range w.workers {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	return nil
}

// next writes one queued registry; false once the queue is shut down.
func (w *statusWriter) next(ctx context.Context) bool {
	name, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(name)
	if err := w.write(ctx, name); err != nil {
		if apierrors.IsConflict(err) { // a stale base: expected while the cache catches up
			log.FromContext(ctx).V(1).Info("status write conflicted; retrying", "serviceregistry", name)
		} else {
			log.FromContext(ctx).Error(err, "write ServiceRegistry status; retrying", "serviceregistry", name)
		}
		w.queue.AddRateLimited(name)
		return true
	}
	w.queue.Forget(name)
	return true
}

// write patches the newest status of one registry when the object does not hold it yet.
func (w *statusWriter) write(ctx context.Context, name types.NamespacedName) error {
	w.mu.Lock()
	e, ok := w.latest[name]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusWriteTimeout)
	defer cancel()
	cached := &v1alpha1.ServiceRegistry{}
	if err := w.client.Get(ctx, name, cached); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(name)
			return nil
		}
		return fmt.Errorf("get ServiceRegistry %s: %w", name, err)
	}
	if cached.UID != e.uid {
		return nil // replaced by a new object: its own reconcile submits its status
	}
	original := w.baseObject(name, cached)
	if equality.Semantic.DeepEqual(original.Status, e.status) {
		return nil
	}
	reg := original.DeepCopy()
	reg.Status = *e.status.DeepCopy()
	// Before the write: its update event may reach the informer before the write returns.
	// e.status is the writer's own copy, never modified (submit and base copy).
	w.echoes.Writing(name, e.uid, e.status)
	if err := w.apply(ctx, original, reg); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(name)
			return nil
		}
		return err
	}
	w.mu.Lock()
	w.written[name] = writtenEntry{from: original.ResourceVersion, obj: reg}
	w.mu.Unlock()
	return nil
}

// baseObject is the object as the server holds it, as far as the writer knows: the cached
// one, or the one its last write returned while the cache still shows the version before it.
func (w *statusWriter) baseObject(name types.NamespacedName, cached *v1alpha1.ServiceRegistry) *v1alpha1.ServiceRegistry {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.written[name]; ok && last.obj.UID == cached.UID && last.from == cached.ResourceVersion {
		return last.obj.DeepCopy()
	}
	return cached
}

// apply writes reg's status over original with an optimistic lock: a stale base fails with
// a conflict and is retried, rather than patching over a status it did not see.
func (w *statusWriter) apply(ctx context.Context, original, reg *v1alpha1.ServiceRegistry) error {
	if len(original.Status.Conditions) == 0 {
		// First write: a merge patch would leave out the zero counts (unchanged from the
		// zero-valued original), and the printer columns would show nothing.
		if err := w.client.Status().Update(ctx, reg); err != nil {
			return fmt.Errorf("write first status of %s/%s: %w", reg.Namespace, reg.Name, err)
		}
		return nil
	}
	patch := client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	if err := w.client.Status().Patch(ctx, reg, patch); err != nil {
		return fmt.Errorf("patch status of %s/%s: %w", reg.Namespace, reg.Name, err)
	}
	return nil
}
