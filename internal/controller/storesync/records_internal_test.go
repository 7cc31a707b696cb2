package storesync

import (
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// Records with equal ports share one map once known (each reconcile and listing builds maps
// of its own, kept for as long as the records); records with other ports keep theirs, and
// nothing read back changes.
func TestKnownRecordsShareEqualPorts(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	scope := store.Scope{Service: "web", Namespace: "ns"}
	rec := func(pod string, ports map[string]int32) store.Record {
		return store.Record{Endpoint: store.Endpoint{Pod: pod, Ports: ports}, Revision: 1}
	}
	records := map[string]store.Record{
		"web-0": rec("web-0", map[string]int32{"http": 8080}),
		"web-1": rec("web-1", map[string]int32{"http": 8080}),
		"web-2": rec("web-2", map[string]int32{"http": 8080}),
		"odd":   rec("odd", map[string]int32{"http": 9090}),
		"none":  rec("none", nil),
	}
	want := map[string]map[string]int32{}
	for pod, r := range records {
		want[pod] = maps.Clone(r.Ports)
	}
	k := newKnownRecords()
	k.set(name, "", "uid", scope, records)
	got, _, ok := k.get(name, "", "uid", scope)
	if !ok {
		t.Fatal("nothing known after set")
	}
	for pod, ports := range want {
		if !maps.Equal(got[pod].Ports, ports) {
			t.Errorf("%s: ports %v, want %v", pod, got[pod].Ports, ports)
		}
	}
	if !samePortsMap(got["web-0"].Ports, got["web-1"].Ports) || !samePortsMap(got["web-1"].Ports, got["web-2"].Ports) {
		t.Error("equal ports are not one map")
	}
	if samePortsMap(got["web-0"].Ports, got["odd"].Ports) {
		t.Error("other ports share the map of web-0")
	}
}

// A reported change the records explain by now is dropped, and so is the map that held it
// once empty: every registry whose write echoed early would otherwise keep one.
func TestExplainedChangesLeaveNoPendingMap(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	scope := store.Scope{Service: "web", Namespace: "ns"}
	k := newKnownRecords()
	k.set(name, "", "uid", scope, map[string]store.Record{})
	if !k.note(name, "", store.Change{Service: "web", Namespace: "ns", Pod: "web-0", Revision: 3}) {
		t.Fatal("an unexplained change is not noted")
	}
	rec := store.Record{Endpoint: store.Endpoint{Pod: "web-0"}, Revision: 3}
	k.set(name, "", "uid", scope, map[string]store.Record{"web-0": rec})
	if k.unexplained(name, "") {
		t.Fatal("the write that explains the change left it unexplained")
	}
	if p := k.entries[name][""].pending; p != nil {
		t.Fatalf("pending = %v, want nil once every change is explained", p)
	}
	if _, stale, _ := k.get(name, "", "uid", scope); stale {
		t.Fatal("records stale after every change was explained")
	}
}

// storedEverywhere: a registry's own records that every answering store holds alike.
func TestStoredEverywhere(t *testing.T) {
	const owner = "uid-web"
	rec := func(pod, owner, addr string) store.Record {
		return store.Record{Endpoint: store.Endpoint{Pod: pod, Owner: owner, Address: addr}}
	}
	mine0, mine1, theirs := rec("web-0", owner, "10.0.0.1"), rec("web-1", owner, "10.0.0.2"), rec("web-2", "other", "10.0.0.3")
	moved := rec("web-1", owner, "10.0.0.9")
	for _, tc := range []struct {
		name    string
		results []StoreResult
		want    []string // nil: nothing known
	}{
		{name: "no store answered"},
		{name: "one store, all its own", results: []StoreResult{{Records: map[string]store.Record{"web-0": mine0, "web-1": mine1}}},
			want: []string{"web-0", "web-1"}},
		{name: "one store, another owner's record left out",
			results: []StoreResult{{Records: map[string]store.Record{"web-0": mine0, "web-2": theirs}}}, want: []string{"web-0"}},
		{name: "one store, empty", results: []StoreResult{{Records: nil}}, want: []string{}},
		{name: "two stores: only what both hold alike", results: []StoreResult{
			{Records: map[string]store.Record{"web-0": mine0, "web-1": mine1}},
			{Records: map[string]store.Record{"web-0": mine0, "web-1": moved}},
		}, want: []string{"web-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := storedEverywhere(owner, tc.results)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
				return
			}
			if got == nil {
				t.Fatal("got nil: taken for no store answering")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, pod := range tc.want {
				if _, ok := got[pod]; !ok {
					t.Fatalf("%s missing from %v", pod, got)
				}
			}
		})
	}
}
