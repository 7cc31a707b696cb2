package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
)

const (
	me    = "reg-uid-me"
	other = "reg-uid-other"
)

var (
	t0  = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
)

// ep is a desired endpoint of pod, as eligibility.Endpoint builds it (no RegisteredAt).
func ep(pod string, mut ...func(*store.Endpoint)) store.Endpoint {
	e := store.Endpoint{
		Service:   "web",
		Namespace: "shop",
		Pod:       pod,
		UID:       "uid-" + pod,
		Address:   "10.0.0.1",
		Ports:     map[string]int32{"http": 8080},
		Node:      "node-a",
		Zone:      "z1",
		Cluster:   "c1",
		Owner:     me,
	}
	for _, m := range mut {
		m(&e)
	}
	return e
}

// rec is a stored record of e with revision rev, registered at t0.
func rec(e store.Endpoint, rev int64) store.Record {
	e.RegisteredAt = t0
	return store.Record{Endpoint: e, Key: "/registrar/services/web/shop/" + e.Pod, Revision: rev}
}

func at(ts time.Time) func(*store.Endpoint) { return func(e *store.Endpoint) { e.RegisteredAt = ts } }
func owner(o string) func(*store.Endpoint)  { return func(e *store.Endpoint) { e.Owner = o } }
func addr(a string) func(*store.Endpoint)   { return func(e *store.Endpoint) { e.Address = a } }
func uid(u string) func(*store.Endpoint)    { return func(e *store.Endpoint) { e.UID = u } }
func ports(p map[string]int32) func(*store.Endpoint) {
	return func(e *store.Endpoint) { e.Ports = p }
}

func desiredOf(eps ...store.Endpoint) map[string]store.Endpoint {
	m := make(map[string]store.Endpoint, len(eps))
	for _, e := range eps {
		m[e.Pod] = e
	}
	return m
}

func currentOf(recs ...store.Record) map[string]store.Record {
	m := make(map[string]store.Record, len(recs))
	for _, r := range recs {
		m[r.Pod] = r
	}
	return m
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name          string
		desired       map[string]store.Endpoint
		current       map[string]store.Record
		wantChanges   store.Changes
		wantConflicts []string
	}{
		{
			name: "nil inputs: nothing to do",
		},
		{
			name:    "empty inputs: nothing to do",
			desired: map[string]store.Endpoint{},
			current: map[string]store.Record{},
		},
		{
			name:        "create gets RegisteredAt now",
			desired:     desiredOf(ep("a")),
			wantChanges: store.Changes{Create: []store.Endpoint{ep("a", at(now))}},
		},
		{
			name:        "create ignores a RegisteredAt set on the desired endpoint",
			desired:     desiredOf(ep("a", at(t0))),
			wantChanges: store.Changes{Create: []store.Endpoint{ep("a", at(now))}},
		},
		{
			name:        "owned record no longer desired is deleted",
			current:     currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Delete: []store.Record{rec(ep("a"), 7)}},
		},
		{
			name:    "foreign record not desired is left alone",
			current: currentOf(rec(ep("a", owner(other)), 7)),
		},
		{
			name:    "undecodable (unowned) record not desired is left alone",
			current: currentOf(store.Record{Key: "/registrar/services/web/shop/a", Endpoint: store.Endpoint{Pod: "a"}, Revision: 3}),
		},
		{
			name:          "foreign record that is desired is a conflict, never written",
			desired:       desiredOf(ep("a")),
			current:       currentOf(rec(ep("a", owner(other)), 7)),
			wantConflicts: []string{"a"},
		},
		{
			name:          "foreign record with identical content is still a conflict",
			desired:       desiredOf(ep("a", owner(me))),
			current:       currentOf(rec(ep("a", owner(other)), 7)),
			wantConflicts: []string{"a"},
		},
		{
			name:          "unowned (undecodable) record that is desired is a conflict",
			desired:       desiredOf(ep("a")),
			current:       currentOf(store.Record{Key: "/registrar/services/web/shop/a", Endpoint: store.Endpoint{Pod: "a"}, Revision: 3}),
			wantConflicts: []string{"a"},
		},
		{
			name:    "unchanged record produces no write",
			desired: desiredOf(ep("a")),
			current: currentOf(rec(ep("a"), 7)),
		},
		{
			name:    "only RegisteredAt differs: no write",
			desired: desiredOf(ep("a", at(now.Add(time.Hour)))),
			current: currentOf(rec(ep("a"), 7)),
		},
		{
			name:    "nil and empty port maps are the same: no write",
			desired: desiredOf(ep("a", ports(map[string]int32{}))),
			current: currentOf(rec(ep("a", ports(nil)), 7)),
		},
		{
			name:    "address change with same UID keeps RegisteredAt",
			desired: desiredOf(ep("a", addr("10.0.0.2"))),
			current: currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Update: []store.Update{{
				Old: rec(ep("a"), 7),
				New: ep("a", addr("10.0.0.2"), at(t0)),
			}}},
		},
		{
			name:    "port change with same UID keeps RegisteredAt",
			desired: desiredOf(ep("a", ports(map[string]int32{"http": 8081}))),
			current: currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Update: []store.Update{{
				Old: rec(ep("a"), 7),
				New: ep("a", ports(map[string]int32{"http": 8081}), at(t0)),
			}}},
		},
		{
			name:    "added port with same UID keeps RegisteredAt",
			desired: desiredOf(ep("a", ports(map[string]int32{"http": 8080, "grpc": 9000}))),
			current: currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Update: []store.Update{{
				Old: rec(ep("a"), 7),
				New: ep("a", ports(map[string]int32{"http": 8080, "grpc": 9000}), at(t0)),
			}}},
		},
		{
			name:    "pod recreated with the same name (new UID) gets RegisteredAt now",
			desired: desiredOf(ep("a", uid("uid-a-2"), addr("10.0.0.9"))),
			current: currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Update: []store.Update{{
				Old: rec(ep("a"), 7),
				New: ep("a", uid("uid-a-2"), addr("10.0.0.9"), at(now)),
			}}},
		},
		{
			name:    "new UID alone is an update with RegisteredAt now",
			desired: desiredOf(ep("a", uid("uid-a-2"))),
			current: currentOf(rec(ep("a"), 7)),
			wantChanges: store.Changes{Update: []store.Update{{
				Old: rec(ep("a"), 7),
				New: ep("a", uid("uid-a-2"), at(now)),
			}}},
		},
		{
			name: "mixed: create, update, delete, conflict, no-op, foreign ignored",
			desired: desiredOf(
				ep("new"),
				ep("moved", addr("10.9.9.9")),
				ep("same"),
				ep("taken"),
			),
			current: currentOf(
				rec(ep("moved"), 11),
				rec(ep("same"), 12),
				rec(ep("taken", owner(other)), 13),
				rec(ep("gone"), 14),
				rec(ep("theirs", owner(other)), 15),
			),
			wantChanges: store.Changes{
				Create: []store.Endpoint{ep("new", at(now))},
				Update: []store.Update{{Old: rec(ep("moved"), 11), New: ep("moved", addr("10.9.9.9"), at(t0))}},
				Delete: []store.Record{rec(ep("gone"), 14)},
			},
			wantConflicts: []string{"taken"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			desiredBefore := clone(tc.desired)
			currentBefore := clone(tc.current)
			got := Compute(me, tc.desired, tc.current, now)
			if !reflect.DeepEqual(got.Changes, tc.wantChanges) {
				t.Errorf("Changes =\n  %+v\nwant\n  %+v", got.Changes, tc.wantChanges)
			}
			if !reflect.DeepEqual(got.Conflicts, tc.wantConflicts) {
				t.Errorf("Conflicts = %q, want %q", got.Conflicts, tc.wantConflicts)
			}
			if !reflect.DeepEqual(desiredBefore, tc.desired) || !reflect.DeepEqual(currentBefore, tc.current) {
				t.Errorf("Compute modified its inputs")
			}
			for _, u := range got.Changes.Update {
				if u.Old.Owner != me {
					t.Errorf("update of a record owned by %q", u.Old.Owner)
				}
			}
			for _, d := range got.Changes.Delete {
				if d.Owner != me {
					t.Errorf("delete of a record owned by %q", d.Owner)
				}
			}
		})
	}
}

func clone[K comparable, V any](m map[K]V) map[K]V { return maps.Clone(m) }

// TestComputeDeterministic checks that the output is sorted by pod, whatever the map
// iteration order, on repeated runs.
func TestComputeDeterministic(t *testing.T) {
	desired := map[string]store.Endpoint{}
	current := map[string]store.Record{}
	var wantCreate, wantUpdate, wantDelete, wantConflict []string
	// Names chosen so that lexical order differs from numeric and insertion order.
	for i := 20; i >= 0; i-- {
		pod := fmt.Sprintf("pod-%d", i)
		switch i % 4 {
		case 0: // create
			desired[pod] = ep(pod)
			wantCreate = append(wantCreate, pod)
		case 1: // update
			desired[pod] = ep(pod, addr("10.1.1.1"))
			current[pod] = rec(ep(pod), int64(i+1))
			wantUpdate = append(wantUpdate, pod)
		case 2: // delete
			current[pod] = rec(ep(pod), int64(i+1))
			wantDelete = append(wantDelete, pod)
		case 3: // conflict
			desired[pod] = ep(pod)
			current[pod] = rec(ep(pod, owner(other)), int64(i+1))
			wantConflict = append(wantConflict, pod)
		}
	}
	for _, s := range [][]string{wantCreate, wantUpdate, wantDelete, wantConflict} {
		slices.Sort(s)
	}

	first := Compute(me, desired, current, now)
	for run := range 20 {
		got := Compute(me, desired, current, now)
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d: Compute is not deterministic:\n  %+v\nvs\n  %+v", run, got, first)
		}
	}
	var gotCreate, gotUpdate, gotDelete []string
	for _, e := range first.Changes.Create {
		gotCreate = append(gotCreate, e.Pod)
	}
	for _, u := range first.Changes.Update {
		gotUpdate = append(gotUpdate, u.New.Pod)
		if u.Old.Pod != u.New.Pod {
			t.Errorf("update pairs %q with %q", u.Old.Pod, u.New.Pod)
		}
	}
	for _, r := range first.Changes.Delete {
		gotDelete = append(gotDelete, r.Pod)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"creates", gotCreate, wantCreate},
		{"updates", gotUpdate, wantUpdate},
		{"deletes", gotDelete, wantDelete},
		{"conflicts", first.Conflicts, wantConflict},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %q, want %q (sorted by pod)", c.what, c.got, c.want)
		}
	}
	if n := first.Changes.Len(); n != len(wantCreate)+len(wantUpdate)+len(wantDelete) {
		t.Errorf("Changes.Len() = %d", n)
	}
}

func TestSame(t *testing.T) {
	base := ep("a", at(t0))
	tests := []struct {
		name string
		mut  func(*store.Endpoint)
		want bool
	}{
		{"identical", func(*store.Endpoint) {}, true},
		{"registeredAt differs", func(e *store.Endpoint) { e.RegisteredAt = now }, true},
		{"registeredAt zero", func(e *store.Endpoint) { e.RegisteredAt = time.Time{} }, true},
		{"same ports, new map", func(e *store.Endpoint) { e.Ports = map[string]int32{"http": 8080} }, true},
		{"service", func(e *store.Endpoint) { e.Service = "api" }, false},
		{"namespace", func(e *store.Endpoint) { e.Namespace = "other" }, false},
		{"pod", func(e *store.Endpoint) { e.Pod = "b" }, false},
		{"uid", func(e *store.Endpoint) { e.UID = "x" }, false},
		{"address", func(e *store.Endpoint) { e.Address = "10.0.0.2" }, false},
		{"port value", func(e *store.Endpoint) { e.Ports = map[string]int32{"http": 80} }, false},
		{"port name", func(e *store.Endpoint) { e.Ports = map[string]int32{"web": 8080} }, false},
		{"extra port", func(e *store.Endpoint) { e.Ports = map[string]int32{"http": 8080, "grpc": 9000} }, false},
		{"no ports", func(e *store.Endpoint) { e.Ports = nil }, false},
		{"node", func(e *store.Endpoint) { e.Node = "node-b" }, false},
		{"zone", func(e *store.Endpoint) { e.Zone = "z2" }, false},
		{"cluster", func(e *store.Endpoint) { e.Cluster = "c2" }, false},
		{"owner", func(e *store.Endpoint) { e.Owner = other }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			b.Ports = clone(base.Ports)
			tc.mut(&b)
			if got := Same(base, b); got != tc.want {
				t.Errorf("Same(a, b) = %v, want %v", got, tc.want)
			}
			if got := Same(b, base); got != tc.want {
				t.Errorf("Same(b, a) = %v, want %v (not symmetric)", got, tc.want)
			}
		})
	}
	t.Run("nil and empty ports", func(t *testing.T) {
		a, b := ep("a", ports(nil)), ep("a", ports(map[string]int32{}))
		if !Same(a, b) {
			t.Errorf("Same with nil vs empty ports = false, want true")
		}
	})
}

func TestOwned(t *testing.T) {
	mine1 := rec(ep("a"), 1)
	mine2 := rec(ep("c"), 3)
	theirs := rec(ep("b", owner(other)), 2)
	unowned := store.Record{Key: "/registrar/services/web/shop/d", Endpoint: store.Endpoint{Pod: "d"}, Revision: 4}
	tests := []struct {
		name    string
		owner   string
		records map[string]store.Record
		want    map[string]store.Record
	}{
		{"nil", me, nil, map[string]store.Record{}},
		{"empty", me, map[string]store.Record{}, map[string]store.Record{}},
		{"mine only", me, currentOf(mine1, mine2), currentOf(mine1, mine2)},
		{"filters others and unowned", me, currentOf(mine1, theirs, mine2, unowned), currentOf(mine1, mine2)},
		{"other owner's view", other, currentOf(mine1, theirs, mine2, unowned), currentOf(theirs)},
		{"none of mine", me, currentOf(theirs, unowned), map[string]store.Record{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.records)
			got := Owned(tc.owner, tc.records)
			if got == nil {
				t.Fatalf("Owned returned nil, want a non-nil map")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Owned() = %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(before, tc.records) {
				t.Errorf("Owned modified its input")
			}
		})
	}
}

// TestComputeWeighted: the weight follows the registration time the plan keeps (now for a
// new or recreated pod, the stored one otherwise); a changed weight alone is an update; an
// unchanged one writes nothing.
func TestComputeWeighted(t *testing.T) {
	// weight: 10 at now, 50 for the stored registration time t0.
	weigh := func(registeredAt time.Time) int32 {
		if registeredAt.Equal(now) {
			return 10
		}
		return 50
	}
	weight := func(w int32) func(*store.Endpoint) { return func(e *store.Endpoint) { e.Weight = w } }
	for _, tc := range []struct {
		name    string
		desired map[string]store.Endpoint
		current map[string]store.Record
		want    store.Changes
	}{
		{"new pod: registered now, weight at now", desiredOf(ep("a")), nil,
			store.Changes{Create: []store.Endpoint{ep("a", at(now), weight(10))}}},
		{"stored without a weight: updated to the weight of its registration time", desiredOf(ep("a")), currentOf(rec(ep("a"), 3)),
			store.Changes{Update: []store.Update{{Old: rec(ep("a"), 3), New: ep("a", at(t0), weight(50))}}}},
		{"stored with that weight: nothing", desiredOf(ep("a")), currentOf(rec(ep("a", weight(50)), 3)), store.Changes{}},
		{"recreated pod: registered now, weight at now", desiredOf(ep("a", uid("new"))), currentOf(rec(ep("a", weight(50)), 3)),
			store.Changes{Update: []store.Update{{Old: rec(ep("a", weight(50)), 3), New: ep("a", uid("new"), at(now), weight(10))}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ComputeWeighted(me, tc.desired, tc.current, now, weigh)
			if !reflect.DeepEqual(got.Changes, tc.want) {
				t.Errorf("changes =\n%+v\nwant\n%+v", got.Changes, tc.want)
			}
		})
	}
	// Without a weigher the weight is not written, and a stored one is removed.
	if got := Compute(me, desiredOf(ep("a")), currentOf(rec(ep("a", weight(50)), 3)), now); len(got.Changes.Update) != 1 || got.Changes.Update[0].New.Weight != 0 {
		t.Errorf("Compute without slow start over a weighted record = %+v, want an update without weight", got.Changes)
	}
}
