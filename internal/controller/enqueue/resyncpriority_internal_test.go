package enqueue

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// TestResyncDoesNotDelayPodEvents: a re-read of every scope enqueues every registry at once;
// a registry enqueued by a pod event afterwards must be reconciled first, not after all of
// them (at 20,000 pods a re-read is 2,000 registries: the queue wait of the sweep's pod
// transitions rose from ~2 ms to 64 ms on average when one fell into the measured phase).
// The real controller-runtime priority queue, as the reconciler gets it by default.
func TestResyncDoesNotDelayPodEvents(t *testing.T) {
	reg := func(name string) event.GenericEvent {
		r := &v1beta1.ServiceRegistry{}
		r.Namespace, r.Name = "shop", name
		return event.GenericEvent{Object: r}
	}
	for _, tc := range []struct {
		name     string
		resync   handler.EventHandler
		podFirst bool
	}{
		{"re-reads at low priority (now)", LowPriority(), true},
		{"re-reads as any event (before)", &handler.EnqueueRequestForObject{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("resync-test")
			defer q.ShutDown()
			for i := range 50 {
				tc.resync.Generic(context.Background(), reg(fmt.Sprintf("resync-%02d", i)), q)
			}
			// A pod event's registry, enqueued the way pod events are (no priority).
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}})
			got, _ := q.Get()
			if first := got.Name == "web"; first != tc.podFirst {
				t.Errorf("first reconciled: %s; want the pod event's registry first: %v", got.Name, tc.podFirst)
			}
			if q.Len() != 50 {
				t.Errorf("%d requests left in the queue, want 50", q.Len())
			}
		})
	}
}
