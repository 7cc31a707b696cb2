package clients

import (
	"slices"
	"strings"
	"testing"
)

// show renders a subscription: "*" for a wildcard, then its names, sorted.
func show(s Subscription) string {
	var out []string
	if s.Wildcard {
		out = append(out, "*")
	}
	for n := range s.Names {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestSubscriptionRules: what a stream subscribes to after each request, state of the world
// and delta (Subscription).
func TestSubscriptionRules(t *testing.T) {
	type step struct {
		names, unsub []string // unsub: delta only
		want         string
	}
	for _, tc := range []struct {
		name  string
		delta bool
		steps []step
	}{
		{name: "sotw: no names first is the legacy wildcard, while none are named", steps: []step{
			{names: nil, want: "*"}, {names: []string{}, want: "*"}, {names: []string{"a"}, want: "a"}}},
		{name: "sotw: an empty request after names subscribes to nothing", steps: []step{
			{names: []string{"a", "b"}, want: "a,b"}, {names: nil, want: ""}, {names: []string{"b"}, want: "b"}}},
		{name: "sotw: \"*\" is a wildcard, with names or alone; an empty request after it is nothing", steps: []step{
			{names: []string{"*"}, want: "*"}, {names: []string{"a", "*"}, want: "*,a"}, {names: []string{"a"}, want: "a"},
			{names: []string{"*"}, want: "*"}, {names: nil, want: ""}}},
		{name: "delta: no names first is the legacy wildcard; unsubscribing \"*\" alone keeps it", delta: true, steps: []step{
			{want: "*"}, {unsub: []string{"*"}, want: "*"}, {names: []string{"a"}, want: "*,a"},
			{unsub: []string{"*"}, want: "a"}, {unsub: []string{"a"}, want: ""}}},
		{name: "delta: names first, then \"*\" and back", delta: true, steps: []step{
			{names: []string{"a", "b"}, want: "a,b"}, {unsub: []string{"a"}, want: "b"}, {names: []string{"*"}, want: "*,b"},
			{unsub: []string{"*", "b"}, want: ""}, {want: ""}}},
	} {
		var s Subscription
		for i, st := range tc.steps {
			if tc.delta {
				s.Delta(st.names, st.unsub)
			} else {
				s.Sotw(st.names)
			}
			if got := show(s); got != st.want {
				t.Errorf("%s, step %d: %q, want %q", tc.name, i+1, got, st.want)
			}
		}
	}
}

func TestAsksForMore(t *testing.T) {
	sub := func(names ...string) Subscription {
		var s Subscription
		s.Sotw(append([]string{"x"}, names...)) // named: an empty request is not a wildcard
		s.Sotw(names)
		return s
	}
	for _, tc := range []struct {
		name        string
		prev, names Subscription
		want        bool
	}{
		{"same names (an ACK)", sub("a", "b"), sub("a", "b"), false},
		{"fewer names", sub("a", "b"), sub("a"), false},
		{"a new name", sub("a"), sub("a", "b"), true},
		{"other names", sub("a"), sub("b"), true},
		{"nothing after names (unsubscribed)", sub("a"), sub(), false},
		{"\"*\" after names", sub("a"), sub("*"), true},
		{"\"*\" after \"*\"", sub("*"), sub("*", "a"), false},
		{"names after \"*\"", sub("*"), sub("a"), false},
	} {
		if got := tc.names.AsksForMore(&tc.prev); got != tc.want {
			t.Errorf("%s: AsksForMore = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSubscribeSequence follows one stream's EDS requests as the request limit sees them:
// what each asks for anew, and the subscription after it.
func TestSubscribeSequence(t *testing.T) {
	const eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	st := &clientState{subs: map[string]*Subscription{}, lastNames: map[string][]string{}}
	for _, step := range []struct {
		name    string
		names   []string
		newOnes bool
		subs    string
	}{
		{"first request", []string{"a", "b"}, true, "a,b"},
		{"ACK with the same names", []string{"a", "b"}, false, "a,b"},
		{"same names, other order", []string{"b", "a"}, false, "a,b"},
		{"one name dropped", []string{"b"}, false, "b"},
		{"a duplicate of the one left", []string{"b", "b"}, false, "b"},
		{"a new name", []string{"b", "c"}, true, "b,c"},
		{"explicit wildcard", []string{"*"}, true, "*"},
		{"wildcard again", []string{"*"}, false, "*"},
		{"names after wildcard", []string{"a"}, false, "a"},
		{"nothing: unsubscribed", []string{}, false, ""},
		{"a name again", []string{"a"}, true, "a"},
	} {
		if got := st.subscribe(eds, step.names); got != step.newOnes {
			t.Errorf("%s: subscribe = %v, want %v", step.name, got, step.newOnes)
		}
		if got := show(*st.subs[eds]); got != step.subs {
			t.Errorf("%s: subscription %q, want %q", step.name, got, step.subs)
		}
	}
	// A first request naming nothing is the legacy wildcard.
	st = &clientState{subs: map[string]*Subscription{}, lastNames: map[string][]string{}}
	if !st.subscribe(eds, nil) || show(*st.subs[eds]) != "*" {
		t.Errorf("a first request naming nothing: %q, want the wildcard", show(*st.subs[eds]))
	}
}
