package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/store"
)

// A store change of a key being written is rechecked once the write is recorded: the echo of
// the operator's own write enqueues nothing, a change made by somebody else in the meantime
// (a later revision) still enqueues the registry.
func TestRecheckOfAKeyBeingWritten(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	scope := store.Scope{Service: "web", Namespace: "ns"}
	key := echo.Key{Service: "web", Namespace: "ns", Pod: "web-0"}
	for _, tc := range []struct {
		name string
		// change is the revision the store's watch reports; the write is acknowledged at 5.
		change int64
		want   bool
	}{
		{name: "the write's own echo", change: 5, want: false},
		{name: "somebody else's write after it", change: 7, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ServiceRegistryReconciler{known: newKnownRecords(), writes: echo.NewWrites(), triggers: newReconcileTriggers()}
			a := &antiEntropy{r: r, enqueue: make(chan event.GenericEvent, 1),
				rechecks: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[echoCheck]{})}
			defer a.rechecks.ShutDown()
			r.known.set(name, "", "uid", scope, map[string]store.Record{})
			end := r.writes.Begin([]echo.Key{key})
			// The watch reports the change before the write returns.
			c := store.Change{Service: "web", Namespace: "ns", Pod: "web-0", Revision: tc.change}
			if !r.known.note(name, "", c) {
				t.Fatal("the known records explain a change they cannot know of yet")
			}
			a.rechecks.Add(echoCheck{name: name, key: key})
			a.recheck(context.Background()) // still in flight: waits EchoRecheck again
			if len(a.enqueue) != 0 {
				t.Fatal("enqueued while the write was in flight")
			}
			rec := store.Record{Endpoint: store.Endpoint{Pod: "web-0"}, Revision: 5}
			r.known.set(name, "", "uid", scope, map[string]store.Record{"web-0": rec})
			end()
			a.recheck(context.Background())
			if got := len(a.enqueue) == 1; got != tc.want {
				t.Fatalf("enqueued: %v, want %v", got, tc.want)
			}
			if tc.want {
				if tr := r.triggers.take(reconcile.Request{NamespacedName: name}); tr != TriggerStoreWatch {
					t.Fatalf("trigger %q, want %q", tr, TriggerStoreWatch)
				}
			}
		})
	}
}

// A store change that arrives while a registry's records are being re-read (dropped after a
// key conflict or a failed write, not listed again yet) still enqueues the registry: the
// listing may have been made before the change, and nothing else would bring the registry
// back before its conflict retry (the older of two registries of one service waited ~10 s
// for the key the younger one had just released).
func TestChangeDuringReRead(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "older"}
	scope := store.Scope{Service: "shop", Namespace: "ns"}
	theirs := store.Record{Endpoint: store.Endpoint{Pod: "shop-1", Owner: "younger-uid"}, Revision: 4}
	k := newKnownRecords()
	k.set(name, "", "uid", scope, map[string]store.Record{"shop-1": theirs})
	k.forgetStore(name, "") // a conflict on shop-1: the scope is listed again
	// The younger registry releases the key before the new listing is recorded.
	deleted := store.Change{Service: "shop", Namespace: "ns", Pod: "shop-1", Revision: 6, Deleted: true}
	if !k.note(name, "", deleted) {
		t.Fatal("a change during the re-read does not enqueue the registry")
	}
	if _, _, ok := k.get(name, "", "uid", scope); ok {
		t.Fatal("records dropped for a re-read are served before the scope is listed again")
	}
	// The listing made before the delete is recorded: it must not explain the delete away.
	k.set(name, "", "uid", scope, map[string]store.Record{"shop-1": theirs})
	if _, stale, _ := k.get(name, "", "uid", scope); !stale {
		t.Fatal("a listing older than the reported delete is taken as current")
	}
}
