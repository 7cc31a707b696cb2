package enqueue

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/controller/regcache"
	"github.com/registrar-dev/registrar/internal/controller/storesync"
)

// StoreEvents are the requests store anti-entropy (storesync.AntiEntropy) sends the
// ServiceRegistry controller: repairs seen on a store watch, and periodic re-reads, which go
// into the queue at low priority (LowPriority) so that the pod events that arrive
// meanwhile are never queued behind them (a re-read enqueues every registry at once).
type StoreEvents struct {
	triggers *ctrlrt.Triggers
	// Repairs and Resyncs are the channels the controller watches (source.Channel): Resyncs
	// with LowPriority.
	Repairs chan event.GenericEvent
	Resyncs chan event.GenericEvent
}

// NewStoreEvents returns the store events' channels, noting each request's trigger in triggers.
func NewStoreEvents(triggers *ctrlrt.Triggers) *StoreEvents {
	return &StoreEvents{triggers: triggers, Repairs: make(chan event.GenericEvent, 256), Resyncs: make(chan event.GenericEvent, 256)}
}

// AntiEntropy is the Syncer's anti-entropy, enqueueing through e and finding a store
// change's registries with the cache (regcache.Reader.SameService).
func (e *StoreEvents) AntiEntropy(syncer *storesync.Syncer, cache *regcache.Reader, interval time.Duration) *storesync.AntiEntropy {
	return syncer.AntiEntropy(storesync.AntiEntropyConfig{
		Interval: interval,
		Registries: func(ctx context.Context, ns, service string) ([]types.NamespacedName, error) {
			regs, err := cache.SameService(ctx, ns, service)
			names := make([]types.NamespacedName, len(regs))
			for i, reg := range regs {
				names[i] = client.ObjectKeyFromObject(reg)
			}
			return names, err
		},
		Enqueue: e.send,
	})
}

// send enqueues one registry, noted under its trigger; it waits (the queue drains fast)
// rather than drop a repair.
func (e *StoreEvents) send(ctx context.Context, name types.NamespacedName, resync bool) {
	trigger, to := ctrlrt.TriggerStoreWatch, e.Repairs
	if resync {
		trigger = ctrlrt.TriggerStoreResync
		if e.Resyncs != nil {
			to = e.Resyncs
		}
	}
	e.triggers.Note(reconcile.Request{NamespacedName: name}, trigger)
	obj := &v1beta1.ServiceRegistry{}
	obj.Namespace, obj.Name = name.Namespace, name.Name
	select {
	case to <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// LowPriority enqueues the registry of a generic event (a re-read) at handler.LowPriority,
// below every event's (0), when the queue has priorities (controller-runtime's priority
// queue, the default), else as usual.
func LowPriority() handler.EventHandler {
	return handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		addAt(q, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}, handler.LowPriority)
	}}
}
