package ctrlrt

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestReconcileTriggers(t *testing.T) {
	web := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	api := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "api"}}
	tr := NewTriggers()
	if got := tr.Take(web); got != TriggerRequeue {
		t.Fatalf("nothing noted: %q, want %q", got, TriggerRequeue)
	}
	tr.Note(web, TriggerPod)
	tr.Note(web, TriggerStoreWatch) // coalesced into the same reconcile: the first counts
	tr.Note(api, TriggerRegistry)
	if got := tr.Take(web); got != TriggerPod {
		t.Fatalf("first trigger: %q, want %q", got, TriggerPod)
	}
	if got := tr.Take(web); got != TriggerRequeue {
		t.Fatalf("taken twice: %q, want %q", got, TriggerRequeue)
	}
	tr.Forget(api.NamespacedName)
	if got := tr.Take(api); got != TriggerRequeue {
		t.Fatalf("forgotten: %q, want %q", got, TriggerRequeue)
	}
	var nilTriggers *Triggers
	nilTriggers.Note(web, TriggerPod)
	if got := nilTriggers.Take(web); got != TriggerRequeue {
		t.Fatalf("nil: %q", got)
	}
}

// The wrapped handler notes what it adds, through a priority queue (kept one, so that the
// handlers still set priorities) and through a plain rate-limited queue.
func TestTriggeredHandler(t *testing.T) {
	reg := &v1beta1.ServiceRegistry{}
	reg.Namespace, reg.Name = "ns", "web"
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	queues := map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{
		"priority": priorityqueue.New[reconcile.Request]("test"),
		"plain":    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()),
	}
	for name, q := range queues {
		t.Run(name, func(t *testing.T) {
			defer q.ShutDown()
			tr := NewTriggers()
			h := tr.Handler(TriggerRegistry, &handler.EnqueueRequestForObject{})
			if name == "priority" {
				if _, ok := (triggeredHandler{t: tr}).queue(q).(priorityqueue.PriorityQueue[reconcile.Request]); !ok {
					t.Fatal("a wrapped priority queue is no priority queue any more")
				}
			}
			h.Create(context.Background(), event.CreateEvent{Object: reg}, q)
			got, _ := q.Get()
			if got != req {
				t.Fatalf("queued %v, want %v", got, req)
			}
			if tr := tr.Take(req); tr != TriggerRegistry {
				t.Fatalf("trigger %q, want %q", tr, TriggerRegistry)
			}
		})
	}
}
