package ctrlrt

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/metrics"
)

// Reconcile triggers: what enqueued a ServiceRegistry, the trigger label of
// registrar_reconciles_total. Reconciles per pod transition are the lever of issue 16 (CPU
// per transition): the label says where the ones beyond the first come from.
const (
	TriggerPod            = "pod"             // a pod the registry selects, or selected, changed
	TriggerRegistry       = "registry"        // the registry itself changed
	TriggerServicePeer    = "service-peer"    // another registry of its service changed
	TriggerStoreWatch     = "store-watch"     // a store change its known records did not explain
	TriggerStoreResync    = "store-resync"    // the periodic re-read, or a store watch that missed changes
	TriggerStoreRecovered = "store-recovered" // the store answers again after an outage
	TriggerLease          = "lease"           // a node Lease renewed after a lapse
	TriggerRequeue        = "requeue"         // nothing noted: RequeueAfter, a retry after an error, a shard taken over
)

// Triggers remembers, for each queued request, what enqueued it first since its
// last reconcile began; the reconcile takes it (take) and counts itself under it. Requests
// coalesce in the queue, so one reconcile counts once, under its first trigger. Entries exist
// only for requests enqueued and not yet reconciled (at most one per registry).
type Triggers struct {
	mu      sync.Mutex
	pending map[reconcile.Request]string
}

func NewTriggers() *Triggers {
	return &Triggers{pending: map[reconcile.Request]string{}}
}

// Note records trigger for req unless an earlier trigger is waiting.
func (t *Triggers) Note(req reconcile.Request, trigger string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pending[req]; !ok {
		t.pending[req] = trigger
	}
}

// Take returns and clears the trigger of req (TriggerRequeue when none was noted).
func (t *Triggers) Take(req reconcile.Request) string {
	if t == nil {
		return TriggerRequeue
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	trigger, ok := t.pending[req]
	if !ok {
		return TriggerRequeue
	}
	delete(t.pending, req)
	return trigger
}

// Forget drops what is noted for a registry that is gone.
func (t *Triggers) Forget(name types.NamespacedName) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, reconcile.Request{NamespacedName: name})
}

// CountReconcile counts one reconcile of req under its trigger.
func (t *Triggers) CountReconcile(req reconcile.Request) {
	metrics.Reconciles.WithLabelValues(t.Take(req)).Inc()
}

// Handler wraps h so that every request it enqueues is noted under trigger first.
func (t *Triggers) Handler(trigger string, h handler.EventHandler) handler.EventHandler {
	return triggeredHandler{h: h, t: t, trigger: trigger}
}

type triggeredHandler struct {
	h       handler.EventHandler
	t       *Triggers
	trigger string
}

func (th triggeredHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	th.h.Create(ctx, e, th.queue(q))
}

func (th triggeredHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	th.h.Update(ctx, e, th.queue(q))
}

func (th triggeredHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	th.h.Delete(ctx, e, th.queue(q))
}

func (th triggeredHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	th.h.Generic(ctx, e, th.queue(q))
}

// queue wraps q so that its adds are noted; a priority queue stays one (the handlers give
// the events of the initial list a low priority through it).
func (th triggeredHandler) queue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return triggeredPriorityQueue{triggeredQueue: triggeredQueue{TypedRateLimitingInterface: pq, t: th.t, trigger: th.trigger}, pq: pq}
	}
	return triggeredQueue{TypedRateLimitingInterface: q, t: th.t, trigger: th.trigger}
}

type triggeredQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	t       *Triggers
	trigger string
}

func (q triggeredQueue) Add(r reconcile.Request) {
	q.t.Note(r, q.trigger)
	q.TypedRateLimitingInterface.Add(r)
}

func (q triggeredQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.t.Note(r, q.trigger)
	q.TypedRateLimitingInterface.AddAfter(r, d)
}

func (q triggeredQueue) AddRateLimited(r reconcile.Request) {
	q.t.Note(r, q.trigger)
	q.TypedRateLimitingInterface.AddRateLimited(r)
}

// triggeredPriorityQueue notes Add, AddAfter and AddRateLimited through its triggeredQueue
// (over the same queue) and AddWithOpts here; GetWithPriority is the queue's own.
type triggeredPriorityQueue struct {
	triggeredQueue
	pq priorityqueue.PriorityQueue[reconcile.Request]
}

func (q triggeredPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, r := range items {
		q.t.Note(r, q.trigger)
	}
	q.pq.AddWithOpts(o, items...)
}

func (q triggeredPriorityQueue) GetWithPriority() (reconcile.Request, int, bool) {
	return q.pq.GetWithPriority()
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = triggeredPriorityQueue{}
