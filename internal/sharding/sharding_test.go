package sharding

import (
	"fmt"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestShardOf(t *testing.T) {
	for _, tc := range []struct {
		ns     string
		shards int
	}{{"default", 32}, {"team-a", 32}, {"", 32}, {"x", 1}, {"x", 0}, {"kube-system", 7}} {
		s := ShardOf(tc.ns, tc.shards)
		if s < 0 || s >= max(tc.shards, 1) {
			t.Errorf("ShardOf(%q, %d) = %d, out of range", tc.ns, tc.shards, s)
		}
		if again := ShardOf(tc.ns, tc.shards); again != s {
			t.Errorf("ShardOf(%q) not stable: %d then %d", tc.ns, s, again)
		}
	}
	// Stable across releases: the fence keys of a running installation depend on it.
	if got := ShardOf("default", 32); got != 30 {
		t.Errorf("ShardOf(default, 32) = %d; changing the hash moves every namespace's fence", got)
	}
}

func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
		want    string
	}{
		{"no members", nil, ""},
		{"one member owns everything", []string{"a"}, "a"},
		{"order does not matter", []string{"c", "a", "b"}, Owner(3, []string{"a", "b", "c"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owner(3, tc.members); got != tc.want {
				t.Errorf("Owner = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAssignmentMovesLittle: a member joining takes shards only for itself, one leaving
// gives up only its own, and the spread is even enough.
func TestAssignmentMovesLittle(t *testing.T) {
	const shards = 64
	for _, tc := range []struct {
		name          string
		before, after []string
	}{
		{"join 3 to 4", []string{"r-0", "r-1", "r-2"}, []string{"r-0", "r-1", "r-2", "r-3"}},
		{"leave 3 to 2", []string{"r-0", "r-1", "r-2"}, []string{"r-0", "r-2"}},
		{"join 1 to 2", []string{"solo"}, []string{"solo", "other"}},
		{"pods of a StatefulSet", []string{"registrar-0", "registrar-1"}, []string{"registrar-0", "registrar-1", "registrar-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := Assignment(shards, tc.before), Assignment(shards, tc.after)
			moved := 0
			for s := range shards {
				if a[s] == b[s] {
					continue
				}
				moved++
				joined := !slices.Contains(tc.before, b[s])
				left := !slices.Contains(tc.after, a[s])
				if !joined && !left {
					t.Errorf("shard %d moved %s -> %s, between members that both stayed", s, a[s], b[s])
				}
			}
			if moved == 0 {
				t.Errorf("no shard moved")
			}
			for m, n := range Counts(b, tc.after) {
				fair := shards / len(tc.after)
				if n < fair/3 || n > fair*3 {
					t.Errorf("member %s owns %d of %d shards (fair %d): %v", m, n, shards, fair, Counts(b, tc.after))
				}
			}
		})
	}
}

func TestMembership(t *testing.T) {
	start := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	const d = 10 * time.Second
	lease := func(holder, version string, renew time.Time) Lease {
		return Lease{Holder: holder, Version: version, RenewTime: renew, Duration: d}
	}
	type step struct {
		advance time.Duration
		leases  []Lease
		want    []string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"fresh lease on first sight is alive", []step{
			{0, []Lease{lease("a", "1", start.Add(-time.Second))}, []string{"a"}},
		}},
		{"stale lease on first sight is dead", []step{
			{0, []Lease{lease("a", "1", start.Add(-time.Minute))}, nil},
		}},
		{"renewed lease stays alive by our clock, whatever its renewTime says", []step{
			{0, []Lease{lease("a", "1", start.Add(-time.Minute))}, nil},
			{5 * time.Second, []Lease{lease("a", "2", start.Add(-time.Hour))}, []string{"a"}},
			{9 * time.Second, []Lease{lease("a", "2", start.Add(-time.Hour))}, []string{"a"}},
			{2 * time.Second, []Lease{lease("a", "2", start.Add(-time.Hour))}, nil},
		}},
		{"a holder clock ahead gets no extra time", []step{
			{0, []Lease{lease("a", "1", start.Add(time.Hour))}, []string{"a"}},
			{d, []Lease{lease("a", "1", start.Add(time.Hour))}, nil},
		}},
		{"unrenewed member expires after its duration", []step{
			{0, []Lease{lease("a", "1", start), lease("b", "1", start)}, []string{"a", "b"}},
			{6 * time.Second, []Lease{lease("a", "2", start), lease("b", "1", start)}, []string{"a", "b"}},
			{5 * time.Second, []Lease{lease("a", "3", start), lease("b", "1", start)}, []string{"a"}},
		}},
		{"deleted lease leaves at once", []step{
			{0, []Lease{lease("a", "1", start), lease("b", "1", start)}, []string{"a", "b"}},
			{time.Second, []Lease{lease("a", "2", start)}, []string{"a"}},
		}},
		{"invalid leases are ignored", []step{
			{0, []Lease{{Holder: "", Version: "1", RenewTime: start, Duration: d}, {Holder: "x", Version: "1", RenewTime: start}}, nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			m := NewMembership(clk)
			for i, st := range tc.steps {
				clk.SetTime(clk.Now().Add(st.advance))
				if got := m.Observe(st.leases); !slices.Equal(got, st.want) {
					t.Errorf("step %d: members %v, want %v", i, got, st.want)
				}
			}
		})
	}
}

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		v    ShardView
		want Action
	}{
		{ShardView{State: Idle, Owner: "me"}, Acquire},
		{ShardView{State: Idle, Owner: "other"}, Keep},
		{ShardView{State: Idle, Owner: ""}, Keep},
		{ShardView{State: Active, Owner: "me"}, Keep},
		{ShardView{State: Active, Owner: "other", InFlight: 3}, Drain},
		{ShardView{State: Active, Owner: ""}, Drain},
		{ShardView{State: Active, Owner: "me", Fenced: true}, Drop},
		{ShardView{State: Draining, Owner: "other", InFlight: 1}, Keep},
		{ShardView{State: Draining, Owner: "other"}, Release},
		{ShardView{State: Draining, Owner: "me", InFlight: 1}, Resume},
		{ShardView{State: Draining, Owner: "other", Fenced: true}, Drop},
	} {
		t.Run(fmt.Sprintf("%s owner=%q inflight=%d fenced=%v", tc.v.State, tc.v.Owner, tc.v.InFlight, tc.v.Fenced), func(t *testing.T) {
			if got := Next("me", tc.v); got != tc.want {
				t.Errorf("Next = %s, want %s", got, tc.want)
			}
		})
	}
}
