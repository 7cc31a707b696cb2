package eureka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// deltaActions is the delta of v as "APP/ID:ACTION", in order.
func deltaActions(v *View) []string {
	var out []string
	for _, app := range v.Delta {
		for _, inst := range app.Instances {
			out = append(out, fmt.Sprintf("%s/%s:%s", app.Name, inst.ID, inst.Action))
		}
	}
	return out
}

func TestDeltaWindow(t *testing.T) {
	a := rec("orders", "ns", "a", "10.0.0.1", map[string]int32{"http": 80})
	b := rec("orders", "ns", "b", "10.0.0.2", map[string]int32{"http": 80})
	c := rec("billing", "ns", "c", "10.0.0.3", map[string]int32{"http": 80})
	a2 := a
	a2.Address, a2.Revision = "10.0.0.9", 7
	aSame := a
	aSame.Revision = 8 // rewritten, same value
	type step struct {
		advance time.Duration
		change  discovery.Change
		prune   bool
	}
	for _, tc := range []struct {
		name        string
		max         int
		steps       []step
		wantDelta   []string
		wantVersion int64
		wantHash    string
	}{
		{name: "initial list is added", steps: []step{{change: discovery.Change{Added: []discovery.Instance{a, b, c}}}},
			wantDelta: []string{"BILLING/c.ns:ADDED", "ORDERS/a.ns:ADDED", "ORDERS/b.ns:ADDED"}, wantVersion: 1, wantHash: "UP_3_"},
		{name: "modified and deleted", steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a, b}}},
			{advance: time.Second, change: discovery.Change{Updated: []discovery.Instance{a2}, Removed: []discovery.Instance{b}}},
		}, wantDelta: []string{"ORDERS/a.ns:MODIFIED", "ORDERS/b.ns:DELETED"}, wantVersion: 2, wantHash: "UP_1_"},
		{name: "a rewrite of the same value is no change", steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a}}},
			{change: discovery.Change{Updated: []discovery.Instance{aSame}}},
		}, wantDelta: []string{"ORDERS/a.ns:ADDED"}, wantVersion: 1, wantHash: "UP_1_"},
		{name: "deleted then added again: the last change wins", steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a}}},
			{change: discovery.Change{Removed: []discovery.Instance{a}}},
			{change: discovery.Change{Added: []discovery.Instance{a2}}},
		}, wantDelta: []string{"ORDERS/a.ns:ADDED"}, wantVersion: 3, wantHash: "UP_1_"},
		{name: "retention drops old changes", steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a}}},
			{advance: 2 * time.Minute, change: discovery.Change{Added: []discovery.Instance{b}}},
			{advance: 90 * time.Second, prune: true},
		}, wantDelta: []string{"ORDERS/b.ns:ADDED"}, wantVersion: 2, wantHash: "UP_2_"},
		{name: "everything expires", steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a}}},
			{advance: 4 * time.Minute, prune: true},
		}, wantDelta: nil, wantVersion: 1, wantHash: "UP_1_"},
		{name: "size bound drops the oldest", max: 2, steps: []step{
			{change: discovery.Change{Added: []discovery.Instance{a}}},
			{change: discovery.Change{Added: []discovery.Instance{b}}},
			{change: discovery.Change{Added: []discovery.Instance{c}}},
		}, wantDelta: []string{"BILLING/c.ns:ADDED", "ORDERS/b.ns:ADDED"}, wantVersion: 3, wantHash: "UP_3_"},
		{name: "removal of an unknown key is no change", steps: []step{
			{change: discovery.Change{Removed: []discovery.Instance{a}}},
		}, wantDelta: nil, wantVersion: 0, wantHash: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}
			r := NewRegistry(RegistryOptions{DeltaMax: tc.max, Now: clk.now})
			for _, s := range tc.steps {
				clk.t = clk.t.Add(s.advance)
				if s.prune {
					r.Prune()
				} else {
					r.Apply(s.change)
				}
			}
			v := r.View()
			if got := deltaActions(v); !slices.Equal(got, tc.wantDelta) {
				t.Errorf("delta %v, want %v", got, tc.wantDelta)
			}
			if v.Version != tc.wantVersion || v.HashCode != tc.wantHash {
				t.Errorf("version %d hash %q, want %d %q", v.Version, v.HashCode, tc.wantVersion, tc.wantHash)
			}
		})
	}
}

func TestViewLookups(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	r.Apply(discovery.Change{Added: []discovery.Instance{
		rec("orders", "ns", "a", "10.0.0.1", map[string]int32{"http": 80}),
		rec("orders", "other", "a", "10.0.0.2", map[string]int32{"http": 80}),
		rec("billing", "ns", "c", "10.0.0.3", map[string]int32{"http": 80}),
	}})
	v := r.View()
	if app, ok := v.App("orders"); !ok || len(app.Instances) != 2 {
		t.Fatalf("App(orders): %v %v", app, ok)
	}
	if _, ok := v.App("nope"); ok {
		t.Error("App(nope) found")
	}
	if inst, ok := v.AppInstance("ORDERS", "a.other"); !ok || inst.IPAddr != "10.0.0.2" {
		t.Errorf("AppInstance: %v %v", inst, ok)
	}
	if _, ok := v.AppInstance("BILLING", "a.other"); ok {
		t.Error("AppInstance of another app found")
	}
	if inst, ok := v.Instance("c.ns"); !ok || inst.App != "BILLING" {
		t.Errorf("Instance: %v %v", inst, ok)
	}
	if apps, ok := v.VIP("ORDERS"); !ok || len(apps) != 1 || len(apps[0].Instances) != 2 {
		t.Errorf("VIP: %v %v", apps, ok)
	}
}
