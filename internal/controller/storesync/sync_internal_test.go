package storesync

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/memory"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/store/storetest"
)

// syncFixture runs a Syncer against two in-memory stores, a and b.
type syncFixture struct {
	r    *Syncer
	a, b *memory.Store
	reg  *v1beta1.ServiceRegistry
}

func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	a, b := memory.New(0), memory.New(0)
	stores, err := multi.New([]multi.Named{{Name: "a", Store: a}, {Name: "b", Store: b}}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{
		Stores: stores, Recorder: events.NewFakeRecorder(1000),
		Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
	})
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID("uid-web")},
		Spec:       v1beta1.ServiceRegistrySpec{Stores: []string{"a", "b"}},
	}
	return &syncFixture{r: r, a: a, b: b, reg: reg}
}

// scopeOf is the registry's scope as the reconciler computes it.
func scopeOf(reg *v1beta1.ServiceRegistry) store.Scope {
	return store.Scope{Service: reg.ResolvedServiceName(), Namespace: reg.Namespace}
}

// sync syncs the registry to the desired pods and returns the result and the error.
func (f *syncFixture) sync(t *testing.T, pods ...string) (Result, error) {
	t.Helper()
	req := Request{Registry: f.reg, Target: scopeOf(f.reg), Desired: map[string]store.Endpoint{}}
	for i, pod := range pods {
		ep := storetest.Endpoint(req.Target, pod, "10.0.0."+string(rune('1'+i)), string(f.reg.UID))
		ep.RegisteredAt = time.Time{}
		req.Desired[pod] = ep
	}
	return f.r.Sync(context.Background(), req)
}

func podsIn(t *testing.T, s *memory.Store) []string {
	t.Helper()
	recs, err := s.List(context.Background(), store.Scope{Service: "web", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Pod)
	}
	slices.Sort(out)
	return out
}

func TestSyncEachStoreOnItsOwn(t *testing.T) {
	f := newSyncFixture(t)
	if _, err := f.sync(t, "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	f.b.Fail(memory.ErrDown)
	for _, round := range [][]string{{"p2", "p3"}, {"p3"}, {"p3", "p4", "p5"}} {
		s, err := f.sync(t, round...)
		if err == nil || !strings.Contains(err.Error(), "store b") {
			t.Fatalf("sync with b down: error %v, want one naming store b", err)
		}
		if got := podsIn(t, f.a); !slices.Equal(got, round) {
			t.Fatalf("store a holds %v, want %v: b being down held it back", got, round)
		}
		st := s.Stores
		if len(st) != 2 || st[0].Name != "a" || st[0].Err != nil || len(st[0].Records) != len(round) ||
			st[1].Name != "b" || st[1].Err == nil || !strings.Contains(st[1].Err.Error(), "down") || st[1].Records != nil {
			t.Fatalf("stores = %+v", st)
		}
	}
	f.b.Fail(nil)
	s, err := f.sync(t, "p3", "p4", "p5")
	if err != nil {
		t.Fatal(err)
	}
	if got := podsIn(t, f.b); !slices.Equal(got, []string{"p3", "p4", "p5"}) {
		t.Fatalf("store b holds %v after it came back", got)
	}
	if len(s.Stored) != 3 {
		t.Errorf("stored = %v, want the 3 pods both stores hold", s.Stored)
	}
}

func TestSyncRepairsDrift(t *testing.T) {
	f := newSyncFixture(t)
	if _, err := f.sync(t, "p1", "p2", "p3"); err != nil {
		t.Fatal(err)
	}
	scope := scopeOf(f.reg)
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	recs, _ := f.a.List(context.Background(), scope)
	rewritten := recs[1].Endpoint
	rewritten.Address = "10.6.6.6"
	foreign := storetest.Endpoint(scope, "other", "10.9.9.9", "someone-else")
	// What the store's watch reports: each change not explained by the known records.
	for _, c := range []store.Change{
		f.a.Tamper(scope, "p1", nil), f.a.Tamper(scope, "p2", &rewritten), f.a.Tamper(scope, "other", &foreign),
	} {
		if !f.r.known.note(name, "a", c) {
			t.Errorf("change %+v not noted", c)
		}
	}
	// This operator's own write, echoed back: already explained, no reconcile needed.
	own, _ := f.b.List(context.Background(), scope)
	if f.r.known.note(name, "b", store.Change{Service: "web", Namespace: "ns", Pod: own[0].Pod, Revision: own[0].Revision}) {
		t.Error("an echo of this operator's own write asked for a reconcile")
	}
	if _, err := f.sync(t, "p1", "p2", "p3"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.a.List(context.Background(), scope)
	for _, r := range got {
		switch r.Pod {
		case "other":
			if r.Owner != "someone-else" || r.Address != "10.9.9.9" {
				t.Errorf("foreign record touched: %+v", r.Endpoint)
			}
		case "p2":
			if r.Address == "10.6.6.6" {
				t.Error("rewritten record not repaired")
			}
		}
	}
	if pods := podsIn(t, f.a); !slices.Equal(pods, []string{"other", "p1", "p2", "p3"}) {
		t.Errorf("store a holds %v", pods)
	}
	// Known again: the next sync plans from memory and writes nothing.
	if _, stale, ok := f.r.known.get(name, "a", f.reg.UID, scope); !ok || stale {
		t.Errorf("known records of a: ok %v stale %v after the repair", ok, stale)
	}
}

// The stores a registry goes to are its spec.stores (immutable), not part of the scope the
// backends see: a registry naming none writes the defaults only, and RemoveOwned clears
// every store it names.
func TestTargetsAreTheRegistrysStores(t *testing.T) {
	f := newSyncFixture(t)
	f.reg.Spec.Stores = nil
	if _, err := f.sync(t, "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	if got := podsIn(t, f.a); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("default store a holds %v", got)
	}
	if got := podsIn(t, f.b); len(got) != 0 {
		t.Fatalf("store b, which the registry does not name, holds %v", got)
	}

	both := newSyncFixture(t)
	if _, err := both.sync(t, "p1", "p2"); err != nil {
		t.Fatal(err)
	}
	if err := both.r.RemoveOwned(context.Background(), both.reg, scopeOf(both.reg)); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*memory.Store{"a": both.a, "b": both.b} {
		if got := podsIn(t, s); len(got) != 0 {
			t.Errorf("store %s still holds %v after RemoveOwned", name, got)
		}
	}
}
