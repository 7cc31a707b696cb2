package xds

import "testing"

func TestAsksForMore(t *testing.T) {
	set := func(names ...string) map[string]bool {
		if len(names) == 0 {
			return nil
		}
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		prev, names map[string]bool
		want        bool
	}{
		{"same names (an ACK)", set("a", "b"), set("a", "b"), false},
		{"fewer names", set("a", "b"), set("a"), false},
		{"a new name", set("a"), set("a", "b"), true},
		{"other names", set("a"), set("b"), true},
		{"wildcard after names", set("a"), set(), true},
		{"wildcard after wildcard", set(), set(), false},
		{"names after wildcard", set(), set("a"), false},
	} {
		if got := asksForMore(tc.prev, tc.names); got != tc.want {
			t.Errorf("%s: asksForMore = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSubscribeSequence follows one stream's EDS requests: what each asks for anew, and the
// subscriptions the readiness gate's wait reads after it.
func TestSubscribeSequence(t *testing.T) {
	const eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	st := &clientState{names: map[string]map[string]bool{}, lastNames: map[string][]string{}}
	for _, step := range []struct {
		name    string
		names   []string
		newOnes bool
		subs    []string // nil: a wildcard
	}{
		{"first request", []string{"a", "b"}, true, []string{"a", "b"}},
		{"ACK with the same names", []string{"a", "b"}, false, []string{"a", "b"}},
		{"same names, other order", []string{"b", "a"}, false, []string{"a", "b"}},
		{"one name dropped", []string{"b"}, false, []string{"b"}},
		{"a duplicate of the one left", []string{"b", "b"}, false, []string{"b"}},
		{"a new name", []string{"b", "c"}, true, []string{"b", "c"}},
		{"wildcard", nil, true, nil},
		{"wildcard again", []string{}, false, nil},
		{"names after wildcard", []string{"a"}, false, []string{"a"}},
	} {
		if got := st.subscribe(eds, step.names); got != step.newOnes {
			t.Errorf("%s: subscribe = %v, want %v", step.name, got, step.newOnes)
		}
		if all := step.subs == nil; st.edsAll != all {
			t.Errorf("%s: edsAll = %v, want %v", step.name, st.edsAll, all)
		}
		if len(st.edsSubs) != len(step.subs) {
			t.Errorf("%s: edsSubs = %v, want %v", step.name, st.edsSubs, step.subs)
		}
		for _, n := range step.subs {
			if !st.edsSubs[n] {
				t.Errorf("%s: edsSubs = %v, want %v", step.name, st.edsSubs, step.subs)
			}
		}
	}
}
