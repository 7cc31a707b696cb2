package etcd_test

import (
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
)

// TestListHostileKeys: keys under a scope that are not {scope}/{one pod segment} — written by
// someone else, even with registrar's owner in the value — are listed unowned, so a plan never
// deletes or rewrites them (a guarded write to Key(pod) would address another key).
func TestListHostileKeys(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	base := f.store.Key(scope, "")
	owned := mustJSON(t, ep("x")) // owner reg-uid, as if registrar wrote it
	hostile := []string{base + "/", base + "/a/b", base + "/a/", base + "/..", base + "/."}
	for _, k := range hostile {
		f.put(t, k, owned)
	}
	records := f.listByPod(t, scope)
	if len(records) != len(hostile) {
		t.Fatalf("listed %d records, want %d: %+v", len(records), len(hostile), records)
	}
	current := map[string]store.Record{}
	for pod, r := range records {
		if r.Owner != "" {
			t.Errorf("record at %q has owner %q; want none", r.Key, r.Owner)
		}
		current[pod] = r
	}
	p := plan.Compute("reg-uid", nil, current, regAt)
	if p.Changes.Len() != 0 {
		t.Errorf("plan touches hostile keys: %+v", p.Changes)
	}
}

// TestApplyRejectsNamesThatAreNotOneSegment: Apply refuses, before any write, a scope or pod
// name that path.Join would clean into another key.
func TestApplyRejectsNamesThatAreNotOneSegment(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	cases := []struct {
		name  string
		scope store.Scope
		pod   string
	}{
		{"pod with slash", scope, "a/b"},
		{"pod dotdot", scope, ".."},
		{"empty pod", scope, ""},
		{"service dotdot", store.Scope{Service: "..", Namespace: "shop"}, "web-0"},
		{"namespace with slash", store.Scope{Service: "web", Namespace: "a/b"}, "web-0"},
		{"empty service", store.Scope{Namespace: "shop"}, "web-0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := ep(tc.pod)
			_, err := f.store.Apply(ctx(t), tc.scope, store.Changes{Create: []store.Endpoint{e}})
			if err == nil || !strings.Contains(err.Error(), "not a valid store key segment") {
				t.Fatalf("Apply = %v, want a key segment error", err)
			}
			if _, err := f.store.List(ctx(t), tc.scope); tc.scope != scope && err == nil {
				t.Errorf("List of scope %+v succeeded", tc.scope)
			}
		})
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("rejected writes left keys %v", keys)
	}
}
