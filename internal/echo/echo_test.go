package echo

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func registry() *v1beta1.ServiceRegistry {
	return &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "10",
			Generation: 1, Labels: map[string]string{"a": "b"}, Finalizers: []string{"registrar.dev/store-cleanup"}},
		Spec: v1beta1.ServiceRegistrySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: v1beta1.ServiceRegistryStatus{
			ObservedGeneration: 1, Registered: 1,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready",
				LastTransitionTime: metav1.NewTime(t0)}},
			Endpoints: []v1beta1.EndpointStatus{{Pod: "web-0", State: v1beta1.EndpointRegistered, Since: &metav1.Time{Time: t0}}},
		},
	}
}

// written is the status the operator computes: times to the nanosecond.
func written() v1beta1.ServiceRegistryStatus {
	st := registry().Status
	st.Registered = 0
	st.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(5*time.Second + 123456789))
	st.Endpoints[0].State = v1beta1.EndpointUnready
	st.Endpoints[0].Since = &metav1.Time{Time: t0.Add(5*time.Second + 987654321)}
	return st
}

// storedAs is st as the API server returns it: times to the second.
func storedAs(st v1beta1.ServiceRegistryStatus) v1beta1.ServiceRegistryStatus {
	st.Conditions = append([]metav1.Condition(nil), st.Conditions...)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.NewTime(st.Conditions[i].LastTransitionTime.Truncate(time.Second))
	}
	st.Endpoints = append([]v1beta1.EndpointStatus(nil), st.Endpoints...)
	for i := range st.Endpoints {
		if st.Endpoints[i].Since != nil {
			st.Endpoints[i].Since = &metav1.Time{Time: st.Endpoints[i].Since.Truncate(time.Second)}
		}
	}
	return st
}

func TestIsEcho(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	cases := []struct {
		name string
		// wrote is the status remembered as written (nil: nothing written).
		wrote  *v1beta1.ServiceRegistryStatus
		uid    types.UID
		mutate func(n *v1beta1.ServiceRegistry)
		want   bool
	}{
		{name: "own status write, as stored (times to the second)", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()) }, want: true},
		{name: "own status write, times identical", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = written() }, want: true},
		{name: "nothing remembered", wrote: nil,
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()) }, want: false},
		{name: "remembered for another object of the same name", wrote: ptr(written()), uid: "uid-0",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()) }, want: false},
		{name: "a status written by somebody else", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()); n.Status.Registered = 7 }, want: false},
		{name: "a time a second off", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) {
				n.Status = storedAs(written())
				n.Status.Endpoints[0].Since = &metav1.Time{Time: t0.Add(6 * time.Second)}
			}, want: false},
		{name: "own status, and the spec changed", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) {
				n.Status = storedAs(written())
				n.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
				n.Generation = 2
			}, want: false},
		{name: "own status, and a label changed", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()); n.Labels["a"] = "c" }, want: false},
		{name: "own status, and an annotation added", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) {
				n.Status = storedAs(written())
				n.Annotations = map[string]string{v1beta1.AnnotationConfigError: "x"}
			}, want: false},
		{name: "own status, and deletion requested", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) {
				n.Status = storedAs(written())
				n.DeletionTimestamp = &metav1.Time{Time: t0}
			}, want: false},
		{name: "own status, and a finalizer removed", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) { n.Status = storedAs(written()); n.Finalizers = nil }, want: false},
		{name: "managedFields change with it (server-side bookkeeping)", wrote: ptr(written()), uid: "uid-1",
			mutate: func(n *v1beta1.ServiceRegistry) {
				n.Status = storedAs(written())
				n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "registrar", Subresource: "status"}}
			}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatuses()
			if tc.wrote != nil {
				s.Writing(name, tc.uid, *tc.wrote)
			}
			old := registry()
			cur := registry()
			cur.ResourceVersion = "11"
			tc.mutate(cur)
			if got := s.IsEcho(old, cur); got != tc.want {
				t.Fatalf("IsEcho = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsEchoAfterForget(t *testing.T) {
	s := NewStatuses()
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	s.Writing(name, "uid-1", written())
	s.Forget(name)
	cur := registry()
	cur.Status = storedAs(written())
	if s.IsEcho(registry(), cur) {
		t.Fatal("an echo recognised after Forget")
	}
}

func TestStatusOnly(t *testing.T) {
	if !StatusOnly(registry(), registry()) {
		t.Fatal("identical objects are a status-only (empty) change")
	}
	cur := registry()
	cur.Status.Registered = 5
	cur.ResourceVersion = "12"
	if !StatusOnly(registry(), cur) {
		t.Fatal("a status change is status-only")
	}
	cur.Spec.ServiceName = "other"
	if StatusOnly(registry(), cur) {
		t.Fatal("a spec change is not status-only")
	}
	if StatusOnly(nil, cur) || StatusOnly(cur, nil) {
		t.Fatal("a missing object is not status-only")
	}
}

// TestStatusOnlyRemembered: Statuses.StatusOnly answers as StatusOnly, remembering the answer
// per UID and pair of resourceVersions, and only for that update.
func TestStatusOnlyRemembered(t *testing.T) {
	s := NewStatuses()
	old := registry()
	old.ResourceVersion = "100"
	statusChange := registry()
	statusChange.ResourceVersion = "101"
	statusChange.Status.Registered = 3
	specChange := registry()
	specChange.ResourceVersion = "102"
	specChange.Spec.ServiceName = "other"
	otherUID := specChange.DeepCopy()
	otherUID.UID, otherUID.ResourceVersion = "uid-2", "101"
	byHand := specChange.DeepCopy()
	byHand.ResourceVersion = ""
	for range 3 {
		if !s.StatusOnly(old, statusChange) {
			t.Fatal("100 -> 101 changed the status only")
		}
		if s.StatusOnly(old, specChange) {
			t.Fatal("100 -> 102 changed the spec")
		}
		if s.StatusOnly(old, otherUID) {
			t.Fatal("another object (UID) with the version of a status-only update")
		}
		if s.StatusOnly(old, byHand) || s.StatusOnly(nil, old) || s.StatusOnly(old, nil) {
			t.Fatal("an object without a version, or none, is compared anew")
		}
	}
}

func TestWrites(t *testing.T) {
	w := NewWrites()
	a := Key{Service: "web", Namespace: "ns", Pod: "web-0"}
	b := Key{Service: "web", Namespace: "ns", Pod: "web-1"}
	if inFlight(w, a) {
		t.Fatal("nothing begun, yet in flight")
	}
	end1 := w.Begin([]Key{a, b})
	end2 := w.Begin([]Key{a})
	if !inFlight(w, a) || !inFlight(w, b) {
		t.Fatal("begun keys not in flight")
	}
	end1()
	end1() // a second call changes nothing
	if !inFlight(w, a) {
		t.Fatal("a is still in the second write")
	}
	if inFlight(w, b) {
		t.Fatal("b ended")
	}
	end2()
	if inFlight(w, a) || len(w.inFlight) != 0 {
		t.Fatalf("everything ended, yet %v in flight", w.inFlight)
	}
	if inFlight(w, Key{Store: "other", Service: "web", Namespace: "ns", Pod: "web-0"}) {
		t.Fatal("a key of another store in flight")
	}
}

// AfterEnd calls its function once, when the last write of the key ends, and not at all for
// a key with nothing in flight.
func TestAfterEnd(t *testing.T) {
	w := NewWrites()
	a := Key{Service: "web", Namespace: "ns", Pod: "web-0"}
	b := Key{Service: "web", Namespace: "ns", Pod: "web-1"}
	calls := map[string]int{}
	note := func(name string) func() { return func() { calls[name]++ } }
	if w.AfterEnd(a, note("idle")) {
		t.Fatal("AfterEnd of a key with nothing in flight arranged a call")
	}
	end1 := w.Begin([]Key{a, b})
	end2 := w.Begin([]Key{a})
	for _, k := range []Key{a, a, b} { // two calls arranged for a
		if !w.AfterEnd(k, note(k.Pod)) {
			t.Fatalf("AfterEnd of %v, in flight, arranged no call", k)
		}
	}
	end1()
	if calls["web-0"] != 0 || calls["web-1"] != 1 {
		t.Fatalf("after the first write ended: %v, want only b called", calls)
	}
	end2()
	end2()
	end1()
	if calls["web-0"] != 2 || calls["web-1"] != 1 || calls["idle"] != 0 {
		t.Fatalf("after every write ended: %v, want a twice (two arranged), b once, idle never", calls)
	}
	if len(w.after) != 0 {
		t.Fatalf("functions kept after their keys ended: %v", w.after)
	}
	// A function may begin and end writes of its own key (it runs outside the lock).
	end3 := w.Begin([]Key{a})
	w.AfterEnd(a, func() { w.Begin([]Key{a})() })
	end3()
	if inFlight(w, a) {
		t.Fatal("a write begun and ended by an AfterEnd function left its key in flight")
	}
}

func TestNilWrites(t *testing.T) {
	var w *Writes
	k := Key{Service: "web", Namespace: "ns", Pod: "web-0"}
	end := w.Begin([]Key{k})
	if inFlight(w, k) {
		t.Fatal("a nil tracker has a key in flight")
	}
	if w.AfterEnd(k, func() { t.Fatal("called") }) {
		t.Fatal("a nil tracker arranged a call")
	}
	end()
}

func ptr[T any](v T) *T { return &v }

// inFlight reports whether k is being written, as AfterEnd sees it.
func inFlight(w *Writes, k Key) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight[k] > 0
}
