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
