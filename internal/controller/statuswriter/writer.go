// Package statuswriter writes ServiceRegistry statuses off the reconcile path: the reconciler
// submits the status it computed, the writer patches the newest one of each registry through
// the status subresource, paced per registry and within an operator-wide budget, and tells the
// registry update events that only carry its own writes back (echoes) from the others.
package statuswriter

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/backoff"
	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/metrics"
)

// writeTimeout bounds one status write.
const writeTimeout = 10 * time.Second

// Writer writes ServiceRegistry statuses off the reconcile path. A reconcile submits
// the status it computed and returns; the writer's workers patch the newest submitted status
// of each registry through the status subresource, only when it differs from what the
// object holds. Submissions for a registry not yet written coalesce into one write (the
// queue dedupes keys), so the queue holds at most one entry per registry.
//
// Writes of one registry are paced: a status that differs from the last one written only in
// what refines the conditions (counts, status.endpoints, messages; regstatus.Urgent) is
// written no sooner than interval after the registry's previous write, and the newest status
// of the registry is what is written then. An idle registry's change is written at once, and
// so is every urgent one; a busy registry's costs at most one write (and one watch echo of
// it) per interval instead of one per pod event. The store is never paced: this is the
// status only.
//
// Paced writes also share an operator-wide budget (budget, --status-writes-qps): under a
// flood of pod events every busy registry would otherwise still cost one write per interval,
// so the API server's load (and the operator's CPU, a write and its watch echo are decoded
// as JSON) would grow with the number of busy registries. A paced write beyond the budget
// reserves the next free slot and waits for it in the queue (registries take the slots in
// the order they asked for them); urgent writes never wait for the budget.
type Writer struct {
	client  client.Client
	workers int
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// interval is the least time between two paced writes of a registry; 0 paces nothing.
	interval time.Duration
	clock    clock.PassiveClock
	// budget limits the paced writes across registries; nil when unlimited.
	budget *rate.Limiter

	mu sync.Mutex
	// latest is the newest status computed for each registry until the cache shows it,
	// written or not: the next reconcile builds on it.
	latest map[types.NamespacedName]statusEntry
	// written is this writer's last successful write of each registry: while the cache
	// still shows the version it was written over, its status and resourceVersion are the
	// base of the next write.
	written map[types.NamespacedName]writtenEntry
	// echoes remembers each status as it is written, so that its echo (the registry's update
	// event carrying it) does not enqueue the registry again (isEcho).
	echoes *echo.Statuses
	// lastWrite is when each registry's status was last written (pacing).
	lastWrite map[types.NamespacedName]time.Time
	// slot is when a registry waiting for the budget may write: the time of the token it
	// reserved. A registry holds at most one slot.
	slot map[types.NamespacedName]time.Time
	// seq numbers the submissions (statusEntry.seq).
	seq uint64
}

type statusEntry struct {
	uid    types.UID
	status v1beta1.ServiceRegistryStatus
	// urgent is set when any status submitted since the last write was urgent
	// (regstatus.Urgent): the write is not paced.
	urgent bool
	// seq numbers the submissions, so a write knows whether it wrote the newest.
	seq uint64
}

// Config configures a Writer.
type Config struct {
	// Workers is how many statuses are written at once (at least 1).
	Workers int
	// RetryBase and RetryMax bound the exponential, jittered retry of a failed write.
	RetryBase, RetryMax time.Duration
	// Interval paces the writes of one registry (see Writer); 0 writes every change at once.
	Interval time.Duration
	// Clock times the pacing; clock.RealClock{} when nil. The queue's delays use it too.
	Clock clock.WithTicker
	// QPS and Burst are the budget of paced writes across registries; QPS <= 0 is no budget.
	QPS   float64
	Burst int
}

type writtenEntry struct {
	uid types.UID
	// from is the resourceVersion the write was made over, rv the one it made; status is
	// what it wrote.
	from, rv string
	status   v1beta1.ServiceRegistryStatus
}

func New(c client.Client, cfg Config) *Writer {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	var budget *rate.Limiter
	if cfg.QPS > 0 {
		budget = rate.NewLimiter(rate.Limit(cfg.QPS), max(cfg.Burst, 1))
	}
	return &Writer{
		budget:   budget,
		slot:     map[types.NamespacedName]time.Time{},
		client:   c,
		workers:  max(cfg.Workers, 1),
		interval: max(cfg.Interval, 0),
		clock:    cfg.Clock,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			backoff.New[types.NamespacedName](cfg.RetryBase, cfg.RetryMax, 0.2),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "serviceregistry_status", Clock: cfg.Clock}),
		latest:    map[types.NamespacedName]statusEntry{},
		written:   map[types.NamespacedName]writtenEntry{},
		echoes:    echo.NewStatuses(),
		lastWrite: map[types.NamespacedName]time.Time{},
	}
}

// base returns the newest status computed for the registry with this UID while the cached
// status does not show it yet; once it does, the writer forgets it and the cache is the base
// again (so that a status changed by anyone else is corrected by the next reconcile).
func (w *Writer) Base(name types.NamespacedName, uid types.UID, cached v1beta1.ServiceRegistryStatus) (v1beta1.ServiceRegistryStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.latest[name]
	if !ok || e.uid != uid {
		return v1beta1.ServiceRegistryStatus{}, false
	}
	if equality.Semantic.DeepEqual(e.status, cached) {
		delete(w.latest, name)
		delete(w.written, name)
		return v1beta1.ServiceRegistryStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// submit records the newest status of a registry and queues its write: at once when it is
// urgent (regstatus.Urgent against the status it was computed over) or the registry's last
// write is at least the pacing interval old, otherwise when that interval ends.
func (w *Writer) Submit(name types.NamespacedName, uid types.UID, st v1beta1.ServiceRegistryStatus, urgent bool) {
	w.mu.Lock()
	if prev, ok := w.latest[name]; ok && prev.uid == uid {
		urgent = urgent || prev.urgent // not written yet: its urgency carries over
	}
	w.seq++
	w.latest[name] = statusEntry{uid: uid, status: *st.DeepCopy(), urgent: urgent, seq: w.seq}
	wait := w.waitLocked(name, urgent)
	w.mu.Unlock()
	if wait > 0 {
		w.queue.AddAfter(name, wait)
		return
	}
	w.queue.Add(name)
}

// waitLocked is how long a write of the registry has to wait for its pacing interval and
// for the budget slot it already reserved (budgetWait); 0 for an urgent one. A registry
// waiting for its slot is thus queued for it straight away, without reading the cache
// again. w.mu is held.
func (w *Writer) waitLocked(name types.NamespacedName, urgent bool) time.Duration {
	if urgent {
		return 0
	}
	var wait time.Duration
	if last, ok := w.lastWrite[name]; ok && w.interval > 0 {
		wait = max(w.interval-w.clock.Since(last), 0)
	}
	if at, ok := w.slot[name]; ok {
		wait = max(wait, at.Sub(w.clock.Now()))
	}
	return wait
}

// forget drops what the writer holds for a registry that is gone.
func (w *Writer) Forget(name types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.latest, name)
	delete(w.written, name)
	delete(w.lastWrite, name)
	delete(w.slot, name)
	w.echoes.Forget(name)
}

// NeedLeaderElection makes the writer run on the leader only, like the reconciler.
func (w *Writer) NeedLeaderElection() bool { return true }

// Start runs the workers until ctx is done.
func (w *Writer) Start(ctx context.Context) error {
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
func (w *Writer) next(ctx context.Context) bool {
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
func (w *Writer) write(ctx context.Context, name types.NamespacedName) error {
	w.mu.Lock()
	e, ok := w.latest[name]
	wait := w.waitLocked(name, e.urgent)
	w.mu.Unlock()
	if !ok {
		return nil
	}
	if wait > 0 { // queued again (a retry, a re-add) inside the pacing interval
		w.queue.AddAfter(name, wait)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	cached := &v1beta1.ServiceRegistry{}
	// Read only (UID, resourceVersion, status): no copy of the cached object.
	if err := w.client.Get(ctx, name, cached, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(name)
			return nil
		}
		return fmt.Errorf("get ServiceRegistry %s: %w", name, err)
	}
	if cached.UID != e.uid {
		return nil // replaced by a new object: its own reconcile submits its status
	}
	base := w.baseOf(name, cached)
	if equality.Semantic.DeepEqual(base.status, e.status) {
		return nil
	}
	if wait := w.budgetWait(name, e.urgent); wait > 0 {
		w.queue.AddAfter(name, wait)
		return nil
	}
	// Before the write: its update event may reach the informer before the write returns.
	// e.status is the writer's own copy, never modified (submit and base copy).
	w.echoes.Writing(name, e.uid, e.status)
	rv, err := w.apply(ctx, name, base.rv, e.status)
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(name)
			return nil
		}
		return err
	}
	kind := "paced"
	if e.urgent {
		kind = "urgent"
	}
	metrics.StatusWrites.WithLabelValues(kind).Inc()
	w.mu.Lock()
	w.written[name] = writtenEntry{uid: e.uid, from: base.rv, rv: rv, status: e.status}
	w.lastWrite[name] = w.clock.Now()
	if cur, ok := w.latest[name]; ok && cur.uid == e.uid && cur.seq == e.seq {
		cur.urgent = false // written: a later submission is paced after this write
		w.latest[name] = cur
	}
	w.mu.Unlock()
	return nil
}

// budgetWait is how long a paced write of the registry has to wait for the operator-wide
// budget: 0 when it may write now (urgent, no budget, a token free, or its reserved slot
// has come), else until its slot. A registry that has to wait reserves one slot and keeps
// it across re-queues, so waiting registries take the budget's slots in turn.
func (w *Writer) budgetWait(name types.NamespacedName, urgent bool) time.Duration {
	if w.budget == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if at, ok := w.slot[name]; ok {
		if urgent || !now.Before(at) {
			delete(w.slot, name) // an urgent write does not wait; its slot's token is spent
			return 0
		}
		return at.Sub(now)
	}
	if urgent {
		return 0
	}
	wait := w.budget.ReserveN(now, 1).DelayFrom(now)
	if wait <= 0 {
		return 0
	}
	w.slot[name] = now.Add(wait)
	metrics.StatusWritesDeferred.Inc()
	return wait
}

// statusBase is the status the server holds as far as the writer knows, and its
// resourceVersion.
type statusBase struct {
	rv     string
	status v1beta1.ServiceRegistryStatus
}

// baseOf is the cached object's status, or the one the writer's last write returned while
// the cache still shows the version before it.
func (w *Writer) baseOf(name types.NamespacedName, cached *v1beta1.ServiceRegistry) statusBase {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.written[name]; ok && last.uid == cached.UID && last.from == cached.ResourceVersion {
		return statusBase{rv: last.rv, status: last.status}
	}
	return statusBase{rv: cached.ResourceVersion, status: cached.Status}
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// apply replaces the registry's status with st over resourceVersion rv and returns the new
// resourceVersion. It is a JSON patch of two operations: the resourceVersion it was computed
// over (an optimistic lock: the server answers 409 Conflict when the object moved on, and the
// write is retried over the newer one rather than over a status it did not see) and the whole
// status (so nothing is diffed, and a field that went back to its zero value is written too).
// The request asks for the object's metadata only (PartialObjectMetadata): the server does not
// send the registry back, and only its resourceVersion is read.
func (w *Writer) apply(ctx context.Context, name types.NamespacedName, rv string, st v1beta1.ServiceRegistryStatus) (string, error) {
	body, err := json.Marshal([]jsonPatchOp{
		{Op: "replace", Path: "/metadata/resourceVersion", Value: rv},
		{Op: "add", Path: "/status", Value: st}, // add replaces a member that exists
	})
	if err != nil {
		return "", fmt.Errorf("encode status of %s: %w", name, err)
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("ServiceRegistry"))
	obj.Namespace, obj.Name = name.Namespace, name.Name
	if err := w.client.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body)); err != nil {
		return "", fmt.Errorf("patch status of %s: %w", name, err)
	}
	return obj.ResourceVersion, nil
}

// Echoes is the record of the statuses being written, for the predicates that drop their
// echoes (the gate releaser's, and the registry controller's own and peers watches).
func (w *Writer) Echoes() *echo.Statuses { return w.echoes }

// Holds reports whether the writer still holds a status for the registry.
func (w *Writer) Holds(name types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.latest[name]
	return ok
}
