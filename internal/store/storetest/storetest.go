// Package storetest is the conformance suite of store.Store: every backend (etcd, CoreDNS,
// ZooKeeper, the in-memory store) runs it from its own tests, so that the controller can
// rely on one contract, and unit-test its sync logic against the in-memory store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/registrar-dev/registrar/internal/store"
)

// roundTripped reports whether got, read back from a store, is what was written (want): every
// field, registeredAt as an instant, an empty ports map as good as none. This is the
// store's contract, stricter than plan.Same (which ignores registeredAt to decide whether a
// write is needed); the suite keeps it here so that store backends need not import plan.
func roundTripped(got, want store.Endpoint) bool {
	return cmp.Equal(got, want, cmpopts.EquateEmpty())
}

// NewStore returns a store under test, empty at least in the namespaces the suite uses
// (each subtest uses namespaces of its own, unique per process and run).
type NewStore func(t *testing.T) store.Store

var counter atomic.Int64

// namespace is a namespace unique to this process and call.
// svc is the service most cases write.
const svc = "web"

func namespace() string { return fmt.Sprintf("conf%d-%d", os.Getpid(), counter.Add(1)) }

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Endpoint is a full endpoint of pod in scope, owned by owner.
func Endpoint(scope store.Scope, pod, ip, owner string) store.Endpoint {
	return store.Endpoint{
		Service: scope.Service, Namespace: scope.Namespace, Pod: pod, UID: "uid-" + pod, Address: ip,
		Ports: map[string]int32{"http": 8080, "grpc": 9000}, Node: "node-a", Zone: "zone-a", Cluster: "c1",
		Owner: owner, RegisteredAt: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	}
}

// ServiceOfThousands is how many endpoints of one service the suite writes in one plan.
const ServiceOfThousands = 2000

func list(t *testing.T, s store.Store, scope store.Scope) map[string]store.Record {
	t.Helper()
	return listIn(ctx(t), t, s, scope)
}

func listIn(c context.Context, t *testing.T, s store.Store, scope store.Scope) map[string]store.Record {
	t.Helper()
	recs, err := s.List(c, scope)
	if err != nil {
		t.Fatalf("List %v: %v", scope, err)
	}
	out := map[string]store.Record{}
	for _, r := range recs {
		out[r.Pod] = r
	}
	return out
}

func apply(t *testing.T, s store.Store, scope store.Scope, c store.Changes) []store.Record {
	t.Helper()
	written, err := s.Apply(ctx(t), scope, c)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return written
}

func expectConflict(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("%s: error = %v, want ErrConflict", what, err)
	}
}

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore NewStore) { //nolint:gocyclo // one t.Run per conformance case, in a row
	t.Run("CreateListRoundTrip", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		if got := list(t, s, scope); len(got) != 0 {
			t.Fatalf("fresh scope lists %v", got)
		}
		a, b := Endpoint(scope, "web-0", "10.0.0.1", "owner-1"), Endpoint(scope, "web-1", "10.0.0.2", "owner-1")
		b.Weight = 28 // a slow-start weight round-trips; a's absent one stays absent
		written := apply(t, s, scope, store.Changes{Create: []store.Endpoint{a, b}})
		if len(written) != 2 {
			t.Fatalf("Apply returned %d records, want 2", len(written))
		}
		got := list(t, s, scope)
		if len(got) != 2 {
			t.Fatalf("listed %d records, want 2: %v", len(got), got)
		}
		for _, want := range []store.Endpoint{a, b} {
			rec, ok := got[want.Pod]
			if !ok || !roundTripped(rec.Endpoint, want) {
				t.Errorf("listed %s = %+v, want %+v", want.Pod, rec.Endpoint, want)
			}
			if rec.Revision == 0 || rec.Key == "" {
				t.Errorf("listed %s without a revision or key: %+v", want.Pod, rec)
			}
		}
		for _, w := range written {
			if got[w.Pod].Revision != w.Revision {
				t.Errorf("Apply returned revision %d for %s, List says %d", w.Revision, w.Pod, got[w.Pod].Revision)
			}
		}
	})

	t.Run("CreateIfAbsent", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		first := Endpoint(scope, "web-0", "10.0.0.1", "owner-1")
		apply(t, s, scope, store.Changes{Create: []store.Endpoint{first}})
		second := Endpoint(scope, "web-0", "10.0.0.9", "owner-2")
		_, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{second}})
		expectConflict(t, "create over an existing record", err)
		if got := list(t, s, scope)["web-0"]; !roundTripped(got.Endpoint, first) {
			t.Errorf("the existing record changed: %+v", got.Endpoint)
		}
	})

	t.Run("GuardedUpdate", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		apply(t, s, scope, store.Changes{Create: []store.Endpoint{Endpoint(scope, "web-0", "10.0.0.1", "o")}})
		old := list(t, s, scope)["web-0"]
		moved := Endpoint(scope, "web-0", "10.0.0.2", "o")
		written := apply(t, s, scope, store.Changes{Update: []store.Update{{Old: old, New: moved}}})
		now := list(t, s, scope)["web-0"]
		if !roundTripped(now.Endpoint, moved) || now.Revision == old.Revision {
			t.Fatalf("after update: %+v rev %d (was rev %d)", now.Endpoint, now.Revision, old.Revision)
		}
		if len(written) != 1 || written[0].Revision != now.Revision {
			t.Errorf("Apply returned %+v, List says revision %d", written, now.Revision)
		}
		_, err := s.Apply(ctx(t), scope, store.Changes{Update: []store.Update{{Old: old, New: Endpoint(scope, "web-0", "10.0.0.3", "o")}}})
		expectConflict(t, "update with a stale revision", err)
		if got := list(t, s, scope)["web-0"]; !roundTripped(got.Endpoint, moved) {
			t.Errorf("a stale update landed: %+v", got.Endpoint)
		}
	})

	t.Run("GuardedDelete", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		apply(t, s, scope, store.Changes{Create: []store.Endpoint{Endpoint(scope, "web-0", "10.0.0.1", "o")}})
		old := list(t, s, scope)["web-0"]
		apply(t, s, scope, store.Changes{Update: []store.Update{{Old: old, New: Endpoint(scope, "web-0", "10.0.0.2", "o")}}})
		_, err := s.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{old}})
		expectConflict(t, "delete with a stale revision", err)
		if _, ok := list(t, s, scope)["web-0"]; !ok {
			t.Fatal("a stale delete landed")
		}
		apply(t, s, scope, store.Changes{Delete: []store.Record{list(t, s, scope)["web-0"]}})
		if got := list(t, s, scope); len(got) != 0 {
			t.Errorf("after delete: %v", got)
		}
		_, err = s.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{old}})
		expectConflict(t, "delete of a missing record", err)
	})

	t.Run("ScopesAreApart", func(t *testing.T) {
		s := newStore(t)
		ns, other := namespace(), namespace()
		scopes := []store.Scope{{Service: svc, Namespace: ns}, {Service: "web-2", Namespace: ns}, {Service: svc, Namespace: other}}
		for i, sc := range scopes {
			apply(t, s, sc, store.Changes{Create: []store.Endpoint{Endpoint(sc, fmt.Sprintf("p-%d", i), fmt.Sprintf("10.0.1.%d", i+1), "o")}})
		}
		for i, sc := range scopes {
			got := slices.Sorted(maps.Keys(list(t, s, sc)))
			if want := []string{fmt.Sprintf("p-%d", i)}; !slices.Equal(got, want) {
				t.Errorf("scope %v lists %v, want %v", sc, got, want)
			}
		}
	})

	t.Run("ForeignRecordsListed", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		apply(t, s, scope, store.Changes{Create: []store.Endpoint{Endpoint(scope, "mine", "10.0.0.1", "me"), Endpoint(scope, "theirs", "10.0.0.2", "them")}})
		got := list(t, s, scope)
		if got["mine"].Owner != "me" || got["theirs"].Owner != "them" {
			t.Errorf("owners listed as %q and %q", got["mine"].Owner, got["theirs"].Owner)
		}
	})

	t.Run("LargeChangeSplit", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		eps := make([]store.Endpoint, 0, 300)
		for i := range 300 {
			eps = append(eps, Endpoint(scope, fmt.Sprintf("web-%03d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), "o"))
		}
		if written := apply(t, s, scope, store.Changes{Create: eps}); len(written) != len(eps) {
			t.Errorf("Apply returned %d records, want %d", len(written), len(eps))
		}
		got := list(t, s, scope)
		if len(got) != len(eps) {
			t.Fatalf("listed %d records, want %d", len(got), len(eps))
		}
		del := make([]store.Record, 0, len(got))
		for _, r := range got {
			del = append(del, r)
		}
		apply(t, s, scope, store.Changes{Delete: del})
		if got := list(t, s, scope); len(got) != 0 {
			t.Errorf("%d records left after deleting all", len(got))
		}
	})

	// A service of thousands of pods is planned, written and deleted like a service of
	// three: one plan of ServiceOfThousands creates, then one of as many updates, then one
	// of as many deletes, each one Apply. How the store splits them (operation limits,
	// comparisons included, request sizes) is its own business.
	t.Run("ServiceOfThousands", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		long, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // bounds the whole case
		defer cancel()
		eps := make([]store.Endpoint, 0, ServiceOfThousands)
		for i := range ServiceOfThousands {
			eps = append(eps, Endpoint(scope, fmt.Sprintf("web-%04d", i), fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), "o"))
		}
		written, err := s.Apply(long, scope, store.Changes{Create: eps})
		if err != nil {
			t.Fatalf("Apply of %d creates: %v", len(eps), err)
		}
		if len(written) != len(eps) {
			t.Errorf("Apply returned %d records, want %d", len(written), len(eps))
		}
		got := listIn(long, t, s, scope)
		if len(got) != len(eps) {
			t.Fatalf("listed %d records after creating %d", len(got), len(eps))
		}
		updates := make([]store.Update, 0, len(got))
		for _, e := range eps {
			moved := e
			moved.Weight = 50
			updates = append(updates, store.Update{Old: got[e.Pod], New: moved})
		}
		if _, err := s.Apply(long, scope, store.Changes{Update: updates}); err != nil {
			t.Fatalf("Apply of %d updates: %v", len(updates), err)
		}
		got = listIn(long, t, s, scope)
		del := make([]store.Record, 0, len(got))
		for _, e := range eps {
			rec, ok := got[e.Pod]
			if !ok || rec.Weight != 50 {
				t.Fatalf("after the updates %s is %+v (found %v), want weight 50", e.Pod, rec.Endpoint, ok)
			}
			del = append(del, rec)
		}
		if _, err := s.Apply(long, scope, store.Changes{Delete: del}); err != nil {
			t.Fatalf("Apply of %d deletes: %v", len(del), err)
		}
		if got := listIn(long, t, s, scope); len(got) != 0 {
			t.Errorf("%d records left after deleting all %d", len(got), len(del))
		}
	})

	t.Run("NothingToDo", func(t *testing.T) {
		s := newStore(t)
		scope := store.Scope{Service: svc, Namespace: namespace()}
		if written := apply(t, s, scope, store.Changes{}); len(written) != 0 {
			t.Errorf("empty Apply wrote %v", written)
		}
	})
}
